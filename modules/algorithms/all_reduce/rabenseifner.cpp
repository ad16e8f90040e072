// all_reduce: Rabenseifner (rabenseifner, rabenseifner_nearest_first)
//
// Collective:   all_reduce
// Kind:         pure
// Restrictions: commutative_op (recursive halving combines ranks that differ
//               in high or low bits first, not in rank order)
// Parameters:   the order of the rounds: farthest first (`rabenseifner`, as
//               MPICH) or nearest first (`rabenseifner_nearest_first`)
//
// Bandwidth-optimal for large vectors in few rounds: a recursive-halving
// reduce_scatter (log2 p' exchanges of halving ranges of pieces) leaves each
// of p' ranks with one complete piece of the vector, and a recursive-doubling
// all_gather (log2 p' exchanges of doubling ranges) spreads them. The vector
// is cut into p' nearly equal pieces, some empty when count < p'. For p not a
// power of two, p' is the largest power of two <= p: as in recursive
// doubling, the first 2 (p - p') ranks pair up beforehand (even rank r sends
// its vector to r + 1) and get the result back at the end.
// (Rabenseifner 2004; Thakur, Rabenseifner, Gropp 2005.)
//
// The first halving round moves half the vector, the last 1/p' of it (and
// the doubling rounds the same in reverse). Farthest first, that half goes
// between r and r xor p'/2; nearest first, the rounds run on bit-reversed
// ranks and the half goes between r and r xor 1. Where a node's ranks are
// consecutive (routed shm+tcp jobs), nearest first keeps the halves in the
// node's memory and only the small pieces cross the network: on 2 nodes of 2
// ranks each rank sends a quarter of the vector over TCP per phase instead of
// a half. On one node of ranks that share cores it is no faster and, with
// unbound ranks, a little slower (docs/performance.md, twenty-fifth session).

#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

constexpr std::uint64_t fold_step = 0;
constexpr std::uint64_t halving_step = 1;   // + round, below 64 rounds
constexpr std::uint64_t doubling_step = 65; // + round
constexpr std::uint64_t unfold_step = 129;

enum class round_order { farthest_first, nearest_first };

task<void> rabenseifner(const call_context& ctx, const all_reduce_args& a, round_order order) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const std::size_t element = a.op->element_size;
    const std::size_t bytes = a.count * element;
    if (reduce_without_messages(a, p)) co_return;

    const int pof2 = power_of_two_floor(p);
    const int extra = p - pof2;

    // Where this rank's contribution is read in the first halving round: the
    // send buffer, or recv once a folded-in partner's part is added to it.
    const std::byte* source = a.send.data();
    int new_rank;
    if (r < 2 * extra) {
        if (r % 2 == 0) {
            co_await ctx.send(r + 1, fold_step, a.send.first(bytes));
            new_rank = -1;
        } else {
            scratch<> incoming(bytes);
            co_await ctx.recv(r - 1, fold_step, incoming.span(), receive_use::combined_at_once);
            a.op->combine(incoming.data(), a.send.data(), a.recv.data(), a.count);
            source = a.recv.data();
            new_rank = r / 2;
        }
    } else {
        new_rank = r - extra;
    }

    if (new_rank >= 0) {
        const auto pieces = static_cast<std::size_t>(pof2);
        auto offset = [&](int i) { return even_piece_start(a.count, pieces, i) * element; };
        // Rounds and pieces numbered by reversed rank for nearest first.
        const bool reversed = order == round_order::nearest_first;
        const int me = reversed ? reversed_bits(new_rank, pof2) : new_rank;
        auto rank_of = [&](int peer) {
            return unfolded_rank(reversed ? reversed_bits(peer, pof2) : peer, extra);
        };
        scratch<> incoming(offset(pof2 / 2)); // the first half is the largest
        co_await halving_rounds(ctx, *a.op, a.count, pof2, me, rank_of, source, a.recv.data(),
                                incoming.span(), halving_step);

        // Recursive doubling: swap the complete ranges, doubling them.
        std::uint64_t round = 0;
        for (int mask = 1; mask < pof2; mask <<= 1, ++round) {
            const int new_partner = me ^ mask;
            const int mine = me & ~(mask - 1);
            const int theirs = new_partner & ~(mask - 1);
            co_await ctx.send_recv(
                rank_of(new_partner),
                a.recv.subspan(offset(mine), offset(mine + mask) - offset(mine)),
                rank_of(new_partner),
                a.recv.subspan(offset(theirs), offset(theirs + mask) - offset(theirs)),
                doubling_step + round);
        }
    }

    // Hand the result back to the ranks that were folded in.
    if (r < 2 * extra) {
        if (r % 2 == 1)
            co_await ctx.send(r - 1, unfold_step, a.recv.first(bytes));
        else
            co_await ctx.recv(r + 1, unfold_step, a.recv.first(bytes));
    }
}

const bool registered = register_algorithm<all_reduce_args>({
    .info = {.name = "rabenseifner",
             .form = algorithm_kind::pure,
             .restrictions = {restriction::commutative_op},
             .summary = "recursive-halving reduce_scatter then recursive-doubling all_gather"},
    .run =
        [](const call_context& ctx, const all_reduce_args& a) {
            return rabenseifner(ctx, a, round_order::farthest_first);
        },
});

const bool registered_nearest_first = register_algorithm<all_reduce_args>({
    .info = {.name = "rabenseifner_nearest_first",
             .form = algorithm_kind::pure,
             .restrictions = {restriction::commutative_op},
             .summary = "rabenseifner with the largest exchanges between neighbouring ranks "
                        "(r xor 1), the smallest between the farthest: for nodes of "
                        "consecutive ranks"},
    .run =
        [](const call_context& ctx, const all_reduce_args& a) {
            return rabenseifner(ctx, a, round_order::nearest_first);
        },
});

} // namespace
} // namespace tutti
