// barrier: every algorithm, every size: no rank leaves before every rank has
// arrived (in one process the ranks share a counter to see it).
#include "support/harness.hpp"

using namespace tutti;
using namespace tutti::testing;

TEST_CASE("barrier: nobody leaves before everybody arrived") {
    sweep<barrier_args>([](int, std::size_t) { return call_signature{}; },
                        [](const std::string& name, int p, std::size_t n) {
                            if (n != 1) return; // a barrier carries no data
                            const bool shared_counter = !job_world().valid();
                            int arrived = 0;
                            std::size_t early = 0;
                            run_ranks(p, [&](communicator comm) -> task<void> {
                                for (int round = 1; round <= 3; ++round) {
                                    ++arrived;
                                    co_await barrier(comm, use(name));
                                    if (shared_counter && arrived < round * p) ++early;
                                    co_await barrier(comm, use(name));
                                }
                            });
                            CHECK(early == 0);
                        });
}

TEST_CASE("barrier: a process's rank over shared memory or TCP is driven by one thread") {
    // Its communicators then claim generations without a lock; the
    // in-process world, whose ranks may be threads, keeps it.
    run_ranks(2, [](communicator comm) -> task<void> {
        const bool in_process = comm.transport().name() == "inproc";
        CHECK(comm.transport().capabilities().one_thread == !in_process);
        co_await barrier(comm);
    });
}
