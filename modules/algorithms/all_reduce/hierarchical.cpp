// all_reduce: hierarchical
//
// Collective:   all_reduce
// Kind:         hierarchical composition
// Restrictions: hierarchy_available
// Parameters:   none
//
// The node-aware all_reduce (Bienz, Olson, Gropp 2019; HPX PR #7160): a
// reduce to the representative inside each group (slot 3k-2), an all_reduce
// among the representatives (3k-1), a broadcast from the representative
// inside each group (3k). Groups of consecutive ranks keep a non-commutative
// operation's order; over a hierarchy whose groups interleave ranks such a
// call runs the flat algorithm.

#include "algorithms/catalog.hpp"
#include "core/scratch.hpp"
#include "hierarchy/compose.hpp"

namespace tutti {
namespace {

using namespace hierarchy_detail;

task<void> hierarchical(const call_context& ctx, const all_reduce_args& a) {
    const auto& h = hierarchy_of(ctx);
    if (delegate_to_flat(ctx, h) || (!a.op->commutative && !h.order_preserving())) {
        co_await run_flat(ctx, a);
        co_return;
    }
    const auto bytes = a.count * a.op->element_size;
    if (bytes == 0) co_return;
    const auto s = slots_for(ctx.generation());
    // The group's partial result apart from recv, so no sub-step runs in
    // place on some ranks only (selection must see one call everywhere).
    scratch<> partial(h.is_representative() ? bytes : 0);
    co_await sub_step(h.group(), reduce_args{a.send, partial.span(), a.count, a.op, 0}, s.first);
    if (h.is_representative())
        co_await sub_step(h.leaders(),
                          all_reduce_args{partial.span(), a.recv.first(bytes), a.count, a.op},
                          s.middle);
    co_await sub_step(h.group(), broadcast_args{a.recv.first(bytes), 0}, s.last);
}

const bool registered = register_algorithm<all_reduce_args>({
    .info = {.name = "hierarchical",
             .form = algorithm_kind::hierarchical,
             .restrictions = {restriction::hierarchy_available},
             .summary = "reduce in each group, all_reduce among representatives, broadcast in "
                        "each group"},
    .run = hierarchical,
});

} // namespace
} // namespace tutti
