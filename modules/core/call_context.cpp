#include "core/call_context.hpp"

#include <exception>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/message.hpp"

namespace tutti {

call_context::call_context(const communicator& comm, std::uint64_t generation, collective kind,
                           std::string_view algorithm)
    : comm_(&comm), rank_(comm.rank()), size_(comm.size()), generation_(generation), kind_(kind),
      algorithm_(algorithm_id(algorithm)) {}

call_context call_context::phase(unsigned index, std::string_view algorithm) const {
    // 6 bits per nesting level above the 20 bits of steps: 63 parts per
    // composition, seven levels deep, within the 64-bit step.
    if (index >= 63)
        throw error(errc::invalid_argument,
                    fmt::format("a composition has at most 63 parts, part {} asked", index));
    call_context sub = *this;
    sub.algorithm_ = algorithm_id(algorithm);
    sub.phase_path_ = phase_path_ * 64 + index + 1;
    if (sub.phase_path_ >= (std::uint64_t{1} << 44))
        throw error(errc::invalid_argument, "compositions nested more than seven levels deep");
    return sub;
}

message_header call_context::header(int world_source, std::uint64_t step, std::size_t bytes) const {
    if (step >= max_steps)
        throw error(errc::invalid_argument,
                    fmt::format("algorithm step {} is beyond the limit {}", step, max_steps));
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

request call_context::isend(int peer, std::uint64_t step, std::span<const std::byte> data) const {
    auto& t = comm_->transport();
    return t.isend(comm_->world_rank(peer), header(t.rank(), step, data.size()), data);
}

request call_context::irecv(int peer, std::uint64_t step, std::span<std::byte> into) const {
    return comm_->transport().irecv(header(comm_->world_rank(peer), step, into.size()), into);
}

request call_context::irecv_any_size(int peer, std::uint64_t step) const {
    return comm_->transport().irecv_any_size(header(comm_->world_rank(peer), step, 0));
}

task<void> call_context::send(int peer, std::uint64_t step, std::span<const std::byte> data) const {
    const auto sent = isend(peer, step, data);
    if (sent->must_wait()) co_await sent->wait();
}

task<void> call_context::recv(int peer, std::uint64_t step, std::span<std::byte> into) const {
    const auto received = irecv(peer, step, into);
    if (received->must_wait()) co_await received->wait();
}

task<std::vector<std::byte>> call_context::recv_any_size(int peer, std::uint64_t step) const {
    auto r = irecv_any_size(peer, step);
    co_await r->wait();
    co_return r->take_payload();
}

task<void> call_context::send_recv(int dest, std::span<const std::byte> data, int source,
                                   std::span<std::byte> into, std::uint64_t step) const {
    // wait_all's semantics (both done before a failure is rethrown) without
    // its coroutine frame: this runs for nearly every message of a collective.
    auto received = irecv(source, step, into);
    auto sent = isend(dest, step, data);
    std::exception_ptr failed;
    try {
        if (received->must_wait()) co_await received->wait();
    } catch (...) {
        failed = std::current_exception();
    }
    try {
        if (sent->must_wait()) co_await sent->wait();
    } catch (...) {
        if (!failed) failed = std::current_exception();
    }
    if (failed) std::rethrow_exception(failed);
}

} // namespace tutti
