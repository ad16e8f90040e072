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
    // Never completed: the suspended coroutine is never resumed (its frame,
    // which owns this request, is being destroyed).
    const auto s = state_.load(std::memory_order_acquire);
    if (s != pending_state && s != done_state) reinterpret_cast<waiter*>(s)->release();
}

void request_state::publish(std::exception_ptr failure) {
    failure_ = std::move(failure);
    const auto s = state_.exchange(done_state, std::memory_order_acq_rel);
    if (s != pending_state && s != done_state) reinterpret_cast<waiter*>(s)->resume_and_release();
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
    auto* w = new (waiter_space_) resume_coroutine(coroutine, chain);
    auto expected = pending_state;
    return state_.compare_exchange_strong(expected, reinterpret_cast<std::uintptr_t>(w),
                                          std::memory_order_acq_rel, std::memory_order_acquire);
}

void request_state::resume_coroutine::resume_and_release() {
    // The coroutines of a rank run on its io_context's own executor; drive()
    // resumes those itself, without a round through the context's queue.
    // Anything else (a strand, another context, another thread) is posted.
    if (auto* context = detail::resumption_context()) {
        if (auto* own = runs_in.executor.target<asio::io_context::executor_type>();
            own && &own->context() == context && detail::park_for_resumption(*context, this))
            return;
    }
    asio::post(runs_in.executor, detail::resume_in_chain(coroutine, runs_in));
}

void request_state::resume_coroutine::resume_here() {
    coroutine.resume();
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
