// all_gather: hierarchical
//
// Collective:   all_gather
// Kind:         hierarchical composition
// Restrictions: hierarchy_available
// Parameters:   none
//
// After HPX PR #7160: a gather to the representative inside each group
// (slot 3k-2), an all_gather among the representatives (3k-1) with each
// group's blocks padded to the largest group's size, as all_gather needs one
// block size, then a broadcast from the representative inside each group
// (3k). Each representative puts every block at its rank's place, cropping
// each group to its real size from the partition, so groups need not be
// consecutive ranks.

#include <algorithm>

#include "algorithms/catalog.hpp"
#include "core/scratch.hpp"
#include "hierarchy/compose.hpp"

namespace tutti {
namespace {

using namespace hierarchy_detail;

task<void> hierarchical(const call_context& ctx, const all_gather_args& a) {
    const auto& h = hierarchy_of(ctx);
    if (delegate_to_flat(ctx, h)) {
        co_await run_flat(ctx, a);
        co_return;
    }
    const std::size_t block = a.send.size();
    if (block == 0) co_return;
    const auto s = slots_for(ctx.generation());
    const auto n = static_cast<std::size_t>(h.size());
    const auto largest = static_cast<std::size_t>(h.largest_group());
    const auto own = static_cast<std::size_t>(h.group_size(h.my_group()));

    scratch<> mine(h.is_representative() ? largest * block : 0);
    co_await sub_step(h.group(),
                      gather_args{a.send, mine.span().first(mine.size() == 0 ? 0 : own * block), 0},
                      s.first);
    if (h.is_representative()) {
        scratch<> all(mine.size() * static_cast<std::size_t>(h.group_count()));
        co_await sub_step(h.leaders(), all_gather_args{mine.span(), all.span()}, s.middle);
        for (int g = 0; g < h.group_count(); ++g) {
            const auto& members = h.groups()[static_cast<std::size_t>(g)];
            for (std::size_t i = 0; i < members.size(); ++i) {
                const auto from =
                    block_at(all.span(), block, static_cast<std::size_t>(g) * largest + i);
                std::copy(from.begin(), from.end(),
                          block_at(a.recv, block, static_cast<std::size_t>(members[i])).begin());
            }
        }
    }
    co_await sub_step(h.group(), broadcast_args{a.recv.first(block * n), 0}, s.last);
}

const bool registered = register_algorithm<all_gather_args>({
    .info = {.name = "hierarchical",
             .form = algorithm_kind::hierarchical,
             .restrictions = {restriction::hierarchy_available},
             .summary = "gather in each group, all_gather among representatives (blocks padded "
                        "to the largest group), broadcast in each group"},
    .run = hierarchical,
});

} // namespace
} // namespace tutti
