// broadcast: linear
//
// Collective:   broadcast
// Kind:         pure
// Restrictions: none (any communicator size, any root, any length)
// Parameters:   none
//
// The root sends the whole buffer to every other rank, all sends posted at
// once. p - 1 messages leave one rank, so it only suits few ranks; it is the
// simplest correct broadcast and a baseline for the others.

#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> linear(const call_context& ctx, const broadcast_args& a) {
    const int p = ctx.size();
    if (p == 1 || a.buffer.empty()) co_return;
    if (ctx.rank() != a.root) {
        co_await ctx.recv(a.root, 0, a.buffer);
        co_return;
    }
    std::vector<request> sends;
    for (int peer = 0; peer < p; ++peer)
        if (peer != a.root)
            keep_pending(sends, ctx.start_send(peer, 0, a.buffer, send_awaited::at_end));
    if (!sends.empty()) co_await wait_all(sends);
}

const bool registered = register_algorithm<broadcast_args>({
    .info = {.name = "linear",
             .form = algorithm_kind::pure,
             .summary = "the root sends the whole buffer to every rank"},
    .run = linear,
});

} // namespace
} // namespace tutti
