// exscan: linear
//
// Collective:   exscan
// Kind:         pure
// Restrictions: none (any communicator size; non-commutative operations give
//               the rank-ordered result; in place)
// Parameters:   none
//
// A chain: rank 0 sends its data to rank 1; rank r > 0 receives
// x0 op ... op x(r-1) from rank r-1, which is its result, and sends that
// with its own data combined on the right to rank r+1 (a long prefix
// combined part by part as it lands, where the transport reports it). p-1
// steps of latency and one combine per rank. In place, the prefix is
// received aside, because the rank's own data is still needed for the
// combine.
//
// Rank 0's send is its whole part, from the caller's buffer: it is awaited
// at the end (send_awaited::at_end), which lets shared memory copy it once,
// shared with the idle sender. The later hops send what the rank has just
// combined, for the next hop to wait on; through the cells the two copies
// overlap (docs/performance.md, fourteenth and sixteenth sessions).

#include <cstring>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"
#include "core/scratch.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> linear(const call_context& ctx, const exscan_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const auto bytes = a.count * a.op->element_size;
    if (bytes == 0 || p == 1) co_return;
    if (r == 0) {
        co_await ctx.send(1, 0, a.send.first(bytes), send_awaited::at_end);
        co_return;
    }

    const bool in_place = a.send.data() == a.recv.data();
    scratch<> aside(in_place ? bytes : 0);
    const std::span<std::byte> prefix = in_place ? aside.span() : a.recv.first(bytes);
    if (r + 1 < p) {
        scratch<> next(bytes);
        const combination c{*a.op, prefix.data(), a.send.data(), next.data(), a.count};
        // The prefix is this rank's result too: kept, as a plain receive.
        if (bytes >= combined_as_it_lands_from) {
            co_await receive_and_combine(ctx, r - 1, 0, prefix, c, receive_use::kept);
        } else {
            co_await ctx.recv(r - 1, 0, prefix);
            a.op->combine(c.left, c.right, c.out, c.count);
        }
        co_await ctx.send(r + 1, 0, next.span());
    } else {
        co_await ctx.recv(r - 1, 0, prefix);
    }
    if (in_place) std::memcpy(a.recv.data(), aside.data(), bytes);
}

const bool registered = register_algorithm<exscan_args>({
    .info = {.name = "linear",
             .form = algorithm_kind::pure,
             .summary = "a chain from rank 0: receive the prefix, pass it on with own data added"},
    .run = linear,
});

} // namespace
} // namespace tutti
