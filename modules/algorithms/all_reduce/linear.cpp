// all_reduce: linear
//
// Collective:   all_reduce
// Kind:         pure
// Restrictions: none (any communicator size; non-commutative operations give
//               the rank-ordered result)
// Parameters:   none
//
// A reduce to rank 0 and a broadcast from it, both direct: every rank sends
// its vector to rank 0, which combines the p vectors in rank order and sends
// the result back to each. Two hops at any p, and every rank but 0 sends
// and receives once, where recursive doubling has every rank exchange in
// each of its log2(p') rounds (and two more for p not a power of two). For
// small vectors between few ranks whose every message and wake-up is dear,
// as over TCP (Open MPI's basic linear all_reduce).

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> linear(const call_context& ctx, const all_reduce_args& a) {
    const int p = ctx.size();
    const auto bytes = a.count * a.op->element_size;
    if (reduce_without_messages(a, p)) co_return;
    constexpr std::uint64_t gathered = 0, released = 1;
    const auto result = a.recv.first(bytes);
    if (ctx.rank() != 0) {
        co_await ctx.send(0, gathered, a.send.first(bytes));
        co_await ctx.recv(0, released, result);
        co_return;
    }
    // In place, send and recv are one buffer: the fold reads x_0 before it
    // writes the result there.
    co_await fold_every_vector_at_root(ctx, 0, gathered, *a.op, a.count, a.send.data(),
                                       result.data());
    co_await send_from_rank_zero(ctx, released, [&](int) { return result; });
}

const bool registered = register_algorithm<all_reduce_args>({
    .info = {.name = "linear",
             .form = algorithm_kind::pure,
             .summary = "every vector to rank 0, combined in rank order, the result back to all"},
    .run = linear,
});

} // namespace
} // namespace tutti
