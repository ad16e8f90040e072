// Locality exchange and the machine tree, posed in-process: every rank is
// given its locality on a synthetic machine, so one test machine poses as
// 2 nodes x 2 packages x 4 cores, 3 unequal nodes, round-robin placement and
// a four-level tree.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "compare.hpp"
#include "topology/machine_tree.hpp"
#include "topology/topology.hpp"
#include "tutti.hpp"

namespace topo = tutti::topology;
using topo::level;

namespace {

// A job's shape: every rank's locality, and a name for the test's output.
struct shape {
    std::string name;
    std::vector<topo::locality> all;
    topo::machine_levels levels = topo::default_levels();
};

// 2 nodes x 2 packages x 4 cores, one rank per core, node-consecutive.
shape two_nodes_two_packages() {
    const auto m = topo::synthetic("pack:2 core:4 pu:1");
    shape s{"2 nodes x 2 packages x 4 cores", {}};
    for (int node = 0; node < 2; ++node)
        for (int pu = 0; pu < 8; ++pu)
            s.all.push_back(topo::place(m, "node" + std::to_string(node), pu));
    return s;
}

// 3 nodes holding 5, 2 and 4 ranks, packages filled unevenly.
shape three_unequal_nodes() {
    const auto m = topo::synthetic("pack:2 numa:2 core:2 pu:1");
    shape s{"3 nodes of 5, 2 and 4 ranks", {}};
    for (int pu : {0, 1, 2, 4, 6})
        s.all.push_back(topo::place(m, "n0", pu));
    for (int pu : {0, 7})
        s.all.push_back(topo::place(m, "n1", pu));
    for (int pu : {3, 2, 1, 0})
        s.all.push_back(topo::place(m, "n2", pu));
    return s;
}

// Ranks dealt round-robin over 3 nodes: no node's ranks are consecutive.
shape round_robin() {
    const auto m = topo::synthetic("pack:2 core:2 pu:1");
    shape s{"12 ranks round-robin over 3 nodes", {}};
    for (int r = 0; r < 12; ++r)
        s.all.push_back(topo::place(m, "rr" + std::to_string(r % 3), (r / 3) % 4));
    return s;
}

// Every level, down to ranks that share a core (two PUs per core).
shape four_levels() {
    const auto m = topo::synthetic("pack:2 numa:2 core:2 pu:2");
    shape s{"node -> package -> NUMA -> core, two ranks on some cores", {}};
    s.levels = {level::node, level::package, level::numa, level::core};
    for (int pu : {0, 1, 2, 5, 8, 9, 10, 11, 12})
        s.all.push_back(topo::place(m, "x", pu));
    for (int pu : {1, 3, 4, 6, 7, 14, 15})
        s.all.push_back(topo::place(m, "y", pu));
    return s;
}

std::vector<shape> shapes() {
    return {two_nodes_two_packages(), three_unequal_nodes(), round_robin(), four_levels()};
}

template <class F>
tutti::errc error_of(F&& f) {
    try {
        f();
    } catch (const tutti::error& e) {
        return e.code();
    }
    FAIL("no tutti::error thrown");
    return tutti::errc::timeout;
}

} // namespace

TEST_CASE("colours: 2 nodes x 2 packages x 4 cores keep node and package") {
    const auto s = two_nodes_two_packages();
    for (int r = 0; r < 16; ++r) {
        CAPTURE(r);
        const auto c = topo::colours_of(s.all, r, s.levels);
        // One NUMA domain per machine: that level splits nothing.
        CHECK(c.levels == topo::machine_levels{level::node, level::package});
        CHECK(c.colour == std::vector<int>{r / 8, (r % 8) / 4});
    }
}

TEST_CASE("colours: nodes numbered by first appearance, NUMA kept where it splits") {
    const auto s = three_unequal_nodes();
    const auto c = topo::colours_of(s.all, 6, s.levels);
    CHECK(c.levels == topo::machine_levels{level::node, level::package, level::numa});
    // Rank 6: node n1, PU 7 = package 1, NUMA domain 3.
    CHECK(c.colour == std::vector<int>{1, 1, 3});
    const auto rr = round_robin();
    CHECK(topo::colours_of(rr.all, 4, rr.levels).colour == std::vector<int>{1, 0});
    CHECK(topo::colours_of(rr.all, 7, rr.levels).colour == std::vector<int>{1, 1});
}

TEST_CASE("colours: a single node with every rank on one PU is flat") {
    const auto m = topo::synthetic("pack:2 core:2 pu:1");
    const std::vector<topo::locality> all(5, topo::place(m, "only", 0));
    const auto c = topo::colours_of(all, 3, topo::default_levels());
    CHECK(c.levels.empty());
    CHECK(c.colour.empty());
}

TEST_CASE("colours: bad levels and ranks are errors") {
    const auto s = two_nodes_two_packages();
    CHECK(error_of([&] { topo::colours_of(s.all, 16, s.levels); }) ==
          tutti::errc::invalid_argument);
    CHECK(error_of([&] { topo::colours_of({}, 0, s.levels); }) == tutti::errc::invalid_argument);
    CHECK(error_of([&] {
              topo::colours_of(s.all, 0, {level::package, level::node});
          }) == tutti::errc::invalid_argument);
    CHECK(error_of([&] {
              topo::colours_of(s.all, 0, {level::node, level::node});
          }) == tutti::errc::invalid_argument);
}

