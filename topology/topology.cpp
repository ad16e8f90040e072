// hwloc discovery and this rank's locality: the only file that includes
// hwloc.h, so the public headers and the module need none of its flags.
#include "topology/topology.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <map>
#include <set>

#include <asio/ip/host_name.hpp>
#include <fmt/format.h>
#include <hwloc.h>

#include "core/error.hpp"

namespace tutti::topology {

namespace {

[[noreturn]] void fail(const std::string& what) {
    throw error(errc::invalid_argument, "topology: " + what);
}

std::string environment(const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr ? value : "";
}

// A bitmap that frees itself.
struct bitmap {
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    bitmap() {
        if (set == nullptr) throw std::bad_alloc();
    }
    ~bitmap() { hwloc_bitmap_free(set); }
    bitmap(const bitmap&) = delete;
    bitmap& operator=(const bitmap&) = delete;

    std::string list() const {
        char* text = nullptr;
        if (hwloc_bitmap_list_asprintf(&text, set) < 0) return {};
        std::string out(text);
        std::free(text);
        return out;
    }
};

int logical_ancestor(hwloc_topology_t topology, hwloc_obj_type_t type, hwloc_obj_t pu) {
    hwloc_obj_t above = hwloc_get_ancestor_obj_by_type(topology, type, pu);
    return above != nullptr ? static_cast<int>(above->logical_index) : 0;
}

std::string_view cache_kind(hwloc_obj_cache_type_t type) {
    switch (type) {
    case HWLOC_OBJ_CACHE_DATA:
        return "data";
    case HWLOC_OBJ_CACHE_INSTRUCTION:
        return "instruction";
    case HWLOC_OBJ_CACHE_UNIFIED:
        break;
    }
    return "unified";
}

std::string bytes_text(std::uint64_t bytes) {
    static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    auto value = static_cast<double>(bytes);
    std::size_t unit = 0;
    while (value >= 1024 && unit + 1 < std::size(units)) {
        value /= 1024;
        ++unit;
    }
    return fmt::format("{:.4g} {}", value, units[unit]);
}

std::string plural(int count, std::string_view one, std::string_view many) {
    return fmt::format("{} {}", count, count == 1 ? one : many);
}

// One value for every rank, or a comma-separated list with one per rank.
std::string override_for(const char* variable, int rank) {
    const std::string value = environment(variable);
    if (value.find(',') == std::string::npos) return value;
    std::vector<std::string> items;
    std::size_t start = 0;
    while (true) {
        const auto comma = value.find(',', start);
        items.push_back(value.substr(start, comma - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    if (rank < 0 || static_cast<std::size_t>(rank) >= items.size())
        fail(fmt::format("{}={} lists {} values, none for rank {}", variable, value, items.size(),
                         rank));
    if (items[static_cast<std::size_t>(rank)].empty())
        fail(fmt::format("{}={} has an empty value for rank {}", variable, value, rank));
    return items[static_cast<std::size_t>(rank)];
}

} // namespace

struct machine_builder {
    // Loads the machine from a synthetic description or an XML file, or
    // this system when both are empty.
    static machine load(const std::string& synthetic, const std::string& xml) {
        hwloc_topology_t raw = nullptr;
        if (hwloc_topology_init(&raw) != 0) fail("hwloc could not start");
        std::shared_ptr<hwloc_topology> topology(raw, hwloc_topology_destroy);
        if (!synthetic.empty() && hwloc_topology_set_synthetic(raw, synthetic.c_str()) != 0)
            fail(fmt::format("\"{}\" is not an hwloc synthetic description (one is \"pack:2 "
                             "core:4 pu:1\")",
                             synthetic));
        if (!xml.empty() && hwloc_topology_set_xml(raw, xml.c_str()) != 0)
            fail(fmt::format("hwloc cannot read the XML file \"{}\"", xml));
        if (hwloc_topology_load(raw) != 0)
            fail(fmt::format("hwloc could not load the topology{}",
                             synthetic.empty() && xml.empty() ? " of this system" : ""));

        machine m;
        m.topology_ = topology;
        // HWLOC_THISSYSTEM=1 makes hwloc treat a description as this machine,
        // and so read bindings against it; hwloc decides, as it does for lstopo.
        m.this_system_ = hwloc_topology_is_thissystem(raw) != 0;
        if (!xml.empty())
            m.source_ = "xml: " + xml;
        else if (!synthetic.empty())
            m.source_ = "synthetic: " + synthetic;
        else
            m.source_ = "this system";

        m.packages_ = std::max(1, hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_PACKAGE));
        m.numa_domains_ = std::max(1, hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_NUMANODE));
        const int pus = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_PU);
        if (pus <= 0) fail("hwloc finds no processing unit");
        // A machine that hwloc shows without cores (some virtual machines)
        // has one core per PU.
        const int cores = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_CORE);
        m.cores_ = cores > 0 ? cores : pus;
        m.memory_bytes_ = hwloc_get_root_obj(raw)->total_memory;

