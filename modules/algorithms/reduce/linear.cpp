// reduce: linear
//
// Collective:   reduce
// Kind:         pure
// Restrictions: none (any communicator size, root and operation)
// Parameters:   none
//
// Every rank sends its vector to the root, which folds them in rank order:
// ((x0 op x1) op x2) ... The root does all p - 1 combinations and receives
// p - 1 vectors, so it only suits few ranks; its strict left-to-right order
// makes it the reference for any operation, commutative or not. The root
// posts all its receives at once, into p - 1 vectors of scratch, so that
// the transport lands each as it arrives (received one at a time, the
// later ones waited unexpected: over TCP, 4 ranks sharing cores, the 128
// KiB reduce read up to 1.10 of the binomial tree's time where the other
// sizes read 0.74-0.96; docs/performance.md, seventieth session).

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

task<void> linear(const call_context& ctx, const reduce_args& a) {
    const int p = ctx.size();
    const auto bytes = a.count * a.op->element_size;
    if (bytes == 0) co_return;
    if (ctx.rank() != a.root) {
        co_await ctx.send(a.root, 0, a.send.first(bytes), send_awaited::at_end);
        co_return;
    }
    if (p == 1) {
        copy_unless_same(a.recv.data(), a.send.data(), bytes);
        co_return;
    }

    co_await fold_every_vector_at_root(ctx, a.root, 0, *a.op, a.count, a.send.data(),
                                       a.recv.data());
}

const bool registered = register_algorithm<reduce_args>({
    .info = {.name = "linear",
             .form = algorithm_kind::pure,
             .summary = "the root receives every vector and folds them in rank order"},
    .run = linear,
});

} // namespace
} // namespace tutti
