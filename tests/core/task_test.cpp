// tutti's coroutine type on its own: values and exceptions through nested
// tasks, spawning with each kind of completion token, waiting on a request
// completed from another thread, and awaiting a task from Asio's awaitable.
#include <future>
#include <stdexcept>
#include <string>
#include <thread>

#include "support/harness.hpp"

using namespace tutti;

namespace {

task<int> leaf(int x) {
    co_return x + 1;
}

task<int> nested(int depth, int x) {
    if (depth == 0) co_return co_await leaf(x);
    co_return co_await nested(depth - 1, x) * 2;
}

task<std::string> throws_at(int depth) {
    if (depth == 0) throw std::runtime_error("thrown at the bottom");
    co_return co_await throws_at(depth - 1) + "never";
}

task<void> wait_on(request r, bool& resumed) {
    co_await r->wait();
    resumed = true;
}

task<void> add_to(int& total, int value) {
    total += value;
    co_return;
}

} // namespace

TEST_CASE("task: values come back exact through thousands of nested chains") {
    asio::io_context io;
    int result = 0;
    int calls = 0;
    spawn(
        io,
        [&]() -> task<void> {
            // Thousands of chains of 6 frames each: frames come back from the
            // thread's free lists, and each result is exact.
            for (int i = 0; i < 5000; ++i) {
                result = co_await nested(5, i);
                if (result != (i + 1) * 32) co_return;
                ++calls;
            }
        },
        asio::detached);
    io.run();
    CHECK(calls == 5000);
    CHECK(result == 5000 * 32);
}

TEST_CASE("task: an exception reaches the awaiting task, then the completion handler") {
    asio::io_context io;
    std::string caught;
    std::exception_ptr handed_over;
    spawn(
        io,
        [&]() -> task<void> {
            try {
                (void)co_await throws_at(4);
            } catch (const std::runtime_error& e) {
                caught = e.what();
            }
            (void)co_await throws_at(2); // not caught here
        },
        [&](std::exception_ptr e) { handed_over = e; });
    io.run();
    CHECK(caught == "thrown at the bottom");
    REQUIRE(handed_over);
    CHECK_THROWS_WITH_AS(std::rethrow_exception(handed_over), "thrown at the bottom",
                         std::runtime_error);
}

TEST_CASE("task: spawn takes asio's completion tokens") {
    asio::io_context io;
    // A handler with the value.
    int got = 0;
    spawn(io, nested(3, 4), [&](std::exception_ptr e, int v) {
        CHECK_FALSE(e);
        got = v;
    });
    // A future.
    auto future = spawn(io, leaf(41), asio::use_future);
    // Detached: runs all the same.
    int total = 0;
    spawn(io, add_to(total, 7), asio::detached);
    // Awaited from an asio::awaitable coroutine.
    int from_asio = 0;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            from_asio = co_await spawn(co_await asio::this_coro::executor, nested(1, 9),
                                       asio::use_awaitable);
        },
        asio::detached);
    io.run();
    CHECK(got == 5 * 8);
    CHECK(future.get() == 42);
    CHECK(total == 7);
    CHECK(from_asio == 10 * 2);
}

TEST_CASE("task: a request completed on another thread resumes its waiter on the executor's") {
    asio::io_context io;
    auto r = make_request();
    const auto runner = std::this_thread::get_id();
    std::thread::id resumed_on;
    bool done = false;
    spawn(
        io,
        [&]() -> task<void> {
            const auto executor = co_await asio::this_coro::executor;
            CHECK(executor == asio::any_io_executor(io.get_executor()));
            co_await r->wait();
            resumed_on = std::this_thread::get_id();
        },
        [&](std::exception_ptr e) {
            CHECK_FALSE(e);
            done = true;
        });
    io.poll(); // runs to the wait
    REQUIRE_FALSE(done);
    std::thread completer([&] { r->complete(); });
    completer.join();
    io.run(); // the chain counts as work until it ends
    CHECK(done);
    CHECK(resumed_on == runner);
}

TEST_CASE("task: a request's failure is rethrown in its waiter") {
    asio::io_context io;
    auto r = make_request();
    std::string what;
    spawn(
        io,
        [&]() -> task<void> {
            try {
                co_await r->wait();
            } catch (const error& e) {
                CHECK(e.code() == errc::peer_lost);
                what = e.what();
            }
        },
        asio::detached);
    io.poll();
    r->complete(std::make_exception_ptr(error(errc::peer_lost, "rank 3 is gone")));
    io.run();
    CHECK(what.find("rank 3 is gone") != std::string::npos);
}

