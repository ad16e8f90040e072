// reduce: hierarchical
//
// Collective:   reduce
// Kind:         hierarchical composition
// Restrictions: hierarchy_available
// Parameters:   none
//
// Up the tree: a reduce to the representative inside each group (slot
// 3k-2), then among the representatives to the root's group's one (3k-1);
// if the root is not its group's representative, the representative sends
// it the result (one message of this call). Slot 3k stays unused.
//
// Groups of consecutive ranks (the arity tree) keep the rank order, so a
// non-commutative operation gives the flat result. A hierarchy whose groups
// interleave ranks (a machine tree over round-robin placement) would
// reorder the operands: such a call runs the flat algorithm instead.

#include "algorithms/catalog.hpp"
#include "core/copy.hpp"
#include "core/scratch.hpp"
#include "hierarchy/compose.hpp"

namespace tutti {
namespace {

using namespace hierarchy_detail;

constexpr std::uint64_t to_root_step = 0;

task<void> hierarchical(const call_context& ctx, const reduce_args& a) {
    const auto& h = hierarchy_of(ctx);
    if (delegate_to_flat(ctx, h) || (!a.op->commutative && !h.order_preserving())) {
        co_await run_flat(ctx, a);
        co_return;
    }
    const auto bytes = a.count * a.op->element_size;
    if (bytes == 0) co_return;
    const auto s = slots_for(ctx.generation());
    const int root_group = h.group_of(a.root);
    const int root_rep = h.representative_of_group(root_group);

    // Sub-steps never run in place, so that every rank of a sub-step shows
    // selection the same call (the user's recv may be the send buffer).
    scratch<> partial(h.is_representative() ? bytes : 0);
    scratch<> result(ctx.rank() == root_rep ? bytes : 0);
    co_await sub_step(h.group(), reduce_args{a.send, partial.span(), a.count, a.op, 0}, s.first);
    if (h.is_representative())
        co_await sub_step(h.leaders(),
                          reduce_args{partial.span(), result.span(), a.count, a.op, root_group},
                          s.middle);
    if (root_rep == a.root) {
        if (ctx.rank() == a.root) copy_bytes(a.recv.data(), result.data(), bytes);
    } else if (ctx.rank() == root_rep) {
        co_await ctx.send(a.root, to_root_step, result.span());
    } else if (ctx.rank() == a.root) {
        co_await ctx.recv(root_rep, to_root_step, a.recv.first(bytes));
    }
}

const bool registered = register_algorithm<reduce_args>({
    .info = {.name = "hierarchical",
             .form = algorithm_kind::hierarchical,
             .restrictions = {restriction::hierarchy_available},
             .summary = "reduce in each group, then among representatives to the root's group"},
    .run = hierarchical,
});

} // namespace
} // namespace tutti
