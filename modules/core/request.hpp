// A request is the completion of one posted send or receive. A transport
// completes it (from any thread); an algorithm co_awaits it. This is the one
// place where a transport's event meets a suspended coroutine.
//
// Every message makes one, so the path costs no heap allocation in steady
// state: states are recycled through per-thread free lists, and the waiting
// coroutine is parked inside the state. It takes no lock either: a
// locked instruction right after a shared-memory send waits until the ring
// write has crossed to the other core, so each one on this path costs
// ~100 ns there. Completion claims the state with one exchange and publishes
// it with another; the waiter parks its coroutine with one compare-exchange.
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

// A coroutine suspended on a request, and the chain it runs in. It lives in
// the request, which the suspended frame owns: a request destroyed with its
// waiter parked is being destroyed with that frame, and nothing is left to
// free.
struct parked_waiter {
    std::coroutine_handle<> coroutine;
    chain* runs_in = nullptr;

    // Resumes through the chain's executor (asio::post), or hands the
    // waiter to the resumption queue of the thread if that queue runs the
    // same io_context (see resumption_scope in progress.hpp).
    void resume_soon();
    // Resumes the coroutine now, on this thread.
    void resume_here() const { coroutine.resume(); }
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
    detail::parked_waiter waiter_; // the suspended coroutine, until completion
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

// The allocator make_request gives std::allocate_shared: one block holds the
// state and its reference counts, and comes from the thread's free lists
// (allocate_block in task.hpp).
template <class T>
struct request_allocator {
    using value_type = T;
    request_allocator() = default;
    template <class U>
    request_allocator(const request_allocator<U>&) noexcept {}
    T* allocate(std::size_t n) {
        static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
        return static_cast<T*>(n == 1 ? allocate_block(sizeof(T)) : ::operator new(n * sizeof(T)));
    }
    void deallocate(T* p, std::size_t n) noexcept {
        if (n == 1)
            free_block(p, sizeof(T));
        else
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
