// scan and exscan: every algorithm of each, sizes 1..17, 31, 64, counts 0,
// 1, 7, 3001: exact integer prefix sums (also in place), and the rank-ordered
// prefix product of a non-commutative operation. exscan leaves rank 0's
// receive buffer as it was.
#include "support/harness.hpp"

using namespace tutti;
using namespace tutti::testing;

namespace {

std::int64_t contribution(int rank, std::size_t i) {
    return rank * 1000 + static_cast<std::int64_t>(i);
}

// Sum of contribution(q, i) over q < ranks.
std::int64_t prefix_sum(int ranks, std::size_t i) {
    return 1000LL * ranks * (ranks - 1) / 2 + static_cast<std::int64_t>(i) * ranks;
}

std::vector<std::int64_t> contributions(int rank, std::size_t n) {
    std::vector<std::int64_t> data(n);
    for (std::size_t i = 0; i < n; ++i)
        data[i] = contribution(rank, i);
    return data;
}

// matrix_of(0, i) * ... * matrix_of(ranks - 1, i); ranks >= 1.
std::vector<matrix2> prefix_product(int ranks, std::size_t n) {
    std::vector<matrix2> out(n);
    for (std::size_t i = 0; i < n; ++i) {
        out[i] = matrix_of(0, i);
        for (int r = 1; r < ranks; ++r)
            out[i] = multiply(out[i], matrix_of(r, i));
    }
    return out;
}

std::vector<matrix2> matrices(int rank, std::size_t n) {
    std::vector<matrix2> data(n);
    for (std::size_t i = 0; i < n; ++i)
        data[i] = matrix_of(rank, i);
    return data;
}

call_signature sum_signature(int, std::size_t n) {
    return call_signature{.bytes = n * 8, .count = n, .has_op = true};
}

call_signature matrix_signature(int, std::size_t n) {
    return call_signature{.bytes = n * sizeof(matrix2),
                          .count = n,
                          .has_op = true,
                          .commutative = false,
                          .builtin_op = false};
}

constexpr std::int64_t untouched = -7;

} // namespace

TEST_CASE("scan: exact prefix sums for every algorithm, size and count") {
    sweep<scan_args>(sum_signature, [](const std::string& name, int p, std::size_t n) {
        tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
            const int me = comm.rank();
            const auto send = contributions(me, n);
            std::vector<std::int64_t> recv(n, untouched);
            co_await scan(comm, send, recv, sum, use(name));
            std::size_t wrong = 0;
            for (std::size_t i = 0; i < n; ++i)
                if (recv[i] != prefix_sum(me + 1, i)) ++wrong;
            CHECK(wrong == 0);
            CHECK(send == contributions(me, n));
        });
    });
}

TEST_CASE("scan: in place for every algorithm") {
    sweep<scan_args>(
        [](int p, std::size_t n) {
            auto s = sum_signature(p, n);
            s.in_place = n > 0;
            return s;
        },
        [](const std::string& name, int p, std::size_t n) {
            tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                const int me = comm.rank();
                auto data = contributions(me, n);
                co_await scan(comm, data, sum, use(name));
                std::size_t wrong = 0;
                for (std::size_t i = 0; i < n; ++i)
                    if (data[i] != prefix_sum(me + 1, i)) ++wrong;
                CHECK(wrong == 0);
            });
        });
}

TEST_CASE("scan: rank order kept for a non-commutative operation") {
    sweep<scan_args>(matrix_signature, [](const std::string& name, int p, std::size_t n) {
        tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
            const int me = comm.rank();
            const auto send = matrices(me, n);
            std::vector<matrix2> recv(n);
            co_await scan(comm, send, recv, matrix_product(), use(name));
            CHECK(recv == prefix_product(me + 1, n));
        });
    });
}

TEST_CASE("exscan: exact prefix sums for every algorithm, size and count") {
    sweep<exscan_args>(sum_signature, [](const std::string& name, int p, std::size_t n) {
        tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
            const int me = comm.rank();
            const auto send = contributions(me, n);
            std::vector<std::int64_t> recv(n, untouched);
            co_await exscan(comm, send, recv, sum, use(name));
            std::size_t wrong = 0;
            for (std::size_t i = 0; i < n; ++i)
                if (recv[i] != (me == 0 ? untouched : prefix_sum(me, i))) ++wrong;
            CHECK(wrong == 0);
            CHECK(send == contributions(me, n));
        });
    });
}

TEST_CASE("exscan: in place for every algorithm") {
    sweep<exscan_args>(
        [](int p, std::size_t n) {
            auto s = sum_signature(p, n);
            s.in_place = n > 0;
            return s;
        },
        [](const std::string& name, int p, std::size_t n) {
            tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                const int me = comm.rank();
                auto data = contributions(me, n);
                co_await exscan(comm, data, sum, use(name));
                std::size_t wrong = 0;
                for (std::size_t i = 0; i < n; ++i)
                    if (data[i] != (me == 0 ? contribution(0, i) : prefix_sum(me, i))) ++wrong;
                CHECK(wrong == 0);
            });
        });
}

TEST_CASE("exscan: rank order kept for a non-commutative operation") {
    sweep<exscan_args>(matrix_signature, [](const std::string& name, int p, std::size_t n) {
        tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
            const int me = comm.rank();
            const auto send = matrices(me, n);
            const matrix2 marker{untouched, untouched, untouched, untouched};
            std::vector<matrix2> recv(n, marker);
            co_await exscan(comm, send, recv, matrix_product(), use(name));
            if (me == 0)
                CHECK(recv == std::vector<matrix2>(n, marker));
            else
                CHECK(recv == prefix_product(me, n));
        });
    });
}
