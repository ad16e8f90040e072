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
// order, so every rank holds the same bits even for floating point.

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
    if (p == 1 || bytes == 0) {
        copy_unless_same(a.recv.data(), a.send.data(), bytes);
        co_return;
    }
    // Every rank's vector in its slot, this rank's own copied there first:
    // then an in-place call may write its result while the sends still read.
    scratch<> vectors(static_cast<std::size_t>(p) * bytes);
    const auto slot = [&](int rank) { return blocks_of(vectors.span(), bytes, rank); };
    copy_bytes(slot(r).data(), a.send.data(), bytes);

    std::vector<request> requests;
    requests.reserve(2 * static_cast<std::size_t>(p - 1));
    for (int k = 1; k < p; ++k) {
        const int source = r - k < 0 ? r - k + p : r - k;
        requests.push_back(ctx.irecv(source, 0, slot(source), receive_use::combined_at_once));
    }
    for (int k = 1; k < p; ++k) {
        const int dest = r + k >= p ? r + k - p : r + k;
        keep_pending(requests, ctx.start_send(dest, 0, slot(r), send_awaited::at_end));
    }
    co_await wait_all(requests);

    std::byte* result = a.recv.data();
    a.op->combine(slot(0).data(), slot(1).data(), result, a.count);
    for (int rank = 2; rank < p; ++rank)
        a.op->combine(result, slot(rank).data(), result, a.count);
}

const bool registered = register_algorithm<all_reduce_args>({
    .info = {.name = "direct",
             .form = algorithm_kind::pure,
             .summary = "every vector to every rank at once, combined in rank order"},
    .run = direct,
});

} // namespace
} // namespace tutti
