// What the machine-tree tests check on every shape, in one process or as one
// rank of a job: each hierarchical collective on the tree gives the flat
// collective's result bit for bit (integer data), and all_to_all the
// transpose identity out[i][e] == encode(i, me, e).
#pragma once

#include <cstdint>
#include <vector>

#include <doctest/doctest.h>

#include "tutti.hpp"

namespace topology_test {

inline std::int64_t encode(std::int64_t from, std::int64_t to, std::int64_t index = 0) {
    return (from * 100003 + to) * 1000003 + index;
}

// A non-commutative operation, so a reduction in the wrong order shows:
// 2x2 integer matrices multiplied modulo a prime.
struct matrix2 {
    std::int64_t a, b, c, d;
    friend bool operator==(const matrix2&, const matrix2&) = default;
};
inline matrix2 multiply(const matrix2& x, const matrix2& y) {
    constexpr std::int64_t m = 1000003;
    return {(x.a * y.a + x.b * y.c) % m, (x.a * y.b + x.b * y.d) % m, (x.c * y.a + x.d * y.c) % m,
            (x.c * y.b + x.d * y.d) % m};
}

// Every hierarchical collective on `tree` against the flat one on `comm`.
inline tutti::task<void> compare_with_flat(tutti::communicator comm, tutti::communicator tree) {
    using tutti::use;
    const int n = comm.size();
    const auto me = comm.rank();
    const auto un = static_cast<std::size_t>(n);
    const auto hierarchical = use("hierarchical");
    REQUIRE(tree.size() == n);
    REQUIRE(tree.rank() == me);
    for (std::size_t count : {std::size_t{1}, std::size_t{5}}) {
        CAPTURE(count);
        std::vector<std::int64_t> mine(count);
        for (std::size_t i = 0; i < count; ++i)
            mine[i] = encode(me, 0, static_cast<std::int64_t>(i));

        std::vector<std::int64_t> flat(count), tiered(count);
        co_await tutti::all_reduce(comm, mine, flat, tutti::sum);
        co_await tutti::all_reduce(tree, mine, tiered, tutti::sum, hierarchical);
        CHECK(tiered == flat);
        co_await tutti::all_reduce(tree, mine, tiered, tutti::bit_xor, hierarchical);
        co_await tutti::all_reduce(comm, mine, flat, tutti::bit_xor);
        CHECK(tiered == flat);

        // Trees whose groups interleave ranks must still keep the order.
        const auto product = tutti::make_op(multiply, tutti::commutativity::non_commutative);
        std::vector<matrix2> factors(count), mf(count), mt(count);
        for (std::size_t i = 0; i < count; ++i)
            factors[i] = {1 + (me * 7 + static_cast<int>(i)) % 5, 1 + me % 3, me % 2, 1};
        co_await tutti::all_reduce(comm, factors, mf, product);
        co_await tutti::all_reduce(tree, factors, mt, product, hierarchical);
        CHECK(mt == mf);

        std::vector<std::int64_t> all_flat(count * un), all_tiered(count * un);
        co_await tutti::all_gather(comm, mine, all_flat);
        co_await tutti::all_gather(tree, mine, all_tiered, hierarchical);
        CHECK(all_tiered == all_flat);

        for (int root : {0, n - 1, n / 2}) {
            CAPTURE(root);
            std::vector<std::int64_t> rf(count), rt(count);
            co_await tutti::reduce(comm, mine, rf, tutti::max, tutti::root(root));
            co_await tutti::reduce(tree, mine, rt, tutti::max, tutti::root(root), hierarchical);
            if (me == root) CHECK(rt == rf);

            std::vector<std::int64_t> bf(count, -1), bt(count, -1);
            if (me == root) bf = bt = mine;
            co_await tutti::broadcast(comm, bf, tutti::root(root));
            co_await tutti::broadcast(tree, bt, tutti::root(root), hierarchical);
            CHECK(bt == bf);

            std::vector<std::int64_t> gf(me == root ? count * un : 0), gt(gf.size());
            co_await tutti::gather(comm, mine, gf, tutti::root(root));
            co_await tutti::gather(tree, mine, gt, tutti::root(root), hierarchical);
            if (me == root) CHECK(gt == gf);

            std::vector<std::int64_t> spread(me == root ? count * un : 0);
            for (std::size_t j = 0; j < spread.size(); ++j)
                spread[j] = encode(root, static_cast<std::int64_t>(j / count),
                                   static_cast<std::int64_t>(j % count));
            std::vector<std::int64_t> sf(count), st(count);
            co_await tutti::scatter(comm, spread, sf, tutti::root(root));
            co_await tutti::scatter(tree, spread, st, tutti::root(root), hierarchical);
            CHECK(st == sf);
        }

        co_await tutti::barrier(tree, hierarchical);

        std::vector<std::int64_t> rows(count * un);
        for (std::size_t j = 0; j < rows.size(); ++j)
            rows[j] = encode(me, static_cast<std::int64_t>(j / count),
                             static_cast<std::int64_t>(j % count));
        std::vector<std::int64_t> cols_flat(rows.size());
        co_await tutti::all_to_all(comm, rows, cols_flat);
        for (const char* name : {"hierarchical", "hierarchical_padded"}) {
            CAPTURE(name);
            std::vector<std::int64_t> cols(rows.size());
            co_await tutti::all_to_all(tree, rows, cols, use(name));
            CHECK(cols == cols_flat);
            bool transposed = true;
            for (std::size_t j = 0; j < cols.size(); ++j)
                transposed =
                    transposed && cols[j] == encode(static_cast<std::int64_t>(j / count), me,
                                                    static_cast<std::int64_t>(j % count));
            CHECK(transposed);
        }
    }
    // Without naming an algorithm, selection on the tree gives the same.
    std::vector<std::int64_t> one{encode(me, 1)}, auto_flat(1), auto_tree(1);
    co_await tutti::all_reduce(comm, one, auto_flat, tutti::sum);
    co_await tutti::all_reduce(tree, one, auto_tree, tutti::sum);
    CHECK(auto_tree == auto_flat);
}

} // namespace topology_test
