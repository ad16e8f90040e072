// all_to_all: linear
//
// Collective:   all_to_all
// Kind:         pure
// Restrictions: none (any communicator size, any block size, in place)
// Parameters:   none
//
// Every receive and every send is posted at once and then all are awaited:
// one step of latency, and the transport is free to move the p-1 blocks in
// whatever order the network allows. Sends start at r+1 and walk around the
// ring so that not every rank targets rank 0 first. The rank's own block is
// copied locally (past the caches where the call's buffers take three
// quarters of the last-level cache or more: buffers_exceed_cache in common.hpp,
// copy_block in core/copy.hpp); in place, the data to send is first copied
// aside.

#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> linear(const call_context& ctx, const all_to_all_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const std::size_t block = a.send.size() / static_cast<std::size_t>(p);
    if (block == 0 || (p == 1 && a.send.data() == a.recv.data())) co_return;

    std::optional<scratch<>> saved;
    const auto send = send_side(a.send, a.recv, saved);
    own_block_copy own(a.send, a.recv, blocks_of(a.send, block, r), blocks_of(a.recv, block, r),
                       buffers_exceed_cache(ctx, a));

    std::vector<request> requests;
    requests.reserve(2 * static_cast<std::size_t>(p));
    for (int k = 1; k < p; ++k) {
        const int source = (r - k + p) % p;
        requests.push_back(ctx.irecv(source, 0, blocks_of(a.recv, block, source)));
    }
    for (int k = 1; k < p; ++k) {
        const int dest = (r + k) % p;
        requests.push_back(ctx.isend(dest, 0, blocks_of(send, block, dest), send_awaited::at_end));
    }
    own.copy_if_deferred();
    co_await wait_all(requests);
}

const bool registered = register_algorithm<all_to_all_args>({
    .info = {.name = "linear",
             .form = algorithm_kind::pure,
             .summary = "all p-1 receives and sends posted at once, then awaited"},
    .run = linear,
});

} // namespace
} // namespace tutti
