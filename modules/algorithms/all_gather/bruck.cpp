// all_gather: Bruck
//
// Collective:   all_gather
// Kind:         pure
// Restrictions: none (any communicator size)
// Parameters:   none
//
// Latency-optimal for small blocks at any p: rank r keeps the blocks in
// rotated order, position i holding the block of rank (r + i) mod p. In round
// k, with d = 2^k, it sends its first min(d, p - d) blocks to rank r - d and
// receives as many from rank r + d into positions d onwards. After
// ceil(log2 p) rounds all p positions are filled, and one local rotation by r
// blocks puts them in rank order. The rotation is done in recv itself, so no
// second buffer of p blocks is needed. (Bruck et al. 1997.)

#include <algorithm>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> bruck(const call_context& ctx, const all_gather_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const std::size_t block = a.send.size();
    auto blocks = [&](int first, int n) { return blocks_of(a.recv, block, first, n); };
    if (block == 0) co_return;
    // Own block to position 0; the send buffer may be part of recv (then
    // later rounds may overwrite it, which is fine once copied).
    copy_unless_same(a.recv.data(), a.send.data(), block);
    if (p == 1) co_return;

    std::uint64_t step = 0;
    for (int d = 1; d < p; d *= 2, ++step) {
        const int n = std::min(d, p - d);
        co_await ctx.send_recv((r - d + p) % p, blocks(0, n), (r + d) % p, blocks(d, n), step);
    }
    // Position i holds rank (r + i) mod p's block; rank j's belongs at j.
    const auto shift = static_cast<std::ptrdiff_t>(static_cast<std::size_t>(p - r) * block);
    std::rotate(a.recv.begin(), a.recv.begin() + shift, a.recv.end());
}

const bool registered = register_algorithm<all_gather_args>({
    .info = {.name = "bruck",
             .form = algorithm_kind::pure,
             .summary = "ceil(log2 p) rounds to rank - 2^k, then a local rotation; any p"},
    .run = bruck,
});

} // namespace
} // namespace tutti
