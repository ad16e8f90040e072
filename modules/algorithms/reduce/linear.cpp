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
// makes it the reference for any operation, commutative or not.

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

    // The running result stays out of recv until the last combination, so
    // an in-place root keeps its own contribution readable until then.
    scratch<> folded(p > 2 || a.root != 0 ? bytes : 0), incoming(bytes);
    const std::byte* left = a.send.data();
    if (a.root != 0) {
        co_await ctx.recv(0, 0, folded.span());
        left = folded.data();
    }
    for (int i = 1; i < p; ++i) {
        const std::byte* right = a.send.data();
        if (i != a.root) {
            co_await ctx.recv(i, 0, incoming.span(), receive_use::combined_at_once);
            right = incoming.data();
        }
        std::byte* out = i == p - 1 ? a.recv.data() : folded.data();
        a.op->combine(left, right, out, a.count);
        left = out;
    }
}

const bool registered = register_algorithm<reduce_args>({
    .info = {.name = "linear",
             .form = algorithm_kind::pure,
             .summary = "the root receives every vector and folds them in rank order"},
    .run = linear,
});

} // namespace
} // namespace tutti
