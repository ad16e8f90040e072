#include "core/request.hpp"

namespace tutti {

void request_state::publish(std::exception_ptr failure) {
    failure_ = std::move(failure);
    const auto s = state_.exchange(done_state, std::memory_order_acq_rel);
    if (s != pending_state && s != done_state)
        reinterpret_cast<detail::parked_waiter*>(s)->resume_soon();
}

void request_state::complete(std::exception_ptr failure) {
    if (claim()) publish(std::move(failure));
}

void request_state::complete_with_payload(std::vector<std::byte> payload) {
    if (!claim()) return;
    payload_ = std::move(payload);
    publish(nullptr);
}

bool request_state::done() const {
    return state_.load(std::memory_order_acquire) == done_state;
}

bool request_state::park(std::coroutine_handle<> coroutine, detail::chain& chain) {
    waiter_ = {coroutine, &chain};
    auto expected = pending_state;
    return state_.compare_exchange_strong(expected, reinterpret_cast<std::uintptr_t>(&waiter_),
                                          std::memory_order_acq_rel, std::memory_order_acquire);
}

void detail::parked_waiter::resume_soon() {
    // The coroutines of a rank run on its io_context's own executor; drive()
    // resumes those itself, without a round through the context's queue.
    // Anything else (a strand, another context, another thread) is posted.
    if (auto* context = resumption_context()) {
        if (auto* own = runs_in->executor.target<asio::io_context::executor_type>();
            own && &own->context() == context && park_for_resumption(*context, this))
            return;
    }
    asio::post(runs_in->executor, resume_in_chain(coroutine, *runs_in));
}

bool request_state::must_wait() const {
    if (!done()) detail::poll_before_suspending(*this);
    if (!done()) return true;
    if (failure_) std::rethrow_exception(failure_);
    return false;
}

std::vector<std::byte> request_state::take_payload() {
    return std::move(payload_);
}

request completed_request() {
    // Owned by the thread, and handed out through a shared_ptr that shares
    // no ownership (aliasing an empty one): copying and dropping it touches
    // no reference count. A count is a locked instruction, and right after a
    // shared-memory send it would wait for the ring write to reach the peer.
    struct completed_state {
        request_state state;
        completed_state() { state.complete(); }
    };
    thread_local completed_state done;
    return request(request(), &done.state);
}

task<void> wait_all(std::span<const request> requests) {
    std::exception_ptr first;
    for (const auto& r : requests) {
        try {
            if (r->must_wait()) co_await r->wait();
        } catch (...) {
            if (!first) first = std::current_exception();
        }
    }
    if (first) std::rethrow_exception(first);
}

} // namespace tutti
