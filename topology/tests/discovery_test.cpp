// hwloc discovery and localities on machines posed by hwloc synthetic
// descriptions and a committed XML file, never on the test machine's shape;
// the one test of this machine binds a thread itself and checks hwloc sees it.
#include <doctest/doctest.h>

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "core/payload.hpp"
#include "topology/topology.hpp"

namespace topo = tutti::topology;

namespace {

// Sets (or, with nullopt, unsets) a variable for one scope, then restores it.
class scoped_env {
public:
    scoped_env(const char* name, std::optional<std::string> value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        if (value)
            ::setenv(name, value->c_str(), 1);
        else
            ::unsetenv(name);
    }
    ~scoped_env() {
        if (old_)
            ::setenv(name_, old_->c_str(), 1);
        else
            ::unsetenv(name_);
    }
    scoped_env(const scoped_env&) = delete;
    scoped_env& operator=(const scoped_env&) = delete;

private:
    const char* name_;
    std::optional<std::string> old_;
};

// Every variable that could place us elsewhere, cleared for one test.
struct clean_env {
    scoped_env synthetic{"HWLOC_SYNTHETIC", std::nullopt};
    scoped_env xml{"HWLOC_XMLFILE", std::nullopt};
    scoped_env this_system{"HWLOC_THISSYSTEM", std::nullopt};
    scoped_env node{"TUTTI_NODE", std::nullopt};
    scoped_env topology_node{"TUTTI_TOPOLOGY_NODE", std::nullopt};
    scoped_env topology_pu{"TUTTI_TOPOLOGY_PU", std::nullopt};
};

const std::string xml_file = std::string(TOPOLOGY_TEST_DATA) + "/pack2-numa2-core2-pu2.xml";

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

TEST_CASE("HWLOC_SYNTHETIC poses 2 packages x 2 NUMA domains x 4 cores") {
    clean_env clean;
    scoped_env posed("HWLOC_SYNTHETIC", "pack:2 numa:2 core:4 pu:1");
    const auto m = topo::discover();
    CHECK(m.source() == "synthetic: pack:2 numa:2 core:4 pu:1");
    CHECK_FALSE(m.this_system());
    CHECK(m.packages() == 2);
    CHECK(m.numa_domains() == 4);
    CHECK(m.cores() == 16);
    CHECK(m.pus() == 16);
    for (int pu = 0; pu < 16; ++pu) {
        CAPTURE(pu);
        CHECK(m.pu(pu).os_index == pu);
        CHECK(m.pu(pu).core == pu);
        CHECK(m.pu(pu).numa == pu / 4);
        CHECK(m.pu(pu).package == pu / 8);
    }
}

TEST_CASE("a synthetic machine with SMT and caches, and its summary") {
    clean_env clean;
    const auto m = topo::synthetic(
        "pack:2 l3:1(size=33554432) core:3 l2:1(size=1048576) l1d:1(size=49152) pu:2");
    CHECK(m.packages() == 2);
    CHECK(m.numa_domains() == 1);
    CHECK(m.cores() == 6);
    CHECK(m.pus() == 12);
    CHECK(m.pu(7).core == 3);
    CHECK(m.pu(7).package == 1);
    CHECK(m.pu(7).numa == 0);
    REQUIRE(m.caches().size() == 3);
    CHECK(m.caches()[0].depth == 1);
    CHECK(m.caches()[0].kind == "data");
    CHECK(m.caches()[0].bytes == 49152);
    CHECK(m.caches()[0].count == 6);
    CHECK(m.caches()[1].depth == 2);
    CHECK(m.caches()[1].kind == "unified");
    CHECK(m.caches()[1].bytes == 1048576);
    CHECK(m.caches()[2].depth == 3);
    CHECK(m.caches()[2].bytes == 33554432);
    CHECK(m.caches()[2].count == 2);
    const auto text = topo::describe(m);
    CHECK(text.find("2 packages, 1 NUMA domain") != std::string::npos);
    CHECK(text.find("6 cores, 12 PUs") != std::string::npos);
    CHECK(text.find("L1d 48 KiB x6, L2 1 MiB x6, L3 32 MiB x2") != std::string::npos);
}

TEST_CASE("an XML file written by lstopo, directly and through HWLOC_XMLFILE") {
    clean_env clean;
    auto check = [](const topo::machine& m) {
        CHECK(m.source() == "xml: " + xml_file);
        CHECK(m.packages() == 2);
        CHECK(m.numa_domains() == 4);
        CHECK(m.cores() == 8);
        CHECK(m.pus() == 16);
        for (int pu = 0; pu < 16; ++pu) {
            CAPTURE(pu);
            CHECK(m.pu(pu).core == pu / 2);
            CHECK(m.pu(pu).numa == pu / 4);
            CHECK(m.pu(pu).package == pu / 8);
        }
        CHECK(m.memory_bytes() == 4ull << 30);
    };
    check(topo::from_xml(xml_file));
    scoped_env posed("HWLOC_XMLFILE", xml_file);
    // An XML file wins over a synthetic description, as in hwloc.
    scoped_env also("HWLOC_SYNTHETIC", "pack:3 pu:1");
    check(topo::discover());
}

TEST_CASE("descriptions hwloc cannot read are errors, not this machine in disguise") {
    clean_env clean;
    CHECK(error_of([] { topo::synthetic("three packages please"); }) ==
          tutti::errc::invalid_argument);
    CHECK(error_of([] { topo::synthetic(""); }) == tutti::errc::invalid_argument);
    CHECK(error_of([] { topo::from_xml("/nonexistent/machine.xml"); }) ==
          tutti::errc::invalid_argument);
    {
        scoped_env bad("HWLOC_SYNTHETIC", "garbage");
        CHECK(error_of([] { topo::discover(); }) == tutti::errc::invalid_argument);
    }
    {
        scoped_env bad("HWLOC_XMLFILE", "/nonexistent/machine.xml");
        CHECK(error_of([] { topo::discover(); }) == tutti::errc::invalid_argument);
    }
    const auto m = topo::synthetic("pack:2 core:2 pu:1");
    CHECK(error_of([&] { (void)m.pu(-1); }) == tutti::errc::invalid_argument);
    CHECK(error_of([&] { (void)m.pu(4); }) == tutti::errc::invalid_argument);
    CHECK(error_of([&] { topo::place(m, "n", 4); }) == tutti::errc::invalid_argument);
}

TEST_CASE("here() on a described machine: unbound on PU 0, then the overrides") {
    clean_env clean;
    scoped_env node("TUTTI_NODE", "node7");
    const auto m = topo::synthetic("pack:2 numa:2 core:4 pu:1");
    auto found = topo::here(m, 3);
    CHECK(found.node == "node7");
    CHECK(found.how == topo::placement::unbound);
    CHECK(found.pu == 0);
    CHECK(found.binding.empty());
    CHECK(topo::node_name() == "node7");

    SUBCASE("one PU for every rank") {
        scoped_env pu("TUTTI_TOPOLOGY_PU", "13");
        found = topo::here(m, 3);
        CHECK(found == topo::locality{.node = "node7",
                                      .package = 1,
                                      .numa = 3,
                                      .core = 13,
                                      .pu = 13,
                                      .how = topo::placement::posed,
                                      .binding = {}});
    }
    SUBCASE("a PU and a node per rank") {
        scoped_env pu("TUTTI_TOPOLOGY_PU", "0,5,13");
        scoped_env nodes("TUTTI_TOPOLOGY_NODE", "a,b,a");
        CHECK(topo::here(m, 1).pu == 5);
        CHECK(topo::here(m, 1).numa == 1);
        CHECK(topo::here(m, 1).node == "b");
        CHECK(topo::here(m, 2).pu == 13);
        CHECK(topo::here(m, 2).node == "a");
        CHECK(error_of([&] { topo::here(m, 3); }) == tutti::errc::invalid_argument);
        CHECK(error_of([&] { topo::here(m, -1); }) == tutti::errc::invalid_argument);
    }
    SUBCASE("the node for the hierarchy alone") {
        scoped_env nodes("TUTTI_TOPOLOGY_NODE", "posed");
        CHECK(topo::here(m, 0).node == "posed");
        CHECK(topo::node_name() == "node7");
    }
    SUBCASE("malformed PUs") {
        for (const char* bad : {"16", "-1", "x", "3x", "1,,2"}) {
            CAPTURE(bad);
            scoped_env pu("TUTTI_TOPOLOGY_PU", bad);
            CHECK(error_of([&] { topo::here(m, 1); }) == tutti::errc::invalid_argument);
        }
    }
}

TEST_CASE("here() on this machine sees a binding made with sched_setaffinity") {
    clean_env clean;
    const auto m = topo::discover();
    CHECK(m.source() == "this system");
    CHECK(m.this_system());
    REQUIRE(m.pus() >= 1);
    const int last = m.pus() - 1;
    const int os_index = m.pu(last).os_index;
    topo::locality seen;
    int bind_status = 0;
    // A thread of its own, so the test's thread keeps its affinity.
    std::thread([&] {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(os_index, &set);
        bind_status = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
        seen = topo::here(m);
    }).join();
    REQUIRE(bind_status == 0);
    CHECK(seen.pu == last);
    CHECK(seen.core == m.pu(last).core);
    CHECK(seen.package == m.pu(last).package);
    if (m.pus() > 1) {
        CHECK(seen.how == topo::placement::bound);
        CHECK(seen.binding == std::to_string(os_index));
    } else {
        CHECK(seen.how == topo::placement::unbound);
    }
}

TEST_CASE("a locality travels through serialization unchanged") {
    const topo::locality where{.node = "node-with-a-long-name",
                               .package = 1,
                               .numa = 3,
                               .core = 14,
                               .pu = 29,
                               .how = topo::placement::bound,
                               .binding = "28-29"};
    topo::locality back;
    tutti::deserialize(tutti::serialize(where), back);
    CHECK(back == where);
    CHECK(topo::to_string(where) == "node-with-a-long-name package 1 numa 3 core 14 pu 29 "
                                    "(bound to 28-29)");
}

TEST_CASE("the summary of a job's shape") {
    const auto m = topo::synthetic("pack:2 core:2 pu:1");
    const std::vector<topo::locality> all{topo::place(m, "b", 0), topo::place(m, "a", 0),
                                          topo::place(m, "b", 3), topo::place(m, "b", 1)};
    CHECK(topo::describe(all) == "4 ranks on 2 nodes\n"
                                 "  b: ranks 0,2,3; per package 0:2 1:1; per NUMA domain 0:3; 3 "
                                 "cores in use\n"
                                 "  a: ranks 1; per package 0:1; per NUMA domain 0:1; 1 core "
                                 "in use");
}

TEST_CASE("last_level_cache_bytes is this system's largest data cache") {
    clean_env clean;
    const auto here = topo::discover();
    std::uint64_t largest = 0;
    for (const auto& c : here.caches())
        if (c.kind != "instruction") largest = std::max(largest, c.bytes);
    CHECK(topo::last_level_cache_bytes() == largest);
}
