#include "info.hpp"

#include <algorithm>
#include <array>
#include <ctime>
#include <utility>

#include <fmt/format.h>

#include "topology/topology.hpp"
#include "transports/shm/shm.hpp"

namespace tutti::info {

namespace {

bool is_reduction(collective c) {
    return c == collective::reduce || c == collective::all_reduce ||
           c == collective::reduce_scatter || c == collective::scan || c == collective::exscan;
}

nlohmann::json steps_json(const std::vector<decision_tree::step>& steps) {
    auto out = nlohmann::json::array();
    for (const auto& s : steps)
        out.push_back({{"pointer", s.pointer}, {"branch", s.branch}, {"reason", s.reason}});
    return out;
}

// What each transport name stands for; its capabilities come from a live
// endpoint (in-process here, the job's when tutti-info runs in one).
constexpr std::array<std::pair<std::string_view, std::string_view>, 4> transport_notes = {{
    {"inproc", "ranks as coroutines or threads of one process (tests, simulation)"},
    {"shm", "shared-memory rings between the ranks of one node; single copy through "
            "process_vm_readv (CMA) where the kernel allows it"},
    {"tcp", "TCP through Asio between any ranks (off the node, or TUTTI_TRANSPORT=tcp)"},
    {"shm+tcp", "a routed world: shared memory within each node, TCP between nodes"},
}};

transport_capabilities inproc_capabilities() {
    asio::io_context context;
    auto world = std::make_shared<inproc::world>(1);
    return world->endpoint(0, context)->capabilities();
}

// This thread's CPU time: on a loaded machine wall time would count the time
// other processes ran while this one waited for a core.
double cpu_ns() {
    timespec t{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

// Alternating two signatures defeats the one-entry decision cache, so every
// call walks the trees.
template <class Args>
double time_choice(const call_signature& call, const selection_request& request, int iterations,
                   bool walk) {
    const algorithm<Args>* last = nullptr;
    auto other = call;
    if (walk) other.bytes ^= 1;
    const double start = cpu_ns();
    for (int i = 0; i < iterations; ++i) {
        last = &choose<Args>(i % 2 ? other : call, request);
        // Keeps the loop from being folded away.
        asm volatile("" : : "r"(last) : "memory");
    }
    return (cpu_ns() - start) / iterations;
}

} // namespace

double selection_cost_ns(const call_signature& call, const selection_request& request,
                         int iterations, bool walk) {
    switch (call.kind) {
    case collective::barrier:
        return time_choice<barrier_args>(call, request, iterations, walk);
    case collective::broadcast:
        return time_choice<broadcast_args>(call, request, iterations, walk);
    case collective::reduce:
        return time_choice<reduce_args>(call, request, iterations, walk);
    case collective::all_reduce:
        return time_choice<all_reduce_args>(call, request, iterations, walk);
    case collective::gather:
        return time_choice<gather_args>(call, request, iterations, walk);
    case collective::scatter:
        return time_choice<scatter_args>(call, request, iterations, walk);
    case collective::all_gather:
        return time_choice<all_gather_args>(call, request, iterations, walk);
    case collective::all_to_all:
        return time_choice<all_to_all_args>(call, request, iterations, walk);
    case collective::all_to_allv:
        return time_choice<all_to_allv_args>(call, request, iterations, walk);
    case collective::reduce_scatter:
        return time_choice<reduce_scatter_args>(call, request, iterations, walk);
    case collective::scan:
        return time_choice<scan_args>(call, request, iterations, walk);
    case collective::exscan:
        return time_choice<exscan_args>(call, request, iterations, walk);
    case collective::split:
        break;
    }
    throw error(errc::invalid_argument, "split is not a selectable collective");
}

call_signature signature_of(const call_description& d) {
    const auto kind = collective_from_string(d.collective);
    if (!kind)
        throw error(errc::invalid_argument,
                    fmt::format("unknown collective '{}'; known: {}", d.collective,
                                fmt::join(all_collectives | std::views::transform([](collective c) {
                                              return to_string(c);
                                          }),
                                          ", ")));
    if (d.ranks < 1)
        throw error(errc::invalid_argument, fmt::format("--ranks {} is not positive", d.ranks));
    if (!d.transport.empty() &&
        std::ranges::find(tree_transports, d.transport) == tree_transports.end())
        throw error(errc::invalid_argument,
                    fmt::format("unknown transport '{}'; known: {}", d.transport,
                                fmt::join(tree_transports, ", ")));
    if (!call_has_size(*kind) && d.bytes_given)
        throw error(errc::invalid_argument,
                    fmt::format("--bytes does not apply to {}: its calls carry no size ({})",
                                d.collective, why_call_has_no_size(*kind)));
    call_signature s{
        .kind = *kind, .comm_size = d.ranks, .bytes = call_has_size(*kind) ? d.bytes : 0};
    if (is_reduction(*kind)) {
        s.has_op = true;
        s.count = d.count ? d.count : d.bytes / 8;
        if (d.op == "sum" || d.op == "prod" || d.op == "min" || d.op == "max") {
            s.commutative = true;
            s.builtin_op = true;
        } else if (d.op == "user") {
            s.commutative = true;
            s.builtin_op = false;
        } else if (d.op == "noncommutative") {
            s.commutative = false;
            s.builtin_op = false;
        } else {
            throw error(errc::invalid_argument,
                        fmt::format("unknown --op '{}'; known: sum, prod, min, max, user (a "
                                    "commutative user function), noncommutative",
                                    d.op));
        }
        s.in_place = d.in_place;
    }
    s.equal_counts = *kind != collective::all_to_allv && !d.unequal_counts;
    s.has_hierarchy = d.hierarchy;
    // The signature keeps a view: point it at the tree's own name, which
    // outlives the request (d may be a temporary).
    if (!d.transport.empty()) s.transport = *std::ranges::find(tree_transports, d.transport);
    s.single_copy = d.single_copy;
    s.ranks_per_node = d.ranks_per_node;
    s.nodes = d.nodes;
    s.line_ns = d.line_ns;
    s.readv_percent = d.readv_percent;
    const auto shm_rule = shm::options{}.cells_readv_percent;
    s.slow_single_copy =
        d.slow_single_copy || (d.transport == "shm" && shm_rule && d.readv_percent > shm_rule);
    s.ranks_per_core = d.ranks_per_core;
    s.node_consecutive = !d.interleaved_nodes;
    return s;
}

nlohmann::json to_json(const selection_explanation& why) {
    const auto& c = why.call;
    nlohmann::json call = {
        {"collective", to_string(c.kind)},
        {"comm_size", c.comm_size},
        {"bytes", c.bytes},
        {"transport", c.transport},
        {"single_copy", c.single_copy},
        {"hierarchy", c.has_hierarchy},
        {"ranks_per_node", c.ranks_per_node > 0 ? c.ranks_per_node : c.comm_size},
        {"nodes", c.nodes > 0 ? c.nodes : 1},
        {"node_consecutive", c.node_consecutive},
        {"line_ns", c.line_ns},
        {"readv_percent", c.readv_percent},
        {"slow_single_copy", c.slow_single_copy},
        {"ranks_per_core", c.ranks_per_core},
        {"equal_counts", c.equal_counts},
    };
    if (c.has_op) {
        call["count"] = c.count;
        call["commutative"] = c.commutative;
        call["builtin_op"] = c.builtin_op;
        call["in_place"] = c.in_place;
    }
    auto candidates = nlohmann::json::array();
    for (const auto& k : why.candidates) {
        nlohmann::json entry = {
            {"name", k.name}, {"kind", to_string(k.form)}, {"runs", !k.failure}};
        if (k.failure) entry["failure"] = *k.failure;
        candidates.push_back(entry);
    }
    return {{"call", call},
            {"overrides", why.notes},
            {"composition_tree",
             {{"source", why.composition_tree}, {"path", steps_json(why.composition_path)}}},
            {"pure_tree", {{"source", why.pure_tree}, {"path", steps_json(why.pure_path)}}},
            {"chosen", why.chosen},
            {"kind", to_string(why.chosen_form)},
            {"candidates", candidates}};
}

nlohmann::json catalog_json() {
    auto out = nlohmann::json::array();
    for (auto c : all_collectives)
        for (const auto* info : algorithms().list(c)) {
            auto restrictions = nlohmann::json::array();
            for (auto r : info->restrictions)
                restrictions.push_back(to_string(r));
            auto parameters = nlohmann::json::array();
            for (const auto& p : info->parameters)
                parameters.push_back(
                    {{"name", p.name}, {"default", p.default_value}, {"meaning", p.meaning}});
            out.push_back({{"collective", to_string(c)},
                           {"name", info->name},
                           {"kind", to_string(info->form)},
                           {"restrictions", restrictions},
                           {"parameters", parameters},
                           {"summary", info->summary}});
        }
    return out;
}

std::string catalog_text() {
    std::string out = "algorithms (collective, name, kind; restrictions; parameters):\n";
    for (auto c : all_collectives) {
        out += fmt::format("  {}\n", to_string(c));
        for (const auto* info : algorithms().list(c)) {
            std::vector<std::string> restrictions, parameters;
            for (auto r : info->restrictions)
                restrictions.push_back(to_string(r));
            for (const auto& p : info->parameters)
                parameters.push_back(fmt::format("{}={}", p.name, p.default_value));
            out += fmt::format("    {:<20} {:<26} {}\n", info->name, to_string(info->form),
                               info->summary);
            out += fmt::format(
                "    {:<20} restrictions: {}{}\n", "",
                restrictions.empty() ? "none" : fmt::format("{}", fmt::join(restrictions, ", ")),
                parameters.empty() ? ""
                                   : fmt::format("; parameters: {}", fmt::join(parameters, ", ")));
        }
    }
    return out;
}

nlohmann::json transports_json() {
    auto out = nlohmann::json::array();
    for (const auto& [name, note] : transport_notes) {
        nlohmann::json entry = {{"name", name}, {"about", note}};
        if (name == "inproc") entry["capabilities"] = capabilities_json(inproc_capabilities());
        out.push_back(entry);
    }
    return out;
}

std::string transports_text() {
    std::string out = "transports:\n";
    for (const auto& [name, note] : transport_notes) {
        out += fmt::format("  {:<8} {}\n", name, note);
        if (name == "inproc") {
            const auto c = inproc_capabilities();
            out +=
                fmt::format("  {:<8} single copy {}, remote memory access {}, ~{} us, ~{} GB/s\n",
                            "", c.single_copy ? "yes" : "no", c.remote_memory_access ? "yes" : "no",
                            c.latency_us, c.bandwidth_gb_per_s);
        }
    }
    out += "  (the capabilities of shm and tcp are those of a connected job: run\n"
           "   `tuttirun -n 2 tutti-info --transports` to see the job's transport)\n";
    return out;
}

nlohmann::json topology_json() {
    const auto m = topology::discover();
    return {{"source", m.source()},
            {"packages", m.packages()},
            {"numa_domains", m.numa_domains()},
            {"cores", m.cores()},
            {"pus", m.pus()},
            {"memory_bytes", m.memory_bytes()},
            {"node", topology::node_name()}};
}

std::string topology_text() {
    auto text = "topology:\n" + topology::describe(topology::discover());
    if (!text.ends_with('\n')) text += '\n';
    return text;
}

nlohmann::json capabilities_json(const transport_capabilities& c) {
    return {{"single_copy", c.single_copy},
            {"remote_memory_access", c.remote_memory_access},
            {"latency_us", c.latency_us},
            {"bandwidth_gb_per_s", c.bandwidth_gb_per_s},
            {"line_ns", c.line_ns},
            {"readv_percent", c.readv_percent},
            {"slow_single_copy", c.slow_single_copy},
            {"ranks_per_core", c.ranks_per_core}};
}

} // namespace tutti::info
