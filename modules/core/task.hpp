// The coroutine type of every tutti collective, and how one is started.
//
// Why a task of tutti's own and not Asio's awaitable: a collective is a chain
// of nested coroutines (the call, the algorithm, its compositions' parts),
// and an awaitable pays a trip through Asio's scheduler thread per level on
// the way in and out, with frames recycled only inside Asio's own run calls.
// On this machine a loop awaiting a chain of trivial coroutines took 45-80 ns
// per level with Asio's awaitable against 15-30 ns with this task, whose
// awaiting is a symmetric transfer and whose frames come from free lists kept
// per thread; 8-byte collectives at 2 ranks became 13-15 % faster
// (docs/performance.md, "fourth session").
//
// A task is lazy: it runs when awaited by another task, or when started with
// tutti::spawn on an executor (an io_context's), which plays the role of
// asio::co_spawn and takes the same completion tokens. Every coroutine of a
// chain runs on the executor it was spawned on: a request completed on
// another thread resumes its waiter there (see request.hpp).
//
// Inside a task one may co_await another task, a request's wait(), and
// asio::this_coro::executor. Asio's own operations (sockets, timers) are
// awaited in asio::awaitable coroutines, as tutti's TCP transport does; a
// task that co_awaits an asio::awaitable does not compile, and the error
// says so.
#pragma once

#include <array>
#include <concepts>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "core/asio.hpp"

namespace tutti {

template <class T = void>
class task;

namespace detail {
template <class T>
class run_here;

// Blocks recycled through free lists of this thread (by 64-byte size class)
// before the heap: coroutine frames, and the shared states of requests. A
// collective's chain holds a handful of frames of a few sizes and a few
// requests, alive one call at a time, so a few per class cover the steady
// state; larger blocks go to the heap. Constant-initialized and trivially
// destroyed, so that every allocation reaches it without a thread_local
// guard; the blocks it keeps are freed at thread exit by its owner (task.cpp),
// made when the first one is kept.
struct block_cache {
    static constexpr std::size_t granule = 64;
    static constexpr std::size_t classes = 48; // blocks up to 3 KiB
    static constexpr std::size_t per_class = 16;
    struct free_list {
        std::size_t count = 0;
        std::array<void*, per_class> blocks{};
    };
    std::array<free_list, classes> lists{};
    bool owned = false; // its owner exists and has not freed the blocks yet
    bool gone = false;  // its owner freed the blocks: later ones go to the heap

