#include "core/call_context.hpp"

#include <array>
#include <exception>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/mailbox.hpp"
#include "core/message.hpp"
#include "core/progress.hpp"

namespace tutti {

call_context call_context::phase(unsigned index, std::string_view algorithm) const {
    return phase(index, algorithm_id(algorithm));
}

void call_context::phase_out_of_range(unsigned index) {
    if (index >= 63)
        throw error(errc::invalid_argument,
                    fmt::format("a composition has at most 63 parts, part {} asked", index));
    throw error(errc::invalid_argument, "compositions nested more than seven levels deep");
}

void call_context::step_out_of_range(std::uint64_t step) {
    throw error(errc::invalid_argument,
                fmt::format("algorithm step {} is beyond the limit {}", step, max_steps));
}

namespace {
request send_through(transport& t, int dest, const message_header& h,
                     std::span<const std::byte> data, send_awaited when) {
    return when == send_awaited::at_end ? t.isend_awaited_at_end(dest, h, data)
                                        : t.isend(dest, h, data);
}
} // namespace

request call_context::isend(int peer, std::uint64_t step, std::span<const std::byte> data,
                            send_awaited when) const {
    auto& t = comm_->transport();
    return send_through(t, comm_->world_rank(peer), header(t.rank(), step, data.size()), data,
                        when);
}

request call_context::irecv(int peer, std::uint64_t step, std::span<std::byte> into,
                            receive_use use) const {
    auto& t = comm_->transport();
    const auto h = header(comm_->world_rank(peer), step, into.size());
    return use == receive_use::combined_at_once ? t.irecv_combined_at_once(h, into)
                                                : t.irecv(h, into);
}

request call_context::irecv_observed(int peer, std::uint64_t step, std::span<std::byte> into,
                                     landing_observer& observer, receive_use use) const {
    return comm_->transport().irecv_observed(header(comm_->world_rank(peer), step, into.size()),
                                             into, observer, use == receive_use::combined_at_once);
}

request call_context::irecv_any_size(int peer, std::uint64_t step) const {
    return comm_->transport().irecv_any_size(header(comm_->world_rank(peer), step, 0));
}

task<void> call_context::abandon(std::span<const request> receives,
                                 std::span<const request> sends) const {
    auto& t = comm_->transport();
    std::vector<request> left(sends.begin(), sends.end());
    for (const auto& r : receives)
        if (r && !r->done() && !t.withdraw(r)) left.push_back(r);
    std::erase_if(left, [](const request& r) { return !r; });
    try {
        co_await wait_all(left);
    } catch (...) {
        // Dropped: see the declaration.
    }
}

namespace {

// The part of a step that did not complete at once: wait_all's semantics,
// with a failure found earlier taking precedence.
task<void> finish_step(std::array<request, 2> pending, std::exception_ptr failed) {
    try {
        co_await wait_all(pending);
    } catch (...) {
        if (!failed) failed = std::current_exception();
    }
    if (failed) std::rethrow_exception(failed);
}

// Empties r if it is done (its failure, if any, kept in `failed` unless
// one is there already).
void drop_if_done(request& r, std::exception_ptr& failed) {
    if (!r) return;
    try {
        if (r->must_wait()) return;
    } catch (...) {
        if (!failed) failed = std::current_exception();
    }
    r = {};
}

} // namespace

message_step::message_step(request first, request second, std::exception_ptr failed) {
    drop_if_done(first, failed);
    drop_if_done(second, failed);
    if (!first && !second) {
        failed_ = std::move(failed);
        return;
    }
    // wait_all takes requests only: one already done stands in for a gap.
    waiting_.emplace(finish_step({first ? std::move(first) : completed_request(),
                                  second ? std::move(second) : completed_request()},
                                 std::move(failed)));
}

request call_context::start_send(int peer, std::uint64_t step, std::span<const std::byte> data,
                                 send_awaited when) const {
    auto& t = comm_->transport();
    const auto h = header(t.rank(), step, data.size());
    const int dest = comm_->world_rank(peer);
    if (t.try_send(dest, h, data)) return {};
    return send_through(t, dest, h, data, when);
}

namespace {
// The step of a send alone: done already when it left at once (no call of
// message_step's constructor, which looks at both requests).
message_step after_send(request sent) {
    if (!sent) return {};
    return {std::move(sent), {}};
}
} // namespace

message_step call_context::send(int peer, std::uint64_t step, std::span<const std::byte> data,
                                send_awaited when) const {
    return after_send(start_send(peer, step, data, when));
}

bool call_context::receive_now(const message_header& expected, std::span<std::byte> into) const {
    using result = transport::try_result;
    auto& t = comm_->transport();
    const auto first = t.try_recv(expected, into);
    if (first != result::not_yet) return first == result::received;
    // Polled only where this thread polls this very transport.
    const auto polling = detail::polling_here();
    if (polling.polled != &t) return false;
    for (unsigned i = 0; i < polling.rounds; ++i) {
        const auto now = t.poll_recv(expected, into);
        if (now != result::not_yet) return now == result::received;
    }
    return false;
}

message_step call_context::recv(int peer, std::uint64_t step, std::span<std::byte> into,
                                receive_use use) const {
    if (into.size() <= polled_receive_bytes &&
        receive_now(header(comm_->world_rank(peer), step, into.size()), into))
        return {};
    return {irecv(peer, step, into, use), {}};
}

task<std::vector<std::byte>> call_context::recv_any_size(int peer, std::uint64_t step) const {
    auto r = irecv_any_size(peer, step);
    co_await r->wait();
    co_return r->take_payload();
}

message_step call_context::send_recv(int dest, std::span<const std::byte> data, int source,
                                     std::span<std::byte> into, std::uint64_t step,
                                     send_awaited when) const {
    if (into.size() <= polled_receive_bytes) {
        // Sent first, so the peer has it while we look for its message.
        auto sent = start_send(dest, step, data, when);
        try {
            if (receive_now(header(comm_->world_rank(source), step, into.size()), into))
                return after_send(std::move(sent));
        } catch (...) {
            return {std::move(sent), {}, std::current_exception()};
        }
        return {irecv(source, step, into), std::move(sent)};
    }
    auto received = irecv(source, step, into);
    return {std::move(received), start_send(dest, step, data, when)};
}

} // namespace tutti
