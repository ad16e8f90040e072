// barrier: hierarchical
//
// Collective:   barrier
// Kind:         hierarchical composition
// Restrictions: hierarchy_available (the communicator carries a hierarchy,
//               tutti::make_arity_hierarchy or tutti::make_hierarchy)
// Parameters:   none
//
// A barrier inside each group (slot 3k-2), among the groups' representatives
// (3k-1), and inside each group again (3k): after the first, a group's
// members have all arrived; after the second, every group has; the third
// holds the members until their representative knows. Groups with levels of
// their own run this again inside; a flat hierarchy runs the flat barrier.

#include "algorithms/catalog.hpp"
#include "hierarchy/compose.hpp"

namespace tutti {
namespace {

using namespace hierarchy_detail;

task<void> hierarchical(const call_context& ctx, const barrier_args& a) {
    const auto& h = hierarchy_of(ctx);
    if (delegate_to_flat(ctx, h)) {
        co_await run_flat(ctx, a);
        co_return;
    }
    const auto s = slots_for(ctx.generation());
    co_await sub_step(h.group(), a, s.first);
    if (h.is_representative()) co_await sub_step(h.leaders(), a, s.middle);
    co_await sub_step(h.group(), a, s.last);
}

const bool registered = register_algorithm<barrier_args>({
    .info = {.name = "hierarchical",
             .form = algorithm_kind::hierarchical,
             .restrictions = {restriction::hierarchy_available},
             .summary = "barrier in each group, among representatives, in each group again"},
    .run = hierarchical,
});

} // namespace
} // namespace tutti
