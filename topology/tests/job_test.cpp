// The machine tree in a real job over shared memory: every rank discovers
// the machine (HWLOC_SYNTHETIC), is placed and given a node by the topology
// overrides (TUTTI_TOPOLOGY_PU, TUTTI_TOPOLOGY_NODE: one entry per rank), so
// one machine poses several nodes while the ranks still talk through shared
// memory. Started by tuttirun, one process per rank (topology/tests/meson.build):
//   HWLOC_SYNTHETIC="pack:2 core:2 pu:1" TUTTI_TOPOLOGY_NODE=a,b,a,b,a,b \
//   TUTTI_TOPOLOGY_PU=0,0,1,2,2,3 tuttirun -n 6 ./tutti-topology-job-tests
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "compare.hpp"
#include "topology/machine_tree.hpp"
#include "tutti.hpp"

namespace topo = tutti::topology;

namespace {

tutti::job* the_job = nullptr;

// The node groups TUTTI_TOPOLOGY_NODE poses, read here independently of the
// library: ranks of one name, in order of each name's first rank.
std::vector<std::vector<int>> posed_nodes() {
    const char* value = std::getenv("TUTTI_TOPOLOGY_NODE");
    REQUIRE(value != nullptr);
    std::vector<std::string> names;
    std::vector<std::vector<int>> groups;
    std::string text = value;
    int rank = 0;
    for (std::size_t start = 0; start <= text.size(); ++rank) {
        auto comma = text.find(',', start);
        if (comma == std::string::npos) comma = text.size();
        const std::string name = text.substr(start, comma - start);
        std::size_t g = 0;
        while (g < names.size() && names[g] != name)
            ++g;
        if (g == names.size()) {
            names.push_back(name);
            groups.emplace_back();
        }
        groups[g].push_back(rank);
        start = comma + 1;
    }
    return groups;
}

// Runs body on the job's world; a failing rank leaves at once, so the others
// see a lost peer instead of waiting for it (tuttirun reports its status).
void on_world(const std::function<tutti::task<void>(tutti::communicator)>& body) {
    try {
        tutti::wait(the_job->world(), body(the_job->world()));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", the_job->rank(), e.what());
        std::_Exit(3);
    }
}

} // namespace

TEST_CASE("a job posing several nodes over shared memory builds the machine tree") {
    const auto expected = posed_nodes();
    std::size_t posed_ranks = 0;
    for (const auto& g : expected)
        posed_ranks += g.size();
    REQUIRE(posed_ranks == static_cast<std::size_t>(the_job->size()));
    // The override poses nodes for the hierarchy only: the ranks still share
    // one machine and talk through shared memory.
    CHECK(std::getenv("TUTTI_NODE") == nullptr);
    on_world([&](tutti::communicator world) -> tutti::task<void> {
        const auto all = co_await topo::exchange(world);
        REQUIRE(all.size() == static_cast<std::size_t>(world.size()));
        for (const auto& where : all)
            CHECK(where.how == topo::placement::posed);
        if (world.rank() == 0) std::printf("%s\n", topo::describe(all).c_str());
        auto tree = co_await topo::make_machine_hierarchy(world, all);
        REQUIRE(tree.hierarchy() != nullptr);
        CHECK(tree.hierarchy()->groups() == expected);
        co_await topology_test::compare_with_flat(world, tree);
        // The same tree, discovering and exchanging by itself.
        auto again = co_await topo::make_machine_hierarchy(world);
        CHECK(again.hierarchy()->groups() == expected);
        std::vector<std::int64_t> mine{topology_test::encode(world.rank(), 9)}, sum(1), flat(1);
        co_await tutti::all_reduce(again, mine, sum, tutti::sum, tutti::use("hierarchical"));
        co_await tutti::all_reduce(world, mine, flat, tutti::sum);
        CHECK(sum == flat);
    });
}

int main(int argc, char** argv) {
    tutti::job job;
    the_job = &job;
    if (job.rank() == 0)
        std::printf("tutti-topology-job-tests: %d ranks over %s\n", job.size(),
                    std::string(job.world().transport().name()).c_str());
    doctest::Context context(argc, argv);
    if (job.rank() != 0) context.setOption("minimal", true);
    context.setOption("no-colors", true);
    const int failed = context.run();
    job.run([](tutti::communicator) -> tutti::task<void> { co_return; });
    the_job = nullptr;
    return failed;
}
