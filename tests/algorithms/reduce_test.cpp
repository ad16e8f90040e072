// reduce: every algorithm, sizes 1..17, 31, 64, counts 0, 1, 7, 3001 and
// roots 0, p/2, p-1: exact integer sums and the rank-ordered result of a
// non-commutative operation at the root, with separate buffers and in place.
#include <set>
#include <string>

#include "support/harness.hpp"

using namespace tutti;
using namespace tutti::testing;

namespace {

std::set<int> roots_for(int p) {
    return {0, p / 2, p - 1};
}

std::int64_t contribution(int rank, std::size_t i) {
    return static_cast<std::int64_t>(rank) * 1000 + static_cast<std::int64_t>(i);
}

std::int64_t sum_at(int p, std::size_t i) {
    return 1000LL * p * (p - 1) / 2 + static_cast<std::int64_t>(i) * p;
}

matrix2 product_at(int p, std::size_t i) {
    matrix2 expected = matrix_of(0, i);
    for (int r = 1; r < p; ++r)
        expected = multiply(expected, matrix_of(r, i));
    return expected;
}

call_signature sum_signature(std::size_t n, bool in_place) {
    return {.bytes = n * 8, .count = n, .has_op = true, .in_place = in_place};
}

call_signature product_signature(std::size_t n, bool in_place) {
    return {.bytes = n * sizeof(matrix2),
            .count = n,
            .has_op = true,
            .commutative = false,
            .builtin_op = false,
            .in_place = in_place};
}

} // namespace

TEST_CASE("reduce: exact sums at the root for every algorithm, size, count and root") {
    sweep<reduce_args>([](int, std::size_t n) { return sum_signature(n, false); },
                       [](const std::string& name, int p, std::size_t n) {
                           for (int r : roots_for(p)) {
                               CAPTURE(r);
                               tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                                   std::vector<std::int64_t> data(n);
                                   for (std::size_t i = 0; i < n; ++i)
                                       data[i] = contribution(comm.rank(), i);
                                   // Only the root needs a receive buffer.
                                   std::vector<std::int64_t> out(comm.rank() == r ? n : 0, -1);
                                   co_await reduce(comm, data, out, sum, root{r}, use(name));
                                   std::size_t wrong = 0;
                                   for (std::size_t i = 0; i < out.size(); ++i)
                                       if (out[i] != sum_at(p, i)) ++wrong;
                                   CHECK(wrong == 0);
                                   for (std::size_t i = 0; i < n; ++i)
                                       if (data[i] != contribution(comm.rank(), i)) ++wrong;
                                   CHECK(wrong == 0);
                               });
                           }
                       });
}

TEST_CASE("reduce: rank order kept for a non-commutative operation, every root") {
    sweep<reduce_args>([](int, std::size_t n) { return product_signature(n, false); },
                       [](const std::string& name, int p, std::size_t n) {
                           for (int r : roots_for(p)) {
                               CAPTURE(r);
                               tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                                   std::vector<matrix2> data(n);
                                   for (std::size_t i = 0; i < n; ++i)
                                       data[i] = matrix_of(comm.rank(), i);
                                   std::vector<matrix2> out(comm.rank() == r ? n : 0);
                                   co_await reduce(comm, data, out, matrix_product(), root{r},
                                                   use(name));
                                   std::size_t wrong = 0;
                                   for (std::size_t i = 0; i < out.size(); ++i)
                                       if (!(out[i] == product_at(p, i))) ++wrong;
                                   CHECK(wrong == 0);
                               });
                           }
                       });
}

TEST_CASE("reduce: in place, sums and a non-commutative operation") {
    sweep<reduce_args>([](int, std::size_t n) { return product_signature(n, true); },
                       [](const std::string& name, int p, std::size_t n) {
                           for (int r : roots_for(p)) {
                               CAPTURE(r);
                               tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                                   std::vector<matrix2> data(n);
                                   for (std::size_t i = 0; i < n; ++i)
                                       data[i] = matrix_of(comm.rank(), i);
                                   co_await reduce(comm, data, matrix_product(), root{r},
                                                   use(name));
                                   std::vector<std::int64_t> values(n);
                                   for (std::size_t i = 0; i < n; ++i)
                                       values[i] = contribution(comm.rank(), i);
                                   co_await reduce(comm, values, sum, root{r}, use(name));
                                   if (comm.rank() != r) co_return;
                                   std::size_t wrong = 0;
                                   for (std::size_t i = 0; i < n; ++i) {
                                       if (!(data[i] == product_at(p, i))) ++wrong;
                                       if (values[i] != sum_at(p, i)) ++wrong;
                                   }
                                   CHECK(wrong == 0);
                               });
                           }
                       });
}

namespace {

// Twelve bytes: a segment of whole elements is not a power of two long.
struct triple {
    std::int32_t x, y, z;
    friend bool operator==(const triple&, const triple&) = default;
};

} // namespace

TEST_CASE("reduce: long vectors of 12-byte elements, many segments") {
    // 60,000 elements are 720,000 bytes: 22 segments of 32 KiB, more than the
    // receives a segmented tree posts ahead, the last one short.
    const std::size_t n = 60000;
    const auto add = make_op(
        [](const triple& a, const triple& b) {
            return triple{a.x + b.x, a.y + b.y, a.z + b.z};
        },
        commutativity::commutative);
    for (const auto& name : algorithm_names(collective::reduce)) {
        for (int p : {2, 3, 5, 8}) {
            for (int r : {0, p - 1}) {
                CAPTURE(name);
                CAPTURE(p);
                CAPTURE(r);
                tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                    std::vector<triple> data(n);
                    for (std::size_t i = 0; i < n; ++i)
                        data[i] = {comm.rank(), static_cast<std::int32_t>(i),
                                   comm.rank() * static_cast<std::int32_t>(i % 7)};
                    std::vector<triple> out(comm.rank() == r ? n : 0);
                    co_await reduce(comm, data, out, add, root{r}, use(name));
                    std::size_t wrong = 0;
                    for (std::size_t i = 0; i < out.size(); ++i) {
                        const auto k = static_cast<std::int32_t>(i);
                        const triple expected{p * (p - 1) / 2, p * k, p * (p - 1) / 2 * (k % 7)};
                        if (!(out[i] == expected)) ++wrong;
                    }
                    CHECK(wrong == 0);
                });
            }
        }
    }
}
