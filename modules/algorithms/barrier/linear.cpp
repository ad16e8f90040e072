// barrier: linear
//
// Collective:   barrier
// Kind:         pure
// Restrictions: none (any communicator size)
// Parameters:   none
//
// Fan-in, fan-out: every rank sends an empty message to rank 0 and waits for
// its answer; rank 0 waits for all p - 1, then answers all. Two hops of
// latency at any p (dissemination takes ceil(log2 p) rounds), at the price of
// 2(p - 1) messages through one rank: for few ranks whose wake-ups cost more
// than rank 0's extra sends, as between oversubscribed hosts (Open MPI's
// basic linear barrier).

#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> linear(const call_context& ctx, const barrier_args&) {
    const int p = ctx.size();
    if (p == 1) co_return;
    constexpr std::uint64_t arrived = 0, released = 1;
    if (ctx.rank() != 0) {
        auto answer = ctx.irecv(0, released, {});
        co_await ctx.send(0, arrived, {});
        co_await wait_all(std::span(&answer, 1));
        co_return;
    }
    std::vector<request> requests;
    requests.reserve(static_cast<std::size_t>(p - 1));
    for (int peer = 1; peer < p; ++peer)
        requests.push_back(ctx.irecv(peer, arrived, {}));
    co_await wait_all(requests);
    requests.clear();
    for (int peer = 1; peer < p; ++peer)
        keep_pending(requests, ctx.start_send(peer, released, {}, send_awaited::at_end));
    co_await wait_all(requests);
}

const bool registered = register_algorithm<barrier_args>({
    .info = {.name = "linear",
             .form = algorithm_kind::pure,
             .summary = "every rank tells rank 0 and waits for its answer: two hops"},
    .run = linear,
});

} // namespace
} // namespace tutti
