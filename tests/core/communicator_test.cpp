// Communicators: split with MPI semantics, collectives on the parts, and
// independence of parts in flight together.
#include <algorithm>

#include "support/harness.hpp"

using namespace tutti;

TEST_CASE("split by colour orders by key, then by parent rank") {
    for (int p : {1, 2, 5, 8, 13}) {
        CAPTURE(p);
        inproc::run(p, [p](communicator comm) -> task<void> {
            const int color = comm.rank() % 3;
            // Reversed keys: the highest parent rank becomes rank 0.
            auto part = co_await comm.split(color, -comm.rank());
            int members = 0, position = 0;
            for (int r = 0; r < p; ++r) {
                if (r % 3 != color) continue;
                ++members;
                if (r > comm.rank()) ++position;
            }
            CHECK(part.size() == members);
            CHECK(part.rank() == position);
            // A collective on the part sums only its members' parent ranks.
            std::vector<std::int64_t> v{comm.rank()};
            co_await all_reduce(part, v, sum);
            std::int64_t expected = 0;
            for (int r = color; r < p; r += 3)
                expected += r;
            CHECK(v[0] == expected);
        });
    }
}

TEST_CASE("equal keys keep the parent order; nested splits work") {
    inproc::run(12, [](communicator comm) -> task<void> {
        auto half = co_await comm.split(comm.rank() / 6, 0);
        CHECK(half.size() == 6);
        CHECK(half.rank() == comm.rank() % 6);
        auto quarter = co_await half.split(half.rank() / 3);
        CHECK(quarter.size() == 3);
        auto gathered = co_await all_gather(quarter, comm.rank());
        const int first = comm.rank() - comm.rank() % 3;
        CHECK(gathered == std::vector<int>{first, first + 1, first + 2});
    });
}

TEST_CASE("undefined colour gives an empty communicator") {
    inproc::run(4, [](communicator comm) -> task<void> {
        auto part = co_await comm.split(comm.rank() == 0 ? undefined_color : 1);
        if (comm.rank() == 0) {
            CHECK_FALSE(part.valid());
            CHECK(part.size() == 0);
        } else {
            CHECK(part.size() == 3);
            co_await barrier(part);
        }
    });
}

TEST_CASE("a negative colour other than undefined_color is refused") {
    CHECK_THROWS_AS(
        inproc::run(2, [](communicator comm) -> task<void> { (void)co_await comm.split(-5); }),
        tutti::error);
}

TEST_CASE("two splits of one parent are independent, even with collectives in flight") {
    inproc::run(6, [](communicator comm) -> task<void> {
        auto a = co_await comm.split(comm.rank() % 2);
        auto b = co_await comm.split(comm.rank() % 2); // same members, new identity
        CHECK(a.id() != b.id());
        std::vector<int> va{1};
        auto executor = co_await asio::this_coro::executor;
        // Same generation number on both: only the communicator tells them
        // apart. The spawned call may outlive this rank's body: it owns its
        // buffer.
        spawn(
            executor,
            [b, vb = std::make_shared<std::vector<int>>(1, 10)]() -> task<void> {
                co_await all_reduce(b, *vb, sum, generation(1));
                CHECK((*vb)[0] == 30);
            },
            asio::detached);
        co_await all_reduce(a, va, sum, generation(1));
        CHECK(va[0] == 3);
    });
}

TEST_CASE("a communicator's serial is never another's, not even one made after it is gone") {
    std::vector<std::uint64_t> seen;
    for (int round = 0; round < 3; ++round)
        inproc::run(2, [&seen](communicator comm) -> task<void> {
            auto part = co_await comm.split(0);
            auto alone = co_await comm.split(comm.rank());
            auto leaving = co_await comm.split(undefined_color);
            CHECK(leaving.serial() == 0);
            if (comm.rank() == 0)
                for (const auto& c : {comm, part, alone, comm.with_hierarchy(nullptr)})
                    seen.push_back(c.serial());
        });
    REQUIRE(seen.size() == 12);
    std::sort(seen.begin(), seen.end());
    CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());
    CHECK(seen.front() != 0);
}
