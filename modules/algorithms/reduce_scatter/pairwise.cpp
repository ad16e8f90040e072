// reduce_scatter: pairwise
//
// Collective:   reduce_scatter
// Kind:         pure
// Restrictions: none (any communicator size, any counts; non-commutative
//               operations give the rank-ordered result)
// Parameters:   none
//
// In step k (k = 1 .. p-1) rank r sends its contribution to block (r + k) mod
// p straight from the send buffer to that rank and receives rank (r - k) mod
// p's contribution to block r. With all p contributions to its block at hand
// it folds them as x0 op x1 op ... op x(p-1), so the rank order is exact for
// any operation, at the cost of p - 1 messages per rank and scratch for p - 1
// contributions. Suits few ranks or operations that do not commute.

#include <cstring>
#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

bool overlap(std::span<const std::byte> x, std::span<const std::byte> y) {
    return !x.empty() && !y.empty() && x.data() < y.data() + y.size() &&
           y.data() < x.data() + x.size();
}

task<void> pairwise(const call_context& ctx, const reduce_scatter_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const std::size_t element = a.op->element_size;
    const auto offset = prefix_offsets(a.counts.first(static_cast<std::size_t>(p)), element);
    auto block_of = [&](int b) { return a.send.subspan(offset[b], offset[b + 1] - offset[b]); };
    const std::size_t count = a.counts[static_cast<std::size_t>(r)];
    const std::size_t bytes = count * element;

    if (p == 1) {
        copy_unless_same(a.recv.data(), a.send.data(), bytes);
        co_return;
    }

    // Slot i holds rank i's contribution to block r. The own one is read from
    // the send buffer unless recv overlaps it: the fold writes recv early.
    scratch<> slots(static_cast<std::size_t>(p) * bytes);
    auto slot = [&](int i) {
        return slots.span().subspan(static_cast<std::size_t>(i) * bytes, bytes);
    };
    for (int k = 1; k < p; ++k) {
        const int to = (r + k) % p;
        const int from = (r - k + p) % p;
        co_await ctx.send_recv(to, block_of(to), from, slot(from), static_cast<std::uint64_t>(k));
    }
    const std::byte* own = block_of(r).data();
    if (overlap(a.send, a.recv.first(bytes))) {
        copy_bytes(slot(r).data(), own, bytes);
        own = slot(r).data();
    }
    if (bytes == 0) co_return;

    auto contribution = [&](int i) { return i == r ? own : slot(i).data(); };
    fold_in_rank_order(*a.op, p, contribution, a.recv.data(), count);
}

const bool registered = register_algorithm<reduce_scatter_args>({
    .info = {.name = "pairwise",
             .form = algorithm_kind::pure,
             .summary = "p-1 direct exchanges, then a rank-ordered fold; any p, any op"},
    .run = pairwise,
});

} // namespace
} // namespace tutti
