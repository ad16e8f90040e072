// all_gather: linear
//
// Collective:   all_gather
// Kind:         pure
// Restrictions: none (any communicator size, in place)
// Parameters:   none
//
// A gather to rank 0 and a broadcast from it, both direct: every rank sends
// its block to rank 0, which places the p blocks and sends the whole result
// back to each. Two hops at any p and 2(p - 1) messages in all, where direct
// sends p(p - 1) and Bruck takes ceil(log2 p) rounds; rank 0 sends p - 1
// copies of the whole result. For short blocks between few ranks whose
// every message is a system call and a wake-up, as over TCP with more ranks
// than cores.

#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> linear(const call_context& ctx, const all_gather_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const std::size_t block = a.send.size();
    const auto block_of = [&](int i) { return blocks_of(a.recv, block, i); };
    if (p == 1 || block == 0) {
        copy_unless_same(block_of(r).data(), a.send.data(), block);
        co_return;
    }
    constexpr std::uint64_t gathered = 0, released = 1;
    const auto result = a.recv.first(static_cast<std::size_t>(p) * block);
    if (r != 0) {
        // In place the block is sent before the result overwrites it.
        co_await ctx.send(0, gathered, a.send);
        co_await ctx.recv(0, released, result);
        co_return;
    }
    // A send buffer inside recv (in place, or elsewhere in it) is copied to
    // its block first: the receives write the other blocks.
    const bool inside = overlapping(a.send, a.recv);
    if (inside) copy_unless_same(block_of(0).data(), a.send.data(), block);
    auto requests = post_receives_at_root(ctx, 0, gathered, block_of);
    // The own block's copy runs while the messages travel.
    if (!inside) copy_bytes(block_of(0).data(), a.send.data(), block);
    co_await wait_all(requests);
    co_await send_from_rank_zero(ctx, released, [&](int) { return result; });
}

const bool registered = register_algorithm<all_gather_args>({
    .info = {.name = "linear",
             .form = algorithm_kind::pure,
             .summary = "every block to rank 0, the whole result back to each"},
    .run = linear,
});

} // namespace
} // namespace tutti
