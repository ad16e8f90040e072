// reduce: Rabenseifner (reduce_scatter, then gather to the root)
//
// Collective:   reduce
// Kind:         pure
// Restrictions: commutative_op (recursive halving combines ranks that differ
//               in high bits first, not in rank order)
// Parameters:   none
//
// The reduce of long vectors: a recursive-halving reduce_scatter (log2 p'
// exchanges of halving ranges of pieces) leaves each of p' ranks with one
// complete piece of the vector, and a binomial gather brings the pieces to
// the root (log2 p' rounds of doubling ranges). Every rank combines about
// count elements in all instead of the root combining them once per child,
// and the root receives each byte once: where a binomial tree leaves its
// ranks idle while the root combines, here they share the combining. Ranks
// are numbered relative to the root. For p not a power of two, p' is the
// largest power of two <= p: of the first 2 (p - p') ranks, each odd one
// sends its vector to the even one below and drops out, so the root (0)
// always stays in. (Rabenseifner 2004; Thakur, Rabenseifner, Gropp 2005;
// MPICH's reduce_scatter_gather.)
//
// A rank's last send (the fold's, or the gather's to its parent) is awaited
// at the end: nothing of the call waits on it.

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

constexpr std::uint64_t fold_step = 0;
constexpr std::uint64_t halving_step = 1; // + round, below 64 rounds
constexpr std::uint64_t gather_step = 65; // + round

task<void> rabenseifner(const call_context& ctx, const reduce_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const std::size_t element = a.op->element_size;
    const std::size_t bytes = a.count * element;
    const bool at_root = r == a.root;
    if (reduce_without_messages(a, p)) co_return;

    const int vr = relative_rank(r, a.root, p);
    const int pof2 = power_of_two_floor(p);
    const int extra = p - pof2;
    // The ranks that stay in after the fold, by their number among them.
    const auto actual = [&](int kept) {
        return actual_rank(kept < extra ? kept * 2 : kept + extra, a.root, p);
    };

    if (vr < 2 * extra && vr % 2 == 1) {
        co_await ctx.send(actual_rank(vr - 1, a.root, p), fold_step, a.send.first(bytes),
                          send_awaited::at_end);
        co_return;
    }
    const int kept = vr < 2 * extra ? vr / 2 : vr - extra;

    const auto pieces = static_cast<std::size_t>(pof2);
    const auto offset = [&](int i) { return even_piece_start(a.count, pieces, i) * element; };
    // The partial results: the root's recv, elsewhere a buffer of our own.
    scratch<> own_result(at_root ? 0 : bytes);
    std::byte* result = at_root ? a.recv.data() : own_result.data();
    // The fold receives a whole vector, a halving round at most half of one.
    scratch<> incoming(vr < 2 * extra ? bytes : offset(pof2 / 2));

    // Where this rank's contribution is read in the first halving round: the
    // send buffer, or the result once a folded-in partner's part is added.
    const std::byte* source = a.send.data();
    if (vr < 2 * extra) {
        co_await ctx.recv(actual_rank(vr + 1, a.root, p), fold_step, incoming.span().first(bytes),
                          receive_use::combined_at_once);
        a.op->combine(a.send.data(), incoming.data(), result, a.count);
        source = result;
    }

    // Recursive halving: `kept` ends holding piece `kept`, complete.
    co_await halving_rounds(ctx, *a.op, a.count, pof2, kept, actual, source, result,
                            incoming.span(), halving_step);

    // Binomial gather to kept rank 0, the root: in round k a rank whose bit
    // k is the lowest set one sends the pieces [kept, kept + 2^k) it holds
    // and drops out; the others receive the range above theirs.
    std::uint64_t round = 0;
    for (int mask = 1; mask < pof2; mask <<= 1, ++round) {
        if (kept & mask) {
            co_await ctx.send(actual(kept - mask), gather_step + round,
                              std::span<const std::byte>(result + offset(kept),
                                                         offset(kept + mask) - offset(kept)),
                              send_awaited::at_end);
            co_return;
        }
        const int from = kept + mask;
        co_await ctx.recv(actual(from), gather_step + round,
                          std::span(result + offset(from), offset(from + mask) - offset(from)));
    }
}

const bool registered = register_algorithm<reduce_args>({
    .info = {.name = "rabenseifner",
             .form = algorithm_kind::pure,
             .restrictions = {restriction::commutative_op},
             .summary = "recursive-halving reduce_scatter then binomial gather to the root"},
    .run = rabenseifner,
});

} // namespace
} // namespace tutti
