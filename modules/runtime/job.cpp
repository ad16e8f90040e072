#include "runtime/job.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "algorithms/collectives.hpp"
#include "bootstrap/join.hpp"
#include "core/debug.hpp"
#include "core/error.hpp"
#include "core/placement.hpp"
#include "core/progress.hpp"
#include "core/wait.hpp"
#include "hierarchy/hierarchy.hpp"

namespace tutti {

namespace {

routed::options routing_options(const job_options& o) {
    routed::options r;
    r.transport = o.transport;
    r.shared_memory = o.shared_memory;
    shm::apply_environment(r.shared_memory);
    r.tcp = o.tcp;
    return r;
}

// This rank's node as a colour for make_hierarchy: the index of its name
// among the job's node names in order of first appearance, the same on
// every rank.
int node_colour(const routed::routing_table& routes) {
    std::vector<std::string_view> seen;
    for (const auto& node : routes.nodes)
        if (std::ranges::find(seen, node) == seen.end()) seen.push_back(node);
    const auto& mine = routes.nodes[static_cast<std::size_t>(routes.rank)];
    return static_cast<int>(std::ranges::find(seen, mine) - seen.begin());
}

// The joined bootstrap, once its ranks have told each other where they run:
// how many cores this machine's ranks may run on between them
// (core/placement.hpp) is what every wait and rule after this weighs, so it
// is said before any transport is set up.
std::unique_ptr<bootstrap> with_cores_agreed(std::unique_ptr<bootstrap> joined) {
    const auto blobs = joined->all_gather(placement_blob());
    const int cores = cores_of_machine(blobs, this_machine_id());
    set_cores_of_this_machines_ranks(cores);
    detail::debug_log("placement",
                      "rank {}: the job's ranks on this machine may run on {} CPUs between them",
                      joined->rank(), cores);
    return joined;
}

// Unset or empty: `otherwise`; "0": false; anything else: true.
bool environment_flag(const char* name, bool otherwise = false) {
    const char* v = std::getenv(name);
    if (!v || !*v) return otherwise;
    return std::string_view(v) != "0";
}

} // namespace

job::job(job_options options)
    : bootstrap_(with_cores_agreed(join_job())),
      connected_(routed::connect(*bootstrap_, context_, routing_options(options))),
      world_(connected_.transport) {
    // Every rank sees the same transport name, so all or none take part.
    const bool across_nodes = connected_.routes.transport_name == "shm+tcp";
    const bool wanted =
        options.node_hierarchy.value_or(environment_flag("TUTTI_NODE_HIERARCHY", true));
    if (wanted && across_nodes)
        world_ = tutti::wait(world_, make_hierarchy(world_, {node_colour(connected_.routes)}));
    if (detail::debug_enabled()) {
        const auto& t = connected_.routes;
        detail::debug_log("routing", "rank {} of {} on node '{}', job {}, transport {}{}: {}",
                          t.rank, t.size(), bootstrap_->node(), bootstrap_->job_id(),
                          t.transport_name,
                          world_.hierarchy() ? ", world with the node hierarchy" : "",
                          fmt::join(t.describe(), "; "));
        std::fflush(stderr);
    }
}

const shm::transport& job::shared_memory() const {
    if (!connected_.shared_memory)
        throw error(errc::invalid_argument,
                    fmt::format("rank {} has no shared-memory transport: the job's transport is "
                                "{} and no other rank is on node '{}' with it",
                                rank(), connected_.routes.transport_name, bootstrap_->node()));
    return *connected_.shared_memory;
}

void job::run(const std::function<task<void>(communicator)>& body) {
    tutti::wait(world_, body(world_));
    tutti::wait(world_, barrier(world_));
    finished_ = true;
}

job::~job() {
    // A rank leaving while a peer still reads its memory (single copy) or
    // its last messages would look lost to that peer; meet once more unless
    // we are unwinding from a failure, when the peers must see us go.
    if (finished_ || std::uncaught_exceptions() > 0) return;
    try {
        tutti::wait(world_, barrier(world_));
    } catch (...) {
        // Leaving anyway; peers that still wait learn it from the transport.
    }
}

} // namespace tutti
