// gather: every algorithm, sizes 1..17, 31, 64, block lengths 0, 1, 7, 3001
// and roots 0, p/2, p-1: the root gets every rank's block, in rank order,
// each element exactly where it belongs; also with the root's block already
// in place, and the value form.
#include <set>
#include <string>

#include "support/harness.hpp"

using namespace tutti;
using namespace tutti::testing;

namespace {

std::set<int> roots_for(int p) {
    return {0, p / 2, p - 1};
}

std::size_t misplaced(const std::vector<std::int64_t>& all, int p, int r, std::size_t n) {
    std::size_t wrong = 0;
    for (int from = 0; from < p; ++from)
        for (std::size_t i = 0; i < n; ++i)
            if (all[static_cast<std::size_t>(from) * n + i] !=
                encode(from, r, static_cast<std::int64_t>(i)))
                ++wrong;
    return wrong;
}

} // namespace

TEST_CASE("gather: every block in its place, every algorithm, size, count and root") {
    sweep<gather_args>(
        [](int p, std::size_t n) {
            return call_signature{.bytes = n * 8 * static_cast<std::size_t>(p)};
        },
        [](const std::string& name, int p, std::size_t n) {
            for (int r : roots_for(p)) {
                CAPTURE(r);
                tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                    std::vector<std::int64_t> mine(n);
                    for (std::size_t i = 0; i < n; ++i)
                        mine[i] = encode(comm.rank(), r, static_cast<std::int64_t>(i));
                    // Only the root needs a receive buffer.
                    std::vector<std::int64_t> all(
                        comm.rank() == r ? n * static_cast<std::size_t>(p) : 0, -1);
                    co_await gather(comm, mine, all, root{r}, use(name));
                    if (comm.rank() == r) CHECK(misplaced(all, p, r, n) == 0);
                });
            }
        });
}

TEST_CASE("gather: the root's own block already in place") {
    sweep<gather_args>(
        [](int p, std::size_t n) {
            return call_signature{.bytes = n * 8 * static_cast<std::size_t>(p)};
        },
        [](const std::string& name, int p, std::size_t n) {
            const int r = p / 2;
            tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                const auto ranks = static_cast<std::size_t>(p);
                const auto me = static_cast<std::size_t>(comm.rank());
                std::vector<std::int64_t> all(n * ranks, -1);
                for (std::size_t i = 0; i < n; ++i)
                    all[me * n + i] = encode(comm.rank(), r, static_cast<std::int64_t>(i));
                std::span<const std::int64_t> mine(all.data() + me * n, n);
                co_await gather(comm, mine, all, root{r}, use(name));
                if (comm.rank() == r) CHECK(misplaced(all, p, r, n) == 0);
            });
        });
}

TEST_CASE("gather: one value per rank, trivially copyable or serialized") {
    for (const auto& name : algorithm_names(collective::gather)) {
        for (int p : {1, 3, 8, 13}) {
            CAPTURE(name);
            CAPTURE(p);
            const int r = p - 1;
            tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                const int me = comm.rank();
                auto numbers = co_await gather(comm, me * 11 + 3, root{r}, use(name));
                auto words = co_await gather(comm, std::string(static_cast<std::size_t>(me), 'x'),
                                             root{r}, use(name));
                if (me != r) {
                    CHECK(numbers.empty());
                    CHECK(words.empty());
                    co_return;
                }
                REQUIRE(numbers.size() == static_cast<std::size_t>(p));
                REQUIRE(words.size() == static_cast<std::size_t>(p));
                for (int i = 0; i < p; ++i) {
                    CHECK(numbers[static_cast<std::size_t>(i)] == i * 11 + 3);
                    CHECK(words[static_cast<std::size_t>(i)] ==
                          std::string(static_cast<std::size_t>(i), 'x'));
                }
            });
        }
    }
}
