// tutti-info --explain: the path through both trees, the choice, and every
// rejected candidate with its failed restriction, as text and as JSON; and
// the catalog listing. The binary itself is run once when the test knows
// where it is (TUTTI_INFO, set by meson).
#include <algorithm>
#include <array>
#include <cstdio>
#include <string>

#include "info.hpp"
#include "select_support.hpp"

using namespace tutti;
using tutti::testing::contains;
using tutti::testing::scoped_env;

namespace {

selection_explanation explain_call(const info::call_description& d) {
    return explain(info::signature_of(d), {.forced = d.algorithm, .sub_call = d.sub_call});
}

std::string run_command(const std::string& command) {
    std::string out;
    if (FILE* pipe = ::popen(command.c_str(), "r")) {
        std::array<char, 4096> buffer;
        for (std::size_t got; (got = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0;)
            out.append(buffer.data(), got);
        ::pclose(pipe);
    }
    return out;
}

// The algorithm chosen for a call over `nodes` nodes of `ranks_per_node`
// ranks each, shared memory within a node and TCP between; a string, so
// that a failed comparison prints both names. Calls that carry no size
// (the all_to_allv) keep the description's default.
std::string chosen_between_nodes(const char* collective, int nodes, int ranks_per_node,
                                 std::uint64_t bytes = info::call_description{}.bytes) {
    return explain_call({.collective = collective,
                         .ranks = nodes * ranks_per_node,
                         .bytes = bytes,
                         .ranks_per_node = ranks_per_node,
                         .nodes = nodes,
                         .transport = "shm+tcp",
                         .hierarchy = true})
        .chosen;
}

} // namespace

TEST_CASE("explain: all_reduce of 1 MiB on 6 ranks takes the ring, rejects the hierarchy") {
    scoped_env clean{{"TUTTI_ALL_REDUCE_ALGORITHM", std::nullopt},
                     {"TUTTI_ALL_REDUCE_COMPOSITION", std::nullopt}};
    const auto text =
        explain_call({.collective = "all_reduce", .ranks = 6, .bytes = 1 << 20}).text();
    CHECK(contains(text, "all_reduce on 6 ranks, 1048576 bytes, commutative op, transport shm"));
    CHECK(contains(text, "at /all_reduce: hierarchy_available fails -> hierarchy_available=no"));
    CHECK(contains(text, "at /all_reduce/hierarchy_available=no: leaf flat"));
    CHECK(contains(text, "at /all_reduce/commutative_op=yes/count_at_least_size=yes: power_of_two "
                         "fails -> power_of_two=no"));
    CHECK(contains(text, "bytes = 1048576 -> bytes=any"));
    CHECK(contains(text, "chosen: ring (pure)"));
    CHECK(contains(text, "rejected: hierarchical (hierarchical composition): restriction "
                         "hierarchy_available fails"));
}

TEST_CASE("explain: a non-commutative reduction rejects ring and rabenseifner") {
    const auto why = explain_call(
        {.collective = "all_reduce", .ranks = 8, .bytes = 1 << 20, .op = "noncommutative"});
    CHECK(why.chosen == "scatter_gather");
    int rejected = 0;
    for (const auto& c : why.candidates)
        if (c.name == "ring" || c.name == "rabenseifner") {
            REQUIRE(c.failure);
            CHECK(contains(*c.failure, "restriction commutative_op fails"));
            ++rejected;
        }
    CHECK(rejected == 2);
}

TEST_CASE("explain: with a hierarchy the composition tree chooses the hierarchical one") {
    const auto why = explain_call({.collective = "all_to_all",
                                   .ranks = 64,
                                   .bytes = 4096,
                                   .ranks_per_node = 8,
                                   .nodes = 8,
                                   .transport = "shm+tcp",
                                   .hierarchy = true});
    CHECK(why.chosen == "hierarchical");
    CHECK(why.pure_path.empty());
    const auto json = info::to_json(why);
    CHECK(json["chosen"] == "hierarchical");
    CHECK(json["kind"] == "hierarchical composition");
    CHECK(json["call"]["ranks_per_node"] == 8);
    CHECK(json["call"]["nodes"] == 8);
    CHECK(json["composition_tree"]["path"][0]["branch"] == "hierarchy_available=yes");
}

TEST_CASE("explain: the TCP section of the pure tree") {
    const auto why =
        explain_call({.collective = "broadcast", .ranks = 8, .bytes = 32768, .transport = "tcp"});
    CHECK(why.chosen == "binomial");
    REQUIRE(!why.pure_path.empty());
    CHECK(why.pure_path[0].pointer == "/transport=tcp/broadcast");
    CHECK(why.pure_path[0].reason == "comm_size = 8 <= 8");
    REQUIRE(why.pure_path.size() >= 2);
    CHECK(why.pure_path[1].pointer == "/transport=tcp/broadcast/comm_size<=8");
}

TEST_CASE("explain: the shm+tcp section of the pure tree") {
    info::call_description d{
        .collective = "all_reduce", .ranks = 4, .bytes = 1 << 20, .transport = "shm+tcp"};
    auto why = explain_call(d);
    CHECK(why.chosen == "rabenseifner_nearest_first");
    REQUIRE(!why.pure_path.empty());
    CHECK(why.pure_path[0].pointer == "/transport=shm+tcp/all_reduce");
    // Over several nodes the largest all_reduce exchanges stay within a node,
    // the broadcast's binomial tree crosses between nodes first and once, and
    // the recursive-doubling all_gather, farthest first, leaves its largest
    // exchange within a node and avoids the ring's many crossings;
    // small calls and the other transports choose as before.
    struct expectation {
        const char* collective;
        std::size_t bytes;
        const char* transport;
        const char* chosen;
    };
    for (const auto& e : std::vector<expectation>{
             {"all_reduce", 8, "shm+tcp", "recursive_doubling"},
             {"all_reduce", 1 << 20, "shm", "rabenseifner"},
             {"all_reduce", 1 << 20, "tcp", "rabenseifner"},
             {"broadcast", 1 << 20, "shm+tcp", "binomial"},
             {"broadcast", 64 << 10, "shm+tcp", "linear"},
             {"all_gather", 1 << 20, "shm+tcp", "recursive_doubling_farthest_first"},
             {"all_gather", 1 << 20, "shm", "recursive_doubling"},
         }) {
        CAPTURE(e.collective);
        CAPTURE(e.bytes);
        CAPTURE(e.transport);
        // Each rank on a core of its own: where ranks share cores the
        // all_gather goes in one round (direct).
        CHECK(explain_call({.collective = e.collective,
                            .ranks = 4,
                            .bytes = e.bytes,
                            .line_ns = 110,
                            .transport = e.transport})
                  .chosen == e.chosen);
    }
}

TEST_CASE("explain: the shm+tcp section of the composition tree, nodes of 2 ranks") {
    // As measured on 2 nodes of 2 ranks: the hierarchy for the barrier, the
    // broadcast and small all_reduce and all_to_all calls; from 3 ranks per
    // node every composition but the all_to_all above 64 KiB, as the general
    // section.
    struct expectation {
        const char* collective;
        std::size_t bytes;
        int ranks_per_node;
        std::string chosen;
    };
    for (const auto& e : std::vector<expectation>{
             {"barrier", 0, 2, "hierarchical"},
             {"broadcast", 1 << 20, 2, "hierarchical"},
             {"all_reduce", 8, 2, "hierarchical"},
             {"all_reduce", 1 << 20, 2, "rabenseifner_nearest_first"},
             {"all_to_all", 4 * 64, 2, "hierarchical"},
             {"all_to_all", 1 << 20, 2, "linear"},
             {"all_gather", 1 << 20, 2, "recursive_doubling_farthest_first"},
             {"gather", 64, 2, "linear"},
             {"all_gather", 1 << 20, 4, "hierarchical"},
             {"all_reduce", 1 << 20, 4, "hierarchical"},
             // 2 nodes of 3 ranks (twenty-seventh session): all_to_all
             // flat above 64 KiB.
             {"all_to_all", 64 << 10, 3, "hierarchical"},
             {"all_to_all", 128 << 10, 3, "linear"},
         }) {
        CAPTURE(e.collective);
        CAPTURE(e.bytes);
        CAPTURE(e.ranks_per_node);
        CHECK(chosen_between_nodes(e.collective, 2, e.ranks_per_node, e.bytes) == e.chosen);
    }
}

TEST_CASE("explain: between nodes the all_to_all goes by Bruck from 4 nodes for blocks up to "
          "8 KiB, every block at once for longer ones and beyond 8 ranks") {
    // Shared memory within a node, TCP between (eighty-first session): from
    // 4 nodes Bruck's log2(p) packed messages for blocks up to 8 KiB where
    // the call runs flat (above the hierarchy's 16 KiB at 2 ranks per node,
    // 64 KiB beyond; from 8 nodes of 2 ranks at every size), and every
    // block posted at once (linear) for longer blocks, where beyond 8 ranks
    // pairwise ran. At 2 and 3 nodes the general tree up to 8 ranks, and
    // beyond them linear where the general tree runs pairwise (eighty-second
    // session: 0.51-0.86 of pairwise's time per call at 10-16 ranks on 2 and
    // 3 nodes, 128 KiB-4 MiB).
    struct expectation {
        int nodes;
        int ranks_per_node;
        std::size_t bytes;
        std::string chosen; // a string, so that a failure prints both names
    };
    for (const auto& e : std::vector<expectation>{
             {4, 2, 16 << 10, "hierarchical"},
             {4, 2, 32 << 10, "bruck"},
             {4, 2, 64 << 10, "bruck"},
             {4, 2, 128 << 10, "linear"},
             {8, 2, 256, "bruck"},
             {8, 2, 16 << 10, "bruck"},
             {8, 2, 128 << 10, "bruck"},
             {8, 2, 256 << 10, "linear"},
             {8, 2, 1 << 20, "linear"},
             {4, 4, 64 << 10, "hierarchical"},
             {4, 4, 128 << 10, "bruck"},
             {4, 4, 256 << 10, "linear"},
             {3, 2, 32 << 10, "linear"},
             {3, 2, 64 << 10, "linear"},
             {3, 4, 256 << 10, "linear"},
             {3, 4, 1 << 20, "linear"},
             {2, 4, 128 << 10, "linear"},
             {2, 5, 128 << 10, "linear"},
             {2, 6, 256 << 10, "linear"},
             {2, 8, 64 << 10, "hierarchical"},
             {2, 8, 128 << 10, "linear"},
             {2, 8, 4 << 20, "linear"},
         }) {
        CAPTURE(e.nodes);
        CAPTURE(e.ranks_per_node);
        CAPTURE(e.bytes);
        CHECK(chosen_between_nodes("all_to_all", e.nodes, e.ranks_per_node, e.bytes) == e.chosen);
    }
    // The all_to_allv (no size): every piece at once beyond 8 ranks at any
    // number of nodes (12 ranks on 3 nodes of 4: 0.66-0.94 of pairwise's
    // time; 10-16 ranks on 2 nodes: 0.43-0.80), as the general tree from 3
    // to 8 ranks; 2 ranks pairwise.
    const auto all_to_allv_on = [](int nodes, int ranks_per_node) {
        return chosen_between_nodes("all_to_allv", nodes, ranks_per_node);
    };
    CHECK(all_to_allv_on(8, 2) == "linear");
    CHECK(all_to_allv_on(6, 2) == "linear");
    CHECK(all_to_allv_on(4, 4) == "linear");
    CHECK(all_to_allv_on(3, 4) == "linear");
    CHECK(all_to_allv_on(3, 2) == "linear");
    CHECK(all_to_allv_on(2, 6) == "linear");
    CHECK(all_to_allv_on(2, 8) == "linear");
    CHECK(all_to_allv_on(2, 1) == "pairwise");
    CHECK(all_to_allv_on(2, 4) == "linear");
}

TEST_CASE("explain: a 2-rank reduce of 2 MiB goes in segments where lines travel far and the "
          "kernel copies slowly") {
    info::call_description d{.collective = "reduce", .ranks = 2, .bytes = 2 << 20};
    d.line_ns = 450;
    d.readv_percent = 300;
    auto why = explain_call(d);
    CHECK(why.chosen == "segmented_binomial");
    CHECK(contains(why.text(), "a line takes 450 ns there and back between cores"));
    CHECK(contains(why.text(), "process_vm_readv takes 300 % of the cells' time"));
    REQUIRE(why.pure_path.size() >= 3);
    CHECK(why.pure_path.back().branch == "segmented_binomial");
    CHECK(contains(why.text(), "single copy judged slow"));
    CHECK(why.pure_path[why.pure_path.size() - 2].reason == "line_ns = 450");
    // A discrete condition, tested above the thresholds (the plan's order).
    CHECK(std::ranges::any_of(
        why.pure_path, [](const auto& step) { return step.reason == "slow_single_copy holds"; }));
    // A shm call's copy is judged slow above the shm transport's rule, as a
    // job judges it; --slow-single-copy says so for any transport.
    d.readv_percent = shm::options{}.cells_readv_percent;
    CHECK(explain_call(d).chosen == "rabenseifner");
    d.readv_percent += 1;
    CHECK(explain_call(d).chosen == "segmented_binomial");
    d.readv_percent = 114;
    CHECK(explain_call(d).chosen == "rabenseifner");
    d.slow_single_copy = true;
    CHECK(explain_call(d).chosen == "segmented_binomial");
    d.slow_single_copy = false;
    d.readv_percent = 300;
    d.line_ns = 110;
    CHECK(explain_call(d).chosen == "rabenseifner");
    d.line_ns = 0; // unknown: as near
    why = explain_call(d);
    CHECK(why.chosen == "rabenseifner");
    CHECK_FALSE(contains(why.text(), "a line takes"));
}

TEST_CASE("explain: 16 ranks with 8 to a core gather through rank 0, and the text says so") {
    info::call_description d{.collective = "all_gather", .ranks = 16, .bytes = 64 << 10};
    d.ranks_per_core = 8;
    auto why = explain_call(d);
    CHECK(why.chosen == "linear");
    CHECK(contains(why.text(), "8 ranks to a core"));
    CHECK(std::ranges::any_of(
        why.pure_path, [](const auto& step) { return step.reason == "ranks_per_core = 8"; }));
    d.ranks_per_core = 1;
    why = explain_call(d);
    CHECK(why.chosen == "ring");
    CHECK(contains(why.text(), "a core for each rank"));
    d.ranks_per_core = 0; // unknown: the general choice, and nothing said
    why = explain_call(d);
    CHECK(why.chosen == "ring");
    CHECK_FALSE(contains(why.text(), "to a core"));
    CHECK_FALSE(contains(why.text(), "a core for each"));
}

TEST_CASE("explain: a named algorithm and a forced one that fails") {
    auto why =
        explain_call({.collective = "all_gather", .ranks = 8, .bytes = 64, .algorithm = "ring"});
    CHECK(why.chosen == "ring");
    CHECK(why.notes.at(0) == "'ring' named in code");
    scoped_env env{{"TUTTI_ALL_GATHER_ALGORITHM", "recursive_doubling"},
                   {"TUTTI_COLL_FALLBACK", "silent"}};
    why = explain_call({.collective = "all_gather", .ranks = 10, .bytes = 64});
    CHECK(why.chosen == "bruck");
    CHECK(contains(why.notes.at(0), "TUTTI_ALL_GATHER_ALGORITHM=recursive_doubling cannot run"));
    CHECK(contains(why.text(), "override: TUTTI_ALL_GATHER_ALGORITHM=recursive_doubling"));
    why = explain_call({.collective = "all_gather", .ranks = 10, .bytes = 64, .sub_call = true});
    CHECK(why.notes.at(0) == "a composition's sub-call: environment overrides do not apply");
}

TEST_CASE("explain: bad descriptions are errors") {
    CHECK_THROWS_WITH_AS(info::signature_of({.collective = "allreduce"}),
                         doctest::Contains("unknown collective 'allreduce'"), tutti::error);
    CHECK_THROWS_WITH_AS(info::signature_of({.collective = "reduce", .op = "xor-ish"}),
                         doctest::Contains("unknown --op 'xor-ish'"), tutti::error);
    CHECK_THROWS_WITH_AS(info::signature_of({.collective = "reduce", .transport = "smoke"}),
                         doctest::Contains("unknown transport 'smoke'"), tutti::error);
    CHECK_THROWS_WITH_AS(
        info::signature_of({.collective = "all_to_allv", .bytes = 1 << 20, .bytes_given = true}),
        doctest::Contains("--bytes does not apply to all_to_allv: its calls carry no size (each "
                          "rank knows only its own counts"),
        tutti::error);
    CHECK_THROWS_WITH_AS(info::signature_of({.collective = "barrier", .bytes_given = true}),
                         doctest::Contains("--bytes does not apply to barrier"), tutti::error);
}

TEST_CASE("explain: an all_to_allv is explained as its calls choose, without a size") {
    // A real all_to_allv call's signature has bytes = 0 (dispatch.cpp), so
    // the explanation must not see the description's default size either.
    const auto s = info::signature_of({.collective = "all_to_allv", .ranks = 4});
    CHECK(s.bytes == 0);
    CHECK(s.equal_counts == false);
    const auto why = explain_call({.collective = "all_to_allv", .ranks = 4});
    CHECK(why.chosen == "linear");
    CHECK(info::to_json(why)["call"]["bytes"] == 0);
}

TEST_CASE("the catalog listing has every algorithm with kind, restrictions, parameters") {
    const auto json = info::catalog_json();
    std::size_t total = 0;
    for (auto c : all_collectives)
        total += algorithms().list(c).size();
    CHECK(json.size() == total);
    bool found = false;
    for (const auto& entry : json)
        if (entry["collective"] == "reduce_scatter" && entry["name"] == "recursive_halving") {
            found = true;
            CHECK(entry["kind"] == "pure");
            CHECK(entry["restrictions"] ==
                  nlohmann::json::array({"power_of_two", "commutative_op"}));
        }
    CHECK(found);
    CHECK(contains(info::catalog_text(), "restrictions: power_of_two, commutative_op"));
}

TEST_CASE("the tutti-info program explains, as text and JSON") {
    const char* program = std::getenv("TUTTI_INFO");
    if (!program) return; // run outside meson: the functions above are tested
    const auto text =
        run_command(std::string(program) + " --explain all_gather --ranks 10 --bytes 64 2>&1");
    CHECK(contains(text, "chosen: bruck (pure)"));
    CHECK(contains(text, "rejected: recursive_doubling (pure): restriction power_of_two fails: "
                         "communicator size 10 is not a power of two"));
    const auto json = nlohmann::json::parse(run_command(
        std::string(program) + " --explain reduce --ranks 4 --bytes 1K --in-place --json"));
    CHECK(json["chosen"] == "linear");
    CHECK(json["call"]["in_place"] == true);
    CHECK(json["call"]["bytes"] == 1024);
    const auto bad = run_command(std::string(program) + " --explain nothing 2>&1");
    CHECK(contains(bad, "tutti-info: unknown collective 'nothing'"));
    const auto no_ranks =
        run_command(std::string(program) + " --explain all_reduce --ranks 0 2>&1");
    CHECK(contains(no_ranks, "--ranks: Value 0 not in range 1 to 2147483647"));
}
