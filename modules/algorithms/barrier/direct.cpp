// barrier: direct
//
// Collective:   barrier
// Kind:         pure
// Restrictions: none (any communicator size)
// Parameters:   none
//
// Every rank posts p - 1 empty receives and sends one empty message to every
// other rank, then waits for all of them: a single round of latency where
// dissemination takes ceil(log2 p), for p - 1 messages per rank instead of
// ceil(log2 p). At three ranks both send two messages, and this one needs
// half the rounds; over TCP a round (a wake-up on every rank) costs more
// than a message, so few ranks gain. Sends start at r + 1 and walk around
// the ring, so that not every rank targets rank 0 first.

#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> direct(const call_context& ctx, const barrier_args&) {
    const int p = ctx.size();
    const int r = ctx.rank();
    if (p == 1) co_return;
    std::vector<request> requests;
    requests.reserve(2 * static_cast<std::size_t>(p - 1));
    for (int k = 1; k < p; ++k) {
        const int source = r - k < 0 ? r - k + p : r - k;
        requests.push_back(ctx.irecv(source, 0, {}));
    }
    for (int k = 1; k < p; ++k) {
        const int dest = r + k >= p ? r + k - p : r + k;
        keep_pending(requests, ctx.start_send(dest, 0, {}, send_awaited::at_end));
    }
    co_await wait_all(requests);
}

const bool registered = register_algorithm<barrier_args>({
    .info = {.name = "direct",
             .form = algorithm_kind::pure,
             .summary = "one round: an empty message from every rank to every other"},
    .run = direct,
});

} // namespace
} // namespace tutti
