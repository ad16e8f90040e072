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
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/job.hpp"
#include "support/harness.hpp"

namespace {

// How many of the job's ranks run under this kernel (an all_gather of
// every rank's boot id).
int ranks_with_this_boot_id(tutti::job& job) {
    constexpr std::size_t id_bytes = 64;
    std::array<char, id_bytes> mine{};
    std::ifstream("/proc/sys/kernel/random/boot_id").getline(mine.data(), id_bytes);
    std::vector<char> all(id_bytes * static_cast<std::size_t>(job.size()));
    const auto world = job.world();
    tutti::wait(world, tutti::all_gather(world, mine, all));
    int same = 0;
    for (std::size_t r = 0; r < all.size(); r += id_bytes)
        same += std::equal(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(r));
    return same;
}

// How many ranks each core runs where the whole job shares this machine: the
// job's size over the CPUs its ranks may run on between them (an all_gather
// of every rank's affinity), rounded up. Under `taskset -c 0` two ranks share
// one core though each sees a single CPU, as a rank bound to its own would.
int ranks_per_core_of_the_job(tutti::job& job) {
    cpu_set_t mine;
    CPU_ZERO(&mine);
    // 0 (nothing to compare with) where this rank cannot read its own.
    if (sched_getaffinity(0, sizeof mine, &mine) != 0) return 0;
    std::vector<unsigned char> bytes(sizeof mine);
    std::memcpy(bytes.data(), &mine, sizeof mine);
    std::vector<unsigned char> all(sizeof mine * static_cast<std::size_t>(job.size()));
    const auto world = job.world();
    tutti::wait(world, tutti::all_gather(world, bytes, all));
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    for (std::size_t at = 0; at < all.size(); at += sizeof mine) {
        cpu_set_t theirs;
        std::memcpy(&theirs, all.data() + at, sizeof theirs);
        CPU_OR(&cpus, &cpus, &theirs);
    }
    const int cores = CPU_COUNT(&cpus);
    return (job.size() + cores - 1) / cores;
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
    // boot id: the transport must count exactly them.
    const int on_this_machine = ranks_with_this_boot_id(job);
    if (const int sharing = job.world().transport().ranks_on_this_machine();
        sharing != on_this_machine) {
        std::fprintf(stderr, "rank %d: the %s transport counts %d ranks on this machine, not %d\n",
                     job.rank(), transport.c_str(), sharing, on_this_machine);
        return 1;
    }
    // Over shared memory alone, and over TCP where every rank is on this
    // machine, the transport's ranks to a core must be the job's own count
    // of them; TCP across machines and shm+tcp say 0 (unknown).
    const auto said = static_cast<int>(job.world().transport().capabilities().ranks_per_core);
    if (transport == "shm" || (transport == "tcp" && on_this_machine == job.size())) {
        if (const int expected = ranks_per_core_of_the_job(job); expected > 0 && said != expected) {
            std::fprintf(stderr, "rank %d: the %s transport runs %d ranks to a core, not %d\n",
                         job.rank(), transport.c_str(), said, expected);
            return 1;
        }
    } else if ((transport == "tcp" || transport == "shm+tcp") && said != 0) {
        std::fprintf(stderr,
                     "rank %d: the %s transport runs %d ranks to a core of machines it "
                     "cannot see\n",
                     job.rank(), transport.c_str(), said);
        return 1;
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
