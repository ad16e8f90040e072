// broadcast: hierarchical
//
// Collective:   broadcast
// Kind:         hierarchical composition
// Restrictions: hierarchy_available
// Parameters:   none
//
// Down the tree: the root's group first broadcasts from the root inside
// itself, unless the root is its representative (slot 3k-2); the
// representatives broadcast from the root's group's one (3k-1); every other
// group broadcasts from its representative (3k). The root's group, served
// in the first step, skips the last; any root works, representative or not.

#include "algorithms/catalog.hpp"
#include "hierarchy/compose.hpp"

namespace tutti {
namespace {

using namespace hierarchy_detail;

task<void> hierarchical(const call_context& ctx, const broadcast_args& a) {
    const auto& h = hierarchy_of(ctx);
    if (delegate_to_flat(ctx, h)) {
        co_await run_flat(ctx, a);
        co_return;
    }
    const auto s = slots_for(ctx.generation());
    const int root_group = h.group_of(a.root);
    const int root_index = h.index_of(a.root);
    const bool in_root_group = h.my_group() == root_group;
    if (in_root_group && root_index != 0)
        co_await sub_step(h.group(), broadcast_args{a.buffer, root_index}, s.first);
    if (h.is_representative())
        co_await sub_step(h.leaders(), broadcast_args{a.buffer, root_group}, s.middle);
    if (!in_root_group || root_index == 0)
        co_await sub_step(h.group(), broadcast_args{a.buffer, 0}, s.last);
}

const bool registered = register_algorithm<broadcast_args>({
    .info = {.name = "hierarchical",
             .form = algorithm_kind::hierarchical,
             .restrictions = {restriction::hierarchy_available},
             .summary = "broadcast in the root's group, among representatives, in the other "
                        "groups"},
    .run = hierarchical,
});

} // namespace
} // namespace tutti
