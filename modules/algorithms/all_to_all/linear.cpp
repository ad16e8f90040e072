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
// copied locally; in place, the data to send is first copied aside.

#include <cstring>
#include <vector>

#include "algorithms/catalog.hpp"

namespace tutti {
namespace {

task<void> linear(const call_context& ctx, const all_to_all_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const std::size_t block = a.send.size() / static_cast<std::size_t>(p);
    if (block == 0 || (p == 1 && a.send.data() == a.recv.data())) co_return;

    std::vector<std::byte> saved;
    std::span<const std::byte> send = a.send;
    if (a.send.data() == a.recv.data()) {
        saved.assign(a.send.begin(), a.send.end());
        send = saved;
    } else {
        const auto own = static_cast<std::size_t>(r) * block;
        std::memcpy(a.recv.data() + own, send.data() + own, block);
    }

    std::vector<request> requests;
    requests.reserve(2 * static_cast<std::size_t>(p));
    for (int k = 1; k < p; ++k) {
        const int source = (r - k + p) % p;
        requests.push_back(
            ctx.irecv(source, 0, a.recv.subspan(static_cast<std::size_t>(source) * block, block)));
    }
    for (int k = 1; k < p; ++k) {
        const int dest = (r + k) % p;
        requests.push_back(
            ctx.isend(dest, 0, send.subspan(static_cast<std::size_t>(dest) * block, block)));
    }
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
