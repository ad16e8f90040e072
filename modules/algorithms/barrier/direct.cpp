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
// ceil(log2 p). For few ranks that share cores over shared memory, where
// each round costs every waiting rank a turn of its core and a message only
// a cell. Over TCP every message is a system call, and `linear` (two hops
// through rank 0) does better (docs/performance.md, twenty-seventh session).

#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> direct(const call_context& ctx, const barrier_args&) {
    if (ctx.size() == 1) co_return;
    const auto requests = post_to_every_rank(
        ctx, 0, [](int) { return std::span<std::byte>{}; },
        [](int) { return std::span<const std::byte>{}; });
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
