// The multi-process driver: every rank of a job runs the same doctest cases
// as the in-process suite, on the job's world (see tests/support/harness.hpp).
// Started by tuttirun or mpirun, one process per rank:
//   ./build/tools/tuttirun/tuttirun -n 4 ./build/tests/multiprocess/tutti-job-tests
// TUTTI_EXPECT_TRANSPORT=shm+tcp (say) makes a job whose world went through
// another transport fail, so a test meant for TCP cannot pass over shared
// memory alone; TUTTI_EXPECT_NODE_HIERARCHY=1 (0) likewise one whose world
// has no hierarchy (has one): a world over nodes has the node hierarchy
// unless TUTTI_NODE_HIERARCHY=0.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/job.hpp"
#include "support/harness.hpp"

namespace {

// This machine's part of the job, counted by the test itself: the ranks
// whose kernel has this one's boot id, and the CPUs they may run on between
// them (one all_gather of every rank's boot id and affinity). Under `taskset
// -c 0` two ranks share one core though each sees a single CPU, as a rank
// bound to its own would. Cores 0 where this rank cannot read its affinity.
struct machine_part {
    int ranks = 0;
    int cores = 0;
};

machine_part this_machines_part(tutti::job& job) {
    constexpr std::size_t id_bytes = 64;
    constexpr std::size_t entry = id_bytes + sizeof(cpu_set_t);
    std::vector<char> mine(entry, 0);
    std::ifstream("/proc/sys/kernel/random/boot_id").getline(mine.data(), id_bytes);
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    const bool known = sched_getaffinity(0, sizeof cpus, &cpus) == 0;
    std::memcpy(mine.data() + id_bytes, &cpus, sizeof cpus);
    std::vector<char> all(entry * static_cast<std::size_t>(job.size()));
    const auto world = job.world();
    tutti::wait(world, tutti::all_gather(world, mine, all));
    machine_part part;
    CPU_ZERO(&cpus);
    for (std::size_t at = 0; at < all.size(); at += entry) {
        if (!std::equal(mine.begin(), mine.begin() + id_bytes,
                        all.begin() + static_cast<std::ptrdiff_t>(at)))
            continue;
        ++part.ranks;
        cpu_set_t theirs;
        std::memcpy(&theirs, all.data() + at + id_bytes, sizeof theirs);
        CPU_OR(&cpus, &cpus, &theirs);
    }
    part.cores = known ? CPU_COUNT(&cpus) : 0;
    return part;
}

// The shared-memory transport among this rank's node, or nullptr where it
// has none (every peer through TCP).
const tutti::shm::transport* shared_memory_of(const tutti::job& job) {
    try {
        return &job.shared_memory();
    } catch (const tutti::error&) {
        return nullptr;
    }
}

} // namespace

int main(int argc, char** argv) {
    tutti::job job;
    if (job.rank() == 0)
        std::printf("tutti-job-tests: %d ranks over %s, joined through %s\n", job.size(),
                    std::string(job.world().transport().name()).c_str(),
                    std::string(job.launch().method()).c_str());
    const std::string transport(job.world().transport().name());
    if (const char* expected = std::getenv("TUTTI_EXPECT_TRANSPORT");
        expected && transport != expected) {
        std::fprintf(stderr, "rank %d: the world's transport is %s, not %s as expected\n",
                     job.rank(), transport.c_str(), expected);
        return 1;
    }
    if (const char* expected = std::getenv("TUTTI_EXPECT_NODE_HIERARCHY");
        expected && *expected &&
        (std::string(expected) != "0") != (job.world().hierarchy() != nullptr)) {
        std::fprintf(stderr,
                     "rank %d: the world %s a node hierarchy, though "
                     "TUTTI_EXPECT_NODE_HIERARCHY=%s\n",
                     job.rank(), job.world().hierarchy() ? "carries" : "carries no", expected);
        return 1;
    }
    // The ranks that share this machine's cores, in network namespaces or
    // posed as several nodes or not, are those whose kernel has this one's
    // boot id: the transport must count exactly them, and so must the
    // shared memory among this node's ranks, and its ranks to a core must be
    // theirs over the CPUs they may run on between them.
    const auto part = this_machines_part(job);
    if (const int sharing = job.world().transport().ranks_on_this_machine();
        sharing != part.ranks) {
        std::fprintf(stderr, "rank %d: the %s transport counts %d ranks on this machine, not %d\n",
                     job.rank(), transport.c_str(), sharing, part.ranks);
        return 1;
    }
    if (const auto* shm = shared_memory_of(job); shm && part.cores > 0) {
        const int expected = (part.ranks + part.cores - 1) / part.cores;
        const auto said = static_cast<int>(shm->capabilities().ranks_per_core);
        if (shm->ranks_on_this_machine() != part.ranks || said != expected) {
            std::fprintf(stderr,
                         "rank %d: shared memory counts %d ranks on this machine at %d to a "
                         "core, not %d at %d\n",
                         job.rank(), shm->ranks_on_this_machine(), said, part.ranks, expected);
            return 1;
        }
    }
    tutti::testing::job_world() = job.world();
    doctest::Context context(argc, argv);
    // One full report for the job is enough; the other ranks print failures.
    if (job.rank() != 0) context.setOption("minimal", true);
    // Launchers may hand us a terminal; the summary is read by tools/test.sh.
    context.setOption("no-colors", true);
    const int failed = context.run();
    tutti::testing::job_world() = {};
    job.run([](tutti::communicator) -> tutti::task<void> { co_return; });
    return failed;
}
