// scan: linear
//
// Collective:   scan
// Kind:         pure
// Restrictions: none (any communicator size; non-commutative operations give
//               the rank-ordered result; in place)
// Parameters:   none
//
// A chain: rank r receives x0 op ... op x(r-1) from rank r-1, combines its
// own data on the right, and sends the result on to rank r+1. p-1 steps of
// latency, but each rank sends and receives one vector only and combines
// once, so it is the least work in all; useful for small communicators.
//
// A long prefix is combined part by part as it lands where the transport
// reports it (over TCP), while the rank before still sends it.
//
// Rank 0's send, the caller's own data, is awaited at the end
// (send_awaited::at_end: shared memory may copy it once, the idle sender
// helping); the later hops send what was just combined, for the next hop to
// wait on, and keep the cells, where the two copies overlap: by single copy
// the 4-rank 64 KiB scan took 45 µs instead of 31 (docs/performance.md,
// sixteenth session).

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> linear(const call_context& ctx, const scan_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const auto bytes = a.count * a.op->element_size;
    if (bytes == 0) co_return;
    auto result = a.recv.first(bytes);
    const auto own = a.send.first(bytes);
    if (r == 0 && p > 1 && own_copy_can_wait(own, result, own, result)) {
        // Rank 0's result is its own data: it leaves from send while it is
        // copied into recv.
        auto sent = ctx.send(1, 0, own, send_awaited::at_end);
        copy_unless_same(result.data(), own.data(), bytes);
        co_await std::move(sent);
        co_return;
    }
    if (r == 0) {
        copy_unless_same(result.data(), own.data(), bytes);
    } else {
        scratch<> prefix(bytes);
        if (bytes >= combined_as_it_lands_from) {
            co_await receive_and_combine(
                ctx, r - 1, 0, prefix.span(),
                {*a.op, prefix.data(), a.send.data(), result.data(), a.count});
        } else {
            co_await ctx.recv(r - 1, 0, prefix.span(), receive_use::combined_at_once);
            a.op->combine(prefix.data(), a.send.data(), result.data(), a.count);
        }
    }
    if (r + 1 < p) co_await ctx.send(r + 1, 0, result);
}

const bool registered = register_algorithm<scan_args>({
    .info = {.name = "linear",
             .form = algorithm_kind::pure,
             .summary = "a chain from rank 0: receive the prefix, combine, pass it on"},
    .run = linear,
});

} // namespace
} // namespace tutti
