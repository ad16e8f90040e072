// broadcast: every algorithm, sizes 1..17, 31, 64, counts 0, 1, 7, 3001 and
// roots 0, p/2, p-1: every rank ends with exactly the root's data, also for
// byte lengths that do not split evenly over the ranks.
#include <algorithm>
#include <optional>
#include <set>
#include <string>

#include "support/harness.hpp"

using namespace tutti;
using namespace tutti::testing;

namespace {
std::set<int> roots_for(int p) {
    return {0, p / 2, p - 1};
}

// Broadcasts n bytes, byte i being value(i) at root r, with the named
// algorithm on p ranks; every rank must end with exactly those bytes.
template <class Value>
void check_byte_broadcast(const std::string& name, int p, std::size_t n, int r, Value value) {
    tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
        std::vector<std::uint8_t> data(n, 0);
        if (comm.rank() == r)
            for (std::size_t i = 0; i < n; ++i)
                data[i] = value(i);
        co_await broadcast(comm, data, root{r}, use(name));
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < n; ++i)
            if (data[i] != value(i)) ++wrong;
        CHECK(wrong == 0);
    });
}
} // namespace

TEST_CASE("broadcast: every rank gets the root's elements, every algorithm, size, count, root") {
    sweep<broadcast_args>(
        [](int, std::size_t n) { return call_signature{.bytes = n * 8}; },
        [](const std::string& name, int p, std::size_t n) {
            for (int r : roots_for(p)) {
                CAPTURE(r);
                tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                    std::vector<std::int64_t> data(n, -1);
                    if (comm.rank() == r)
                        for (std::size_t i = 0; i < n; ++i)
                            data[i] = encode(r, 0, static_cast<std::int64_t>(i));
                    co_await broadcast(comm, data, root{r}, use(name));
                    std::size_t wrong = 0;
                    for (std::size_t i = 0; i < n; ++i)
                        if (data[i] != encode(r, 0, static_cast<std::int64_t>(i))) ++wrong;
                    CHECK(wrong == 0);
                });
            }
        });
}

TEST_CASE("broadcast: byte lengths that do not split evenly over the ranks") {
    sweep<broadcast_args>([](int, std::size_t n) { return call_signature{.bytes = n}; },
                          [](const std::string& name, int p, std::size_t n) {
                              check_byte_broadcast(name, p, n, p - 1, [](std::size_t i) {
                                  return static_cast<std::uint8_t>((i * 31 + 7) % 251 + 1);
                              });
                          });
}

TEST_CASE("broadcast: one value, trivially copyable or serialized") {
    for (const auto& name : algorithm_names(collective::broadcast)) {
        for (int p : {1, 2, 5, 8}) {
            CAPTURE(name);
            CAPTURE(p);
            const int r = p / 2;
            tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                int value = comm.rank() == r ? 4242 : -1;
                co_await broadcast(comm, value, root{r}, use(name));
                CHECK(value == 4242);
                std::string text = comm.rank() == r ? "from the root" : "";
                co_await broadcast(comm, text, root{r}, use(name));
                CHECK(text == "from the root");
            });
        }
    }
}

TEST_CASE("broadcast: long buffers, in many segments and a short last one, every algorithm") {
    // Longer than the pipeline's segment (128 KiB) and its receives posted
    // ahead (8), so that segments are forwarded while later ones arrive.
    const std::size_t segment = 128 * 1024;
    for (const auto& name : algorithm_names(collective::broadcast)) {
        for (int p : {2, 3, 5}) {
            for (std::size_t n : {segment - 1, segment, 3 * segment + 5, 9 * segment + 17}) {
                for (int r : {0, p - 1}) {
                    CAPTURE(name);
                    CAPTURE(p);
                    CAPTURE(n);
                    CAPTURE(r);
                    check_byte_broadcast(name, p, n, r, [r](std::size_t i) {
                        return static_cast<std::uint8_t>(
                            (i * 131 + static_cast<std::size_t>(r)) % 251 + 1);
                    });
                }
            }
        }
    }
}

TEST_CASE("broadcast pipeline: a rank holding more than the rank before it fails alone") {
    // Ranks 0 and 1 hold 9 segments, the last of 64 KiB; rank 2 holds 16
    // whole ones. Rank 2's receive of the short segment fails at once with
    // a size mismatch, and the receives it posted for later segments, whose
    // messages nobody sends, are taken back rather than waited for; ranks 0
    // and 1 finish as usual.
    const std::size_t segment = 128 * 1024;
    tutti::testing::run_ranks(3, [&](communicator comm) -> task<void> {
        const std::size_t n = comm.rank() == 2 ? 16 * segment : 8 * segment + segment / 2;
        std::vector<std::uint8_t> data(n, comm.rank() == 0 ? 7 : 0);
        std::optional<errc> failed;
        try {
            co_await broadcast(comm, data, root{0}, use("pipeline"));
        } catch (const tutti::error& e) {
            failed = e.code();
        }
        if (comm.rank() == 2) {
            CHECK(failed == errc::message_size_mismatch);
        } else {
            CHECK_FALSE(failed);
            CHECK(std::count(data.begin(), data.end(), 7) == static_cast<std::ptrdiff_t>(n));
        }
    });
}
