// all_to_all: pairwise exchange
//
// Collective:   all_to_all
// Kind:         pure
// Restrictions: none (any communicator size, any block size, in place)
// Parameters:   none
//
// The rank's own block is copied locally; then in step k = 1 .. p-1 rank r
// sends block r+k to rank r+k and receives block r-k from rank r-k (mod p).
// Every rank sends and receives exactly one block per step, so no link is
// shared and the network sees p-1 balanced permutations: the choice for
// medium and large blocks. In place, the data to send is first copied aside,
// since received blocks overwrite blocks not yet sent. Where the call's
// buffers take three quarters of the last-level cache or more, the own
// block is written past the caches (buffers_exceed_cache in common.hpp, copy_block in
// core/copy.hpp).

#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> pairwise(const call_context& ctx, const all_to_all_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const std::size_t block = a.send.size() / static_cast<std::size_t>(p);
    if (block == 0 || (p == 1 && a.send.data() == a.recv.data())) co_return;

    std::optional<scratch<>> saved;
    const auto send = send_side(a.send, a.recv, saved);
    own_block_copy own(a.send, a.recv, blocks_of(a.send, block, r), blocks_of(a.recv, block, r),
                       buffers_exceed_cache(ctx, a));

    for (int k = 1; k < p; ++k) {
        const int dest = (r + k) % p;
        const int source = (r - k + p) % p;
        // The last step's send is awaited only as the call ends.
        auto exchange =
            ctx.send_recv(dest, blocks_of(send, block, dest), source,
                          blocks_of(a.recv, block, source), static_cast<std::uint64_t>(k),
                          k == p - 1 ? send_awaited::at_end : send_awaited::before_next_step);
        if (k == 1) own.copy_if_deferred();
        co_await std::move(exchange);
    }
    own.copy_if_deferred(); // p == 1
}

const bool registered = register_algorithm<all_to_all_args>({
    .info = {.name = "pairwise",
             .form = algorithm_kind::pure,
             .summary = "p-1 steps, each sending one block to r+k and receiving one from r-k"},
    .run = pairwise,
});

} // namespace
} // namespace tutti
