// all_gather: recursive doubling (recursive_doubling,
// recursive_doubling_farthest_first)
//
// Collective:   all_gather
// Kind:         pure
// Restrictions: power_of_two (communicator size)
// Parameters:   the order of the rounds: nearest first (`recursive_doubling`)
//               or farthest first (`recursive_doubling_farthest_first`)
//
// Latency-optimal for small blocks: in round k rank r exchanges with
// r xor 2^k the 2^k contiguous blocks it holds, so after log2(p) rounds every
// rank has all p blocks. Holding contiguous, aligned ranges of blocks is what
// needs p to be a power of two. (Thakur, Rabenseifner, Gropp 2005.)
//
// The last round moves half of all blocks. Farthest first, the rounds run on
// bit-reversed ranks (round k pairs r with r xor p/2^(k+1)), so that half
// goes between r and r xor 1, which share a node where nodes hold
// consecutive ranks, and only the first rounds' few blocks cross between
// nodes. Each rank then holds the blocks in bit-reversed places and swaps
// them into rank order at the end: one more local copy of about the
// received bytes, against a quarter of them less over the network on 2
// nodes of 2 ranks.

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

enum class round_order { nearest_first, farthest_first };

task<void> recursive_doubling(const call_context& ctx, const all_gather_args& a,
                              round_order order) {
    const int p = ctx.size();
    const bool reversed = order == round_order::farthest_first && p > 2;
    // Rounds, and places in recv until the end, by reversed rank (see the head).
    auto place = [&](int rank) { return reversed ? reversed_bits(rank, p) : rank; };
    const int me = place(ctx.rank());
    const auto rank_at = place; // reversing twice gives the rank back
    const std::size_t block = a.send.size();
    auto blocks = [&](int first, int n) { return blocks_of(a.recv, block, first, n); };
    std::uint64_t step = 0;
    int mask = 1;
    if (p > 1 && block > 0 && !overlapping(a.send, a.recv)) {
        // The first round sends the own block from send and copies it into
        // recv meanwhile (as the ring all_gather does).
        const int partner = rank_at(me ^ 1);
        auto first = ctx.send_recv(partner, a.send, partner, blocks(me ^ 1, 1), step++);
        copy_bytes(blocks(me, 1).data(), a.send.data(), block);
        co_await std::move(first);
        mask = 2;
    } else {
        // Own block first: later rounds send from recv only, so a send buffer
        // that is part of recv may be overwritten once it has been copied.
        copy_unless_same(blocks(me, 1).data(), a.send.data(), block);
        if (p == 1 || block == 0) co_return;
    }
    for (; mask < p; mask <<= 1, ++step) {
        const int partner = me ^ mask;
        const int mine = me & ~(mask - 1);
        const int theirs = partner & ~(mask - 1);
        co_await ctx.send_recv(rank_at(partner), blocks(mine, mask), rank_at(partner),
                               blocks(theirs, mask), step);
    }
    if (!reversed) co_return;
    // Place v holds rank reversed(v)'s block: swap each such pair once.
    scratch<> held(block);
    for (int v = 0; v < p; ++v) {
        const int w = reversed_bits(v, p);
        if (w <= v) continue;
        copy_bytes(held.data(), blocks(v, 1).data(), block);
        copy_bytes(blocks(v, 1).data(), blocks(w, 1).data(), block);
        copy_bytes(blocks(w, 1).data(), held.data(), block);
    }
}

const bool registered = register_algorithm<all_gather_args>({
    .info = {.name = "recursive_doubling",
             .form = algorithm_kind::pure,
             .restrictions = {restriction::power_of_two},
             .summary = "log2(p) exchanges of doubling ranges of blocks; p a power of two"},
    .run =
        [](const call_context& ctx, const all_gather_args& a) {
            return recursive_doubling(ctx, a, round_order::nearest_first);
        },
});

const bool registered_farthest_first = register_algorithm<all_gather_args>({
    .info = {.name = "recursive_doubling_farthest_first",
             .form = algorithm_kind::pure,
             .restrictions = {restriction::power_of_two},
             .summary = "recursive doubling whose last, largest exchange is between neighbouring "
                        "ranks (r xor 1): for nodes of consecutive ranks"},
    .run =
        [](const call_context& ctx, const all_gather_args& a) {
            return recursive_doubling(ctx, a, round_order::farthest_first);
        },
});

} // namespace
} // namespace tutti
