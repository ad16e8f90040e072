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

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
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
    if (const int sharing = job.world().transport().ranks_on_this_machine(),
        expected = ranks_with_this_boot_id(job);
        sharing != expected) {
        std::fprintf(stderr, "rank %d: the %s transport counts %d ranks on this machine, not %d\n",
                     job.rank(), transport.c_str(), sharing, expected);
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
