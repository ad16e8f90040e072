// The machine tree: every rank learns every rank's locality (exchange), and
// from those the levels node -> package -> NUMA domain -> core become a
// hierarchy of sub-communicators, built by the generic hierarchy builder
// (modules/hierarchy), on which every hierarchical collective runs.
//
//   auto tree = co_await tutti::topology::make_machine_hierarchy(world);
//   co_await tutti::all_reduce(tree, data, tutti::sum);
//
// Tests give the localities explicitly, so one machine poses as any shape.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/communicator.hpp"
#include "core/task.hpp"
#include "hierarchy/hierarchy.hpp"
#include "topology/topology.hpp"

namespace tutti::topology {

// A level of the machine tree, top down.
enum class level { node, package, numa, core };

std::string_view to_string(level l) noexcept;

using machine_levels = std::vector<level>;

// node -> package -> NUMA domain: ranks that share a core are not split
// further unless asked.
inline machine_levels default_levels() {
    return {level::node, level::package, level::numa};
}

// A collective over comm: every rank gives its locality and gets every
// rank's, in rank order.
task<std::vector<locality>> exchange(communicator comm, locality mine);
// discover(), then here() indexed by this rank's rank in the transport's
// world (the job's rank), then the exchange.
task<std::vector<locality>> exchange(communicator comm);

// Rank `rank`'s colour at each level that splits some group, top down, from
// every rank's locality. A node's colour is its order of first appearance
// in rank order; the other levels use hwloc's logical indices, which are
// distinct within the level above. A level under which no group has two
// different colours (a NUMA domain per package, one node) is left out: it
// would only add a step that moves nothing. Every rank computes the same.
struct tree_colours {
    machine_levels levels;   // the levels kept
    std::vector<int> colour; // this rank's colour at each of them
};
tree_colours colours_of(const std::vector<locality>& all, int rank, const machine_levels& levels);

// The machine tree over comm from every rank's locality (the same vector on
// every rank, all.size() == comm.size()): a new communicator of the same
// ranks carrying the hierarchy (tutti::make_hierarchy), on which the
// hierarchical collectives run. A collective over comm.
task<communicator> make_machine_hierarchy(communicator comm, std::vector<locality> all,
                                          machine_levels levels = default_levels(),
                                          hierarchy_options options = {});
// The same from this machine and this rank's binding, exchanged first.
task<communicator> make_machine_hierarchy(communicator comm,
                                          machine_levels levels = default_levels(),
                                          hierarchy_options options = {});

} // namespace tutti::topology
