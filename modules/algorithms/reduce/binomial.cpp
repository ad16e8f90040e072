// reduce: binomial tree
//
// Collective:   reduce
// Kind:         pure
// Restrictions: none (any communicator size and root; non-commutative
//               operations give the rank-ordered result)
// Parameters:   none
//
// In round k a rank whose bit k is set sends its partial result to the rank
// 2^k below it and drops out; the others receive from 2^k above and combine.
// A rank's partial result then always covers a contiguous range of ranks
// starting at itself, and what it receives covers the range just above, so
// combining (mine, received) keeps the rank order. ceil(log2 p) rounds of
// the whole vector: the choice for short vectors, and over TCP for every
// length, where a received vector of 1 MiB or more is combined part by
// part as it lands (transport::irecv_observed) rather than once it is all
// in: the same result, element by element.
//
// For a commutative operation ranks are numbered relative to the root, so
// the tree ends at the root. A non-commutative one needs the true rank
// order, so the tree ends at rank 0, which sends the result on to the root.

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

constexpr std::uint64_t to_root_step = 32; // beyond the tree's rounds (bit numbers)

task<void> binomial(const call_context& ctx, const reduce_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    if (reduce_without_messages(a, p)) co_return;
    const auto bytes = a.count * a.op->element_size;
    const bool at_root = r == a.root;
    const reduce_tree tree(ctx, a);
    const int top = tree.top;
    const int vr = tree.vr;

    // The partial result starts as the user's own data, sent from there if
    // this rank is a leaf. Once something is combined it lives in the root's
    // recv or, elsewhere, in a buffer of our own. A rank receives at all only
    // if its first round does not make it send (vr even) and has a partner.
    const bool receives = vr % 2 == 0 && vr + 1 < p;
    scratch<> incoming(receives ? bytes : 0), partial(receives && !at_root ? bytes : 0);
    const std::byte* mine = a.send.data();
    std::byte* combined = nullptr;
    // A rank's send is its last message, except at a root that receives the
    // result from rank 0 after it.
    const auto send_to_parent =
        top == a.root || !at_root ? send_awaited::at_end : send_awaited::before_next_step;
    std::uint64_t round = 0;
    for (int mask = 1; mask < p; mask *= 2, ++round) {
        if (vr & mask) {
            co_await ctx.send(tree.actual(vr - mask), round, {mine, bytes}, send_to_parent);
            break;
        }
        if (vr + mask >= p) continue;
        if (!combined) combined = at_root ? a.recv.data() : partial.data();
        if (bytes >= combined_as_it_lands_from) {
            co_await receive_and_combine(ctx, tree.actual(vr + mask), round, incoming.span(),
                                         {*a.op, mine, incoming.data(), combined, a.count});
        } else {
            co_await ctx.recv(tree.actual(vr + mask), round, incoming.span(),
                              receive_use::combined_at_once);
            a.op->combine(mine, incoming.data(), combined, a.count);
        }
        mine = combined;
    }

    // Only the non-commutative case ends away from the root: rank 0 holds
    // the result (it received at least once, as p > 1).
    co_await result_to_root(ctx, a, tree, {mine, bytes}, to_root_step);
}

const bool registered = register_algorithm<reduce_args>({
    .info = {.name = "binomial",
             .form = algorithm_kind::pure,
             .summary = "binomial tree, ceil(log2 p) rounds; any op, keeps rank order"},
    .run = binomial,
});

} // namespace
} // namespace tutti