        for (int i = 0; i < pus; ++i) {
            hwloc_obj_t pu = hwloc_get_obj_by_type(raw, HWLOC_OBJ_PU, static_cast<unsigned>(i));
            pu_place place;
            place.os_index = static_cast<int>(pu->os_index);
            place.core = cores > 0 ? logical_ancestor(raw, HWLOC_OBJ_CORE, pu) : i;
            place.package = logical_ancestor(raw, HWLOC_OBJ_PACKAGE, pu);
            // NUMA nodes hang off the tree as memory children, not ancestors:
            // a PU belongs to the domain whose cpuset holds it.
            hwloc_obj_t numa = nullptr;
            while ((numa = hwloc_get_next_obj_by_type(raw, HWLOC_OBJ_NUMANODE, numa)) != nullptr)
                if (hwloc_bitmap_isset(numa->cpuset, pu->os_index)) {
                    place.numa = static_cast<int>(numa->logical_index);
                    break;
                }
            m.pus_.push_back(place);
        }

        // In order of depth, data before instruction.
        for (hwloc_obj_type_t type :
             {HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L1ICACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L2ICACHE,
              HWLOC_OBJ_L3CACHE, HWLOC_OBJ_L3ICACHE, HWLOC_OBJ_L4CACHE, HWLOC_OBJ_L5CACHE}) {
            const int count = hwloc_get_nbobjs_by_type(raw, type);
            if (count <= 0) continue;
            hwloc_obj_t first = hwloc_get_obj_by_type(raw, type, 0);
            m.caches_.push_back({.depth = static_cast<int>(first->attr->cache.depth),
                                 .kind = std::string(cache_kind(first->attr->cache.type)),
                                 .bytes = first->attr->cache.size,
                                 .count = count});
        }
        return m;
    }

    // The PU this thread is bound to or runs on, as hwloc says; on a machine
    // that is not this system hwloc reports the whole machine.
    static locality where(const machine& m) {
        hwloc_topology_t raw = m.topology_.get();
        bitmap binding, last;
        if (hwloc_get_cpubind(raw, binding.set, HWLOC_CPUBIND_THREAD) != 0)
            hwloc_bitmap_copy(binding.set, hwloc_topology_get_topology_cpuset(raw));
        const bool bound =
            m.this_system_ &&
            !hwloc_bitmap_isincluded(hwloc_topology_get_topology_cpuset(raw), binding.set);
        int os_pu = -1;
        if (m.this_system_ &&
            hwloc_get_last_cpu_location(raw, last.set, HWLOC_CPUBIND_THREAD) == 0 &&
            hwloc_bitmap_intersects(last.set, binding.set)) {
            hwloc_bitmap_and(last.set, last.set, binding.set);
            os_pu = hwloc_bitmap_first(last.set);
        }
        if (os_pu < 0) os_pu = bound ? hwloc_bitmap_first(binding.set) : -1;
        int logical = 0;
        if (os_pu >= 0)
            if (hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(raw, static_cast<unsigned>(os_pu)))
                logical = static_cast<int>(pu->logical_index);
        locality here = place(m, node_name(), logical);
        here.how = bound ? placement::bound : placement::unbound;
        if (bound) here.binding = binding.list();
        return here;
    }
};

const pu_place& machine::pu(int pu) const {
    if (pu < 0 || pu >= pus())
        fail(fmt::format("PU {} does not exist on a machine of {} PUs ({})", pu, pus(), source_));
    return pus_[static_cast<std::size_t>(pu)];
}

std::string_view to_string(placement how) noexcept {
    switch (how) {
    case placement::bound:
        return "bound";
    case placement::unbound:
        return "unbound";
    case placement::posed:
        break;
    }
    return "posed";
}

std::string to_string(const locality& where) {
    std::string how = where.how == placement::bound ? fmt::format("bound to {}", where.binding)
                                                    : std::string(to_string(where.how));
    return fmt::format("{} package {} numa {} core {} pu {} ({})", where.node, where.package,
                       where.numa, where.core, where.pu, how);
}

machine discover() {
    // hwloc would read these variables itself, but falls back to this system
    // without a word when it cannot; a test would then silently run on the
    // wrong machine. Giving them to hwloc explicitly turns that into an error.
    // As in hwloc, an XML file wins over a synthetic description.
    if (std::string xml = environment("HWLOC_XMLFILE"); !xml.empty())
        return machine_builder::load({}, xml);
    if (std::string description = environment("HWLOC_SYNTHETIC"); !description.empty())
        return machine_builder::load(description, {});
    return machine_builder::load({}, {});
}

