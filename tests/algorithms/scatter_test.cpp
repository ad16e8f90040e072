// scatter: every algorithm, sizes 1..17, 31, 64, block lengths 0, 1, 7, 3001
// and roots 0, p/2, p-1: every rank gets exactly its own block of the root's
// buffer; also with the root's block already in place, and the value form.
#include <set>
#include <string>

#include "support/harness.hpp"

using namespace tutti;
using namespace tutti::testing;

namespace {

std::set<int> roots_for(int p) {
    return {0, p / 2, p - 1};
}

// The root's buffer: block `to`, element i.
std::vector<std::int64_t> blocks_of(int root, int p, std::size_t n) {
    std::vector<std::int64_t> all(n * static_cast<std::size_t>(p));
    for (int to = 0; to < p; ++to)
        for (std::size_t i = 0; i < n; ++i)
            all[static_cast<std::size_t>(to) * n + i] =
                encode(root, to, static_cast<std::int64_t>(i));
    return all;
}

std::size_t misplaced(std::span<const std::int64_t> mine, int root, int me) {
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < mine.size(); ++i)
        if (mine[i] != encode(root, me, static_cast<std::int64_t>(i))) ++wrong;
    return wrong;
}

} // namespace

TEST_CASE("scatter: every rank gets its block, every algorithm, size, count and root") {
    sweep<scatter_args>(
        [](int p, std::size_t n) {
            return call_signature{.bytes = n * 8 * static_cast<std::size_t>(p)};
        },
        [](const std::string& name, int p, std::size_t n) {
            for (int r : roots_for(p)) {
                CAPTURE(r);
                tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                    // Only the root has something to send.
                    std::vector<std::int64_t> all;
                    if (comm.rank() == r) all = blocks_of(r, p, n);
                    std::vector<std::int64_t> mine(n, -1);
                    co_await scatter(comm, all, mine, root{r}, use(name));
                    CHECK(misplaced(mine, r, comm.rank()) == 0);
                    if (comm.rank() == r) CHECK(all == blocks_of(r, p, n));
                });
            }
        });
}

TEST_CASE("scatter: the root's own block already in place") {
    sweep<scatter_args>(
        [](int p, std::size_t n) {
            return call_signature{.bytes = n * 8 * static_cast<std::size_t>(p)};
        },
        [](const std::string& name, int p, std::size_t n) {
            const int r = p / 2;
            tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                const auto me = static_cast<std::size_t>(comm.rank());
                auto all = blocks_of(r, p, n);
                std::vector<std::int64_t> elsewhere(n, -1);
                std::span<std::int64_t> mine(elsewhere);
                if (comm.rank() == r) mine = std::span(all).subspan(me * n, n);
                co_await scatter(comm, all, mine, root{r}, use(name));
                CHECK(misplaced(mine, r, comm.rank()) == 0);
            });
        });
}

TEST_CASE("scatter: one value per rank, trivially copyable or serialized") {
    for (const auto& name : algorithm_names(collective::scatter)) {
        for (int p : {1, 3, 8, 13}) {
            CAPTURE(name);
            CAPTURE(p);
            const int r = p / 2;
            tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                const int me = comm.rank();
                std::vector<int> numbers;
                std::vector<std::string> words;
                if (me == r) {
                    for (int i = 0; i < p; ++i) {
                        numbers.push_back(i * 11 + 3);
                        words.emplace_back(static_cast<std::size_t>(i), 'x');
                    }
                }
                const int number = co_await scatter(comm, numbers, root{r}, use(name));
                const std::string word = co_await scatter(comm, words, root{r}, use(name));
                CHECK(number == me * 11 + 3);
                CHECK(word == std::string(static_cast<std::size_t>(me), 'x'));
            });
        }
    }
}
