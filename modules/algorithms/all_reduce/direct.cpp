// all_reduce: direct
//
// Collective:   all_reduce
// Kind:         pure
// Restrictions: none (any communicator size; non-commutative operations give
//               the rank-ordered result)
// Parameters:   none
//
// For small vectors on few ranks: every rank sends its whole vector to every
// other rank at once and then combines the p vectors itself, in rank order,
// ((x_0 op x_1) op x_2) op ... One round of latency where recursive doubling
// takes log2(p') and, for p not a power of two, two more (at three ranks:
// one round against three), for p - 1 messages of the whole vector per rank
// and p - 1 combines. Every rank combines the same operands in the same
// order, so every rank holds the same bits even for floating point. Suits
// ranks that share cores over shared memory; over TCP, where a message is a
// system call, `linear` does better.

#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> direct(const call_context& ctx, const all_reduce_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const auto bytes = a.count * a.op->element_size;
    if (reduce_without_messages(a, p)) co_return;
    // Every rank's vector in its slot, this rank's own copied there first:
    // then an in-place call may write its result while the sends still read.
    scratch<> vectors(static_cast<std::size_t>(p) * bytes);
    const auto slot = [&](int rank) { return blocks_of(vectors.span(), bytes, rank); };
    copy_bytes(slot(r).data(), a.send.data(), bytes);

    const auto requests = post_to_every_rank(
        ctx, 0, slot, [&](int) { return slot(r); }, receive_use::combined_at_once);
    co_await wait_all(requests);
    fold_in_rank_order(
        *a.op, p, [&](int rank) { return slot(rank).data(); }, a.recv.data(), a.count);
}

const bool registered = register_algorithm<all_reduce_args>({
    .info = {.name = "direct",
             .form = algorithm_kind::pure,
             .summary = "every vector to every rank at once, combined in rank order"},
    .run = direct,
});

} // namespace
} // namespace tutti
