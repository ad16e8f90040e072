// A request is the completion of one posted send or receive. A transport
// completes it (from any thread); an algorithm co_awaits it. This is the one
// place where a transport's event meets a suspended coroutine.
//
// Every message makes one, so the path costs no heap allocation in steady
// state: states are recycled through a per-thread free list, and the waiting
// coroutine's handler is kept inside the state. It takes no lock either: a
// locked instruction right after a shared-memory send waits until the ring
// write has crossed to the other core, so each one on this path costs
// ~100 ns there. Completion claims the state with one exchange and publishes
// it with another; the waiter parks its handler with one compare-exchange.
#pragma once

#include <atomic>
#include <concepts>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/task.hpp"

namespace tutti {

class request_state;

namespace detail {

// A coroutine suspended on a request. Each operation ends the waiter's life.
struct parked_waiter {
    // Resumes through the coroutine's executor (asio::post), or hands the
    // waiter to the resumption queue of the thread if that queue runs the
    // same io_context (see resumption_scope in progress.hpp).
    virtual void resume_and_release() = 0;
    // Resumes the coroutine now, on this thread.
    virtual void resume_here() = 0;
    // Forgets the coroutine: it is never resumed.
    virtual void release() = 0;

protected:
    ~parked_waiter() = default;
};

// The thread's resumption queue for `context`, or nullptr: waiters whose
// executor is that io_context's are queued there instead of posted.
bool park_for_resumption(asio::io_context& context, parked_waiter* waiter) noexcept;
asio::io_context* resumption_context() noexcept;

// Before a coroutine suspends on a request, it polls the transport its
// thread is driving for a moment (see resumption_scope).
void poll_before_suspending(const request_state& r);

} // namespace detail

class request_state {
public:
    request_state() = default;
    request_state(const request_state&) = delete;
    request_state& operator=(const request_state&) = delete;
    ~request_state();

    // Marks the request complete and resumes its waiter, if any, on the
    // waiter's own executor. A second completion is ignored, so a transport
    // failing everything pending cannot race a late success into a crash.
    void complete(std::exception_ptr failure = nullptr);
    void complete_with_payload(std::vector<std::byte> payload);

    bool done() const;

    // Suspends the awaiting tutti coroutine until complete; rethrows the
    // failure if there was one:  co_await r->wait();
    class awaiter;
    awaiter wait();

    // The first half of wait() without suspending:
    //   if (r->must_wait()) co_await r->wait();
    // Polls the thread's transport a moment if still pending; false when
    // complete (rethrowing its failure, if any), true when the caller must
    // wait. Most sends complete as they are made and most small receives
    // during the polling, so the suspension is seldom needed.
    bool must_wait() const;

    // The payload of a receive whose size was not known in advance.
    std::vector<std::byte> take_payload();

private:
    // The suspended coroutine, parked in waiter_space_ until completion.
    struct resume_coroutine final : detail::parked_waiter {
        resume_coroutine(std::coroutine_handle<> c, detail::chain& ch)
            : coroutine(c), runs_in(ch) {}
        void resume_and_release() override;
        void resume_here() override;
        // The frame that awaits owns the request, so a request destroyed
        // with its waiter parked is being destroyed with that frame: there
        // is nothing left to free.
        void release() override {}
        std::coroutine_handle<> coroutine;
        detail::chain& runs_in;
    };
    using waiter = detail::parked_waiter;
    static_assert(std::is_trivially_destructible_v<resume_coroutine>);

    // Parks the coroutine; false when the request completed meanwhile (on
    // another thread) and the coroutine must not suspend.
    bool park(std::coroutine_handle<> coroutine, detail::chain& chain);
    void rethrow_failure() const {
        if (failure_) std::rethrow_exception(failure_);
    }

    // First completer wins; failure_ and payload_ are its to write.
    bool claim() noexcept { return !claimed_.exchange(true, std::memory_order_acquire); }
    // Publishes the claimed completion and resumes the waiter, if parked.
    void publish(std::exception_ptr failure);

    // pending (no waiter), a parked waiter, or done.
    static constexpr std::uintptr_t pending_state = 0;
    static constexpr std::uintptr_t done_state = 1;
    std::atomic<std::uintptr_t> state_{pending_state};
    std::atomic<bool> claimed_{false};
    std::exception_ptr failure_;
    std::vector<std::byte> payload_;
    alignas(resume_coroutine) std::byte waiter_space_[sizeof(resume_coroutine)];
};

class request_state::awaiter {
public:
    explicit awaiter(request_state& r) noexcept : request_(r) {}
    bool await_ready() const {
        if (!request_.done()) detail::poll_before_suspending(request_);
        return request_.done();
    }
    template <class Promise>
    requires std::derived_from<Promise, detail::promise_base>
    bool await_suspend(std::coroutine_handle<Promise> coroutine) {
        return request_.park(coroutine, coroutine.promise().owner());
    }
    void await_resume() const { request_.rethrow_failure(); }

private:
    request_state& request_;
};

inline request_state::awaiter request_state::wait() {
    return awaiter(*this);
}

using request = std::shared_ptr<request_state>;

namespace detail {

// Blocks of one size kept for reuse by the thread that freed them (a few
// dozen at most); nullptr / false when there is none or no room.
void* reuse_request_block(std::size_t bytes) noexcept;
bool keep_request_block(void* block, std::size_t bytes) noexcept;

// The allocator make_request gives std::allocate_shared: one block holds the
// state and its reference counts, and comes from the free list above.
template <class T>
struct request_allocator {
    using value_type = T;
    request_allocator() = default;
    template <class U>
    request_allocator(const request_allocator<U>&) noexcept {}
    T* allocate(std::size_t n) {
        static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
        if (n == 1)
            if (void* block = reuse_request_block(sizeof(T))) return static_cast<T*>(block);
        return static_cast<T*>(::operator new(n * sizeof(T)));
    }
    void deallocate(T* p, std::size_t n) noexcept {
        if (n == 1 && keep_request_block(p, sizeof(T))) return;
        ::operator delete(p);
    }
    template <class U>
    friend bool operator==(const request_allocator&, const request_allocator<U>&) noexcept {
        return true;
    }
};

} // namespace detail

inline request make_request() {
    return std::allocate_shared<request_state>(detail::request_allocator<request_state>{});
}

// A request that is already complete, without failure: what a send that
// finished before it returned gives back. One per thread, shared, so such a
// send allocates nothing.
request completed_request();

// Waits for every request, and rethrows the first failure only after all of
// them are done, so no transport still writes into a buffer we give up.
task<void> wait_all(std::span<const request> requests);

} // namespace tutti
