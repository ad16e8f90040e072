// reduce_scatter: direct
//
// Collective:   reduce_scatter
// Kind:         pure
// Restrictions: none (any communicator size, any counts; non-commutative
//               operations give the rank-ordered result)
// Parameters:   none
//
// Pairwise's messages posted all at once: rank r sends its contribution to
// block j straight from the send buffer to rank j for every j != r, receives
// every rank's contribution to block r, and folds them as x0 op x1 op ...
// op x(p-1). One round of latency where pairwise takes p - 1 and recursive
// halving log2 p, for p - 1 messages per rank and scratch for p - 1
// contributions: for small vectors on few ranks that share cores.

#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> direct(const call_context& ctx, const reduce_scatter_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const std::size_t element = a.op->element_size;
    const auto offset = prefix_offsets(a.counts.first(static_cast<std::size_t>(p)), element);
    const auto block_of = [&](int b) {
        return a.send.subspan(offset[b], offset[b + 1] - offset[b]);
    };
    const std::size_t count = a.counts[static_cast<std::size_t>(r)];
    const std::size_t bytes = count * element;
    if (p == 1) {
        copy_unless_same(a.recv.data(), a.send.data(), bytes);
        co_return;
    }

    // Slot i holds rank i's contribution to block r.
    scratch<> slots(static_cast<std::size_t>(p) * bytes);
    const auto slot = [&](int i) { return blocks_of(slots.span(), bytes, i); };
    const auto requests = post_to_every_rank(ctx, 0, slot, block_of, receive_use::combined_at_once);
    co_await wait_all(requests);
    if (bytes == 0) co_return;

    // The fold writes recv from the start: an own contribution it overlaps
    // is read from a copy.
    const std::byte* own = block_of(r).data();
    if (overlapping(a.send, a.recv.first(bytes))) {
        copy_bytes(slot(r).data(), own, bytes);
        own = slot(r).data();
    }
    const auto contribution = [&](int i) { return i == r ? own : slot(i).data(); };
    fold_in_rank_order(*a.op, p, contribution, a.recv.data(), count);
}

const bool registered = register_algorithm<reduce_scatter_args>({
    .info = {.name = "direct",
             .form = algorithm_kind::pure,
             .summary = "every contribution to its block's rank at once, a rank-ordered fold"},
    .run = direct,
});

} // namespace
} // namespace tutti
