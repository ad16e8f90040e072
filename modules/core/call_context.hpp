// What an algorithm sees of the call it runs: the communicator, the
// generation, and point-to-point messaging whose tags are made for it. Steps
// are the algorithm's own numbering of its messages; phase() gives a
// sub-collective of a composition a step space of its own within the same
// generation, so the parts of one call never match each other's messages.
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/collective.hpp"
#include "core/communicator.hpp"
#include "core/message.hpp"
#include "core/request.hpp"
#include "core/task.hpp"

namespace tutti {

// What call_context's send, recv and send_recv return; co_await it at once.
// The messages are posted when the call is made. Those that complete
// meanwhile (a send into a ring with room, a small receive whose message
// is already here or arrives while the thread polls) cost neither a
// suspension nor a coroutine frame; only the rest is waited for by a task.
// Awaiting rethrows a failure once every message of the step is done, so
// no transport still uses a buffer the caller gives up.
class [[nodiscard]] message_step {
public:
    message_step() = default; // done
    explicit message_step(std::exception_ptr failed) noexcept : failed_(std::move(failed)) {}
    // Waits for the requests still pending (either may be empty), then
    // rethrows `failed`, or else the first failure among them.
    message_step(request first, request second, std::exception_ptr failed = nullptr);

    bool await_ready() const noexcept { return !waiting_; }
    template <class Promise>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> awaiting) noexcept {
        return waiting_->await_suspend(awaiting);
    }
    void await_resume() {
        if (waiting_) return waiting_->await_resume();
        if (failed_) std::rethrow_exception(failed_);
    }

private:
    std::exception_ptr failed_;
    std::optional<task<void>> waiting_;
};

// When an algorithm needs a send to have completed: before a later step of
// its call (the default: a ring that awaits each step, a buffer overwritten
// next), or only at the call's end, together with its other messages (a
// fan-out such as a linear all_to_all). The transport may move a send of
// the second kind by a path that saves a copy but holds the sender until its
// receiver takes it (transport::isend_awaited_at_end).
enum class send_awaited { before_next_step, at_end };

// What a receiver does with a message once it has it: keeps it (a result,
// a block passed on later), or reads it whole at once (a reduction's
// scratch, combined with its own data before anything else). A transport
// may copy the second kind so that it lands in the receiver's own cache
// (transport::irecv_combined_at_once).
enum class receive_use { kept, combined_at_once };

class call_context {
public:
    // Algorithms number their steps below this bound.
    static constexpr std::uint64_t max_steps = std::uint64_t{1} << 20;

    // The context refers to comm, which the call's own coroutine frame holds
    // (every front end takes its communicator by value): it is made for one
    // call and lives no longer. Copying a communicator is a reference count,
    // a locked instruction; a call makes several contexts (one per phase).
    call_context(const communicator& comm, std::uint64_t generation, collective kind,
                 std::string_view algorithm)
        : call_context(comm, generation, kind, algorithm_id(algorithm)) {}
    // The same with the algorithm's id (algorithm_id of its name).
    call_context(const communicator& comm, std::uint64_t generation, collective kind,
                 std::uint32_t algorithm)
        : comm_(&comm), rank_(comm.rank()), size_(comm.size()), generation_(generation),
          kind_(kind), algorithm_(algorithm) {}

    const communicator& comm() const noexcept { return *comm_; }
    int rank() const noexcept { return rank_; }
    int size() const noexcept { return size_; }
    std::uint64_t generation() const noexcept { return generation_; }
    collective kind() const noexcept { return kind_; }
    std::uint32_t algorithm() const noexcept { return algorithm_; }

    // A context for part `index` of a composition, run by `algorithm`.
    call_context phase(unsigned index, std::string_view algorithm) const;
    // The same with the algorithm's id (algorithm_id of its name, as the
    // catalog keeps it): a call's phases do not hash a name every time.
    call_context phase(unsigned index, std::uint32_t algorithm) const {
        // 6 bits per nesting level above the 20 bits of steps: 63 parts per
        // composition, seven levels deep, within the 64-bit step. Inline:
        // every call makes one.
        call_context sub = *this;
        sub.algorithm_ = algorithm;
        sub.phase_path_ = phase_path_ * 64 + index + 1;
        if (index >= 63 || sub.phase_path_ >= (std::uint64_t{1} << 44)) phase_out_of_range(index);
        return sub;
    }

