// For the hierarchy tests: every collective run on a hierarchical
// communicator (with the named algorithm, or "auto") and on the plain one it
// was made from (flat), with exact checks of both and of their equality.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/harness.hpp"

namespace tutti::testing {

inline std::int64_t value_of(int rank, std::size_t i) {
    return encode(rank, 0, static_cast<std::int64_t>(i));
}

inline std::vector<std::int64_t> contribution(int rank, std::size_t n) {
    std::vector<std::int64_t> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = value_of(rank, i);
    return v;
}

inline std::vector<matrix2> matrices(int rank, std::size_t n) {
    std::vector<matrix2> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = matrix_of(rank, i);
    return v;
}

// Row of rank `me` for all_to_all: block j (n elements) for rank j.
inline std::vector<std::int64_t> row_of(int me, int p, std::size_t n) {
    std::vector<std::int64_t> data(n * static_cast<std::size_t>(p));
    for (int j = 0; j < p; ++j)
        for (std::size_t k = 0; k < n; ++k)
            data[static_cast<std::size_t>(j) * n + k] = encode(me, j, static_cast<std::int64_t>(k));
    return data;
}

// Elements of an all_to_all result that break the transpose identity.
inline std::size_t transposed_wrong(const std::vector<std::int64_t>& got, int me, int p,
                                    std::size_t n) {
    std::size_t wrong = 0;
    for (int i = 0; i < p; ++i)
        for (std::size_t k = 0; k < n; ++k)
            if (got[static_cast<std::size_t>(i) * n + k] !=
                encode(i, me, static_cast<std::int64_t>(k)))
                ++wrong;
    return wrong;
}

// The roots every rooted collective is tried with: 0, a rank that is not its
// top-level group's representative (when there is one), and the last.
inline std::vector<int> roots_for(const communicator& h) {
    std::vector<int> roots{0};
    const auto levels = h.hierarchy();
    for (int r = 0; r < h.size(); ++r)
        if (levels && levels->index_of(r) != 0) {
            roots.push_back(r);
            break;
        }
    if (h.size() > 1) roots.push_back(h.size() - 1);
    return roots;
}

struct compare_options {
    std::string algorithm = "hierarchical"; // or "auto"
    std::size_t count = 3;                  // elements per block
    bool non_commutative = true;            // also the matrix product
};

// Runs every collective on `hier` and on `plain` (same ranks) and checks
// both against the exact expected values. A collective call of all ranks,
// which share `arrived` (0 before the call). No CAPTURE in here: doctest's
// context stack is per thread, and the ranks' coroutines interleave on it.
inline task<void> compare_everything(communicator plain, communicator hier, int& arrived,
                                     compare_options o = {}) {
    const int p = hier.size();
    const int me = hier.rank();
    const std::size_t n = o.count;
    const auto alg = use(o.algorithm);
    REQUIRE(plain.rank() == me);

    // barrier: nobody leaves before everybody arrived (the ranks share this
    // process, and `arrived`, which starts at 0).
    ++arrived;
    co_await barrier(hier, alg);
    CHECK(arrived == p);

    for (int root : roots_for(hier)) {
        // broadcast
        std::vector<std::int64_t> data(n, -1), flat(n, -1);
        if (me == root) data = flat = contribution(root, n);
        co_await broadcast(hier, data, tutti::root(root), alg);
        co_await broadcast(plain, flat, tutti::root(root));
        CHECK(data == contribution(root, n));
        CHECK(data == flat);

        // reduce, sum and (order-keeping hierarchies) matrix product
        std::vector<std::int64_t> sum(n, -1), flat_sum(n, -1), expected(n, 0);
        for (int r = 0; r < p; ++r)
            for (std::size_t i = 0; i < n; ++i)
                expected[i] += value_of(r, i);
        const auto mine = contribution(me, n);
        co_await reduce(hier, mine, sum, tutti::sum, tutti::root(root), alg);
        co_await reduce(plain, mine, flat_sum, tutti::sum, tutti::root(root));
        if (me == root) {
            CHECK(sum == expected);
            CHECK(sum == flat_sum);
        }
        if (o.non_commutative) {
            const auto ms = matrices(me, n);
            std::vector<matrix2> product(n), flat_product(n);
            co_await reduce(hier, ms, product, matrix_product(), tutti::root(root), alg);
            co_await reduce(plain, ms, flat_product, matrix_product(), tutti::root(root));
            if (me == root) CHECK(product == flat_product);
        }

        // gather
        std::vector<std::int64_t> all(n * static_cast<std::size_t>(p), -1);
        std::vector<std::int64_t> flat_all(all.size(), -1), expected_all;
        for (int r = 0; r < p; ++r) {
            auto c = contribution(r, n);
            expected_all.insert(expected_all.end(), c.begin(), c.end());
        }
        co_await gather(hier, mine, all, tutti::root(root), alg);
        co_await gather(plain, mine, flat_all, tutti::root(root));
        if (me == root) {
            CHECK(all == expected_all);
            CHECK(all == flat_all);
        }

        // scatter
        std::vector<std::int64_t> source;
        if (me == root)
            source = expected_all;
        else
            source.assign(expected_all.size(), -1);
        std::vector<std::int64_t> piece(n, -1), flat_piece(n, -1);
        co_await scatter(hier, source, piece, tutti::root(root), alg);
        co_await scatter(plain, source, flat_piece, tutti::root(root));
        CHECK(piece == mine);
        CHECK(piece == flat_piece);
    }

    // all_reduce, sum and matrix product
    {
        std::vector<std::int64_t> sum(n, -1), flat_sum(n, -1), expected(n, 0);
        for (int r = 0; r < p; ++r)
            for (std::size_t i = 0; i < n; ++i)
                expected[i] += value_of(r, i);
        const auto mine = contribution(me, n);
        co_await all_reduce(hier, mine, sum, tutti::sum, alg);
        co_await all_reduce(plain, mine, flat_sum, tutti::sum);
        CHECK(sum == expected);
        CHECK(sum == flat_sum);
        auto in_place = mine;
        co_await all_reduce(hier, in_place, tutti::sum, alg);
        CHECK(in_place == expected);
        if (o.non_commutative) {
            const auto ms = matrices(me, n);
            std::vector<matrix2> product(n), flat_product(n);
            co_await all_reduce(hier, ms, product, matrix_product(), alg);
            co_await all_reduce(plain, ms, flat_product, matrix_product());
            CHECK(product == flat_product);
        }
    }

    // all_gather
    {
        const auto mine = contribution(me, n);
        std::vector<std::int64_t> all(n * static_cast<std::size_t>(p), -1), flat(all.size(), -1);
        co_await all_gather(hier, mine, all, alg);
        co_await all_gather(plain, mine, flat);
        for (int r = 0; r < p; ++r)
            for (std::size_t i = 0; i < n; ++i)
                CHECK(all[static_cast<std::size_t>(r) * n + i] == value_of(r, i));
        CHECK(all == flat);
    }

    // all_to_all: the transpose identity, both layouts when forced
    {
        std::vector<std::string> layouts{o.algorithm};
        if (o.algorithm == "hierarchical") layouts.push_back("hierarchical_padded");
        const auto row = row_of(me, p, n);
        std::vector<std::int64_t> flat(row.size(), -1);
        co_await all_to_all(plain, row, flat);
        for (const auto& layout : layouts) {
            std::vector<std::int64_t> got(row.size(), -1);
            co_await all_to_all(hier, row, got, use(layout));
            CHECK(transposed_wrong(got, me, p, n) == 0);
            CHECK(got == flat);
            auto in_place = row;
            co_await all_to_all(hier, in_place, in_place, use(layout));
            CHECK(in_place == flat);
        }
    }
}

} // namespace tutti::testing
