// scan: recursive doubling
//
// Collective:   scan
// Kind:         pure
// Restrictions: none (any communicator size; non-commutative operations give
//               the rank-ordered result; in place)
// Parameters:   none
//
// Latency-optimal: ceil(log2 p) rounds of whole-vector exchanges. In round k
// rank r exchanges with r xor 2^k (when that rank exists). Each rank keeps
// two values: `partial`, the reduction over its aligned block of 2^k ranks
// (the block that r xor 2^k complements), and the result, the reduction from
// the start of that block up to r. What arrives from a lower partner is the
// reduction of the block just below, so it is combined on the left of both;
// what arrives from a higher partner only extends `partial`, on the right.
// Blocks that run past p - 1 are incomplete, but only ranks above them could
// use them, and there are none. (MPICH's scan; Thakur, Rabenseifner, Gropp
// 2005.)

#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> recursive_doubling(const call_context& ctx, const scan_args& a) {
    const int p = ctx.size();
    const auto bytes = a.count * a.op->element_size;
    if (bytes == 0) co_return;
    copy_unless_same(a.recv.data(), a.send.data(), bytes);
    if (p == 1) co_return;

    co_await prefix_doubling(ctx, *a.op, a.count, a.send, [&](const std::byte* below) {
        a.op->combine(below, a.recv.data(), a.recv.data(), a.count);
    });
}

const bool registered = register_algorithm<scan_args>({
    .info = {.name = "recursive_doubling",
             .form = algorithm_kind::pure,
             .summary = "ceil(log2 p) whole-vector exchanges; any p, keeps rank order"},
    .run = recursive_doubling,
});

} // namespace
} // namespace tutti