    static constexpr std::size_t size_class(std::size_t bytes) noexcept {
        return (bytes + granule - 1) / granule;
    }
};
inline constinit thread_local block_cache blocks_here;

// Under AddressSanitizer every block comes from the heap, so that a frame or
// request used after its end is reported rather than reused.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool keep_blocks = false;
#else
inline constexpr bool keep_blocks = true;
#endif
#else
inline constexpr bool keep_blocks = true;
#endif

// The ways past the free lists (task.cpp): the heap, and the first block a
// thread keeps, which makes the owner that frees them at its exit.
void* allocate_block_from_heap(std::size_t size_class);
void free_block_elsewhere(void* block, std::size_t size_class) noexcept;

// Inline: every call allocates and frees its algorithm's frame, and the
// calls of the free lists' few instructions were a tenth of them.
inline void* allocate_block(std::size_t bytes) {
    const auto c = block_cache::size_class(bytes);
    if (keep_blocks && c < block_cache::classes && !blocks_here.gone) {
        auto& list = blocks_here.lists[c];
        if (list.count) return list.blocks[--list.count];
    }
    return allocate_block_from_heap(c);
}
inline void free_block(void* block, std::size_t bytes) noexcept {
    const auto c = block_cache::size_class(bytes);
    if (keep_blocks && c < block_cache::classes && blocks_here.owned) {
        auto& list = blocks_here.lists[c];
        if (list.count < block_cache::per_class) {
            list.blocks[list.count++] = block;
            return;
        }
    }
    free_block_elsewhere(block, c);
}

// What the coroutines of one spawned chain share: the executor they run on,
// and work counted on it while the chain lives (an io_context's run() returns
// only once every chain is done, as with asio::co_spawn).
struct chain {
    explicit chain(asio::any_io_executor ex)
        : executor(std::move(ex)),
          work(asio::prefer(executor, asio::execution::outstanding_work.tracked)) {}
    // For a chain that its starting thread drives to its end itself
    // (tutti::wait), which counts the context's work its own way.
    struct untracked_t {};
    chain(asio::any_io_executor ex, untracked_t) : executor(std::move(ex)) {}
    asio::any_io_executor executor;
    // Empty in an untracked chain: an empty any_io_executor still costs its
    // construction and an indirect call to destroy it, on every blocking call.
    std::optional<asio::any_io_executor> work;
    // The spawned coroutine that owns the chain: destroying it destroys
    // every frame of the chain.
    std::coroutine_handle<> outermost;
};

// A handler that resumes a coroutine of a chain on the chain's executor. If
// the executor drops it unrun (its io_context is destroyed), the whole chain
// is destroyed with it, as Asio destroys an awaitable's frames.
class resume_in_chain {
public:
    resume_in_chain(std::coroutine_handle<> c, chain& owner) noexcept
        : coroutine_(c), owner_(&owner) {}
    resume_in_chain(resume_in_chain&& other) noexcept
        : coroutine_(other.coroutine_), owner_(std::exchange(other.owner_, nullptr)) {}
    resume_in_chain& operator=(resume_in_chain&&) = delete;
    ~resume_in_chain() {
        if (owner_) owner_->outermost.destroy();
    }
    void operator()() {
        owner_ = nullptr;
        coroutine_.resume();
    }

private:
    std::coroutine_handle<> coroutine_;
    chain* owner_;
};

template <class>
struct is_asio_awaitable : std::false_type {};
template <class T, class Executor>
struct is_asio_awaitable<asio::awaitable<T, Executor>> : std::true_type {
    // What await_transform gives back for one, so that the static_assert
    // there is the only error.
    struct rejected {
        bool await_ready() const noexcept { return true; }
        void await_suspend(std::coroutine_handle<>) const noexcept {}
        T await_resume() const; // never defined: no program gets this far
    };
};

template <class Awaitable>
concept asio_awaitable = is_asio_awaitable<std::remove_cvref_t<Awaitable>>::value;
template <class Awaitable>
concept not_asio_awaitable = !asio_awaitable<Awaitable>;

// The part of a promise every tutti coroutine has.
class promise_base {
public:
    static void* operator new(std::size_t bytes) { return allocate_block(bytes); }
    static void operator delete(void* frame, std::size_t bytes) noexcept {
        free_block(frame, bytes);
    }

    std::suspend_always initial_suspend() noexcept { return {}; }

    // Hands the thread to whoever awaited this coroutine.
    struct final_awaiter {
        bool await_ready() noexcept { return false; }
        template <class Promise>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> self) noexcept {
            auto next = self.promise().continuation_;
            return next ? next : std::noop_coroutine();
        }
        void await_resume() noexcept {}
    };
    final_awaiter final_suspend() noexcept { return {}; }

    void unhandled_exception() noexcept { failure_ = std::current_exception(); }

    // co_await asio::this_coro::executor gives the chain's executor.
    struct executor_awaiter {
        const asio::any_io_executor& executor;
        bool await_ready() const noexcept { return true; }
        void await_suspend(std::coroutine_handle<>) const noexcept {}
        asio::any_io_executor await_resume() const { return executor; }
    };
    executor_awaiter await_transform(asio::this_coro::executor_t) const noexcept {
        return {chain_->executor};
    }
    template <not_asio_awaitable Awaitable>
    Awaitable&& await_transform(Awaitable&& awaited) const noexcept {
        return std::forward<Awaitable>(awaited);
    }
    // Asio resumes an awaitable only from a coroutine of its own. Without
    // this overload the compiler's complaint would be that await_suspend
    // cannot take a tutti promise, which does not say what to do.
    template <asio_awaitable Awaitable>
    auto await_transform(Awaitable&&) const noexcept {
        static_assert(!asio_awaitable<Awaitable>,
                      "tutti: a tutti::task cannot co_await an asio::awaitable (an Asio "
                      "operation given asio::use_awaitable, or an awaitable coroutine). Await "
                      "it in an asio::awaitable coroutine and start the tutti work from there "
                      "with co_await tutti::spawn(executor, work, asio::use_awaitable).");
        // Never built: only keeps the compiler from a second, cryptic error.
        return typename is_asio_awaitable<std::remove_cvref_t<Awaitable>>::rejected{};
    }

