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

namespace tutti {
namespace {

task<void> recursive_doubling(const call_context& ctx, const exscan_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const auto bytes = a.count * a.op->element_size;
    if (bytes == 0 || p == 1) co_return;
    std::vector<std::byte> partial(a.send.begin(),
                                   a.send.begin() + static_cast<std::ptrdiff_t>(bytes));
    std::vector<std::byte> incoming(bytes);
    bool have_result = false;
    std::uint64_t round = 0;
    for (int mask = 1; mask < p; mask <<= 1, ++round) {
        const int partner = r ^ mask;
        if (partner >= p) continue;
        co_await ctx.send_recv(partner, partial, partner, incoming, round);
        if (partner < r) {
            a.op->combine(incoming.data(), partial.data(), partial.data(), a.count);
            if (have_result)
                a.op->combine(incoming.data(), a.recv.data(), a.recv.data(), a.count);
            else
                std::memcpy(a.recv.data(), incoming.data(), bytes);
            have_result = true;
        } else {
            a.op->combine(partial.data(), incoming.data(), partial.data(), a.count);
        }
    }
}

const bool registered = register_algorithm<exscan_args>({
    .info = {.name = "recursive_doubling",
             .form = algorithm_kind::pure,
             .summary = "ceil(log2 p) whole-vector exchanges; any p, keeps rank order"},
    .run = recursive_doubling,
});

} // namespace
} // namespace tutti
