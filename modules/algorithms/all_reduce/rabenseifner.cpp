// all_reduce: Rabenseifner (rabenseifner, rabenseifner_nearest_first)
//
// Collective:   all_reduce
// Kind:         pure
// Restrictions: commutative_op (recursive halving combines ranks that differ
//               in high or low bits first, not in rank order)
// Parameters:   the order of the rounds: farthest first (`rabenseifner`, as
//               MPICH) or nearest first (`rabenseifner_nearest_first`);
//               through shared memory's cells, from pieces of fused_from
//               (2 MiB), the last halving and first doubling rounds run
//               together in segments of fused_segment_bytes (512 KiB)
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

#include <algorithm>
#include <deque>
#include <exception>
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
constexpr std::uint64_t segments_step = 130; // + 2 * segment, + 1 for its doubling

// The last halving round and the first doubling round go between the same
// two ranks (me and me xor 1), and the second sends exactly the piece the
// first combines. Where those pieces travel through shared memory's cells
// (no quick single copy), from pieces of fused_from bytes, the two rounds
// run together in segments: each combined segment goes into the cells while
// it is still in the cache, instead of being read again from memory once the
// whole piece is combined, and the link carries both rounds at once. 2
// ranks, private buffers: the 16 MiB all_reduce took 0.74-0.80 of the time
// with segments of 128 KiB to 2 MiB; from pieces of 1 MiB (the 2 MiB
// all_reduce) it gained nothing; shared buffers read level, and TCP lost
// (the 4 MiB all_reduce 1.10 of the time; docs/performance.md,
// seventy-sixth session). Where single copy is quick the pieces keep it.
constexpr std::size_t fused_from = 2 * 1024 * 1024;
constexpr std::size_t fused_segment_bytes = 512 * 1024;

// Whether the rounds run together: where large exchanges between steps
// travel in units that the receiver copies while the sender writes the next
// (shared memory's cells) rather than by single copy, and each rank has a
// core (where ranks take turns, every segment waits for a turn: 4 ranks on
// 2 cores took 1.03 of the time at 64 MiB). The same on every rank.
bool rounds_run_together(const transport_capabilities& t) {
    return t.segment_bytes != 0 && (!t.single_copy || t.slow_single_copy) && t.ranks_per_core <= 1;
}

// The last halving round of halving_rounds (called with last_mask 2 and the
// same arguments) and the first doubling round, in segments, as steps from
// segments_step (two per segment): segment s of piece me xor 1 goes out
// from `source`, that of piece me comes back and is combined with this
// rank's own into `result`, and then goes back to the partner, whose own
// combined segment lands in piece me xor 1 of `result`. Both ranks cut both
// pieces alike. A segment's halving send may read `result` (source ==
// result after earlier rounds), but the partner sends that segment's
// doubling only once it has received all of it.
template <typename RankOf>
task<void> halve_and_double_in_segments(const call_context& ctx, const reduction_op& op,
                                        std::size_t count, int pof2, int me, RankOf rank_of,
                                        const std::byte* source, std::byte* result,
                                        std::span<std::byte> incoming) {
    const std::size_t element = op.element_size;
    const even_pieces whole{count, static_cast<std::size_t>(pof2), element};
    const std::size_t longest = std::max(whole.count_of(me), whole.count_of(me ^ 1));
    const std::size_t per_segment = std::max<std::size_t>(1, fused_segment_bytes / element);
    const std::size_t segments = std::min((longest + per_segment - 1) / per_segment,
                                          (call_context::max_steps - segments_step) / 2);
    const even_pieces kept{whole.count_of(me), segments, element};
    const even_pieces given{whole.count_of(me ^ 1), segments, element};
    const auto own = whole.of(std::span(source, count * element), me);
    const auto out = whole.of(std::span(result, count * element), me);
    const auto sent = whole.of(std::span(source, count * element), me ^ 1);
    const auto back = whole.of(std::span(result, count * element), me ^ 1);
    const int partner = rank_of(me ^ 1);
    const bool partner_first = partner < ctx.rank();

    std::deque<combining_as_it_lands> combining;
    std::deque<request> halves; // halving receives, oldest first
    std::vector<request> receives, sends;
    receives.reserve(segments);
    sends.reserve(2 * segments);
    const auto start_halving = [&](int s) {
        const std::uint64_t step = segments_step + 2 * static_cast<std::uint64_t>(s);
        const auto into = kept.of(incoming, s);
        const std::byte* mine = kept.of(own, s).data();
        std::byte* to = kept.of(out, s).data();
        const std::size_t n = kept.count_of(s);
        const combination c = partner_first ? combination{op, into.data(), mine, to, n}
                                            : combination{op, mine, into.data(), to, n};
        combining.emplace_back(c, into, combining_as_it_lands::pieces::taken,
                               combining_as_it_lands::reports::ignore);
        halves.push_back(ctx.irecv_observed(partner, step, into, combining.back()));
        keep_pending(sends, ctx.start_send(partner, step, given.of(sent, s)));
    };
    std::exception_ptr failed;
    try {
        start_halving(0);
        for (int s = 0; s < static_cast<int>(segments); ++s) {
            // The next segment's halving goes out ahead of this one's
            // doubling, so that the link never waits for the combining.
            if (s + 1 < static_cast<int>(segments)) start_halving(s + 1);
            const request arrived = halves.front();
            if (arrived->must_wait()) co_await arrived->wait();
            halves.pop_front();
            combining.front().finish();
            combining.pop_front();
            const std::uint64_t step = segments_step + 2 * static_cast<std::uint64_t>(s) + 1;
            receives.push_back(ctx.irecv(partner, step, given.of(back, s)));
            keep_pending(sends, ctx.start_send(partner, step, kept.of(out, s)));
        }
    } catch (...) {
        failed = std::current_exception();
    }
    if (failed) {
        receives.insert(receives.end(), halves.begin(), halves.end());
        co_await ctx.abandon(receives, sends);
        std::rethrow_exception(failed);
    }
    receives.insert(receives.end(), sends.begin(), sends.end());
    co_await wait_all(receives);
}

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
        // The same on every rank (pieces differ by an element at most).
        const bool fused = bytes / static_cast<std::size_t>(pof2) >= fused_from &&
                           rounds_run_together(ctx.comm().transport().capabilities());
        co_await halving_rounds(ctx, *a.op, a.count, pof2, me, rank_of, source, a.recv.data(),
                                incoming.span(), halving_step, fused ? 2 : 1);
        if (fused)
            co_await halve_and_double_in_segments(ctx, *a.op, a.count, pof2, me, rank_of,
                                                  pof2 > 2 ? a.recv.data() : source, a.recv.data(),
                                                  incoming.span());

        // Recursive doubling: swap the complete ranges, doubling them.
        std::uint64_t round = fused ? 1 : 0;
        for (int mask = fused ? 2 : 1; mask < pof2; mask <<= 1, ++round) {
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