TEST_CASE("task: a spawned task whose executor never runs it is destroyed, not leaked") {
    // Run under AddressSanitizer, a leaked frame or chain fails the suite.
    bool ran = false;
    {
        asio::io_context io;
        spawn(
            io.get_executor(),
            [&]() -> task<void> {
                ran = true;
                co_return;
            },
            asio::detached);
    }
    CHECK_FALSE(ran);
}

TEST_CASE("task: a chain whose resumption is dropped with its io_context is destroyed") {
    // Under AddressSanitizer a leaked chain (3 frames and the chain) fails
    // the suite; here the resumption was queued but never ran.
    auto r = make_request();
    bool resumed = false;
    {
        asio::io_context io;
        spawn(
            io, [&]() -> task<void> { co_await wait_on(r, resumed); }, asio::detached);
        io.poll();
        r->complete(); // queues the resumption on io
    }
    CHECK_FALSE(resumed);
    CHECK(r->done());
}

TEST_CASE("task: a block freed after its thread's free lists were released goes to the heap") {
    // A thread's free lists are released by an owner made with the first
    // block kept; a thread_local destroyed after it (made before it) may
    // still free a frame then. That block must not join a list nobody will
    // release again. (Under AddressSanitizer no block is ever kept.)
    constexpr std::size_t bytes = 64;
    constexpr std::size_t size_class = 1;
    std::size_t kept_before = 0;
    std::size_t kept_after = 0;
    std::thread([&] {
        struct frees_late {
            std::size_t* before;
            std::size_t* after;
            ~frees_late() {
                void* block = ::operator new(bytes);
                *before = detail::blocks_here.lists[size_class].count;
                detail::free_block(block, bytes);
                *after = detail::blocks_here.lists[size_class].count;
            }
        };
        // Made first, so destroyed after the lists' owner.
        static thread_local frees_late late{&kept_before, &kept_after};
        (void)late;
        detail::free_block(detail::allocate_block(bytes), bytes); // makes the owner
    }).join();
    CHECK(kept_after == kept_before);
}

namespace {
// Deferred work that notes that it ran.
struct noting_work final : detail::deferred_work {
    noting_work(std::vector<std::string>& notes, std::string note)
        : notes_(notes), note_(std::move(note)) {}
    void run() override { notes_.push_back(note_); }
    std::vector<std::string>& notes_;
    std::string note_;
};
} // namespace

TEST_CASE("progress: work deferred past the waiters runs after them, in the same round") {
    inproc::run_threads(1, [](communicator comm) {
        auto& io = comm.context();
        auto r = make_request();
        std::vector<std::string> notes;
        spawn(
            io,
            [&]() -> task<void> {
                co_await r->wait();
                notes.push_back("waiter");
            },
            asio::detached);
        // What a transport's reader does: completes a receive (its waiter is
        // queued in the loop's scope), then defers its own next step.
        asio::post(io, [&] {
            r->complete();
            notes.push_back("handler");
            std::unique_ptr<detail::deferred_work> work =
                std::make_unique<noting_work>(notes, "deferred");
            CHECK(detail::defer_past_waiters(io, work));
            CHECK_FALSE(work);
        });
        drive(io, comm.transport(), [&] { return notes.size() == 3; });
        CHECK(notes == std::vector<std::string>{"handler", "waiter", "deferred"});

        // No progress loop here: the work stays with the caller.
        std::unique_ptr<detail::deferred_work> work = std::make_unique<noting_work>(notes, "no");
        CHECK_FALSE(detail::defer_past_waiters(io, work));
        CHECK(work);

        // A loop ended by another handler's exception hands what it deferred
        // to Asio, which runs it later.
        asio::post(io, [&] {
            std::unique_ptr<detail::deferred_work> later =
                std::make_unique<noting_work>(notes, "after the exception");
            CHECK(detail::defer_past_waiters(io, later));
            throw std::runtime_error("other work failed");
        });
        CHECK_THROWS_AS(drive(io, comm.transport(), [] { return false; }), std::runtime_error);
        CHECK(notes.size() == 3);
        io.restart(); // stopped when it last ran out of work
        io.poll();
        CHECK(notes.back() == "after the exception");
    });
}
