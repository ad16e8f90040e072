// reduce_scatter: ring
//
// Collective:   reduce_scatter
// Kind:         pure
// Restrictions: commutative_op (partial results gather their operands around
//               the ring, not in rank order)
// Parameters:   none
//
// Bandwidth-optimal for large vectors: in step s (s = 0 .. p-2) rank r sends
// its partial result for block (r - s - 1) mod p to its right neighbour and
// receives from its left one the partial result for block (r - s - 2) mod p,
// to which it adds its own contribution. Block r completes at rank r in the
// last step. Each rank sends every block but its own once; block sizes may
// differ, and empty blocks cost an empty message. (Thakur, Rabenseifner,
// Gropp 2005.)

#include <algorithm>
#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> ring(const call_context& ctx, const reduce_scatter_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const std::size_t element = a.op->element_size;
    const auto offset = prefix_offsets(a.counts.first(static_cast<std::size_t>(p)), element);
    auto count_of = [&](int b) { return a.counts[static_cast<std::size_t>(b)]; };
    auto mine = [&](int b) { return a.send.subspan(offset[b], offset[b + 1] - offset[b]); };

    if (p == 1) {
        copy_unless_same(a.recv.data(), a.send.data(), a.recv.size());
        co_return;
    }

    std::size_t largest = 0;
    for (int i = 0; i < p; ++i)
        largest = std::max(largest, offset[i + 1] - offset[i]);
    scratch<> partial(largest), incoming(largest);
    const int right = (r + 1) % p;
    const int left = (r - 1 + p) % p;

    // Step 0 sends the own contribution straight from the send buffer.
    std::span<const std::byte> outgoing = mine(left);
    for (int s = 0; s < p - 1; ++s) {
        const int b = (r - s - 2 + 2 * p) % p;
        const std::size_t bytes = offset[b + 1] - offset[b];
        co_await ctx.send_recv(right, outgoing, left, incoming.span().first(bytes),
                               static_cast<std::uint64_t>(s));
        const bool last = s == p - 2; // then b == r
        std::byte* out = last ? a.recv.data() : partial.data();
        a.op->combine(incoming.data(), mine(b).data(), out, count_of(b));
        outgoing = std::span<const std::byte>(partial.span()).first(bytes);
    }
}

const bool registered = register_algorithm<reduce_scatter_args>({
    .info = {.name = "ring",
             .form = algorithm_kind::pure,
             .restrictions = {restriction::commutative_op},
             .summary =
                 "p-1 steps passing partial blocks to the right neighbour; any p, any counts"},
    .run = ring,
});

} // namespace
} // namespace tutti
