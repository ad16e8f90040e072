// broadcast: pipelined chain
//
// Collective:   broadcast
// Kind:         pure
// Restrictions: none (any communicator size, any root, any length)
// Parameters:   segment_bytes (128 KiB; larger when a buffer would need more
//               segments than a call has steps)
//
// Ranks form a chain in order from the root (vr = r - root mod p). The
// buffer is cut into segments; the root sends them one after another to
// vr 1, and every other rank forwards each segment to vr + 1 as soon as it
// has it. Once the pipeline is full every link carries a segment at once,
// so a long buffer takes about (p - 2 + segments) segment times instead of
// the binomial tree's ceil(log2 p) whole-buffer times: the choice for long
// messages where a link (a socket) costs more than the chain's extra hops.
// (The classic pipelined chain; Open MPI's tuned broadcast has it as
// "pipeline".)

#include <algorithm>
#include <deque>
#include <exception>
#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

constexpr std::size_t segment_bytes = 128 * 1024;
// Receives posted ahead of the segment being forwarded: enough to keep a
// link busy while this rank forwards, few enough to keep matching cheap.
constexpr std::size_t receives_ahead = 8;

task<void> pipeline(const call_context& ctx, const broadcast_args& a) {
    const int p = ctx.size();
    // Every rank has the same length, so all of them skip an empty buffer.
    if (p == 1 || a.buffer.empty()) co_return;
    const int vr = relative_rank(ctx.rank(), a.root, p);
    const std::size_t n = a.buffer.size();
    // One step per segment, within the steps a call may number.
    const std::size_t segment =
        std::max(segment_bytes, (n + call_context::max_steps - 1) / call_context::max_steps);
    const std::size_t segments = (n + segment - 1) / segment;
    const auto piece = [&](std::size_t k) {
        return a.buffer.subspan(k * segment, std::min(segment, n - k * segment));
    };
    const bool forwards = vr + 1 < p;
    const int next = actual_rank(vr + 1, a.root, p);
    std::vector<request> sends;
    sends.reserve(forwards ? segments : 0);

    if (vr == 0) {
        for (std::size_t k = 0; k < segments; ++k)
            sends.push_back(ctx.isend(next, k, piece(k)));
        co_await wait_all(sends);
        co_return;
    }
    const int previous = actual_rank(vr - 1, a.root, p);
    std::deque<request> receives;
    std::size_t posted = 0;
    std::exception_ptr failed;
    for (std::size_t k = 0; k < segments; ++k) {
        for (; posted < segments && posted < k + receives_ahead; ++posted)
            receives.push_back(ctx.irecv(previous, posted, piece(posted)));
        const request arrived = receives.front();
        receives.pop_front();
        try {
            if (arrived->must_wait()) co_await arrived->wait();
        } catch (...) {
            failed = std::current_exception();
            break;
        }
        if (forwards) sends.push_back(ctx.isend(next, k, piece(k)));
    }
    if (failed) {
        // The receives posted ahead would still write into the buffer.
        const std::vector<request> ahead(receives.begin(), receives.end());
        co_await ctx.abandon(ahead, sends);
        std::rethrow_exception(failed);
    }
    co_await wait_all(sends);
}

const bool registered = register_algorithm<broadcast_args>({
    .info = {.name = "pipeline",
             .form = algorithm_kind::pure,
             .summary = "chain from the root, the buffer forwarded in 128 KiB segments"},
    .run = pipeline,
});

} // namespace
} // namespace tutti
