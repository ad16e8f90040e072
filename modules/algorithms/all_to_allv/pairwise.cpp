// all_to_allv: pairwise exchange
//
// Collective:   all_to_allv
// Kind:         pure
// Restrictions: none (any communicator size, any counts including zero, in
//               place)
// Parameters:   none
//
// As all_to_all pairwise: the rank's own piece is copied locally, then in
// step k = 1 .. p-1 rank r sends its piece for r+k and receives the piece
// from r-k (mod p). Each rank sends and receives at most one piece per step,
// so the steps are balanced permutations however uneven the counts are. A
// piece of zero bytes is not sent at all: the sender's count and the
// receiver's count for a pair are the same number, so both sides agree. In
// place, the data to send is first copied aside. Where the call's buffers
// take three quarters of the last-level cache or more, the own piece is
// written past the caches (buffers_exceed_cache in common.hpp, copy_block
// in core/copy.hpp): 2 ranks, 8 MiB, 0.88 and 0.90 of the time
// (docs/performance.md, seventy-ninth session).

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> pairwise(const call_context& ctx, const all_to_allv_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const auto me = static_cast<std::size_t>(r);

    std::optional<scratch<>> saved;
    const auto send = send_side(a.send, a.recv, saved);
    // In place with the same offset, the own piece is already where it belongs.
    own_block_copy own(a.send, a.recv, a.send.subspan(a.send_offsets[me], a.send_counts[me]),
                       a.recv.subspan(a.recv_offsets[me], a.send_counts[me]),
                       buffers_exceed_cache(ctx, a));

    for (int k = 1; k < p; ++k) {
        const auto dest = static_cast<std::size_t>((r + k) % p);
        const auto source = static_cast<std::size_t>((r - k + p) % p);
        const auto step = static_cast<std::uint64_t>(k);
        const auto outgoing = send.subspan(a.send_offsets[dest], a.send_counts[dest]);
        const auto incoming = a.recv.subspan(a.recv_offsets[source], a.recv_counts[source]);
        // The last step's send is awaited only as the call ends.
        const auto when = k == p - 1 ? send_awaited::at_end : send_awaited::before_next_step;
        // One step object whatever is empty, so that a small exchange takes
        // send_recv's way (its receive looked for before any is posted).
        auto exchange = !outgoing.empty() && !incoming.empty()
                            ? ctx.send_recv(static_cast<int>(dest), outgoing,
                                            static_cast<int>(source), incoming, step, when)
                        : !outgoing.empty() ? ctx.send(static_cast<int>(dest), step, outgoing, when)
                        : !incoming.empty() ? ctx.recv(static_cast<int>(source), step, incoming)
                                            : message_step();
        if (k == 1) own.copy_if_deferred();
        co_await std::move(exchange);
    }
    own.copy_if_deferred(); // p == 1
}

const bool registered = register_algorithm<all_to_allv_args>({
    .info = {.name = "pairwise",
             .form = algorithm_kind::pure,
             .summary = "p-1 steps, each sending one piece to r+k and receiving one from r-k"},
    .run = pairwise,
});

} // namespace
} // namespace tutti
