// A process's place in a multi-process job: joins the job the way it was
// launched (PMIx under mpirun or srun; the environment under tuttirun or by
// hand), connects the ranks (shared memory within a node, TCP between nodes,
// see transports/routed/routed.hpp), and hands out the world communicator,
// which knows the job's nodes when there are several (job_options). One per
// process.
//
//   int main() {
//       tutti::job job;
//       job.run([](tutti::communicator world) -> tutti::task<void> {
//           std::vector<double> x{1.0};
//           co_await tutti::all_reduce(world, x, tutti::sum);
//       });
//   }
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "bootstrap/bootstrap.hpp"
#include "core/communicator.hpp"
#include "core/task.hpp"
#include "transports/routed/routed.hpp"
#include "transports/shm/shm.hpp"
#include "transports/tcp/tcp.hpp"

namespace tutti {

struct job_options {
    shm::options shared_memory;
    tcp::options tcp;
    // nullopt: TUTTI_TRANSPORT decides (auto when unset): shared memory
    // within a node, TCP between nodes; shm or tcp force one for every peer.
    std::optional<routed::choice> transport;
    // In a job over several nodes of which some hold several ranks (shm+tcp),
    // the world communicator gets the node hierarchy (a group per node), so
    // that `auto` may run the hierarchical compositions: shared memory
    // within each node, TCP only among the nodes' representatives
    // (docs/routing.md). false keeps the world flat. nullopt: on, unless
    // TUTTI_NODE_HIERARCHY=0.
    std::optional<bool> node_hierarchy;
};

class job {
public:
    // Throws tutti::error when the launch information is missing or bad
    // (saying how to launch), or when peers do not arrive in time.
    explicit job(job_options options = {});
    ~job();
    job(const job&) = delete;
    job& operator=(const job&) = delete;

    int rank() const noexcept { return world_.rank(); }
    int size() const noexcept { return world_.size(); }
    const communicator& world() const noexcept { return world_; }
    asio::io_context& context() noexcept { return context_; }
    const tutti::bootstrap& launch() const noexcept { return *bootstrap_; }
    // Which rank is on which node and reached through what (printed at start
    // when TUTTI_DEBUG is set).
    const routed::routing_table& routes() const noexcept { return connected_.routes; }
    // The shared-memory transport among this node's ranks; a tutti::error
    // when this rank has none (every peer through TCP).
    const shm::transport& shared_memory() const;
    // The TCP transport, or nullptr when the job does not use one.
    const tcp::transport* tcp() const noexcept { return connected_.tcp.get(); }

    // Runs body(world) to completion on this thread, then waits at a barrier
    // so no rank leaves while others still read from it.
    void run(const std::function<task<void>(communicator)>& body);

private:
    asio::io_context context_;
    std::unique_ptr<tutti::bootstrap> bootstrap_;
    routed::world connected_;
    communicator world_;
    bool finished_ = false;
};

} // namespace tutti
