// all_to_allv: linear
//
// Collective:   all_to_allv
// Kind:         pure
// Restrictions: none (any communicator size, any counts including zero, in
//               place)
// Parameters:   none
//
// Every receive and every send is posted at once and then all are awaited:
// one step of latency, and the transport moves the pieces in whatever order
// the network allows, which suits uneven counts where a fixed schedule would
// wait on the largest piece of each step. Pieces of zero bytes are not sent
// (sender and receiver hold the same count for a pair, so both skip it).
// Sends start at r+1 and walk around the ring so that not every rank targets
// rank 0 first. In place, the data to send is first copied aside. Where the
// call's buffers take three quarters of the last-level cache or more, the
// own piece is written past the caches (buffers_exceed_cache in common.hpp,
// copy_block in core/copy.hpp).

#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> linear(const call_context& ctx, const all_to_allv_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const auto me = static_cast<std::size_t>(r);

    std::optional<scratch<>> saved;
    const auto send = send_side(a.send, a.recv, saved);
    // In place with the same offset, the own piece is already where it belongs.
    own_block_copy own(a.send, a.recv, a.send.subspan(a.send_offsets[me], a.send_counts[me]),
                       a.recv.subspan(a.recv_offsets[me], a.send_counts[me]),
                       buffers_exceed_cache(ctx, a));

    std::vector<request> requests;
    requests.reserve(2 * static_cast<std::size_t>(p));
    for (int k = 1; k < p; ++k) {
        const auto source = static_cast<std::size_t>((r - k + p) % p);
        if (a.recv_counts[source])
            requests.push_back(
                ctx.irecv(static_cast<int>(source), 0,
                          a.recv.subspan(a.recv_offsets[source], a.recv_counts[source])));
    }
    for (int k = 1; k < p; ++k) {
        const auto dest = static_cast<std::size_t>((r + k) % p);
        if (a.send_counts[dest])
            requests.push_back(ctx.isend(static_cast<int>(dest), 0,
                                         send.subspan(a.send_offsets[dest], a.send_counts[dest]),
                                         send_awaited::at_end));
    }
    own.copy_if_deferred();
    co_await wait_all(requests);
}

const bool registered = register_algorithm<all_to_allv_args>({
    .info = {.name = "linear",
             .form = algorithm_kind::pure,
             .summary = "all nonempty receives and sends posted at once, then awaited"},
    .run = linear,
});

} // namespace
} // namespace tutti
