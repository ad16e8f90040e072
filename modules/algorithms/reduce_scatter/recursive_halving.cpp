// reduce_scatter: recursive halving
//
// Collective:   reduce_scatter
// Kind:         pure
// Restrictions: power_of_two (communicator size), commutative_op (a rank's
//               partial results combine ranks that differ in high bits first,
//               not in rank order)
// Parameters:   none
//
// Latency-optimal with near-optimal bandwidth: the blocks of ranks
// [lo, lo + 2m) are split in two; rank r sends the half holding the other
// ranks' blocks to r xor m and combines the half holding its own with what
// r xor m sends back, for m = p/2, p/4, ..., 1. After log2(p) rounds rank r
// holds exactly block r, fully reduced. The halves are halves of ranks, not
// of bytes, so counts per rank may differ. The first round sends straight
// from the send buffer. (Thakur, Rabenseifner, Gropp 2005.)

#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> recursive_halving(const call_context& ctx, const reduce_scatter_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const std::size_t element = a.op->element_size;
    const auto offset = prefix_offsets(a.counts.first(static_cast<std::size_t>(p)), element);

    if (p == 1) {
        copy_unless_same(a.recv.data(), a.send.data(), a.recv.size());
        co_return;
    }

    // The first round keeps the largest range; later ones keep parts of it,
    // so partial covers that range only, starting at byte `base`. Only the
    // rounds before the last write to it.
    const int first_keep = (r & (p / 2)) == 0 ? 0 : p / 2;
    const std::size_t base = offset[first_keep];
    const std::size_t first_kept = offset[first_keep + p / 2] - base;
    const bool one_round = p == 2;
    // The last round's block arrives in recv and is combined there, unless
    // recv overlaps the send buffer, which a single round still reads.
    const bool last_into_recv = !one_round || !overlapping(a.send, a.recv);
    scratch<> partial(one_round ? 0 : first_kept),
        incoming(one_round && last_into_recv ? 0 : first_kept);
    auto partial_at = [&](int b) { return partial.data() + (offset[b] - base); };
    auto send_at = [&](int b) { return a.send.data() + offset[b]; };
    bool first = true;
    int lo = 0;
    std::uint64_t step = 0;
    for (int mask = p / 2; mask >= 1; mask /= 2, ++step) {
        const int partner = r ^ mask;
        const bool keep_lower = (r & mask) == 0;
        const int keep = keep_lower ? lo : lo + mask;
        const int give = keep_lower ? lo + mask : lo;
        const std::size_t keep_bytes = offset[keep + mask] - offset[keep];
        const std::size_t give_bytes = offset[give + mask] - offset[give];
        const bool last = mask == 1; // then keep == r
        const std::byte* outgoing = first ? send_at(give) : partial_at(give);
        const auto arriving =
            last && last_into_recv ? a.recv.first(keep_bytes) : incoming.span().first(keep_bytes);
        const auto given = std::span(outgoing, give_bytes);
        std::byte* out = last ? a.recv.data() : partial_at(keep);
        const std::byte* own = first ? send_at(keep) : partial_at(keep);
        const std::size_t count = keep_bytes / element;
        const combination c = partner < r ? combination{*a.op, arriving.data(), own, out, count}
                                          : combination{*a.op, own, arriving.data(), out, count};
        if (combines_from_pieces(given, arriving, c)) {
            co_await exchange_combining_pieces(ctx, partner, step, given, arriving, c);
        } else {
            co_await ctx.send_recv(partner, given, partner, arriving, step);
            a.op->combine(c.left, c.right, c.out, c.count);
        }
        first = false;
        lo = keep;
    }
}

const bool registered = register_algorithm<reduce_scatter_args>({
    .info = {.name = "recursive_halving",
             .form = algorithm_kind::pure,
             .restrictions = {restriction::power_of_two, restriction::commutative_op},
             .summary = "log2(p) exchanges of halving ranges of blocks; p a power of two"},
    .run = recursive_halving,
});

} // namespace
} // namespace tutti
