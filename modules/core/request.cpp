#include "core/request.hpp"

namespace tutti {

void request_state::complete(std::exception_ptr failure) {
    std::unique_ptr<waiter> w;
    {
        std::lock_guard lock(mutex_);
        if (done_) return;
        done_ = true;
        failure_ = std::move(failure);
        w = std::move(waiter_);
    }
    if (w) w->resume();
}

void request_state::complete_with_payload(std::vector<std::byte> payload) {
    {
        std::lock_guard lock(mutex_);
        if (done_) return;
        payload_ = std::move(payload);
    }
    complete();
}

bool request_state::done() const {
    std::lock_guard lock(mutex_);
    return done_;
}

task<void> request_state::wait() {
    bool ready;
    {
        std::lock_guard lock(mutex_);
        ready = done_;
    }
    if (!ready) {
        co_await asio::async_initiate<const asio::use_awaitable_t<>&, void()>(
            [this](auto handler) {
                std::unique_lock lock(mutex_);
                if (done_) {
                    lock.unlock();
                    auto ex = asio::get_associated_executor(handler);
                    asio::post(ex, std::move(handler));
                    return;
                }
                waiter_ = std::make_unique<waiter_for<decltype(handler)>>(std::move(handler));
            },
            asio::use_awaitable);
    }
    std::lock_guard lock(mutex_);
    if (failure_) std::rethrow_exception(failure_);
}

std::vector<std::byte> request_state::take_payload() {
    std::lock_guard lock(mutex_);
    return std::move(payload_);
}

task<void> wait_all(std::span<const request> requests) {
    std::exception_ptr first;
    for (const auto& r : requests) {
        try {
            co_await r->wait();
        } catch (...) {
            if (!first) first = std::current_exception();
        }
    }
    if (first) std::rethrow_exception(first);
}

} // namespace tutti
