// Bad input: each mistake a caller can make gives a tutti::error whose code
// and message name the problem, on every rank, never a hang or a crash.
#include <string>

#include "support/harness.hpp"

using namespace tutti;

namespace {

// Runs body on p in-process ranks and returns the error it ends with.
tutti::error failure_of(int p, const std::function<task<void>(communicator)>& body) {
    try {
        inproc::run(p, body);
    } catch (const tutti::error& e) {
        return e;
    }
    FAIL("expected a tutti::error");
    return tutti::error(errc::invalid_argument, "unreachable");
}

bool mentions(const tutti::error& e, const std::string& text) {
    return std::string(e.what()).find(text) != std::string::npos;
}

} // namespace

TEST_CASE("all_to_all: a send count that is not a multiple of the size is refused") {
    auto e = failure_of(3, [](communicator comm) -> task<void> {
        std::vector<int> send(7), recv(7);
        co_await all_to_all(comm, send, recv);
    });
    CHECK(e.code() == errc::invalid_count);
    CHECK(mentions(e, "all_to_all"));
    CHECK(mentions(e, "7 elements"));
}

TEST_CASE("all_to_all: one value per rank is required") {
    auto e = failure_of(4, [](communicator comm) -> task<void> {
        std::vector<std::string> values(3, "x");
        co_await all_to_all(comm, values);
    });
    CHECK(e.code() == errc::invalid_count);
    CHECK(mentions(e, "3 values passed for 4 ranks"));
}

TEST_CASE("all_to_all: ranks disagreeing on the count get a size mismatch, not a hang") {
    auto e = failure_of(2, [](communicator comm) -> task<void> {
        std::vector<int> send(comm.rank() == 0 ? 4 : 6), recv(send.size());
        co_await all_to_all(comm, send, recv, use("pairwise"));
    });
    CHECK(e.code() == errc::message_size_mismatch);
    CHECK(mentions(e, "bytes"));
}

TEST_CASE("gather: a rank whose block differs from the others' gets a size mismatch, not a hang") {
    // Small blocks reach the root one after another through polled
    // receives, large ones through receives posted at once: both tell.
    for (const std::size_t ints : {std::size_t{3}, std::size_t{3000}}) {
        CAPTURE(ints);
        auto e = failure_of(3, [ints](communicator comm) -> task<void> {
            std::vector<int> send(comm.rank() == 2 ? ints + 1 : ints, comm.rank());
            std::vector<int> recv(comm.rank() == 0 ? 3 * ints : 0);
            co_await gather(comm, send, recv, use("linear"));
        });
        INFO(std::string(e.what()));
        CHECK(e.code() == errc::message_size_mismatch);
        CHECK(mentions(e, "rank 2 sent " + std::to_string(4 * (ints + 1)) + " bytes"));
    }
}

TEST_CASE("all_to_allv: a rank's count for itself must be the same both ways") {
    // Rank 0 sends itself 3 elements but makes room for 1: copied as given,
    // the piece would run past its receive buffer.
    auto e = failure_of(2, [](communicator comm) -> task<void> {
        const bool first = comm.rank() == 0;
        const std::vector<std::size_t> send_counts{first ? 3u : 1u, 1u};
        const std::vector<std::size_t> recv_counts{1u, 1u};
        std::vector<int> send(first ? 4 : 2), recv(2);
        co_await all_to_allv(comm, send, send_counts, recv, recv_counts);
    });
    CHECK(e.code() == errc::invalid_count);
    CHECK(mentions(e, "rank 0 sends itself 3 elements but expects 1"));
}

TEST_CASE("scatter: the root must send one block per rank") {
    auto e = failure_of(4, [](communicator comm) -> task<void> {
        std::vector<int> send(comm.rank() == 0 ? 10 : 0), recv(3);
        co_await scatter(comm, send, recv);
    });
    CHECK(e.code() == errc::invalid_count);
    CHECK(mentions(e, "scatter"));
    CHECK(mentions(e, "10 elements"));
}

TEST_CASE("scatter: the root must pass one value per rank") {
    auto e = failure_of(3, [](communicator comm) -> task<void> {
        std::vector<int> values(comm.rank() == 1 ? 2 : 0);
        (void)co_await scatter(comm, values, root(1));
    });
    CHECK(e.code() == errc::invalid_count);
}

TEST_CASE("generation 0 is refused") {
    auto e = failure_of(2, [](communicator comm) -> task<void> {
        std::vector<int> data(3, 1);
        co_await all_reduce(comm, data, sum, generation(0));
    });
    CHECK(e.code() == errc::invalid_generation);
    CHECK(mentions(e, "generation 0"));
}

TEST_CASE("a generation used twice on one communicator is refused") {
    auto e = failure_of(2, [](communicator comm) -> task<void> {
        std::vector<int> data(3, 1);
        co_await all_reduce(comm, data, sum, generation(5));
        co_await barrier(comm, generation(5));
    });
    CHECK(e.code() == errc::reused_generation);
    CHECK(mentions(e, "generation 5 was already used"));
}

TEST_CASE("an unknown algorithm name is refused, naming the known ones") {
    auto e = failure_of(2, [](communicator comm) -> task<void> {
        std::vector<int> data(3, 1);
        co_await all_reduce(comm, data, sum, use("quantum_teleport"));
    });
    CHECK(e.code() == errc::unknown_algorithm);
    CHECK(mentions(e, "quantum_teleport"));
    CHECK(mentions(e, "recursive_doubling"));
}

