// all_reduce: scatter_gather
//
// Collective:   all_reduce
// Kind:         pure
// Restrictions: none (any communicator size, in place; non-commutative
//               operations give the rank-ordered result)
// Parameters:   none
//
// A reduce_scatter and an all_gather, each in one round. The vector is cut
// into p nearly equal blocks (some empty when count < p). First every rank
// sends its contribution to block j straight to rank j, receives every
// rank's contribution to its own block and folds them in rank order, x0 op
// x1 op ... op x(p-1), into its block of recv (reduce_scatter's `direct`).
// Then every rank sends its folded block to every other rank, straight into
// place (all_gather's `direct`). Each rank sends and receives about 2 (p -
// 1) / p of the vector and combines one block p - 1 times, in two rounds.
// Rabenseifner's halving and the ring move as little, but combine ranks out
// of order and need a commutative operation; recursive doubling, the usual
// choice for a non-commutative one, moves the whole vector and combines it
// in every one of its ceil(log2 p) rounds.

#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

constexpr std::uint64_t scatter_step = 0;
constexpr std::uint64_t gather_step = 1;

task<void> scatter_gather(const call_context& ctx, const all_reduce_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    if (reduce_without_messages(a, p)) co_return;
    const even_pieces cut{a.count, static_cast<std::size_t>(p), a.op->element_size};
    std::vector<std::size_t> counts(static_cast<std::size_t>(p));
    for (int b = 0; b < p; ++b)
        counts[static_cast<std::size_t>(b)] = cut.count_of(b);
    const auto block_of = [&](int b) { return cut.of(a.recv, b); };

    // The reduce_scatter (its `direct` round). Its sends are awaited with its
    // receives, so that an in-place call's send buffer is read in full before
    // the all_gather writes over it.
    {
        const reduce_scatter_args scattered{a.send, block_of(r), counts, a.op};
        own_block_contributions blocks(ctx, scattered);
        const auto requests = blocks.post_round(ctx, scatter_step);
        co_await wait_all(requests);
        blocks.fold();
    }

    // The all_gather of the folded blocks, each straight into its place.
    const std::span<const std::byte> own = block_of(r);
    const auto requests = post_to_every_rank(ctx, gather_step, block_of, [&](int) { return own; });
    co_await wait_all(requests);
}

const bool registered = register_algorithm<all_reduce_args>({
    .info = {.name = "scatter_gather",
             .form = algorithm_kind::pure,
             .summary = "each block folded in rank order by its rank, then sent to every rank: "
                        "two rounds"},
    .run = scatter_gather,
});

} // namespace
} // namespace tutti
