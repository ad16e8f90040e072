// The TCP transport: ranks on any network exchange messages over Asio TCP
// sockets driven by C++20 coroutines on the caller's io_context. One
// connection per pair of ranks, made when first needed (the lower rank
// connects; a simultaneous connect from the higher rank is answered by
// asking it to wait for ours), authenticated by the job-secret handshake of
// handshake.hpp before any data frame is accepted, and framed by frame.hpp.
// A send is one gathered write of header and user bytes; a receive lands
// straight in the destination of its posted receive, or is queued (within a
// memory bound) until that receive is posted. A peer whose connection drops
// without a goodbye frame fails every pending and later receive with
// errc::peer_lost naming it.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "bootstrap/bootstrap.hpp"
#include "core/asio.hpp"
#include "core/transport.hpp"

namespace tutti::tcp {

struct options {
    // "" : TUTTI_TCP_ADDRESS if set, else where the bootstrap says this rank
    // is reachable, else the host's address.
    std::string listen_address;
    // 0: any free port (TUTTI_TCP_PORT may set it).
    std::uint16_t listen_port = 0;
    // Per series of attempts; the final error names peer rank and address.
    std::chrono::milliseconds connect_timeout{10000};
    // The largest data frame accepted; a longer one closes its connection.
    std::uint64_t max_frame_payload = std::uint64_t{1} << 30;
    // "" : TUTTI_JOB_SECRET, else rank 0 makes a random one and shares it
    // through the bootstrap.
    std::string secret;
    // Bytes of arrived messages whose receive is not yet posted that one
    // rank keeps; a peer exceeding it is read no further until receives are
    // posted (TCP's flow control then holds the sender back).
    std::uint64_t max_unexpected_bytes = std::uint64_t{1} << 31;
    // A large message (over 128 KiB) whose receive is not posted yet when it
    // arrives: its reader waits up to this many nanoseconds per byte (1 MiB:
    // ~1 ms at 1.0) for the receive, reading nothing more from that peer
    // meanwhile, and reads the message straight into it; only after that
    // does it read the message into a buffer of its own, to be copied again
    // when the receive comes. Open MPI's TCP path reads such messages into
    // their receives alone (a rendezvous); at 4 ranks over loopback, staging
    // took a fifth to two thirds of the bytes of 1-16 MiB collectives
    // through that second copy, and waiting made the 4 and 16 MiB ones
    // 0.70-0.93 as long (docs/performance.md, forty-fourth session). The
    // bound keeps a program that awaits a later message of the same peer
    // first from waiting on this one for long: about as long as the message
    // takes to arrive. 0: stage at once. TUTTI_TCP_UNPOSTED_WAIT_NS_PER_BYTE
    // overrides it.
    double unposted_wait_ns_per_byte = 1.0;
    // true: a waiting rank polls its sockets (spinning, then yielding, then
    // blocking, as over shared memory) instead of blocking in the io_context
    // at once: an 8-byte all_reduce over loopback takes ~5.5 us instead of
    // ~17 us on idle cores (a blocked wake-up costs ~20 us here), and with
    // more ranks than cores, where the back-off yields at once, 64 KiB
    // collectives take half the time or less (docs/transport-tcp.md).
    // TUTTI_TCP_BUSY_POLL=1 or 0 overrides it.
    bool busy_poll = true;
    // The congestion control of this rank's connections (Linux's
    // TCP_CONGESTION), set once a connection is up:
    // - "" (the default): reno on a connection whose two ends have the same
    //   address, that is within this host; on the others the system's
    //   default, unless that paces (BBR), then reno too. BBR, a common
    //   default, sends every burst at the rate it last measured; 1 and
    //   16 MiB collectives took up to 1.9 times as long with it over
    //   loopback and up to 3 times over veth between network namespaces
    //   (docs/transport-tcp.md). Reno is the one every process may choose,
    //   and with nothing lost it only grows its window.
    // - "system": the system's default on every connection.
    // - a name: that one on every connection; it must be one of
    //   /proc/sys/net/ipv4/tcp_available_congestion_control. One that is not
    //   allowed to this process (tcp_allowed_congestion_control) leaves the
    //   system's default.
    // TUTTI_TCP_CONGESTION overrides it.
    std::string congestion_control;
    // Which machine this rank runs on: the ranks that name the same one
    // share its cores, and a rank waits for them as it would for ranks of
    // shared memory (transport::ranks_on_this_machine). "" : the kernel's
    // boot id, which every process of one machine sees, in any network
    // namespace or container; a test poses ranks of one machine as on
    // several with it.
    std::string machine;
};

// What happened on this rank's connections, for tests and tutti-info.
struct counters {
    std::uint64_t frames_sent = 0, frames_received = 0, connections = 0, rejected_connections = 0,
                  bad_frames = 0;
    // Large messages that arrived before their receive (options::
    // unposted_wait_ns_per_byte): how many the reader waited for, and how
    // many of those it then read into a buffer of their own, their receive
    // not posted in time.
    std::uint64_t unposted_waits = 0, staged_messages = 0;
    // Messages whose payload, past what the reader had buffered, was read
    // straight into their posted receive (large ones, and mid-size ones whose
    // receive was posted when they came).
    std::uint64_t straight_reads = 0;
    // The congestion control of the last connection made, as its socket
    // reports it ("" before the first, or where the system cannot tell).
    std::array<char, 16> congestion_control{};
};

class transport : public tutti::transport {
public:
    // "address:port" this rank listens on.
    virtual std::string endpoint() const = 0;
    // What every rank published.
    virtual std::string endpoint_of(int rank) const = 0;
    virtual tcp::counters counters() const noexcept = 0;
    // A loss this rank learnt of elsewhere (over shared memory): fails every
    // TCP receive, as a loss seen on a connection does, and tells the
    // connected peers that `rank` was lost, so that a rank which never
    // waited for it still names it. Nothing when a loss was already seen.
    // `why` follows "rank N " in this rank's own failures.
    virtual void report_loss(int rank, const std::string& why) = 0;
};

// Collective over the bootstrap's ranks (every rank calls it): listens,
// publishes its endpoint with boot.all_gather, connects lazily on first
// send. World ranks = bootstrap ranks. Throws tutti::error for bad options,
// an address it cannot listen on, or a secret that is not 64 hex digits.
std::shared_ptr<tcp::transport> create_transport(bootstrap& boot, asio::io_context& context,
                                                 options opts = {});

} // namespace tutti::tcp
