// The machine tree in a real job: every rank discovers its machine with
// hwloc, the ranks exchange where they are, and the levels node -> package
// -> NUMA domain become a hierarchy on which the collectives follow the
// machine. Rank 0 prints the machine, the job's shape and the tree; then
// every hierarchical collective is checked against the flat one.
//
//   ./build/tools/tuttirun/tuttirun -n 4 ./build/examples/hierarchy_demo
//
// One machine can pose as another: hwloc reads HWLOC_SYNTHETIC (or an XML
// file, HWLOC_XMLFILE), and TUTTI_TOPOLOGY_NODE / TUTTI_TOPOLOGY_PU place
// each rank (one entry per rank) without changing how the ranks talk:
//
//   HWLOC_SYNTHETIC="pack:2 core:2 pu:1" TUTTI_TOPOLOGY_NODE=a,b,a,b,a,b \
//   TUTTI_TOPOLOGY_PU=0,0,1,2,2,3 ./build/tools/tuttirun/tuttirun -n 6 \
//   ./build/examples/hierarchy_demo --levels node,package
//
// Exit status: 0 when every check passed, 1 when one failed or a collective
// threw, 2 for a bad command line or when not started as part of a job.
#include <coroutine>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

import tutti;

namespace topo = tutti::topology;

namespace {

// Rank 0 prints the groups of each level, walking down its own branch: below
// the top, the ranks are numbered inside the group above.
void print_tree(const tutti::communicator& tree) {
    auto h = tree.hierarchy();
    int depth = 0;
    while (h && !h->flat()) {
        fmt::print("level {}{}: {} groups {}\n", depth, depth == 0 ? "" : " (in rank 0's group)",
                   h->group_count(), h->groups());
        h = h->group().hierarchy();
        ++depth;
    }
    if (depth == 0) fmt::print("the tree is flat: every collective runs flat\n");
}

// Checks `what` and counts it when wrong; prints the verdict at rank 0.
int check(const tutti::communicator& world, bool good, const std::string& what) {
    if (!good) fmt::print(stderr, "rank {}: WRONG: {}\n", world.rank(), what);
    return good ? 0 : 1;
}

tutti::task<int> compare(tutti::communicator world, tutti::communicator tree) {
    const std::int64_t r = world.rank();
    const auto n = static_cast<std::size_t>(world.size());
    const auto hierarchical = tutti::use("hierarchical");
    int wrong = 0;

    std::vector<std::int64_t> mine{r + 1, 1000 * (r + 1)}, flat(2), tiered(2);
    co_await tutti::all_reduce(world, mine, flat, tutti::sum);
    co_await tutti::all_reduce(tree, mine, tiered, tutti::sum, hierarchical);
    wrong += check(world, tiered == flat, "all_reduce");

    std::vector<std::int64_t> gf(2 * n), gt(2 * n);
    co_await tutti::all_gather(world, mine, gf);
    co_await tutti::all_gather(tree, mine, gt, hierarchical);
    wrong += check(world, gt == gf, "all_gather");

    const int root = world.size() - 1;
    std::vector<std::int64_t> bf(2, -1), bt(2, -1);
    if (world.rank() == root) bf = bt = mine;
    co_await tutti::broadcast(world, bf, tutti::root(root));
    co_await tutti::broadcast(tree, bt, tutti::root(root), hierarchical);
    wrong += check(world, bt == bf, "broadcast");

    std::vector<std::int64_t> rf(2), rt(2);
    co_await tutti::reduce(world, mine, rf, tutti::max, tutti::root(root));
    co_await tutti::reduce(tree, mine, rt, tutti::max, tutti::root(root), hierarchical);
    wrong += check(world, world.rank() != root || rt == rf, "reduce");

    co_await tutti::barrier(tree, hierarchical);

    std::vector<std::int64_t> row(n), column(n), expected(n);
    for (std::size_t j = 0; j < n; ++j) {
        row[j] = 1000 * r + static_cast<std::int64_t>(j);
        expected[j] = 1000 * static_cast<std::int64_t>(j) + r;
    }
    co_await tutti::all_to_all(tree, row, column, hierarchical);
    wrong += check(world, column == expected, "hierarchical all_to_all (transpose)");

    std::vector<int> total{wrong}, sum(1);
    co_await tutti::all_reduce(world, total, sum, tutti::sum);
    co_return sum[0];
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"The machine tree of a job: discovery, locality exchange, hierarchical "
                 "collectives checked against the flat ones"};
    std::vector<std::string> level_names{"node", "package", "numa"};
    app.add_option("--levels", level_names, "levels of the tree, top down")
        ->delimiter(',')
        ->check(CLI::IsMember({"node", "package", "numa", "core"}));
    CLI11_PARSE(app, argc, argv);
    const std::map<std::string, topo::level> by_name{{"node", topo::level::node},
                                                     {"package", topo::level::package},
                                                     {"numa", topo::level::numa},
                                                     {"core", topo::level::core}};
    topo::machine_levels levels;
    for (const auto& name : level_names)
        levels.push_back(by_name.at(name));

    std::optional<tutti::job> job;
    try {
        job.emplace();
    } catch (const tutti::error& e) {
        fmt::print(stderr, "hierarchy_demo: {}\n", e.what());
        return 2;
    }
    int wrong = 0;
    try {
        job->run([&](tutti::communicator world) -> tutti::task<void> {
            const auto m = topo::discover();
            const auto all = co_await topo::exchange(world, topo::here(m, world.rank()));
            auto tree = co_await topo::make_machine_hierarchy(world, all, levels);
            if (world.rank() == 0) {
                fmt::print("{}\n{}\n", topo::describe(m), topo::describe(all));
                for (std::size_t i = 0; i < all.size(); ++i)
                    fmt::print("  rank {}: {}\n", i, topo::to_string(all[i]));
                print_tree(tree);
                std::fflush(stdout);
            }
            wrong = co_await compare(world, tree);
        });
    } catch (const std::exception& e) {
        fmt::print(stderr, "hierarchy_demo: rank {}: {}\n", job->rank(), e.what());
        return 1;
    }
    if (job->rank() == 0) {
        if (wrong == 0)
            fmt::print("every check passed\n");
        else
            fmt::print("{} checks failed\n", wrong);
    }
    return wrong == 0 ? 0 : 1;
}
