// all_gather: neighbour exchange
//
// Collective:   all_gather
// Kind:         pure
// Restrictions: even_size (the ranks pair up)
// Parameters:   none
//
// p/2 rounds, each one exchange with a neighbour, the neighbours alternating
// (Chen et al. 2005). Ranks 2k and 2k + 1 first swap their blocks, so each
// holds the pair k of blocks 2k and 2k + 1. Then, in rounds 1 .. p/2 - 1,
// every rank passes on the pair it received last: in odd rounds an even
// rank with its left neighbour and an odd one with its right, in even
// rounds each with its partner of the first round; an even rank's pairs
// spread out leftwards, its partner's rightwards, and between the two of
// them every pair arrives once. The bytes on the wire are the ring's, in
// about half its rounds, every message one contiguous piece of recv and
// nothing rotated afterwards as Bruck must; the recursive doubling needs a
// power of two. For large blocks on an even number of ranks that are not a
// power of two.

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> neighbor_exchange(const call_context& ctx, const all_gather_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const std::size_t block = a.send.size();
    auto block_of = [&](int i) { return blocks_of(a.recv, block, i); };
    const bool even = r % 2 == 0;
    const int partner = even ? r + 1 : r - 1;
    const int other = even ? (r - 1 + p) % p : (r + 1) % p;
    if (block > 0 && !overlapping(a.send, a.recv)) {
        // The first swap sends from send while the own block is copied (as
        // the ring all_gather does).
        auto first = ctx.send_recv(partner, a.send, partner, block_of(partner), 0);
        copy_bytes(block_of(r).data(), a.send.data(), block);
        co_await std::move(first);
    } else {
        // Own block first: the swap then sends from recv, so a send buffer
        // that is part of recv may be overwritten once it has been copied.
        copy_unless_same(block_of(r).data(), a.send.data(), block);
        if (block == 0) co_return;
        co_await ctx.send_recv(partner, block_of(r), partner, block_of(partner), 0);
    }
    const int pairs = p / 2;
    const int own_pair = r / 2;
    // Even ranks gather pairs to their left first, odd ranks to their right.
    const int outward = even ? -1 : 1;
    auto pair_of = [&](int k) { return blocks_of(a.recv, 2 * block, (k % pairs + pairs) % pairs); };
    int last = own_pair;
    for (int round = 1; round < pairs; ++round) {
        const bool odd_round = round % 2 == 1;
        const int incoming =
            odd_round ? own_pair + outward * (round + 1) / 2 : own_pair - outward * round / 2;
        co_await ctx.send_recv(odd_round ? other : partner, pair_of(last),
                               odd_round ? other : partner, pair_of(incoming),
                               static_cast<std::uint64_t>(round));
        last = incoming;
    }
}

const bool registered = register_algorithm<all_gather_args>({
    .info = {.name = "neighbor_exchange",
             .form = algorithm_kind::pure,
             .restrictions = {restriction::even_size},
             .summary = "p/2 exchanges with alternating neighbours, a pair of blocks each; even p"},
    .run = neighbor_exchange,
});

} // namespace
} // namespace tutti