TEST_CASE("a named algorithm whose restriction fails is refused, naming the restriction") {
    SUBCASE("power of two") {
        auto e = failure_of(6, [](communicator comm) -> task<void> {
            std::vector<int> send(2, 1), recv(12);
            co_await all_gather(comm, send, recv, use("recursive_doubling"));
        });
        CHECK(e.code() == errc::restriction_violated);
        CHECK(mentions(e, "power_of_two"));
        CHECK(mentions(e, "communicator size 6 is not a power of two"));
    }
    SUBCASE("commutative operation") {
        auto e = failure_of(4, [](communicator comm) -> task<void> {
            std::vector<tutti::testing::matrix2> data(8, tutti::testing::matrix_of(1, 1));
            co_await all_reduce(comm, data, tutti::testing::matrix_product(), use("ring"));
        });
        CHECK(e.code() == errc::restriction_violated);
        CHECK(mentions(e, "commutative_op"));
    }
}

TEST_CASE("a root outside the communicator is refused") {
    for (int bad : {-1, 4, 100}) {
        CAPTURE(bad);
        auto e = failure_of(4, [bad](communicator comm) -> task<void> {
            std::vector<int> data(2);
            co_await broadcast(comm, data, root(bad));
        });
        CHECK(e.code() == errc::invalid_root);
        CHECK(mentions(e, "root " + std::to_string(bad) + " is out of range"));
    }
}

TEST_CASE("ranks calling different collectives for one generation are told so") {
    auto e = failure_of(3, [](communicator comm) -> task<void> {
        std::vector<int> data(4, comm.rank());
        if (comm.rank() == 0)
            co_await broadcast(comm, data);
        else
            co_await all_reduce(comm, data, sum);
    });
    CHECK(e.code() == errc::mismatched_collective);
    CHECK(mentions(e, "broadcast"));
    CHECK(mentions(e, "all_reduce"));
}

TEST_CASE("ranks waiting for a message nobody sends end in a deadlock report") {
    auto e = failure_of(3, [](communicator comm) -> task<void> {
        if (comm.rank() != 2) co_await barrier(comm);
    });
    CHECK(e.code() == errc::deadlock);
    CHECK(mentions(e, "barrier"));
    CHECK(mentions(e, "waits for"));
}

TEST_CASE("a collective on an empty communicator is refused") {
    auto e = failure_of(2, [](communicator comm) -> task<void> {
        auto none = co_await comm.split(undefined_color);
        co_await barrier(none);
    });
    CHECK(e.code() == errc::invalid_argument);
    CHECK(mentions(e, "empty communicator"));
}

TEST_CASE("a failing rank makes the others fail with peer_lost, and the cause is reported") {
    int lost = 0;
    CHECK_THROWS_WITH_AS(inproc::run(4,
                                     [&lost](communicator comm) -> task<void> {
                                         if (comm.rank() == 3)
                                             throw std::runtime_error("rank 3 gives up");
                                         try {
                                             co_await barrier(comm);
                                         } catch (const tutti::error& x) {
                                             if (x.code() == errc::peer_lost &&
                                                 mentions(x, "rank 3 failed"))
                                                 ++lost;
                                             throw;
                                         }
                                     }),
                         "rank 3 gives up", std::runtime_error);
    CHECK(lost == 3);
}

// A pipelined broadcast whose last rank holds a longer buffer than the rank
// before it: its receive of that rank's short last segment fails at once,
// while the receives it posted for later segments wait for messages nobody
// will send. The failure must come promptly (not as a deadlock report), and
// the receives posted ahead must be taken back, not left in the mailbox.
TEST_CASE("a failed pipelined broadcast takes back the receives it posted ahead") {
    const std::size_t segment = 128 * 1024;
    auto w = std::make_shared<inproc::world>(3);
    asio::io_context context;
    std::vector<std::exception_ptr> failures(3);
    int finished = 0;
    for (int r = 0; r < 3; ++r) {
        communicator comm(w->endpoint(r, context));
        // Ranks 0 and 1: 9 segments, the last of 64 KiB; rank 2: 16 whole ones.
        const std::size_t n = r == 2 ? 16 * segment : 8 * segment + segment / 2;
        spawn(
            context,
            [](communicator comm, std::size_t n) -> task<void> {
                std::vector<std::uint8_t> buffer(n, static_cast<std::uint8_t>(comm.rank()));
                co_await broadcast(comm, buffer, root{0}, use("pipeline"));
            }(comm, n),
            [&failures, &finished, r](std::exception_ptr e) {
                failures[static_cast<std::size_t>(r)] = e;
                ++finished;
            });
    }
    // Every event comes from this thread: a quiet spell means nothing more
    // will happen.
    while (finished < 3 && context.run_one_for(std::chrono::milliseconds(500)) > 0) {
    }
    REQUIRE(finished == 3);
    CHECK_FALSE(failures[0]);
    CHECK_FALSE(failures[1]);
    REQUIRE(failures[2]);
    try {
        std::rethrow_exception(failures[2]);
    } catch (const tutti::error& e) {
        CHECK(e.code() == errc::message_size_mismatch);
    }
    CHECK(w->pending().empty());
}
