// exscan: direct
//
// Collective:   exscan
// Kind:         pure
// Restrictions: none (any communicator size; non-commutative operations give
//               the rank-ordered result; in place)
// Parameters:   none
//
// One round: every rank sends its vector to every higher rank at once and
// combines what the lower ranks sent in rank order, x0 op ... op x(r-1);
// rank 0's receive buffer is left as it was. One step of latency where
// recursive doubling takes ceil(log2 p) and the chain p - 1, for
// p(p - 1)/2 messages of the whole vector (rank r receives r, sends
// p - 1 - r). For short vectors where ranks share cores, as scan's direct
// (docs/performance.md, forty-eighth session).

#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> direct(const call_context& ctx, const exscan_args& a) {
    const auto bytes = a.count * a.op->element_size;
    if (bytes == 0 || ctx.size() == 1) co_return;
    // In place, the sends read the receive buffer: it is written only once
    // they have all left.
    prefix_round round(ctx, *a.op, a.count, a.send.first(bytes));
    co_await round.done();
    if (ctx.rank() > 0) round.fold_lower(a.recv.data());
}

const bool registered = register_algorithm<exscan_args>({
    .info = {.name = "direct",
             .form = algorithm_kind::pure,
             .summary = "every vector to every higher rank at once; the lower ranks' vectors "
                        "combined in rank order, without the own"},
    .run = direct,
});

} // namespace
} // namespace tutti
