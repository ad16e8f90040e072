// The machine a rank runs on, as hwloc sees it (packages, NUMA domains,
// caches, cores, processing units), and where on it this rank is: its
// locality. hwloc stays behind topology.cpp, so neither this header nor the
// module needs hwloc's flags.
//
//   auto m = tutti::topology::discover();       // this machine, or HWLOC_SYNTHETIC / XML
//   auto me = tutti::topology::here(m, rank);   // node, package, NUMA, core, PU
//   std::puts(tutti::topology::describe(m).c_str());
//
// Tests pose other machines with hwloc's own means (a synthetic description
// or an XML file) and other placements with the topology overrides
// TUTTI_TOPOLOGY_NODE and TUTTI_TOPOLOGY_PU (docs/topology.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct hwloc_topology;

namespace tutti::topology {

// One kind of cache: every instance of a level and type has the same size
// on the machines hwloc describes, so one entry per (depth, kind).
struct cache {
    int depth = 0;           // 1 for L1, 2 for L2, ...
    std::string kind;        // "data", "instruction" or "unified"
    std::uint64_t bytes = 0; // one instance
    int count = 0;           // instances on the machine
};

// Where one processing unit sits, as hwloc's logical indices: they number
// the objects of each type across the whole machine in topology order.
struct pu_place {
    int os_index = 0;
    int core = 0;
    int numa = 0;
    int package = 0;
};

class machine {
public:
    // Where the description came from: "this system", "synthetic: ..." or
    // "xml: <file>".
    const std::string& source() const noexcept { return source_; }
    // Whether this is the machine we run on: only then can a binding be read.
    bool this_system() const noexcept { return this_system_; }

    int packages() const noexcept { return packages_; }
    int numa_domains() const noexcept { return numa_domains_; }
    int cores() const noexcept { return cores_; }
    int pus() const noexcept { return static_cast<int>(pus_.size()); }
    std::uint64_t memory_bytes() const noexcept { return memory_bytes_; }
    // By depth, then data, instruction, unified.
    const std::vector<cache>& caches() const noexcept { return caches_; }

    // The place of the PU with hwloc logical index `pu`; throws tutti::error
    // (invalid_argument) outside [0, pus()).
    const pu_place& pu(int pu) const;

private:
    friend struct machine_builder; // topology.cpp: fills a machine from hwloc

    std::shared_ptr<hwloc_topology> topology_; // kept for reading bindings
    std::string source_;
    bool this_system_ = false;
    int packages_ = 0;
    int numa_domains_ = 0;
    int cores_ = 0;
    std::uint64_t memory_bytes_ = 0;
    std::vector<cache> caches_;
    std::vector<pu_place> pus_;
};

// How a rank came to be where its locality says.
enum class placement {
    bound,   // bound to a part of the machine (tuttirun --bind core, taskset, ...)
    unbound, // free to run anywhere: placed by the PU it last ran on
    posed,   // placed by TUTTI_TOPOLOGY_PU, or given explicitly by a test
};

std::string_view to_string(placement how) noexcept;

// Where one rank is: its node's name and hwloc logical indices on that
// node's machine. Every rank learns every rank's locality (exchange()), so
// it is a value that travels.
struct locality {
    std::string node;
    int package = 0;
    int numa = 0;
    int core = 0;
    int pu = 0;
    placement how = placement::posed;
    std::string binding; // the PUs it is bound to (OS indices, hwloc list syntax); "" if unbound

    template <class Archive>
    void serialize(Archive& archive, unsigned /*version*/) {
        archive& node& package& numa& core& pu& how& binding;
    }
    friend bool operator==(const locality&, const locality&) = default;
};

// "node0 package 1 numa 2 core 5 pu 5 (bound to 5)".
std::string to_string(const locality& where);

// This machine, unless hwloc is told to read another one: HWLOC_SYNTHETIC
// or HWLOC_XMLFILE in the environment are honoured as hwloc does. Throws
// tutti::error (invalid_argument) when hwloc cannot load it, including when
// it would silently ignore a malformed HWLOC_SYNTHETIC or HWLOC_XMLFILE.
machine discover();
// A machine from an hwloc synthetic description, "pack:2 numa:2 core:4 pu:1".
machine synthetic(std::string_view description);
// A machine from an XML file written by `lstopo --of xml`.
machine from_xml(const std::string& path);

// The largest data cache of the machine (its last level, which the cores
// share), in bytes, as discover() sees the machine (a posed one poses its
// caches too). Read once, on first use; 0 when hwloc cannot tell.
std::uint64_t last_level_cache_bytes() noexcept;

// The node's name as the bootstrap gives it: TUTTI_NODE, else the host name.
std::string node_name();

// This rank's locality on m: the node (node_name()), and the PU it is bound
// to or, unbound, the one it last ran on. A machine that is not this system
// (synthetic, XML) cannot say where we run: the rank is unbound on PU 0.
// Then the topology overrides from the environment apply, each one value
// for every rank or a comma-separated list with one per rank, indexed by
// `rank` (a launcher gives every rank the same environment):
//   TUTTI_TOPOLOGY_NODE  the node's name for the hierarchy only (TUTTI_NODE
//                        also chooses transports; this does not)
//   TUTTI_TOPOLOGY_PU    the hwloc logical PU index to place the rank on
// Throws tutti::error (invalid_argument) for a malformed override.
locality here(const machine& m, int rank = 0);

// The rank placed on PU `pu` of m, on node `node` (how = posed). Throws
// tutti::error (invalid_argument) when m has no such PU.
locality place(const machine& m, std::string node, int pu);

// A few lines for people and tutti-info: where the machine came from, its
// packages, NUMA domains and memory, cores, PUs and caches.
std::string describe(const machine& m);
// The shape of a job from every rank's locality: nodes, and per node the
// ranks on each package and NUMA domain.
std::string describe(const std::vector<locality>& all);

} // namespace tutti::topology
