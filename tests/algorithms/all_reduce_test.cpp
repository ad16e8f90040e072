// all_reduce: every algorithm, sizes 1..17, 31, 64, counts 0, 1, 7, 3001:
// exact integer sums in place and with separate buffers, and the rank-ordered
// result of a non-commutative op.
#include "support/harness.hpp"

using namespace tutti;
using namespace tutti::testing;

TEST_CASE("all_reduce: exact sums for every algorithm, size and count") {
    sweep<all_reduce_args>(
        [](int, std::size_t n) {
            return call_signature{.bytes = n * 8, .count = n, .has_op = true};
        },
        [](const std::string& name, int p, std::size_t n) {
            tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                std::vector<std::int64_t> data(n);
                for (std::size_t i = 0; i < n; ++i)
                    data[i] = static_cast<std::int64_t>(comm.rank() * 1000 + i);
                co_await all_reduce(comm, data, sum, use(name));
                std::size_t wrong = 0;
                for (std::size_t i = 0; i < n; ++i) {
                    auto expected = 1000LL * p * (p - 1) / 2 + static_cast<std::int64_t>(i) * p;
                    if (data[i] != expected) ++wrong;
                }
                CHECK(wrong == 0);
            });
        });
}

TEST_CASE("all_reduce: rank order kept for a non-commutative operation") {
    sweep<all_reduce_args>(
        [](int, std::size_t n) {
            return call_signature{.bytes = n * sizeof(matrix2),
                                  .count = n,
                                  .has_op = true,
                                  .commutative = false,
                                  .builtin_op = false};
        },
        [](const std::string& name, int p, std::size_t n) {
            tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                std::vector<matrix2> data(n), out(n);
                for (std::size_t i = 0; i < n; ++i)
                    data[i] = matrix_of(comm.rank(), i);
                co_await all_reduce(comm, data, out, matrix_product(), use(name));
                std::size_t wrong = 0;
                for (std::size_t i = 0; i < n; ++i) {
                    matrix2 expected = matrix_of(0, i);
                    for (int r = 1; r < p; ++r)
                        expected = multiply(expected, matrix_of(r, i));
                    if (!(out[i] == expected)) ++wrong;
                }
                CHECK(wrong == 0);
            });
        });
}

TEST_CASE("all_reduce: separate send and receive buffers, send left unchanged") {
    sweep<all_reduce_args>(
        [](int, std::size_t n) {
            return call_signature{.bytes = n * 8, .count = n, .has_op = true};
        },
        [](const std::string& name, int p, std::size_t n) {
            tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                std::vector<std::int64_t> send(n), recv(n, -1);
                for (std::size_t i = 0; i < n; ++i)
                    send[i] = encode(comm.rank(), 0, static_cast<std::int64_t>(i));
                const auto original = send;
                co_await all_reduce(comm, send, recv, sum, use(name));
                std::size_t wrong = 0;
                for (std::size_t i = 0; i < n; ++i) {
                    std::int64_t expected = 0;
                    for (int r = 0; r < p; ++r)
                        expected += encode(r, 0, static_cast<std::int64_t>(i));
                    if (recv[i] != expected) ++wrong;
                }
                CHECK(wrong == 0);
                CHECK(send == original);
            });
        });
}
