// scan: direct
//
// Collective:   scan
// Kind:         pure
// Restrictions: none (any communicator size; non-commutative operations give
//               the rank-ordered result; in place)
// Parameters:   none
//
// One round: every rank sends its vector to every higher rank at once and
// combines what the lower ranks sent, in rank order, with its own on the
// right: ((x0 op x1) op ...) op xr. One step of latency where recursive
// doubling takes ceil(log2 p) and the chain p - 1, for p(p - 1)/2 messages
// of the whole vector (rank r receives r, sends p - 1 - r) and r combines
// at rank r. For short vectors where ranks share cores, as the direct
// all_reduce: each round a rank waits in costs it a turn of its core
// (docs/performance.md, forty-eighth session).

#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> direct(const call_context& ctx, const scan_args& a) {
    const auto bytes = a.count * a.op->element_size;
    if (bytes == 0) co_return;
    const auto own = a.send.first(bytes);
    prefix_round round(ctx, *a.op, a.count, own);
    // In place, send and recv are one buffer: nothing is written to it
    // before every send has left, and the last combine reads each element of
    // xr before it writes that of the result.
    if (ctx.rank() == 0) {
        copy_unless_same(a.recv.data(), own.data(), bytes);
        co_await round.done();
        co_return;
    }
    co_await round.done();
    round.fold_lower(round.slot(0).data());
    a.op->combine(round.slot(0).data(), own.data(), a.recv.data(), a.count);
}

const bool registered = register_algorithm<scan_args>({
    .info = {.name = "direct",
             .form = algorithm_kind::pure,
             .summary = "every vector to every higher rank at once, combined in rank order"},
    .run = direct,
});

} // namespace
} // namespace tutti
