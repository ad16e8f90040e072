// reduce_scatter: linear
//
// Collective:   reduce_scatter
// Kind:         pure
// Restrictions: none (any communicator size, any counts; non-commutative
//               operations give the rank-ordered result)
// Parameters:   none
//
// A reduce to rank 0 and a scatter from it, both direct: every rank sends its
// whole vector to rank 0, which combines the p vectors in rank order and
// sends each rank its block of the result. Two hops at any p and 2(p - 1)
// messages in all, where direct sends p(p - 1) and the ring takes p - 1
// rounds; rank 0 moves p vectors in and one out. For small vectors between
// few ranks whose every message is a system call and a wake-up, as over TCP
// with more ranks than cores; the ring and recursive halving move less per
// rank once vectors are long.

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> linear(const call_context& ctx, const reduce_scatter_args& a) {
    const int p = ctx.size();
    const auto offset =
        prefix_offsets(a.counts.first(static_cast<std::size_t>(p)), a.op->element_size);
    const std::size_t total = offset[p];
    const auto block = [&](std::span<std::byte> vector, int b) {
        return vector.subspan(offset[b], offset[b + 1] - offset[b]);
    };
    const auto own = a.recv.first(offset[ctx.rank() + 1] - offset[ctx.rank()]);
    if (p == 1 || total == 0) {
        copy_unless_same(own.data(), a.send.data(), own.size());
        co_return;
    }
    constexpr std::uint64_t gathered = 0, scattered = 1;
    if (ctx.rank() != 0) {
        co_await ctx.send(0, gathered, a.send.first(total));
        if (!own.empty()) co_await ctx.recv(0, scattered, own);
        co_return;
    }
    // Rank 0: the whole result, then each rank's block of it.
    scratch<> whole(total);
    const auto result = whole.span();
    co_await fold_every_vector_at_root(ctx, 0, gathered, *a.op, total / a.op->element_size,
                                       a.send.data(), result.data());
    // In place, recv is send, which the fold has read.
    if (!own.empty()) copy_bytes(own.data(), block(result, 0).data(), own.size());
    co_await send_from_rank_zero(ctx, scattered, [&](int peer) { return block(result, peer); });
}

const bool registered = register_algorithm<reduce_scatter_args>({
    .info = {.name = "linear",
             .form = algorithm_kind::pure,
             .summary =
                 "every vector to rank 0, combined in rank order, each block back to its rank"},
    .run = linear,
});

} // namespace
} // namespace tutti
