// barrier: dissemination
//
// Collective:   barrier
// Kind:         pure
// Restrictions: none (any communicator size)
// Parameters:   none
//
// In round k (k = 0, 1, ... while 2^k < p) rank r sends an empty message to
// r + 2^k and waits for one from r - 2^k (mod p). After ceil(log2 p) rounds
// every rank has heard, directly or through others, from every rank.
// (Hensgen, Finkel, Manber 1988.)

#include "algorithms/catalog.hpp"

namespace tutti {
namespace {

task<void> dissemination(const call_context& ctx, const barrier_args&) {
    const int p = ctx.size();
    const int r = ctx.rank();
    std::uint64_t round = 0;
    // Partners by a compare, not `%`: a division costs more than the rest of
    // the round's arithmetic, and the barrier is all latency.
    for (int distance = 1; distance < p; distance *= 2, ++round) {
        const int to = r + distance >= p ? r + distance - p : r + distance;
        const int from = r - distance < 0 ? r - distance + p : r - distance;
        co_await ctx.send_recv(to, {}, from, {}, round);
    }
}

const bool registered = register_algorithm<barrier_args>({
    .info = {.name = "dissemination",
             .form = algorithm_kind::pure,
             .summary = "ceil(log2 p) rounds of empty messages to rank + 2^k"},
    .run = dissemination,
});

} // namespace
} // namespace tutti
