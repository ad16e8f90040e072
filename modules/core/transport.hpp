// The transport interface: tagged send and receive of byte spans between the
// ranks of one "world" (the processes or threads a transport connects), plus
// what the transport can do, for selection. Each transport lives in its own
// folder under transports/; a communicator routes through it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "core/message.hpp"
#include "core/request.hpp"

namespace tutti {

struct transport_capabilities {
    bool single_copy = false; // a peer can read or write our memory directly
    bool remote_memory_access = false;
    double latency_us = 0;         // one small message, one way
    double bandwidth_gb_per_s = 0; // one large message, one way
    // Every call for this rank comes from the one thread that runs its
    // io_context (a process's rank over shared memory or TCP), so what is
    // per rank needs no lock.
    bool one_thread = false;
    // The longest message that travels as one piece, which its receiver can
    // copy while the sender writes the next (shared memory: a cell's
    // payload); 0 if the transport has no such unit. Algorithms that cut a
    // vector into segments (reduce's segmented_binomial) cut it into pieces
    // of this size: one a byte longer would take a second piece.
    std::size_t segment_bytes = 0;
    // How long a cache line takes there and back between the cores of two
    // of the world's ranks (the slowest pair measured), in ns; the same on
    // every rank, so selection may branch on it. 0: unknown (ranks that
    // share cores, other transports).
    std::uint32_t line_ns = 0;
    // How long process_vm_readv takes to read a buffer its owner has just
    // written, as a percentage of the time its two copies through the
    // shared-memory cells take (timed at setup between rank 0 and the
    // slowest pair's peer); the same on every rank. Where it is high, the
    // kernel copies slowly across these cores, whatever line_ns says. 0:
    // unknown (ranks that share cores, no single copy, other transports).
    std::uint32_t readv_percent = 0;
    // The transport judged its single copy slow from that figure (shm: above
    // options::cells_readv_percent) and keeps messages in its cells that
    // would otherwise take it. Selection branches on this, not on the
    // figure, so that an algorithm is chosen for the path its messages
    // really take, and the rule's figure lives in one place. The same on
    // every rank.
    bool slow_single_copy = false;
    // How many of the world's ranks each core runs, rounded up, where all of
    // them run on this machine (shared memory; TCP where every rank names
    // this machine): 1 where each rank has a core of its own, 5 for 9 or 10
    // ranks on 2 cores. Where ranks take turns on a core, every step of an
    // algorithm waits for turns, and the algorithms of fewest steps win
    // (docs/selection.md). The same on every rank. 0: unknown (ranks on
    // several machines, RDMA, shm+tcp, whose trees were measured without
    // it; the in-process transport does not count its threads).
    std::uint32_t ranks_per_core = 0;
};

// Told, while a receive's message arrives, how much of it has landed: its
// owner may use those bytes before the rest comes in (a reduction combines
// them while they are still in the cache, and while the sender still
// sends). Called on the thread that runs the transport, between its reads,
// with a count of bytes that only grows and never reaches the whole
// message: the owner takes what is left once the receive completes, and a
// transport may report nothing before that. Never called once the receive
// has completed, failed or been withdrawn.
class landing_observer {
public:
    // Bytes [0, bytes) of the receive's buffer hold the message's and will
    // not change.
    virtual void landed(std::size_t bytes) noexcept = 0;

    // Whether the observer takes the message's bytes from where they arrive
    // (take): a transport that would copy them into the receive's buffer
    // piece by piece, from cells or a mapping of the sender's memory, hands
    // each piece over instead, and a reduction combines straight from it,
    // sparing the buffer a write and a read of every byte.
    virtual bool takes_pieces() const noexcept { return false; }
    // Bytes [at, at + piece.size()) of the message, in order: the owner uses
    // them now (piece is gone once this returns), and writes into the
    // receive's buffer only what it keeps. Pieces handed over this way are
    // not reported by landed(); one transport may mix the two, in order.
    virtual void take(std::size_t /*at*/, std::span<const std::byte> /*piece*/) noexcept {}

protected:
    ~landing_observer() = default;
};

class transport {
public:
    virtual ~transport() = default;

    virtual std::string_view name() const noexcept = 0;
    virtual int rank() const noexcept = 0; // this endpoint's rank in the world
    virtual int size() const noexcept = 0; // ranks in the world
    // Ranks of the world that run on this rank's machine (this one among
    // them), and so share its cores: what the progress engine's back-off
    // weighs against the cores. A transport between machines says how many
    // of its peers share this one; the others' worlds are on one machine.
    virtual int ranks_on_this_machine() const noexcept { return size(); }
    virtual asio::io_context& context() noexcept = 0;
    virtual transport_capabilities capabilities() const noexcept = 0;
    // capabilities().single_copy alone. Every call asks it (the remembered
    // choice of algorithm depends on it), and a transport whose whole
    // capabilities take some building answers it more cheaply.
    virtual bool single_copy_now() const noexcept { return capabilities().single_copy; }

    // Sends header.bytes bytes of data to world rank dest. The data must stay
    // valid until the request completes; the transport reads it in place.
    virtual request isend(int dest, const message_header& header,
                          std::span<const std::byte> data) = 0;

