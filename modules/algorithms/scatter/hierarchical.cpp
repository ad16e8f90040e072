// scatter: hierarchical
//
// Collective:   scatter
// Kind:         hierarchical composition
// Restrictions: hierarchy_available
// Parameters:   none
//
// Down the tree, the mirror of the hierarchical gather: a root that is not
// its group's representative first sends it the whole data in one message;
// the representative lays the blocks out group by group, each padded to the
// largest group's size, and scatters them among the representatives (slot
// 3k-1); each representative scatters its group's real blocks inside the
// group (3k). Groups need not be consecutive ranks. Slot 3k-2 stays unused.

#include <algorithm>

#include "algorithms/catalog.hpp"
#include "core/scratch.hpp"
#include "hierarchy/compose.hpp"

namespace tutti {
namespace {

using namespace hierarchy_detail;

constexpr std::uint64_t to_representative_step = 0;

task<void> hierarchical(const call_context& ctx, const scatter_args& a) {
    const auto& h = hierarchy_of(ctx);
    if (delegate_to_flat(ctx, h)) {
        co_await run_flat(ctx, a);
        co_return;
    }
    const std::size_t block = a.recv.size();
    if (block == 0) co_return;
    const auto s = slots_for(ctx.generation());
    const int root_group = h.group_of(a.root);
    const int root_rep = h.representative_of_group(root_group);
    const auto n = static_cast<std::size_t>(h.size());
    const auto largest = static_cast<std::size_t>(h.largest_group());

    const bool rep = h.is_representative();
    const bool lays_out = ctx.rank() == root_rep;
    // What the root representative receives from a root outside its place,
    // the blocks it lays out padded per group, and this group's blocks.
    scratch<> received(lays_out && root_rep != a.root ? block * n : 0);
    scratch<> laid_out(lays_out ? largest * block * static_cast<std::size_t>(h.group_count()) : 0);
    scratch<> mine(rep ? largest * block : 0);
    if (rep) {
        if (lays_out) {
            std::span<const std::byte> data = a.send;
            if (root_rep != a.root) {
                co_await ctx.recv(a.root, to_representative_step, received.span());
                data = received.span();
            }
            for (int g = 0; g < h.group_count(); ++g) {
                const auto& members = h.groups()[static_cast<std::size_t>(g)];
                for (std::size_t i = 0; i < members.size(); ++i) {
                    const auto from = block_at(data, block, static_cast<std::size_t>(members[i]));
                    std::copy(
                        from.begin(), from.end(),
                        block_at(laid_out.span(), block, static_cast<std::size_t>(g) * largest + i)
                            .begin());
                }
            }
        }
        co_await sub_step(h.leaders(), scatter_args{laid_out.span(), mine.span(), root_group},
                          s.middle);
    } else if (ctx.rank() == a.root) {
        co_await ctx.send(root_rep, to_representative_step, a.send.first(block * n));
    }
    const auto own = rep ? static_cast<std::size_t>(h.group_size(h.my_group())) * block : 0;
    co_await sub_step(h.group(), scatter_args{mine.span().first(own), a.recv, 0}, s.last);
}

const bool registered = register_algorithm<scatter_args>({
    .info = {.name = "hierarchical",
             .form = algorithm_kind::hierarchical,
             .restrictions = {restriction::hierarchy_available},
             .summary = "scatter among representatives (blocks padded to the largest group), "
                        "then in each group"},
    .run = hierarchical,
});

} // namespace
} // namespace tutti
