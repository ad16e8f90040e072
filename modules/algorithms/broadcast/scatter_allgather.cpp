// broadcast: scatter then all_gather (Van de Geijn)
//
// Collective:   broadcast
// Kind:         pure
// Restrictions: none (any communicator size, any root, any length; pieces
//               are empty when the buffer is shorter than p)
// Parameters:   none
//
// The buffer is cut into p nearly equal pieces, piece i for the rank i
// places after the root. A binomial scatter gives each rank its piece (a
// rank of the tree receives the pieces of its whole subtree and passes them
// on), then a ring all_gather in p - 1 steps passes every piece round. Each
// rank sends and receives about 2n bytes instead of n log2 p for a binomial
// broadcast, which wins for long buffers on many ranks. Both parts are
// written out here on point-to-point messages, so it is a pure algorithm.
// (Barnett, Gupta, Payne, Shuler, van de Geijn, Watts 1994; Thakur,
// Rabenseifner, Gropp 2005.)

#include <algorithm>
#include <cstddef>
#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

constexpr std::uint64_t scatter_step = 0;
constexpr std::uint64_t first_ring_step = 1;

task<void> scatter_allgather(const call_context& ctx, const broadcast_args& a) {
    const int p = ctx.size();
    if (p == 1 || a.buffer.empty()) co_return;
    const int r = ctx.rank();
    const int vr = relative_rank(r, a.root, p);
    const auto actual = [&](int relative) { return actual_rank(relative, a.root, p); };

    // Piece i (by relative rank) starts at offset(i); the first n mod p
    // pieces are one byte longer than the others.
    const std::size_t n = a.buffer.size();
    const auto parts = static_cast<std::size_t>(p);
    const auto offset = [&](int i) { return even_piece_start(n, parts, i); };
    // Pieces [lo, hi), contiguous because they are numbered in buffer order.
    const auto pieces = [&](int lo, int hi) {
        return a.buffer.subspan(offset(lo), offset(hi) - offset(lo));
    };

    // Scatter: vr receives the pieces of its subtree [vr, vr + extent).
    const int limit = binomial_extent(vr, p);
    if (vr != 0) {
        auto mine = pieces(vr, std::min(vr + limit, p));
        // Both sides see the same length, so both skip an empty message.
        if (!mine.empty()) co_await ctx.recv(actual(vr - limit), scatter_step, mine);
    }
    std::vector<request> sends;
    for (int mask = limit / 2; mask > 0; mask /= 2) {
        const int child = vr + mask;
        if (child >= p) continue;
        auto theirs = pieces(child, std::min(child + mask, p));
        if (!theirs.empty()) sends.push_back(ctx.isend(actual(child), scatter_step, theirs));
    }
    co_await wait_all(sends);

    // Ring all_gather: in step s, pass piece vr - s right and take piece
    // vr - s - 1 from the left. The two are distinct pieces, so no buffer is
    // read and written at once. A piece is empty for its sender exactly when
    // it is for its receiver, so both skip it.
    const int right = (r + 1) % p;
    const int left = (r - 1 + p) % p;
    for (int s = 0; s < p - 1; ++s) {
        const auto step = first_ring_step + static_cast<std::uint64_t>(s);
        const int out = (vr - s + p) % p;
        const int in = (vr - s - 1 + p) % p;
        std::vector<request> both;
        if (auto piece = pieces(in, in + 1); !piece.empty())
            both.push_back(ctx.irecv(left, step, piece));
        if (auto piece = pieces(out, out + 1); !piece.empty())
            both.push_back(ctx.isend(right, step, piece));
        co_await wait_all(both);
    }
}

const bool registered = register_algorithm<broadcast_args>({
    .info = {.name = "scatter_allgather",
             .form = algorithm_kind::pure,
             .summary = "binomial scatter of p pieces, then a ring all_gather; for long buffers"},
    .run = scatter_allgather,
});

} // namespace
} // namespace tutti