    // As isend, for a send whose completion the caller awaits only when its
    // whole call ends, together with its other messages (a fan-out such as
    // a linear all_to_all), never before its next step. A transport may then
    // take a path that makes the sender wait for its receiver but saves a
    // copy, since no step of the sender hangs on that wait: shared memory
    // reads such a message by single copy from a lower size where ranks
    // share cores. A send that gates the next step (a ring's, whose buffer
    // the sender overwrites or whose completion it awaits before going on)
    // must use isend. Measured: the hops of a chain that pass on what they
    // have just combined do better without it, even as their last send; its
    // first hop, the caller's data from a rank with nothing else to do, does
    // better with it (docs/performance.md, fourteenth and sixteenth
    // sessions).
    virtual request isend_awaited_at_end(int dest, const message_header& header,
                                         std::span<const std::byte> data) {
        return isend(dest, header, data);
    }

    // Sends as isend does if the whole message can leave at once (into a
    // ring with room, say): true then, and it is sent; false, and nothing
    // was sent (the caller sends with isend, which reports a failure). A
    // send done this way costs no request. Transports without it say false.
    virtual bool try_send(int /*dest*/, const message_header& /*header*/,
                          std::span<const std::byte> /*data*/) {
        return false;
    }

    // Receives exactly into.size() bytes for the given key and source. A
    // message of another length, or of another collective or algorithm for
    // the same step, fails the request with a tutti::error that says so.
    virtual request irecv(const message_header& expected, std::span<std::byte> into) = 0;

    // As irecv, into a buffer the receiver reads whole as soon as the
    // receive completes: a reduction's scratch, combined at once with its
    // own data. Where the sender would otherwise write part of the message
    // from its own core, the receiver would then fetch those lines back one
    // by one; shared memory copies such a message alone where lines travel
    // far between the cores (shm::options::shared_copy_far_line_ns).
    virtual request irecv_combined_at_once(const message_header& expected,
                                           std::span<std::byte> into) {
        return irecv(expected, into);
    }

    // As irecv (irecv_combined_at_once if combined_at_once), telling
    // `observer` how much of the message has landed while the rest is still
    // on its way (landing_observer). TCP reads a large message straight into
    // the receive and reports after each read; transports without it report
    // nothing, and the owner takes the whole message at completion.
    virtual request irecv_observed(const message_header& expected, std::span<std::byte> into,
                                   landing_observer& /*observer*/, bool combined_at_once) {
        return combined_at_once ? irecv_combined_at_once(expected, into) : irecv(expected, into);
    }

    // Takes a receive of this transport back before any message is matched
    // to it, for an algorithm that gives up after an earlier failure: true
    // when it is withdrawn (it completes failed, and nothing will write into
    // its buffer), false when it is done or may still be written (wait for
    // it then). Transports that cannot say false.
    virtual bool withdraw(const request& /*receive*/) { return false; }

    // Receives a message whose length only the sender knows; the request's
    // payload holds it.
    virtual request irecv_any_size(const message_header& expected) = 0;

    // A receive that completes now or never: if the message for `expected`
    // is already here, copies it into `into` (received), else leaves
    // nothing posted (not_yet); throws the error irecv's request would fail
    // with for a message that does not fit. Polled between rounds of
    // progress(), it lets a small receive skip its request. Transports
    // without it say unsupported, and their callers post irecv at once.
    enum class try_result { received, not_yet, unsupported };
    virtual try_result try_recv(const message_header& /*expected*/, std::span<std::byte> /*into*/) {
        return try_result::unsupported;
    }

    // One round of progress() for a receive that is not posted, then
    // try_recv(). A transport may hand the message over as it arrives
    // instead of queueing it first (shared memory does, through
    // mailbox::await_here). Only for transports whose try_recv is supported.
    // Unsupported (having done nothing) for a receive the transport would
    // not hand over as it arrives: the caller posts it instead.
    virtual try_result poll_recv(const message_header& expected, std::span<std::byte> into) {
        progress();
        return try_recv(expected, into);
    }

    // For transports that must be polled (shared memory, libfabric queues):
    // moves what is ready and returns how many events it handled. The
    // progress engine calls it from the thread that runs context(), between
    // handlers and from a coroutine about to suspend; it must never run a
    // coroutine itself (completions park or post their waiters).
    virtual std::size_t progress() { return 0; }

    // Blocks until a peer may have sent something or `limit` passes; the
    // last stage of the progress engine's spin, yield, block back-off.
    // Transports whose events arrive through context() need not override.
    virtual void await_activity(std::chrono::microseconds /*limit*/) {}

    // True when progress() must be called for pending work to complete.
    virtual bool needs_polling() const noexcept { return false; }
    // True when progress() itself finds every peer's message (shared memory
    // reads them from memory) rather than the io_context's events, which
    // the progress engine looks at only every few idle rounds: then a rank
    // may yield its core at every idle round without looking less often.
    virtual bool progress_finds_messages() const noexcept { return false; }
};

} // namespace tutti