std::uint64_t last_level_cache_bytes() noexcept {
    static const std::uint64_t bytes = []() -> std::uint64_t {
        try {
            const machine here = discover();
            std::uint64_t largest = 0;
            for (const auto& c : here.caches())
                if (c.kind != "instruction") largest = std::max(largest, c.bytes);
            return largest;
        } catch (...) {
            return 0;
        }
    }();
    return bytes;
}

machine synthetic(std::string_view description) {
    if (description.empty()) fail("an empty synthetic description");
    return machine_builder::load(std::string(description), {});
}

machine from_xml(const std::string& path) {
    if (path.empty()) fail("an empty XML file name");
    return machine_builder::load({}, path);
}

std::string node_name() {
    std::string node = environment("TUTTI_NODE");
    return node.empty() ? asio::ip::host_name() : node;
}

locality place(const machine& m, std::string node, int pu) {
    const pu_place& where = m.pu(pu);
    return {.node = std::move(node),
            .package = where.package,
            .numa = where.numa,
            .core = where.core,
            .pu = pu,
            .how = placement::posed,
            .binding = {}};
}

locality here(const machine& m, int rank) {
    locality found = machine_builder::where(m);
    if (const std::string pu = override_for("TUTTI_TOPOLOGY_PU", rank); !pu.empty()) {
        int index = -1;
        const auto [end, ec] = std::from_chars(pu.data(), pu.data() + pu.size(), index);
        if (ec != std::errc{} || end != pu.data() + pu.size() || index < 0 || index >= m.pus())
            fail(fmt::format("TUTTI_TOPOLOGY_PU gives rank {} the PU \"{}\"; it must be a "
                             "logical index from 0 to {} ({})",
                             rank, pu, m.pus() - 1, m.source()));
        found = place(m, std::move(found.node), index);
    }
    if (std::string node = override_for("TUTTI_TOPOLOGY_NODE", rank); !node.empty())
        found.node = std::move(node);
    return found;
}

std::string describe(const machine& m) {
    std::string out = fmt::format("machine ({}): {}, {} ({} of memory), {}, {}", m.source(),
                                  plural(m.packages(), "package", "packages"),
                                  plural(m.numa_domains(), "NUMA domain", "NUMA domains"),
                                  bytes_text(m.memory_bytes()), plural(m.cores(), "core", "cores"),
                                  plural(m.pus(), "PU", "PUs"));
    if (!m.caches().empty()) {
        out += "\ncaches:";
        const char* separator = " ";
        for (const cache& c : m.caches()) {
            const char* suffix = c.kind == "data" ? "d" : c.kind == "instruction" ? "i" : "";
            out += fmt::format("{}L{}{} {} x{}", separator, c.depth, suffix, bytes_text(c.bytes),
                               c.count);
            separator = ", ";
        }
    }
    return out;
}

std::string describe(const std::vector<locality>& all) {
    // Nodes in order of their first rank, so every rank prints the same.
    std::vector<std::string> nodes;
    std::map<std::string, std::vector<int>> ranks;
    for (std::size_t r = 0; r < all.size(); ++r) {
        auto& list = ranks[all[r].node];
        if (list.empty()) nodes.push_back(all[r].node);
        list.push_back(static_cast<int>(r));
    }
    std::string out = fmt::format("{} on {}", plural(static_cast<int>(all.size()), "rank", "ranks"),
                                  plural(static_cast<int>(nodes.size()), "node", "nodes"));
    for (const auto& node : nodes) {
        const auto& list = ranks[node];
        std::map<int, int> per_package, per_numa;
        std::set<int> cores;
        for (int r : list) {
            ++per_package[all[static_cast<std::size_t>(r)].package];
            ++per_numa[all[static_cast<std::size_t>(r)].numa];
            cores.insert(all[static_cast<std::size_t>(r)].core);
        }
        auto counts = [](const std::map<int, int>& per) {
            std::string text;
            for (const auto& [index, count] : per)
                text += fmt::format("{}{}:{}", text.empty() ? "" : " ", index, count);
            return text;
        };
        std::string rank_list;
        for (int r : list)
            rank_list += fmt::format("{}{}", rank_list.empty() ? "" : ",", r);
        out += fmt::format("\n  {}: ranks {}; per package {}; per NUMA domain {}; {} in use", node,
                           rank_list, counts(per_package), counts(per_numa),
                           plural(static_cast<int>(cores.size()), "core", "cores"));
    }
    return out;
}

} // namespace tutti::topology
