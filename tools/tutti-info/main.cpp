// tutti-info: what this build of tutti has and why it chooses what it does.
//
//   tutti-info                               transports, topology, every algorithm
//   tutti-info --explain all_reduce --ranks 8 --bytes 1M --op sum --transport shm
//   tutti-info --explain all_to_all --ranks 64 --bytes 4K --ppn 8 --nodes 8 --hierarchy --json
//   tutti-info --trees                       the decision trees in use, as JSON
//   tutti-info --validate my_tree.json --role pure
//   tutti-info --explain all_reduce --ranks 2 --bytes 8 --time-selection
//   tuttirun -n 2 tutti-info --transports    the transport a job connects
//
// --explain prints the path taken through the composition tree and the pure
// tree, the algorithm chosen, and every other algorithm of the collective
// with the restriction that rules it out. The environment's overrides
// (TUTTI_<COLLECTIVE>_ALGORITHM, TUTTI_SELECTION_FILE, ...) apply as they
// would to a call.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "info.hpp"

namespace {

bool in_a_job() {
    return std::getenv("TUTTI_RANK") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

// The job's own transport, as rank 0 sees it.
void print_job_transport(bool json) {
    tutti::job job;
    if (job.rank() == 0) {
        const auto& t = job.world().transport();
        const auto c = t.capabilities();
        if (json) {
            auto out = tutti::info::capabilities_json(c);
            out["job_transport"] = t.name();
            out["ranks"] = job.size();
            std::puts(out.dump(2).c_str());
        } else {
            fmt::print("this job's transport: {} ({} ranks): single copy {}, remote memory "
                       "access {}, ~{} us, ~{} GB/s, a line between the ranks' cores {}, "
                       "process_vm_readv {}{}, ranks to a core {}\n",
                       t.name(), job.size(), c.single_copy ? "yes" : "no",
                       c.remote_memory_access ? "yes" : "no", c.latency_us, c.bandwidth_gb_per_s,
                       c.line_ns ? fmt::format("{} ns", c.line_ns) : std::string("unknown"),
                       c.readv_percent ? fmt::format("{} % of the cells' time", c.readv_percent)
                                       : std::string("unknown"),
                       c.slow_single_copy ? " (judged slow: messages kept in the cells)" : "",
                       c.ranks_per_core ? fmt::format("{}", c.ranks_per_core)
                                        : std::string("unknown"));
            for (const auto& line : job.routes().describe())
                fmt::print("  {}\n", line);
        }
    }
    job.run([](tutti::communicator) -> tutti::task<void> { co_return; });
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw tutti::error(tutti::errc::invalid_argument, "cannot open " + path);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"tutti-info: transports, topology, algorithms, and why selection chooses what "
                 "it does"};
    bool json = false, transports = false, topology = false, algorithms = false, trees = false;
    app.add_flag("--json", json, "machine-readable output");
    app.add_flag("--transports", transports, "the transports (a job's own under tuttirun)");
    app.add_flag("--topology", topology, "this machine as hwloc sees it");
    app.add_flag("--algorithms", algorithms, "every algorithm: kind, restrictions, parameters");
    app.add_flag("--trees", trees, "the decision trees in use, as JSON");

    tutti::info::call_description d;
    auto* explain = app.add_option("--explain", d.collective,
                                   "explain the choice for a call of this collective");
    app.add_option("--ranks", d.ranks, "communicator size")
        ->check(CLI::Range(1, std::numeric_limits<int>::max()));
    auto* bytes = app.add_option("--bytes", d.bytes,
                                 "the call's largest buffer (16K, 1M, ...); not for barrier "
                                 "and all_to_allv, whose calls carry no size")
                      ->transform(CLI::AsSizeValue(false));
    app.add_option("--count", d.count, "elements of a reduction (default: bytes / 8)");
    app.add_option("--ppn", d.ranks_per_node, "ranks per node")
        ->check(CLI::Range(1, std::numeric_limits<int>::max()));
    app.add_option("--nodes", d.nodes, "nodes")
        ->check(CLI::Range(1, std::numeric_limits<int>::max()));
    app.add_option("--line-ns", d.line_ns,
                   "how long a cache line takes there and back between the ranks' cores, in "
                   "ns (a shm job measures it; 0: unknown)");
    app.add_option("--readv-percent", d.readv_percent,
                   "process_vm_readv's time as a percentage of the shared-memory cells' (a shm "
                   "job measures it; 0: unknown)");
    app.add_option("--ranks-per-core", d.ranks_per_core,
                   "how many ranks each core runs, rounded up (a shm job counts them; 0: "
                   "unknown)");
    app.add_option("--op", d.op, "sum, prod, min, max, user, noncommutative");
    app.add_flag("--in-place", d.in_place, "a reduction in place");
    app.add_option("--transport", d.transport, "inproc, shm, tcp, fabric or shm+tcp");
    app.add_flag("--single-copy", d.single_copy, "the transport copies straight between ranks");
    app.add_flag("--slow-single-copy", d.slow_single_copy,
                 "the transport judged that copy slow and keeps messages off it (a shm call "
                 "is so where --readv-percent exceeds the shm transport's rule)");
    app.add_flag("--hierarchy", d.hierarchy, "the communicator carries a hierarchy");
    app.add_flag("--interleaved-nodes", d.interleaved_nodes,
                 "the ranks of a node are not consecutive");
    app.add_flag("--unequal-counts", d.unequal_counts, "ranks contribute different counts");
    app.add_option("--algorithm", d.algorithm, "as tutti::use(name) in the call");
    app.add_flag("--sub-call", d.sub_call, "as a composition's sub-call (no overrides)");
    bool time_selection = false;
    app.add_flag("--time-selection", time_selection,
                 "with --explain: also measure what choosing costs per call");

    std::string validate, role = "pure";
    app.add_option("--validate", validate, "check a decision tree file and exit");
    app.add_option("--role", role, "the tree's role for --validate: pure or composition")
        ->check(CLI::IsMember({"pure", "composition"}));
    CLI11_PARSE(app, argc, argv);

    try {
        if (!validate.empty()) {
            tutti::decision_tree::load(read_file(validate), validate,
                                       role == "pure" ? tutti::tree_role::pure
                                                      : tutti::tree_role::composition);
            fmt::print("{}: a valid {} tree\n", validate, role);
            return 0;
        }
        if (*explain) {
            d.bytes_given = bytes->count() > 0;
            const auto signature = tutti::info::signature_of(d);
            const auto why = tutti::explain(
                signature, {.forced = d.algorithm, .on_fail = {}, .sub_call = d.sub_call});

            const tutti::selection_request request{
                .forced = d.algorithm, .on_fail = {}, .sub_call = d.sub_call};
            double cached = 0, walked = 0;
            if (time_selection) {
                cached = tutti::info::selection_cost_ns(signature, request, 1'000'000, false);
                walked = tutti::info::selection_cost_ns(signature, request, 1'000'000, true);
            }
            if (json) {
                auto out = tutti::info::to_json(why);
                if (time_selection)
                    out["selection_cpu_ns"] = {{"repeated_call", cached}, {"tree_walk", walked}};
                std::puts(out.dump(2).c_str());
            } else {
                std::fputs(why.text().c_str(), stdout);
                if (time_selection)
                    fmt::print("  selection costs {:.1f} ns of CPU per call when the call repeats "
                               "the one before, {:.1f} ns when the trees are walked\n",
                               cached, walked);
            }
            return 0;
        }
        if (trees) {
            const auto composition = nlohmann::json::parse(tutti::composition_tree().text());
            const auto pure = nlohmann::json::parse(tutti::pure_tree().text());
            nlohmann::json out = {
                {"composition",
                 {{"source", tutti::composition_tree().source()}, {"tree", composition}}},
                {"pure", {{"source", tutti::pure_tree().source()}, {"tree", pure}}}};
            std::puts(out.dump(2).c_str());
            return 0;
        }
        if (transports && in_a_job()) {
            print_job_transport(json);
            return 0;
        }
        const bool all = !transports && !topology && !algorithms;
        if (json) {
            nlohmann::json out;
            if (all || transports) out["transports"] = tutti::info::transports_json();
            if (all || topology) out["topology"] = tutti::info::topology_json();
            if (all || algorithms) out["algorithms"] = tutti::info::catalog_json();
            std::puts(out.dump(2).c_str());
            return 0;
        }
        if (all || transports) std::fputs(tutti::info::transports_text().c_str(), stdout);
        if (all || topology) std::fputs(tutti::info::topology_text().c_str(), stdout);
        if (all || algorithms) std::fputs(tutti::info::catalog_text().c_str(), stdout);
    } catch (const tutti::error& e) {
        std::string_view what = e.what();
        if (what.starts_with("tutti: ")) what.remove_prefix(7);
        fmt::print(stderr, "tutti-info: {}\n", what);
        return 1;
    }
    return 0;
}
