// The routed transport: one world over several transports, each peer reached
// through the best one that reaches it (NCCL's per-peer transport choice):
// shared memory for the ranks on this node, TCP for the ranks on other nodes.
// Which ranks share a node comes from the bootstrap's node() (the host name,
// or TUTTI_NODE to pose several nodes on one machine). A job whose ranks all
// share one node uses the shared-memory transport alone, exactly as without
// routing; a job whose routes are all TCP uses the TCP transport alone; only
// a mixed job pays for the routing layer (see docs/routing.md).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "core/asio.hpp"
#include "core/transport.hpp"
#include "transports/shm/shm.hpp"
#include "transports/tcp/tcp.hpp"

namespace tutti::routed {

// What TUTTI_TRANSPORT asks for: auto (shared memory on the node, TCP off
// it), shm (every rank must be on one node), tcp (every peer through TCP,
// even on one node).
enum class choice { automatic, shm, tcp };

std::string_view to_string(choice c) noexcept;
// "auto", "shm" or "tcp"; anything else is a tutti::error
// (errc::invalid_argument) naming `origin` (e.g. "TUTTI_TRANSPORT").
choice parse_choice(std::string_view text, std::string_view origin);
// TUTTI_TRANSPORT, or automatic when it is unset or empty.
choice choice_from_environment();

enum class route { shm, tcp };
std::string_view to_string(route r) noexcept;

// Who reaches whom through what, as this rank sees it; the same node names
// and transport name on every rank.
struct routing_table {
    int rank = 0;
    std::vector<std::string> nodes; // the node of each rank
    std::vector<route> routes;      // how this rank reaches each rank (itself included)
    // "shm" when every rank shares one node, "tcp" when every route of the
    // job is TCP, "shm+tcp" otherwise: what the world's transport is named.
    std::string transport_name;

    int size() const noexcept { return static_cast<int>(nodes.size()); }
    // One line per rank: "rank 2 on node 'b': tcp".
    std::vector<std::string> describe() const;
};

// Decides the routes from every rank's node (what connect() exchanges), so
// the choice can be tested without processes. Throws tutti::error
// (errc::invalid_argument) for choice::shm over several nodes.
routing_table plan_routes(int rank, std::vector<std::string> nodes, choice wanted);

struct options {
    // nullopt: TUTTI_TRANSPORT decides (auto when it is unset).
    std::optional<choice> transport;
    shm::options shared_memory;
    tcp::options tcp;
    // A mixed rank that waits on both routes at once blocks on each in turn
    // (the shared-memory doorbell, then the io_context's sockets) for this
    // long: the most latency an arrival on the other route can gain.
    std::chrono::microseconds wait_slice{100};
    // When everything it waits for is on one route, it blocks on that route
    // for up to this long before it looks at the other one, which can only
    // bring messages nobody waits for yet.
    std::chrono::microseconds single_route_block{500};
};

struct world {
    // What the world communicator uses: the shm or tcp transport itself when
    // one of them reaches every rank, the routing layer over both otherwise.
    std::shared_ptr<tutti::transport> transport;
    routing_table routes;
    // The parts, for counters and tutti-info; null where not used.
    std::shared_ptr<shm::transport> shared_memory; // over this node's ranks in a mixed job
    std::shared_ptr<tcp::transport> tcp;
};

// Collective over every rank of boot: exchanges node names (and checks that
// every rank asked for the same transport), then sets up shared memory
// within each node and TCP among all ranks as the routes need. Throws
// tutti::error for bad options, ranks that disagree on TUTTI_TRANSPORT, or a
// transport that cannot be set up.
world connect(bootstrap& boot, asio::io_context& context, options opts = {});

} // namespace tutti::routed
