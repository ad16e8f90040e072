// reduce_scatter: direct
//
// Collective:   reduce_scatter
// Kind:         pure
// Restrictions: none (any communicator size, any counts; non-commutative
//               operations give the rank-ordered result)
// Parameters:   none
//
// Pairwise's messages posted all at once: rank r sends its contribution to
// block j straight from the send buffer to rank j for every j != r, receives
// every rank's contribution to block r, and folds them as x0 op x1 op ...
// op x(p-1). One round of latency where pairwise takes p - 1 and recursive
// halving log2 p, for p - 1 messages per rank and scratch for p - 1
// contributions: for small vectors on few ranks that share cores.

#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> direct(const call_context& ctx, const reduce_scatter_args& a) {
    own_block_contributions blocks(ctx, a);
    if (ctx.size() == 1) {
        copy_unless_same(a.recv.data(), a.send.data(), blocks.bytes());
        co_return;
    }
    const auto requests = blocks.post_round(ctx, 0);
    co_await wait_all(requests);
    blocks.fold();
}

const bool registered = register_algorithm<reduce_scatter_args>({
    .info = {.name = "direct",
             .form = algorithm_kind::pure,
             .summary = "every contribution to its block's rank at once, a rank-ordered fold"},
    .run = direct,
});

} // namespace
} // namespace tutti
