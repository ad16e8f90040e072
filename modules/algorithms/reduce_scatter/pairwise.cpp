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

task<void> pairwise(const call_context& ctx, const reduce_scatter_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    own_block_contributions blocks(ctx, a);
    if (p == 1) {
        copy_unless_same(a.recv.data(), a.send.data(), blocks.bytes());
        co_return;
    }
    for (int k = 1; k < p; ++k) {
        const int to = (r + k) % p;
        const int from = (r - k + p) % p;
        co_await ctx.send_recv(to, blocks.block_of(to), from, blocks.slot(from),
                               static_cast<std::uint64_t>(k));
    }
    blocks.fold();
}

const bool registered = register_algorithm<reduce_scatter_args>({
    .info = {.name = "pairwise",
             .form = algorithm_kind::pure,
             .summary = "p-1 direct exchanges, then a rank-ordered fold; any p, any op"},
    .run = pairwise,
});

} // namespace
} // namespace tutti