TEST_CASE("exchange: every rank learns every rank's locality") {
    for (const auto& s : shapes()) {
        CAPTURE(s.name);
        const int n = static_cast<int>(s.all.size());
        tutti::inproc::run(n, [&](tutti::communicator comm) -> tutti::task<void> {
            const auto all =
                co_await topo::exchange(comm, s.all[static_cast<std::size_t>(comm.rank())]);
            CHECK(all == s.all);
        });
    }
}

namespace {

// The top level's groups: the ranks of each node, each ascending, in order of first rank.
std::vector<std::vector<int>> nodes_of(const std::vector<topo::locality>& all) {
    std::vector<std::vector<int>> groups;
    std::vector<std::string> names;
    for (std::size_t r = 0; r < all.size(); ++r) {
        auto at = std::find(names.begin(), names.end(), all[r].node);
        if (at == names.end()) {
            names.push_back(all[r].node);
            groups.emplace_back();
            at = names.end() - 1;
        }
        groups[static_cast<std::size_t>(at - names.begin())].push_back(static_cast<int>(r));
    }
    return groups;
}

} // namespace

TEST_CASE("machine trees: every hierarchical collective equals the flat one") {
    for (const auto& s : shapes()) {
        CAPTURE(s.name);
        const int n = static_cast<int>(s.all.size());
        tutti::inproc::run(n, [&](tutti::communicator comm) -> tutti::task<void> {
            auto tree = co_await topo::make_machine_hierarchy(comm, s.all, s.levels);
            const auto h = tree.hierarchy();
            REQUIRE(h != nullptr);
            CHECK_FALSE(h->flat());
            CHECK(h->groups() == nodes_of(s.all));
            const auto kept = topo::colours_of(s.all, comm.rank(), s.levels).levels;
            // A rank's depth counts the levels that split its groups; the
            // deepest rank goes through every level kept.
            std::vector<int> depth{h->depth()}, deepest(1);
            co_await tutti::all_reduce(comm, depth, deepest, tutti::max);
            CHECK(deepest[0] == static_cast<int>(kept.size()));
            CHECK(h->depth() >= 1);
            co_await topology_test::compare_with_flat(comm, tree);
        });
    }
}

TEST_CASE("machine trees: one node, one level below it, and a flat job") {
    const auto m = topo::synthetic("pack:2 numa:2 core:2 pu:1");
    SUBCASE("packages of one node") {
        std::vector<topo::locality> all;
        for (int pu : {0, 4, 1, 5, 2, 6, 3})
            all.push_back(topo::place(m, "solo", pu));
        tutti::inproc::run(7, [&](tutti::communicator comm) -> tutti::task<void> {
            auto tree =
                co_await topo::make_machine_hierarchy(comm, all, {level::node, level::package});
            REQUIRE(tree.hierarchy() != nullptr);
            CHECK(tree.hierarchy()->groups() ==
                  std::vector<std::vector<int>>{{0, 2, 4, 6}, {1, 3, 5}});
            co_await topology_test::compare_with_flat(comm, tree);
        });
    }
    SUBCASE("every rank on one PU of one node") {
        const std::vector<topo::locality> all(4, topo::place(m, "solo", 0));
        tutti::inproc::run(4, [&](tutti::communicator comm) -> tutti::task<void> {
            auto tree = co_await topo::make_machine_hierarchy(comm, all);
            REQUIRE(tree.hierarchy() != nullptr);
            CHECK(tree.hierarchy()->flat());
            co_await topology_test::compare_with_flat(comm, tree);
        });
    }
    SUBCASE("localities that do not match the communicator") {
        const std::vector<topo::locality> all(3, topo::place(m, "solo", 0));
        CHECK_THROWS_AS(tutti::inproc::run(4,
                                           [&](tutti::communicator comm) -> tutti::task<void> {
                                               co_await topo::make_machine_hierarchy(comm, all);
                                           }),
                        tutti::error);
    }
}

TEST_CASE("machine trees from discovery: exchange, then the tree") {
    // Every rank discovers the posed machine and is placed by the override.
    const char* old_synthetic = std::getenv("HWLOC_SYNTHETIC");
    const char* old_pu = std::getenv("TUTTI_TOPOLOGY_PU");
    const char* old_node = std::getenv("TUTTI_TOPOLOGY_NODE");
    REQUIRE(old_synthetic == nullptr);
    REQUIRE(old_pu == nullptr);
    REQUIRE(old_node == nullptr);
    ::setenv("HWLOC_SYNTHETIC", "pack:2 core:2 pu:1", 1);
    ::setenv("TUTTI_TOPOLOGY_PU", "0,0,2,3,1,2", 1);
    ::setenv("TUTTI_TOPOLOGY_NODE", "p,q,p,q,p,q", 1);
    tutti::inproc::run(6, [&](tutti::communicator comm) -> tutti::task<void> {
        const auto all = co_await topo::exchange(comm);
        REQUIRE(all.size() == 6);
        CHECK(all[3].node == "q");
        CHECK(all[3].package == 1);
        CHECK(all[3].how == topo::placement::posed);
        auto tree = co_await topo::make_machine_hierarchy(comm);
        REQUIRE(tree.hierarchy() != nullptr);
        CHECK(tree.hierarchy()->groups() == std::vector<std::vector<int>>{{0, 2, 4}, {1, 3, 5}});
        co_await topology_test::compare_with_flat(comm, tree);
    });
    ::unsetenv("HWLOC_SYNTHETIC");
    ::unsetenv("TUTTI_TOPOLOGY_PU");
    ::unsetenv("TUTTI_TOPOLOGY_NODE");
}