    // The chain this coroutine runs in; set when it is awaited or spawned.
    chain& owner() const noexcept { return *chain_; }

protected:
    template <class>
    friend class tutti::task;
    template <class>
    friend class run_here;
    std::coroutine_handle<> continuation_;
    chain* chain_ = nullptr;
    std::exception_ptr failure_;
};

template <class T>
class promise final : public promise_base {
public:
    task<T> get_return_object() noexcept;
    template <class U>
    requires std::convertible_to<U&&, T>
    void return_value(U&& value) { value_.emplace(std::forward<U>(value)); }
    T take() {
        if (failure_) std::rethrow_exception(failure_);
        return std::move(*value_);
    }

private:
    std::optional<T> value_;
};

template <>
class promise<void> final : public promise_base {
public:
    task<void> get_return_object() noexcept;
    void return_void() noexcept {}
    void take() {
        if (failure_) std::rethrow_exception(failure_);
    }
};

} // namespace detail

template <class T>
class [[nodiscard]] task {
public:
    using promise_type = detail::promise<T>;
    using value_type = T;

    task(task&& other) noexcept : coroutine_(std::exchange(other.coroutine_, {})) {}
    task& operator=(task&& other) noexcept {
        if (this != &other) {
            if (coroutine_) coroutine_.destroy();
            coroutine_ = std::exchange(other.coroutine_, {});
        }
        return *this;
    }
    ~task() {
        if (coroutine_) coroutine_.destroy();
    }

    // Awaited from another tutti coroutine: runs in its chain, and resumes it
    // when done.
    bool await_ready() const noexcept { return false; }
    template <class Promise>
    requires std::derived_from<Promise, detail::promise_base> std::coroutine_handle<>
    await_suspend(std::coroutine_handle<Promise> awaiting)
    noexcept {
        auto& p = coroutine_.promise();
        p.continuation_ = awaiting;
        p.chain_ = &awaiting.promise().owner();
        return coroutine_;
    }
    T await_resume() { return coroutine_.promise().take(); }

private:
    friend class detail::promise<T>;
    template <class>
    friend class detail::run_here;
    explicit task(std::coroutine_handle<promise_type> c) noexcept : coroutine_(c) {}
    std::coroutine_handle<promise_type> coroutine_;
};

namespace detail {

template <class T>
task<T> promise<T>::get_return_object() noexcept {
    return task<T>(std::coroutine_handle<promise<T>>::from_promise(*this));
}
inline task<void> promise<void>::get_return_object() noexcept {
    return task<void>(std::coroutine_handle<promise<void>>::from_promise(*this));
}

// The outermost coroutine of a spawned chain: owns the chain, awaits the
// task and hands its outcome to the completion handler. It frees itself
// when it ends.
class spawned {
public:
    class promise_type : public promise_base {
    public:
        spawned get_return_object() noexcept {
            return spawned{std::coroutine_handle<promise_type>::from_promise(*this)};
        }
        std::suspend_never final_suspend() noexcept { return {}; }
        void return_void() noexcept {}
        void start_in(chain& c) noexcept { chain_ = &c; }
    };
    std::coroutine_handle<promise_type> coroutine;
};

// The handler's signature: asio::co_spawn's.
template <class T>
struct spawn_signature {
    using type = void(std::exception_ptr, T);
};
template <>
struct spawn_signature<void> {
    using type = void(std::exception_ptr);
};

template <class T, class Handler>
spawned run_spawned(std::unique_ptr<chain> owned, task<T> work, Handler handler) {
    // The chain lives in this frame, so it outlives every coroutine of it.
    const std::unique_ptr<chain> kept = std::move(owned);
    std::exception_ptr failure;
    if constexpr (std::is_void_v<T>) {
        try {
            co_await std::move(work);
        } catch (...) {
            failure = std::current_exception();
        }
        auto ex = asio::get_associated_executor(handler, kept->executor);
        asio::dispatch(ex, [h = std::move(handler), failure]() mutable { std::move(h)(failure); });
    } else {
        std::optional<T> value;
        try {
            value.emplace(co_await std::move(work));
        } catch (...) {
            failure = std::current_exception();
        }
        auto ex = asio::get_associated_executor(handler, kept->executor);
        asio::dispatch(ex, [h = std::move(handler), failure, v = std::move(value)]() mutable {
            std::move(h)(failure, v ? std::move(*v) : T{});
        });
    }
}

// Destroys a spawned chain that never started (its executor was shut down
// with the start still queued).
struct start_spawned {
    std::coroutine_handle<spawned::promise_type> coroutine;
    explicit start_spawned(std::coroutine_handle<spawned::promise_type> c) : coroutine(c) {}
    start_spawned(start_spawned&& other) noexcept : coroutine(std::exchange(other.coroutine, {})) {}
    ~start_spawned() {
        if (coroutine) coroutine.destroy();
    }
    void operator()() { std::exchange(coroutine, {}).resume(); }
};

// A task started and driven to its end by the thread that holds it, in a
// chain of that thread's (tutti::wait): no spawned coroutine, no trip
// through the executor's queue at its start or its end, no completion
// handler. Those cost a blocking 8-byte barrier 1.1-1.25 us here against
// 0.32 us for the same call awaited in a loop (docs/performance.md,
// thirty-first session).
template <class T>
class run_here {
public:
    run_here(task<T>& work, chain& owner) noexcept : coroutine_(work.coroutine_) {
        auto& p = coroutine_.promise();
        p.continuation_ = {};
        p.chain_ = &owner;
        owner.outermost = coroutine_;
    }
    // Runs the task until it first waits, or to its end.
    void start() { coroutine_.resume(); }
    // At its final suspension (continuation_ is empty, so it returns there).
    bool done() const noexcept { return coroutine_.done(); }

private:
    std::coroutine_handle<promise<T>> coroutine_;
};

} // namespace detail

