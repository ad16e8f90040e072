// A request is the completion of one posted send or receive. A transport
// completes it (from any thread); an algorithm co_awaits it. This is the one
// place where a transport's event meets a suspended coroutine.
//
// Every message makes one, so the path costs no heap allocation in steady
// state: states are recycled through a per-thread free list, and the waiting
// coroutine's handler is kept inside the state.
#pragma once

#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <utility>
#include <vector>

#include "core/task.hpp"

namespace tutti {

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

    // Suspends until complete; rethrows the failure if there was one.
    task<void> wait();

    // The payload of a receive whose size was not known in advance.
    std::vector<std::byte> take_payload();

private:
    // The suspended coroutine's completion handler, type-erased. Both
    // operations end the waiter's life, so that the state may be gone by the
    // time the resumed coroutine runs.
    struct waiter {
        virtual void resume_and_release() = 0;
        virtual void release() = 0;

    protected:
        ~waiter() = default;
    };
    template <class Handler>
    struct waiter_for final : waiter {
        waiter_for(Handler&& h, bool heap) : handler(std::move(h)), on_heap(heap) {}
        void resume_and_release() override {
            Handler h = std::move(handler);
            release();
            auto ex = asio::get_associated_executor(h);
            asio::post(ex, std::move(h));
        }
        void release() override {
            if (on_heap)
                delete this;
            else
                this->~waiter_for();
        }
        Handler handler;
        bool on_heap;
    };
    template <class Handler>
    void set_waiter(Handler&& handler) {
        using stored = waiter_for<std::remove_cvref_t<Handler>>;
        if constexpr (sizeof(stored) <= sizeof(waiter_space_) &&
                      alignof(stored) <= alignof(std::max_align_t))
            waiter_ = new (waiter_space_) stored(std::move(handler), false);
        else
            waiter_ = new stored(std::move(handler), true);
    }

    mutable std::mutex mutex_;
    bool done_ = false;
    std::exception_ptr failure_;
    std::vector<std::byte> payload_;
    waiter* waiter_ = nullptr; // in waiter_space_ when it fits
    alignas(std::max_align_t) std::byte waiter_space_[64];
};

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
