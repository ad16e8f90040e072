// all_gather: direct
//
// Collective:   all_gather
// Kind:         pure
// Restrictions: none (any communicator size, in place)
// Parameters:   none
//
// Every rank posts p - 1 receives straight into their blocks of recv and
// sends its own block to every other rank at once, then awaits them all: one
// round of latency where recursive doubling and Bruck take ceil(log2 p), for
// p - 1 messages per rank. For small blocks on few ranks that share cores,
// where each round costs every rank a turn of its core. Where the call's
// buffers take three quarters of the last-level cache or more, the own
// block's copy is written past the caches (buffers_exceed_cache in common.hpp,
// copy_block in core/copy.hpp).

#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> direct(const call_context& ctx, const all_gather_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const std::size_t block = a.send.size();
    const auto block_of = [&](int i) { return blocks_of(a.recv, block, i); };
    // A send buffer inside recv (in place, or elsewhere in it) is copied to
    // its block first and sent from there: receives write the other blocks.
    const bool inside = overlapping(a.send, a.recv);
    if (inside || p == 1 || block == 0) copy_unless_same(block_of(r).data(), a.send.data(), block);
    if (p == 1 || block == 0) co_return;
    const std::span<const std::byte> own = inside ? block_of(r) : a.send;

    const auto requests = post_to_every_rank(ctx, 0, block_of, [&](int) { return own; });
    // The own block's copy runs while the messages travel.
    if (!inside) copy_block(block_of(r).data(), a.send.data(), block, buffers_exceed_cache(ctx, a));
    co_await wait_all(requests);
}

const bool registered = register_algorithm<all_gather_args>({
    .info = {.name = "direct",
             .form = algorithm_kind::pure,
             .summary = "one round: the own block to every rank at once, straight into place"},
    .run = direct,
});

} // namespace
} // namespace tutti
