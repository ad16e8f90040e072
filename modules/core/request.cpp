#include "core/request.hpp"

#include <array>

namespace tutti {

namespace detail {

namespace {

// One thread's recycled blocks. All hold the same type (the shared state of
// a request), so one size; blocks of another size are not kept.
struct block_cache {
    static constexpr std::size_t capacity = 64;
    std::size_t bytes = 0;
    std::size_t count = 0;
    std::array<void*, capacity> blocks{};
    ~block_cache();
};
thread_local block_cache cache;
// Set once the cache is destroyed at thread exit: requests freed later (by
// objects destroyed after it) go straight back to the heap.
thread_local bool cache_gone = false;

block_cache::~block_cache() {
    for (std::size_t i = 0; i < count; ++i)
        ::operator delete(blocks[i]);
    count = 0;
    cache_gone = true;
}

} // namespace

void* reuse_request_block(std::size_t bytes) noexcept {
    if (cache_gone || cache.count == 0 || cache.bytes != bytes) return nullptr;
    return cache.blocks[--cache.count];
}

bool keep_request_block(void* block, std::size_t bytes) noexcept {
    if (cache_gone) return false;
    if (cache.count == 0) cache.bytes = bytes;
    if (cache.bytes != bytes || cache.count == block_cache::capacity) return false;
    cache.blocks[cache.count++] = block;
    return true;
}

} // namespace detail

request_state::~request_state() {
    // Never completed: the suspended coroutine is destroyed, not resumed.
    if (waiter_) waiter_->release();
}

void request_state::complete(std::exception_ptr failure) {
    waiter* w;
    {
        std::lock_guard lock(mutex_);
        if (done_) return;
        done_ = true;
        failure_ = std::move(failure);
        w = std::exchange(waiter_, nullptr);
    }
    if (w) w->resume_and_release();
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
                set_waiter(std::move(handler));
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

request completed_request() {
    thread_local const request done = [] {
        auto r = make_request();
        r->complete();
        return r;
    }();
    return done;
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