// Starts `work` on `executor` and hands its outcome to the completion token,
// as asio::co_spawn does for an awaitable: a handler called with
// (std::exception_ptr) or (std::exception_ptr, T), asio::detached,
// asio::use_future, asio::use_awaitable (to await a tutti task from an
// asio::awaitable coroutine).
template <class T, class CompletionToken>
auto spawn(const asio::any_io_executor& executor, task<T> work, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, typename detail::spawn_signature<T>::type>(
        [executor](auto handler, task<T> w) {
            auto owned = std::make_unique<detail::chain>(executor);
            auto& c = *owned;
            auto started = detail::run_spawned(std::move(owned), std::move(w), std::move(handler));
            started.coroutine.promise().start_in(c);
            c.outermost = started.coroutine;
            // As asio::co_spawn: at once when called from a handler of that
            // executor, else queued to it.
            asio::dispatch(c.executor, detail::start_spawned(started.coroutine));
        },
        token, std::move(work));
}

template <class T, class CompletionToken>
auto spawn(asio::io_context& context, task<T> work, CompletionToken&& token) {
    return spawn(asio::any_io_executor(context.get_executor()), std::move(work),
                 std::forward<CompletionToken>(token));
}

// What converts to a task<void> without being one: the call object a
// collective's front end returns (see single_phase_call). It is started as
// that task.
template <class Work>
concept converts_to_task =
    !std::same_as<std::remove_cvref_t<Work>, task<void>> && std::convertible_to<Work, task<void>>;

template <converts_to_task Work, class CompletionToken>
auto spawn(const asio::any_io_executor& executor, Work work, CompletionToken&& token) {
    return spawn(executor, task<void>(std::move(work)), std::forward<CompletionToken>(token));
}

template <converts_to_task Work, class CompletionToken>
auto spawn(asio::io_context& context, Work work, CompletionToken&& token) {
    return spawn(asio::any_io_executor(context.get_executor()), task<void>(std::move(work)),
                 std::forward<CompletionToken>(token));
}

namespace detail {
template <class F>
using task_of = std::invoke_result_t<F&>;

// A task that keeps the function object whose call it awaits (a lambda's
// captures live in that object, not in the coroutine's frame).
template <class F>
auto call_kept(F f) -> task_of<F> {
    co_return co_await f();
}
} // namespace detail

// Starts the task that calling f returns, keeping f alive until it ends (as
// asio::co_spawn does for a function object):
//   tutti::spawn(executor, [comm]() -> tutti::task<void> { ... }, asio::detached);
template <class F, class CompletionToken>
requires std::invocable<F&> && requires {
    typename detail::task_of<F>::promise_type;
}
auto spawn(const asio::any_io_executor& executor, F function, CompletionToken&& token) {
    return spawn(executor, detail::call_kept(std::move(function)),
                 std::forward<CompletionToken>(token));
}

template <class F, class CompletionToken>
requires std::invocable<F&> && requires {
    typename detail::task_of<F>::promise_type;
}
auto spawn(asio::io_context& context, F function, CompletionToken&& token) {
    return spawn(asio::any_io_executor(context.get_executor()),
                 detail::call_kept(std::move(function)), std::forward<CompletionToken>(token));
}

} // namespace tutti
