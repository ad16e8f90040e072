// all_reduce: ring
//
// Collective:   all_reduce
// Kind:         pure
// Restrictions: commutative_op (partial results gather their operands around
//               the ring, not in rank order)
// Parameters:   none
//
// Bandwidth-optimal for large vectors at any p: the vector is cut into p
// nearly equal pieces (some empty when count < p). A ring reduce_scatter
// (step s: send the partial piece (r - s - 1) mod p to the right, receive
// piece (r - s - 2) mod p from the left and add the own contribution) leaves
// piece r complete at rank r; a ring all_gather (step s: pass piece (r - s)
// mod p to the right) then spreads the pieces. Each rank sends
// 2 (p - 1) / p of the vector in 2 (p - 1) steps. Partial results are built
// in recv, and the first step sends straight from the send buffer.
// (Patarasuk, Yuan 2009; Thakur, Rabenseifner, Gropp 2005.)

#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> ring(const call_context& ctx, const all_reduce_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const std::size_t element = a.op->element_size;
    if (reduce_without_messages(a, p)) co_return;

    const even_pieces cut{a.count, static_cast<std::size_t>(p), element};
    scratch<> incoming(cut.count_of(0) * element); // piece 0 is the largest
    const int right = (r + 1) % p;
    const int left = (r - 1 + p) % p;

    // Reduce-scatter. Each piece is written in recv at most once here, after
    // its own contribution has been read, so in-place calls are safe.
    std::span<const std::byte> outgoing = cut.of(a.send, left);
    for (int s = 0; s < p - 1; ++s) {
        const int b = (r - s - 2 + 2 * p) % p;
        auto into = incoming.span().first(cut.count_of(b) * element);
        co_await ctx.send_recv(right, outgoing, left, into, static_cast<std::uint64_t>(s));
        auto partial = cut.of(a.recv, b);
        a.op->combine(into.data(), cut.of(a.send, b).data(), partial.data(), cut.count_of(b));
        outgoing = partial;
    }

    // All-gather: piece r is complete here; pass pieces on around the ring.
    const auto gather_step = static_cast<std::uint64_t>(p);
    for (int s = 0; s < p - 1; ++s) {
        co_await ctx.send_recv(right, cut.of(a.recv, (r - s + p) % p), left,
                               cut.of(a.recv, (r - s - 1 + p) % p),
                               gather_step + static_cast<std::uint64_t>(s));
    }
}

const bool registered = register_algorithm<all_reduce_args>({
    .info = {.name = "ring",
             .form = algorithm_kind::pure,
             .restrictions = {restriction::commutative_op},
             .summary = "ring reduce_scatter then ring all_gather of p pieces; any p, any count"},
    .run = ring,
});

} // namespace
} // namespace tutti
