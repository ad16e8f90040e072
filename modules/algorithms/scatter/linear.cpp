// scatter: linear
//
// Collective:   scatter
// Kind:         pure
// Restrictions: none (any communicator size, root and block size)
// Parameters:   none
//
// The root sends every rank its block straight from the send buffer, all
// sends posted at once. p - 1 messages leave one rank, so it suits few ranks
// or long blocks, where the binomial tree's forwarding of whole subtrees
// costs more than it saves. Where the call's buffers take three quarters of
// the last-level cache or more, the root's own block is written past the
// caches (buffers_exceed_cache in common.hpp, copy_block in core/copy.hpp).

#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> linear(const call_context& ctx, const scatter_args& a) {
    const int p = ctx.size();
    const std::size_t block = a.recv.size();
    if (block == 0) co_return;
    if (ctx.rank() != a.root) {
        co_await ctx.recv(a.root, 0, a.recv);
        co_return;
    }
    const auto at = [&](int rank) { return blocks_of(a.send, block, rank); };
    own_block_copy own(a.send, a.recv, at(a.root), a.recv, buffers_exceed_cache(ctx, a));
    std::vector<request> sends;
    for (int peer = 0; peer < p; ++peer)
        if (peer != a.root)
            keep_pending(sends, ctx.start_send(peer, 0, at(peer), send_awaited::at_end));
    own.copy_if_deferred();
    if (!sends.empty()) co_await wait_all(sends);
}

const bool registered = register_algorithm<scatter_args>({
    .info = {.name = "linear",
             .form = algorithm_kind::pure,
             .summary = "the root sends every rank its block straight from the send buffer"},
    .run = linear,
});

} // namespace
} // namespace tutti
