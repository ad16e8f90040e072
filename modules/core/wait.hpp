// The blocking form, for callers without coroutines:
//   tutti::wait(comm, tutti::all_reduce(comm, data, tutti::sum));
// runs the collective on the communicator's io_context in this thread until
// it completes (polling its transport, see progress.hpp), and returns its
// result or rethrows its error.
#pragma once

#include <concepts>
#include <exception>
#include <optional>
#include <type_traits>

#include <asio/executor_work_guard.hpp>

#include "core/communicator.hpp"
#include "core/progress.hpp"
#include "core/task.hpp"

namespace tutti {

namespace detail {
// Runs `work` on the communicator's io_context in this thread until it
// completes; its outcome stays in it (work.await_resume()).
template <class T>
void run_to_end(const communicator& comm, task<T>& work) {
    auto& context = comm.context();
    // The task runs on this thread from here, in a chain of this frame: no
    // spawned coroutine, no hand-over through the context's queue at its
    // start or end (detail::run_here).
    chain here(context.get_executor(), chain::untracked_t{});
    run_here<T> run(work, here);
    // A transport whose events come through the context is run (not
    // polled), and run_one() must block, not return for want of work. A
    // polled one is never waited on in run_one(), and there the guard would
    // cost every call a stop of the context as it is dropped (its lock and
    // its wake-ups), then a restart.
    auto& transport = comm.transport();
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> keep_running;
    if (!transport.needs_polling()) keep_running.emplace(context.get_executor());
    auto done = [&run] { return run.done(); };
    std::exception_ptr escaped;
    try {
        drive(
            context, transport, [&run] { run.start(); }, done);
    } catch (...) {
        escaped = std::current_exception();
    }
    // A handler of other work on the context threw (Asio hands that to
    // whoever runs the context). The collective still uses the caller's
    // buffers and this frame: it is finished first, and then the exception
    // goes on.
    while (!run.done()) {
        try {
            drive(context, transport, done);
        } catch (...) {
        }
    }
    if (escaped) std::rethrow_exception(escaped);
}
} // namespace detail

template <class T>
T wait(const communicator& comm, task<T> work) {
    detail::run_to_end(comm, work);
    return work.await_resume();
}

namespace detail {
// The root of a call object's run in wait(): it awaits the object where
// wait() keeps it, so the call refers to the caller's communicator as a
// co_await does, without the copy a conversion to task<void> takes.
template <class Call>
task<void> await_in_place(Call& call) {
    co_await call;
}
} // namespace detail

// A collective's call object (what the typed front ends return), run in
// place.
template <converts_to_task Work>
void wait(const communicator& comm, Work work) {
    if constexpr (requires(Work & w) {
                      { w.prepare_in_place() } -> std::same_as<task<void>&>;
                      w.await_resume();
                  }) {
        detail::run_to_end(comm, work.prepare_in_place());
        work.await_resume();
    } else if constexpr (requires(Work & w) {
                             { w.await_ready() } -> std::convertible_to<bool>;
                             w.await_resume();
                         })
        wait(comm, detail::await_in_place(work));
    else
        wait(comm, task<void>(std::move(work)));
}

} // namespace tutti
