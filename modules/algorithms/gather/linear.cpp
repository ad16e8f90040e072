// gather: linear
//
// Collective:   gather
// Kind:         pure
// Restrictions: none (any communicator size, root and block size)
// Parameters:   none
//
// Every rank sends its block to the root, which posts all p - 1 receives at
// once, each straight into the block's place in recv. p - 1 messages meet at
// one rank, so it suits few ranks or long blocks, where the binomial tree's
// forwarding of whole subtrees costs more than it saves.
//
// Blocks of at most call_context::polled_receive_bytes the root receives one
// after another instead, each looking for its message before it posts a
// receive: no request, no vector of them and no wait_all frame when the
// message is there, and one that came before its turn is copied from the
// mailbox, which costs less than those at that size. The 2-rank gather of
// 8-128 byte blocks took 0.69-0.72 of the time (docs/performance.md,
// fifty-sixth session); 4 and 8 ranks on 2 cores read the same either way.
//
// Where the call's buffers take three quarters of the last-level cache or
// more, the root's own block is written past the caches (buffers_exceed_cache in
// common.hpp, copy_block in core/copy.hpp): 2 ranks, 8-64 MiB, 0.73-0.82 of the time
// (docs/performance.md, seventy-eighth session).

#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> linear(const call_context& ctx, const gather_args& a) {
    const int p = ctx.size();
    const std::size_t block = a.send.size();
    if (block == 0) co_return;
    if (ctx.rank() != a.root) {
        co_await ctx.send(a.root, 0, a.send, send_awaited::at_end);
        co_return;
    }
    const auto at = [&](int rank) { return blocks_of(a.recv, block, rank); };
    own_block_copy own(a.send, a.recv, a.send, at(a.root), buffers_exceed_cache(ctx, a));
    if (block <= call_context::polled_receive_bytes) {
        own.copy_if_deferred();
        for (int peer = 0; peer < p; ++peer)
            if (peer != a.root) co_await ctx.recv(peer, 0, at(peer));
        co_return;
    }
    std::vector<request> receives;
    receives.reserve(static_cast<std::size_t>(p - 1));
    for (int peer = 0; peer < p; ++peer)
        if (peer != a.root) receives.push_back(ctx.irecv(peer, 0, at(peer)));
    own.copy_if_deferred();
    co_await wait_all(receives);
}

const bool registered = register_algorithm<gather_args>({
    .info = {.name = "linear",
             .form = algorithm_kind::pure,
             .summary = "every rank sends its block to the root, straight into its place"},
    .run = linear,
});

} // namespace
} // namespace tutti
