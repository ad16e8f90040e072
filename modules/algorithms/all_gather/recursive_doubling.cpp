// all_gather: recursive doubling
//
// Collective:   all_gather
// Kind:         pure
// Restrictions: power_of_two (communicator size)
// Parameters:   none
//
// Latency-optimal for small blocks: in round k rank r exchanges with
// r xor 2^k the 2^k contiguous blocks it holds, so after log2(p) rounds every
// rank has all p blocks. Holding contiguous, aligned ranges of blocks is what
// needs p to be a power of two. (Thakur, Rabenseifner, Gropp 2005.)

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> recursive_doubling(const call_context& ctx, const all_gather_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const std::size_t block = a.send.size();
    auto blocks = [&](int first, int n) { return blocks_of(a.recv, block, first, n); };
    std::uint64_t step = 0;
    int mask = 1;
    if (p > 1 && block > 0 && !overlapping(a.send, a.recv)) {
        // The first round sends the own block from send and copies it into
        // recv meanwhile (as the ring all_gather does).
        auto first = ctx.send_recv(r ^ 1, a.send, r ^ 1, blocks(r ^ 1, 1), step++);
        copy_bytes(blocks(r, 1).data(), a.send.data(), block);
        co_await std::move(first);
        mask = 2;
    } else {
        // Own block first: later rounds send from recv only, so a send buffer
        // that is part of recv may be overwritten once it has been copied.
        copy_unless_same(blocks(r, 1).data(), a.send.data(), block);
        if (p == 1 || block == 0) co_return;
    }
    for (; mask < p; mask <<= 1, ++step) {
        const int partner = r ^ mask;
        const int mine = r & ~(mask - 1);
        const int theirs = partner & ~(mask - 1);
        co_await ctx.send_recv(partner, blocks(mine, mask), partner, blocks(theirs, mask), step);
    }
}

const bool registered = register_algorithm<all_gather_args>({
    .info = {.name = "recursive_doubling",
             .form = algorithm_kind::pure,
             .restrictions = {restriction::power_of_two},
             .summary = "log2(p) exchanges of doubling ranges of blocks; p a power of two"},
    .run = recursive_doubling,
});

} // namespace
} // namespace tutti
