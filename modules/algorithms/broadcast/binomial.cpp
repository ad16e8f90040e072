// broadcast: binomial tree
//
// Collective:   broadcast
// Kind:         pure
// Restrictions: none (any communicator size, any root, any length)
// Parameters:   none
//
// Ranks are numbered relative to the root (vr = r - root mod p). A rank
// receives the whole buffer from the rank that differs from it in its lowest
// set bit, then sends it to vr + 2^k for every 2^k below that bit. Every
// rank has the data after ceil(log2 p) rounds, each sending the whole
// buffer: latency-optimal, the choice for short messages.

#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> binomial(const call_context& ctx, const broadcast_args& a) {
    const int p = ctx.size();
    // Every rank has the same length, so all of them skip an empty buffer.
    if (p == 1 || a.buffer.empty()) co_return;
    const int vr = relative_rank(ctx.rank(), a.root, p);
    const auto actual = [&](int relative) { return actual_rank(relative, a.root, p); };

    // The root's subtree is everything; another rank's ends below its lowest bit.
    const int limit = binomial_extent(vr, p);
    if (vr != 0) co_await ctx.recv(actual(vr - limit), 0, a.buffer);

    std::vector<request> sends;
    for (int mask = limit / 2; mask > 0; mask /= 2)
        if (vr + mask < p)
            keep_pending(sends,
                         ctx.start_send(actual(vr + mask), 0, a.buffer, send_awaited::at_end));
    if (!sends.empty()) co_await wait_all(sends);
}

const bool registered = register_algorithm<broadcast_args>({
    .info = {.name = "binomial",
             .form = algorithm_kind::pure,
             .summary = "binomial tree from the root; ceil(log2 p) rounds of the whole buffer"},
    .run = binomial,
});

} // namespace
} // namespace tutti
