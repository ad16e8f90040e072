// scatter: binomial tree
//
// Collective:   scatter
// Kind:         pure
// Restrictions: none (any communicator size, root and block size)
// Parameters:   none
//
// The gather tree run backwards. Ranks are numbered relative to the root
// (vr = r - root mod p); rank vr stands for the subtree of blocks
// [vr, vr + 2^k), 2^k its lowest set bit. Each rank receives its subtree's
// blocks from its parent and passes each child the child's subtree:
// ceil(log2 p) rounds instead of p - 1 messages from the root, for short
// blocks.
//
// A rank's own block comes as a message of its own, straight into recv, and
// the blocks below it as a second message into a buffer it forwards from.
// The root sends straight from the user's send buffer; where a subtree's
// blocks wrap from rank p - 1 to rank 0 (relative block p - root), that
// message is cut in two, which every rank can tell from the root alone.

#include <algorithm>
#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

constexpr std::uint64_t own_block_step = 0;
constexpr std::uint64_t first_rest_step = 1; // and first_rest_step + 1 for a wrapped part

task<void> binomial(const call_context& ctx, const scatter_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const std::size_t block = a.recv.size();
    if (block == 0) co_return;
    // Only the root has a send buffer, and a block of it to keep.
    const bool root = r == a.root;
    own_block_copy own(a.send, a.recv,
                       root ? a.send.subspan(static_cast<std::size_t>(r) * block, block)
                            : std::span<const std::byte>{},
                       root ? a.recv : std::span<std::byte>{});
    if (p == 1) {
        own.copy_if_deferred();
        co_return;
    }

    const int vr = relative_rank(r, a.root, p);
    const auto actual = [&](int relative) { return actual_rank(relative, a.root, p); };
    const int wrap = p - a.root; // the relative block of rank 0
    const int limit = binomial_extent(vr, p);
    const int end = std::min(vr + limit, p); // my subtree is [vr, end)

    // Where relative block j of my subtree (j > vr) lives: in the user's
    // send buffer at the root, else in the buffer of the blocks below me.
    scratch<> below(vr == 0 ? 0 : static_cast<std::size_t>(end - vr - 1) * block);
    const auto place = [&](int j, int blocks) {
        const auto length = static_cast<std::size_t>(blocks) * block;
        if (vr == 0) return a.send.subspan(static_cast<std::size_t>(actual(j)) * block, length);
        return std::span<const std::byte>(below.span())
            .subspan(static_cast<std::size_t>(j - vr - 1) * block, length);
    };
    const auto writable_place = [&](int j, int blocks) {
        return below.span().subspan(static_cast<std::size_t>(j - vr - 1) * block,
                                    static_cast<std::size_t>(blocks) * block);
    };
    // The blocks [lo, hi) below a child, cut where they wrap to rank 0.
    const auto parts = [&](int lo, int hi) { return unwrapped_runs(lo, hi, wrap); };

    if (vr != 0) {
        const int parent = actual(vr - limit);
        std::vector<request> receives{ctx.irecv(parent, own_block_step, a.recv)};
        std::uint64_t step = first_rest_step;
        for (auto [lo, hi] : parts(vr + 1, end))
            receives.push_back(ctx.irecv(parent, step++, writable_place(lo, hi - lo)));
        co_await wait_all(receives);
    }

    std::vector<request> sends;
    for (int mask = limit / 2; mask > 0; mask /= 2) {
        const int child = vr + mask;
        if (child >= p) continue;
        const int child_end = std::min(child + mask, p);
        keep_pending(sends, ctx.start_send(actual(child), own_block_step, place(child, 1),
                                           send_awaited::at_end));
        std::uint64_t step = first_rest_step;
        for (auto [lo, hi] : parts(child + 1, child_end))
            keep_pending(sends, ctx.start_send(actual(child), step++, place(lo, hi - lo),
                                               send_awaited::at_end));
    }
    own.copy_if_deferred();
    if (!sends.empty()) co_await wait_all(sends);
}

const bool registered = register_algorithm<scatter_args>({
    .info = {.name = "binomial",
             .form = algorithm_kind::pure,
             .summary = "binomial tree of subtrees relative to the root; ceil(log2 p) rounds"},
    .run = binomial,
});

} // namespace
} // namespace tutti
