// What an algorithm sees of the call it runs: the communicator, the
// generation, and point-to-point messaging whose tags are made for it. Steps
// are the algorithm's own numbering of its messages; phase() gives a
// sub-collective of a composition a step space of its own within the same
// generation, so the parts of one call never match each other's messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/collective.hpp"
#include "core/communicator.hpp"
#include "core/request.hpp"
#include "core/task.hpp"

namespace tutti {

class call_context {
public:
    // Algorithms number their steps below this bound.
    static constexpr std::uint64_t max_steps = std::uint64_t{1} << 20;

    // The context refers to comm, which the call's own coroutine frame holds
    // (every front end takes its communicator by value): it is made for one
    // call and lives no longer. Copying a communicator is a reference count,
    // a locked instruction; a call makes several contexts (one per phase).
    call_context(const communicator& comm, std::uint64_t generation, collective kind,
                 std::string_view algorithm);

    const communicator& comm() const noexcept { return *comm_; }
    int rank() const noexcept { return rank_; }
    int size() const noexcept { return size_; }
    std::uint64_t generation() const noexcept { return generation_; }
    collective kind() const noexcept { return kind_; }
    std::uint32_t algorithm() const noexcept { return algorithm_; }

    // A context for part `index` of a composition, run by `algorithm`.
    call_context phase(unsigned index, std::string_view algorithm) const;

    // Point to point with this call's tags; peers are ranks of comm().
    request isend(int peer, std::uint64_t step, std::span<const std::byte> data) const;
    request irecv(int peer, std::uint64_t step, std::span<std::byte> into) const;
    request irecv_any_size(int peer, std::uint64_t step) const;

    task<void> send(int peer, std::uint64_t step, std::span<const std::byte> data) const;
    task<void> recv(int peer, std::uint64_t step, std::span<std::byte> into) const;
    task<std::vector<std::byte>> recv_any_size(int peer, std::uint64_t step) const;
    // Sends to one peer and receives from another at once, so two ranks that
    // exchange never wait on each other's send.
    task<void> send_recv(int dest, std::span<const std::byte> data, int source,
                         std::span<std::byte> into, std::uint64_t step) const;

private:
    message_header header(int world_source, std::uint64_t step, std::size_t bytes) const;

    const communicator* comm_;
    int rank_;
    int size_;
    std::uint64_t generation_;
    collective kind_;
    std::uint32_t algorithm_;
    std::uint64_t phase_path_ = 0; // which part of a composition, nested
};

} // namespace tutti
