// all_reduce: recursive doubling
//
// Collective:   all_reduce
// Kind:         pure
// Restrictions: none (any communicator size; non-commutative operations give
//               the rank-ordered result)
// Parameters:   none
//
// Latency-optimal for small messages: log2(p') rounds of whole-vector
// exchanges, where p' is the largest power of two <= p. For p not a power of
// two, the first 2*(p - p') ranks pair up beforehand (even rank r sends to
// r + 1, which combines x_r op x_(r+1)), leaving p' ranks that each stand for
// a contiguous range of ranks; afterwards the result is sent back to the even
// ranks. In every exchange the operand of the lower ranks is the left one,
// so the rank order is kept. (Thakur, Rabenseifner, Gropp 2005.)

#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> recursive_doubling(const call_context& ctx, const all_reduce_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const auto bytes = a.count * a.op->element_size;
    copy_unless_same(a.recv.data(), a.send.data(), bytes);
    if (p == 1 || bytes == 0) co_return;

    const int pof2 = power_of_two_floor(p);
    const int extra = p - pof2;
    scratch<> buffer(bytes);
    const auto incoming = buffer.span();
    auto result = a.recv.first(bytes);

    // Fold the extra ranks in: their partner holds x_even op x_odd.
    int new_rank;
    if (r < 2 * extra) {
        if (r % 2 == 0) {
            co_await ctx.send(r + 1, 0, result);
            new_rank = -1;
        } else {
            co_await ctx.recv(r - 1, 0, incoming, receive_use::combined_at_once);
            a.op->combine(incoming.data(), result.data(), result.data(), a.count);
            new_rank = r / 2;
        }
    } else {
        new_rank = r - extra;
    }

    if (new_rank >= 0) {
        std::uint64_t step = 1;
        for (int mask = 1; mask < pof2; mask <<= 1, ++step) {
            const int new_partner = new_rank ^ mask;
            const int partner = unfolded_rank(new_partner, extra);
            co_await ctx.send_recv(partner, result, partner, incoming, step);
            if (partner < r)
                a.op->combine(incoming.data(), result.data(), result.data(), a.count);
            else
                a.op->combine(result.data(), incoming.data(), result.data(), a.count);
        }
    }

    // Hand the result back to the ranks that were folded in.
    constexpr std::uint64_t unfold_step = 100;
    if (r < 2 * extra) {
        if (r % 2 == 1)
            co_await ctx.send(r - 1, unfold_step, result);
        else
            co_await ctx.recv(r + 1, unfold_step, result);
    }
}

const bool registered = register_algorithm<all_reduce_args>({
    .info = {.name = "recursive_doubling",
             .form = algorithm_kind::pure,
             .summary = "log2(p) whole-vector exchanges; any p, keeps rank order"},
    .run = recursive_doubling,
});

} // namespace
} // namespace tutti
