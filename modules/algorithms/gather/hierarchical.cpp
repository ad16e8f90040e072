// gather: hierarchical
//
// Collective:   gather
// Kind:         hierarchical composition
// Restrictions: hierarchy_available
// Parameters:   none
//
// Up the tree: a gather to the representative inside each group (slot
// 3k-2), then among the representatives to the root's group's one (3k-1),
// each contributing its group's blocks padded to the largest group's size,
// as gather needs one block size; the receiving representative puts each
// block at its rank's place (groups need not be consecutive ranks), cropping
// each group to its real size from the partition. A root that is not its
// group's representative receives the whole result from it in one message.
// Slot 3k stays unused.

#include <algorithm>

#include "algorithms/catalog.hpp"
#include "core/scratch.hpp"
#include "hierarchy/compose.hpp"

namespace tutti {
namespace {

using namespace hierarchy_detail;

constexpr std::uint64_t to_root_step = 0;

task<void> hierarchical(const call_context& ctx, const gather_args& a) {
    const auto& h = hierarchy_of(ctx);
    if (delegate_to_flat(ctx, h)) {
        co_await run_flat(ctx, a);
        co_return;
    }
    const std::size_t block = a.send.size();
    if (block == 0) co_return;
    const auto s = slots_for(ctx.generation());
    const int root_group = h.group_of(a.root);
    const int root_rep = h.representative_of_group(root_group);
    const auto n = static_cast<std::size_t>(h.size());
    const auto largest = static_cast<std::size_t>(h.largest_group());
    const auto own = static_cast<std::size_t>(h.group_size(h.my_group()));
    const bool rep = h.is_representative();

    // The group's blocks, padded for the representatives' gather.
    scratch<> mine(rep ? largest * block : 0);
    co_await sub_step(h.group(), gather_args{a.send, mine.span().first(rep ? own * block : 0), 0},
                      s.first);
    if (!rep) {
        if (ctx.rank() == a.root)
            co_await ctx.recv(root_rep, to_root_step, a.recv.first(block * n));
        co_return;
    }
    const bool receives = h.my_group() == root_group;
    scratch<> all(receives ? mine.size() * static_cast<std::size_t>(h.group_count()) : 0);
    co_await sub_step(h.leaders(), gather_args{mine.span(), all.span(), root_group}, s.middle);
    if (!receives) co_return;

    scratch<> sorted(root_rep != a.root ? block * n : 0);
    const std::span<std::byte> result = root_rep != a.root ? sorted.span() : a.recv;
    for (int g = 0; g < h.group_count(); ++g) {
        const auto& members = h.groups()[static_cast<std::size_t>(g)];
        for (std::size_t i = 0; i < members.size(); ++i) {
            const auto from =
                block_at(all.span(), block, static_cast<std::size_t>(g) * largest + i);
            std::copy(from.begin(), from.end(),
                      block_at(result, block, static_cast<std::size_t>(members[i])).begin());
        }
    }
    if (root_rep != a.root) co_await ctx.send(a.root, to_root_step, sorted.span());
}

const bool registered = register_algorithm<gather_args>({
    .info = {.name = "hierarchical",
             .form = algorithm_kind::hierarchical,
             .restrictions = {restriction::hierarchy_available},
             .summary = "gather in each group, then among representatives (blocks padded to the "
                        "largest group)"},
    .run = hierarchical,
});

} // namespace
} // namespace tutti