    // Point to point with this call's tags; peers are ranks of comm().
    // `when` says whether a later step of this call awaits the send (the
    // default) or only the call's end, with its other messages, its buffer
    // left alone until then (a fan-out): see transport::isend_awaited_at_end.
    request isend(int peer, std::uint64_t step, std::span<const std::byte> data,
                  send_awaited when = send_awaited::before_next_step) const;
    // As isend, but a send the transport completes at once (try_send) gives
    // an empty request, and makes none: algorithms that post several sends
    // keep only the pending ones, and wait only if there are any.
    request start_send(int peer, std::uint64_t step, std::span<const std::byte> data,
                       send_awaited when = send_awaited::before_next_step) const;
    request irecv(int peer, std::uint64_t step, std::span<std::byte> into,
                  receive_use use = receive_use::kept) const;
    request irecv_any_size(int peer, std::uint64_t step) const;
    // As irecv, telling `observer` how much has landed while the rest is on
    // its way (transport::irecv_observed). observer must outlive the
    // request.
    request irecv_observed(int peer, std::uint64_t step, std::span<std::byte> into,
                           landing_observer& observer, receive_use use = receive_use::kept) const;

    // For an algorithm that failed with requests still pending: withdraws
    // the receives no message has reached yet, then waits for the other
    // receives and the sends, so that no transport touches the caller's
    // buffers once the call has thrown. Their own failures are dropped; the
    // algorithm rethrows the one that made it give up. (Waiting for the
    // receives instead could wait forever: after a failure their messages
    // may never be sent.)
    task<void> abandon(std::span<const request> receives, std::span<const request> sends) const;

    // Receives of at most this many bytes (recv, send_recv) look for their
    // message before posting a receive: the request, its place in the
    // mailbox, its completion and the coroutine's suspension cost more than
    // the look. A message that arrives while the receive polls is copied
    // straight into it and one that arrived before is copied from the
    // mailbox, as a posted receive would have been. Larger receives are
    // posted first: their copy outweighs the request, and a transport that
    // cannot hand them over as they arrive would copy them twice. Up to 64
    // bytes until the eighteenth session; 8 KiB took the 2-rank 256-byte
    // all_gather from 0.249 to 0.210 us and the 4 KiB one from 0.493 to
    // 0.385 (docs/performance.md).
    static constexpr std::size_t polled_receive_bytes = 8 * 1024;

    message_step send(int peer, std::uint64_t step, std::span<const std::byte> data,
                      send_awaited when = send_awaited::before_next_step) const;
    message_step recv(int peer, std::uint64_t step, std::span<std::byte> into,
                      receive_use use = receive_use::kept) const;
    task<std::vector<std::byte>> recv_any_size(int peer, std::uint64_t step) const;
    // Sends to one peer and receives from another at once, so two ranks that
    // exchange never wait on each other's send.
    message_step send_recv(int dest, std::span<const std::byte> data, int source,
                           std::span<std::byte> into, std::uint64_t step,
                           send_awaited when = send_awaited::before_next_step) const;

private:
    [[noreturn]] static void phase_out_of_range(unsigned index);
    // Inline: every message of every call makes one.
    message_header header(int world_source, std::uint64_t step, std::size_t bytes) const {
        if (step >= max_steps) step_out_of_range(step);
        message_header h;
        h.key.communicator = comm_->id();
        h.key.generation = generation_;
        h.key.step = (phase_path_ << 20) | step;
        h.key.source = world_source;
        h.kind = kind_;
        h.algorithm = algorithm_;
        h.bytes = bytes;
        return h;
    }
    [[noreturn]] static void step_out_of_range(std::uint64_t step);
    // For a small receive: looks for the message without posting a receive,
    // polling the thread's transport a moment (true: it is in `into`).
    bool receive_now(const message_header& expected, std::span<std::byte> into) const;

    const communicator* comm_;
    int rank_;
    int size_;
    std::uint64_t generation_;
    collective kind_;
    std::uint32_t algorithm_;
    std::uint64_t phase_path_ = 0; // which part of a composition, nested
};

} // namespace tutti
