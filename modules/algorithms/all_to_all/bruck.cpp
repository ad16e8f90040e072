// all_to_all: Bruck
//
// Collective:   all_to_all
// Kind:         pure
// Restrictions: none (any communicator size, any block size, in place)
// Parameters:   none
//
// Latency-optimal for small blocks: ceil(log2 p) messages per rank instead of
// p-1, at the price of sending each block up to log2 p times. The blocks are
// first rotated so that position i holds the block for rank r+i, which has i
// hops to travel. In round k (distance 2^k) every block whose position has
// bit k set is packed and sent to rank r+2^k, and the blocks of the same
// positions arrive from r-2^k. After the last round position i holds the
// block that came from rank r-i, and an inverse rotation puts it in place.
// (Bruck, Ho, Kipnis, Upfal, Weathersby 1997.)

#include <cstring>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> bruck(const call_context& ctx, const all_to_all_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const std::size_t block = a.send.size() / static_cast<std::size_t>(p);
    if (block == 0) co_return;
    if (p == 1) {
        copy_unless_same(a.recv.data(), a.send.data(), block);
        co_return;
    }

    const auto at = [block](int position) { return static_cast<std::size_t>(position) * block; };
    // The rotation reads all of send before recv is written, so in place
    // needs no further care.
    scratch<> work(a.send.size());
    for (int i = 0; i < p; ++i)
        copy_bytes(work.data() + at(i), a.send.data() + at((r + i) % p), block);

    // A round moves the blocks whose position has its bit set: at most half
    // of the positions below p have any one bit set.
    scratch<> outgoing(at(p / 2)), incoming(at(p / 2));
    std::uint64_t round = 0;
    for (int distance = 1; distance < p; distance *= 2, ++round) {
        std::size_t packed = 0;
        for (int i = distance; i < p; ++i)
            if (i & distance) {
                copy_bytes(outgoing.data() + packed, work.data() + at(i), block);
                packed += block;
            }
        co_await ctx.send_recv((r + distance) % p, outgoing.span().first(packed),
                               (r - distance + p) % p, incoming.span().first(packed), round);
        std::size_t offset = 0;
        for (int i = distance; i < p; ++i)
            if (i & distance) {
                copy_bytes(work.data() + at(i), incoming.data() + offset, block);
                offset += block;
            }
    }

    for (int i = 0; i < p; ++i)
        copy_bytes(a.recv.data() + at((r - i + p) % p), work.data() + at(i), block);
}

const bool registered = register_algorithm<all_to_all_args>({
    .info = {.name = "bruck",
             .form = algorithm_kind::pure,
             .summary = "ceil(log2 p) rounds of packed blocks with local rotations; small blocks"},
    .run = bruck,
});

} // namespace
} // namespace tutti
