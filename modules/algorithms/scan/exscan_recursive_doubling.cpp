// exscan: recursive doubling
//
// Collective:   exscan
// Kind:         pure
// Restrictions: none (any communicator size; non-commutative operations give
//               the rank-ordered result; in place)
// Parameters:   none
//
// As scan's recursive doubling: ceil(log2 p) rounds of exchanges with
// r xor 2^k, keeping `partial`, the reduction over the rank's aligned block
// of 2^k ranks. The result leaves out the rank's own data: it starts empty,
// and each reduction that arrives from a lower partner (the block just below)
// is put on its left, the first one simply copied. Rank 0 never has a lower
// partner, so its receive buffer is left as it was. The rank's own data is
// copied into `partial` before the result is written, so in place works.
// (MPICH's exscan.)

#include <cstring>
#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> recursive_doubling(const call_context& ctx, const exscan_args& a) {
    const int p = ctx.size();
    const auto bytes = a.count * a.op->element_size;
    if (bytes == 0 || p == 1) co_return;
    bool have_result = false;
    co_await prefix_doubling(ctx, *a.op, a.count, a.send, [&](const std::byte* below) {
        if (have_result)
            a.op->combine(below, a.recv.data(), a.recv.data(), a.count);
        else
            std::memcpy(a.recv.data(), below, bytes);
        have_result = true;
    });
}

const bool registered = register_algorithm<exscan_args>({
    .info = {.name = "recursive_doubling",
             .form = algorithm_kind::pure,
             .summary = "ceil(log2 p) whole-vector exchanges; any p, keeps rank order"},
    .run = recursive_doubling,
});

} // namespace
} // namespace tutti
