// The blocking form: one thread per rank, tutti::wait instead of co_await.
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
