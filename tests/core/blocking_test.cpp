// The blocking form: one thread per rank, tutti::wait instead of co_await.
#include <atomic>
#include <stdexcept>
#include <thread>

#include "support/harness.hpp"

using namespace tutti;

TEST_CASE("blocking collectives on one thread per rank") {
    for (int p : {1, 2, 4, 7}) {
        CAPTURE(p);
        inproc::run_threads(p, [p](communicator comm) {
            std::vector<std::int64_t> v(100, comm.rank());
            tutti::wait(comm, all_reduce(comm, v, sum));
            CHECK(v[99] == p * (p - 1) / 2);
            std::string text = comm.rank() == 0 ? "from the root" : "";
            tutti::wait(comm, broadcast(comm, text));
            CHECK(text == "from the root");
            auto part = tutti::wait(comm, comm.split(comm.rank() % 2));
            auto ranks = tutti::wait(part, all_gather(part, comm.rank()));
            CHECK(ranks.size() == static_cast<std::size_t>(part.size()));
            tutti::wait(comm, barrier(comm));
        });
    }
}

TEST_CASE("a blocking call's error reaches the caller") {
    CHECK_THROWS_AS(inproc::run_threads(2,
                                        [](communicator comm) {
                                            std::vector<int> v(1);
                                            tutti::wait(comm,
                                                        all_reduce(comm, v, sum, generation(0)));
                                        }),
                    tutti::error);
}

// tutti::wait runs the context, and Asio hands an exception thrown by
// another handler there to whoever runs it. The collective still writes into
// the caller's buffers then: it must end before the exception reaches the
// caller. Rank 1 joins only once rank 0's other handler has thrown, so the
// exception comes while rank 0's all_reduce is surely still waiting.
TEST_CASE("a blocking call ends its collective before passing on another handler's exception") {
    std::atomic<bool> thrown{false};
    // Set however rank 0's call ends, so that a failure before the handler
    // ran (a selection error, say) fails the test instead of hanging rank 1.
    std::atomic<bool> rank0_done{false};
    std::atomic<int> rank0_sum{-1};
    inproc::run_threads(2, [&](communicator comm) {
        std::vector<int> v(3, comm.rank() + 1);
        if (comm.rank() == 0) {
            asio::post(comm.context(), [&thrown] {
                thrown = true;
                throw std::runtime_error("other work failed");
            });
            CHECK_THROWS_WITH_AS(tutti::wait(comm, all_reduce(comm, v, sum)), "other work failed",
                                 std::runtime_error);
            rank0_sum = v[2];
            rank0_done = true;
        } else {
            while (!thrown && !rank0_done)
                std::this_thread::yield();
            tutti::wait(comm, all_reduce(comm, v, sum));
            CHECK(v == std::vector<int>(3, 3));
        }
    });
    CHECK(rank0_sum == 3);
}

TEST_CASE("a blocking call object made from a temporary communicator keeps its own copy") {
    inproc::run_threads(3, [](communicator comm) {
        std::vector<int> data(4, comm.rank() == 2 ? 42 : 0);
        tutti::wait(comm, broadcast(communicator(comm), data, root(2)));
        CHECK(data == std::vector<int>(4, 42));
        const auto all = tutti::wait(comm, all_gather(communicator(comm), comm.rank() * 10));
        CHECK(all == std::vector<int>{0, 10, 20});
    });
}
