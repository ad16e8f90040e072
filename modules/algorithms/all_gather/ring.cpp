// all_gather: ring
//
// Collective:   all_gather
// Kind:         pure
// Restrictions: none (any communicator size)
// Parameters:   none
//
// Bandwidth-optimal for large blocks: in step s (s = 0 .. p-2) rank r passes
// block (r - s) mod p to its right neighbour and receives block (r - s - 1)
// mod p from its left one, straight into place in recv. Every rank sends and
// receives p - 1 blocks, each link carrying one block per step.
// (Thakur, Rabenseifner, Gropp 2005.)
//
// At p = 2 the one step is an exchange that ends the call: its send is
// awaited at the end (send_awaited::at_end), which shared memory reads by
// single copy from a lower size, each rank reading the other's block
// (docs/performance.md, sixteenth session). Longer rings keep the cells: a
// step's receiver is then busy sending on. Where the call's buffers take
// three quarters of the last-level cache or more, that first copy of the
// own block is written past the caches (buffers_exceed_cache in common.hpp,
// copy_block in core/copy.hpp).

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> ring(const call_context& ctx, const all_gather_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const std::size_t block = a.send.size();
    auto block_of = [&](int i) { return blocks_of(a.recv, block, i); };
    const int right = (r + 1) % p;
    const int left = (r - 1 + p) % p;
    const auto when = p == 2 ? send_awaited::at_end : send_awaited::before_next_step;
    int s = 0;
    if (p > 1 && block > 0 && !overlapping(a.send, a.recv)) {
        // The first step sends the own block from send, and the copy of it
        // into recv runs while the neighbour takes it: a block copied first
        // and sent from recv would reach the neighbour only after that copy,
        // and from lines just written here rather than ones it may have read
        // before (2 ranks, 1 MiB: docs/performance.md, thirteenth session).
        auto first = ctx.send_recv(right, a.send, left, block_of(left), 0, when);
        copy_block(block_of(r).data(), a.send.data(), block, buffers_exceed_cache(ctx, a));
        co_await std::move(first);
        s = 1;
    } else {
        // Own block first: later steps send from recv only, so a send buffer
        // that is part of recv may be overwritten once it has been copied.
        copy_unless_same(block_of(r).data(), a.send.data(), block);
        if (p == 1 || block == 0) co_return;
    }
    for (; s < p - 1; ++s) {
        co_await ctx.send_recv(right, block_of((r - s + p) % p), left,
                               block_of((r - s - 1 + p) % p), static_cast<std::uint64_t>(s), when);
    }
}

const bool registered = register_algorithm<all_gather_args>({
    .info = {.name = "ring",
             .form = algorithm_kind::pure,
             .summary = "p-1 steps passing one block to the right neighbour; any p"},
    .run = ring,
});

} // namespace
} // namespace tutti
