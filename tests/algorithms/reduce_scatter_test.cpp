// reduce_scatter: every algorithm, sizes 1..17, 31, 64, counts 0, 1, 7, 3001
// per rank, and unequal counts (some zero): exact integer sums, also when recv
// is the rank's own part of send, and the rank-ordered result of a
// non-commutative op where an algorithm allows it. Under AddressSanitizer
// 3001 per rank runs up to 17 ranks only (sweep_per_rank).
#include <numeric>

#include "support/harness.hpp"

using namespace tutti;
using namespace tutti::testing;

namespace {

// Equal counts n per rank, or (r % 3) * n / 2: zero for every third rank.
std::vector<std::size_t> counts_for(int p, std::size_t n, bool equal) {
    std::vector<std::size_t> counts(static_cast<std::size_t>(p));
    for (int r = 0; r < p; ++r)
        counts[static_cast<std::size_t>(r)] = equal ? n : static_cast<std::size_t>(r % 3) * n / 2;
    return counts;
}

auto signature_for(bool equal, bool commutative) {
    return [=](int p, std::size_t n) {
        auto counts = counts_for(p, n, equal);
        const auto total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
        const std::size_t element = commutative ? 8 : sizeof(matrix2);
        return call_signature{.bytes = total * element,
                              .count = total,
                              .has_op = true,
                              .commutative = commutative,
                              .builtin_op = commutative,
                              .equal_counts = std::all_of(counts.begin(), counts.end(),
                                                          [&](auto c) { return c == counts[0]; })};
    };
}

// With own_part, recv is the rank's own part of the send buffer.
void check_sums(const std::string& name, int p, std::size_t n, bool equal, bool own_part = false) {
    const auto counts = counts_for(p, n, equal);
    const auto total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
    tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
        const auto r = static_cast<std::size_t>(comm.rank());
        const auto first =
            std::accumulate(counts.begin(), counts.begin() + comm.rank(), std::size_t{0});
        std::vector<std::int64_t> send(total), separate(counts[r], -1);
        for (std::size_t i = 0; i < total; ++i)
            send[i] = encode(comm.rank(), 0, static_cast<std::int64_t>(i));
        std::span<std::int64_t> recv =
            own_part ? std::span(send).subspan(first, counts[r]) : std::span(separate);
        co_await reduce_scatter(comm, send, recv, counts, sum, use(name));
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < counts[r]; ++i) {
            std::int64_t expected = 0;
            for (int from = 0; from < p; ++from)
                expected += encode(from, 0, static_cast<std::int64_t>(first + i));
            if (recv[i] != expected) ++wrong;
        }
        CHECK(wrong == 0);
    });
}

void check_order(const std::string& name, int p, std::size_t n, bool equal) {
    const auto counts = counts_for(p, n, equal);
    const auto total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
    tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
        const auto r = static_cast<std::size_t>(comm.rank());
        std::vector<matrix2> send(total), recv(counts[r]);
        for (std::size_t i = 0; i < total; ++i)
            send[i] = matrix_of(comm.rank(), i);
        co_await reduce_scatter(comm, send, recv, counts, matrix_product(), use(name));
        const auto first =
            std::accumulate(counts.begin(), counts.begin() + comm.rank(), std::size_t{0});
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < counts[r]; ++i) {
            matrix2 expected = matrix_of(0, first + i);
            for (int from = 1; from < p; ++from)
                expected = multiply(expected, matrix_of(from, first + i));
            if (!(recv[i] == expected)) ++wrong;
        }
        CHECK(wrong == 0);
    });
}

} // namespace

TEST_CASE("reduce_scatter: exact sums with equal counts for every algorithm, size and count") {
    sweep_per_rank<reduce_scatter_args>(
        signature_for(true, true),
        [](const std::string& name, int p, std::size_t n) { check_sums(name, p, n, true); });
}

TEST_CASE("reduce_scatter: exact sums with unequal counts, some zero") {
    sweep_per_rank<reduce_scatter_args>(
        signature_for(false, true),
        [](const std::string& name, int p, std::size_t n) { check_sums(name, p, n, false); });
}

TEST_CASE("reduce_scatter: rank order kept for a non-commutative operation") {
    for (bool equal : {true, false}) {
        CAPTURE(equal);
        sweep_per_rank<reduce_scatter_args>(
            signature_for(equal, false),
            [=](const std::string& name, int p, std::size_t n) { check_order(name, p, n, equal); });
    }
}

TEST_CASE("reduce_scatter: receive buffer is the rank's own part of the send buffer") {
    for (bool equal : {true, false}) {
        CAPTURE(equal);
        sweep_per_rank<reduce_scatter_args>(signature_for(equal, true),
                                            [=](const std::string& name, int p, std::size_t n) {
                                                check_sums(name, p, n, equal, true);
                                            });
    }
}
