// The blocking form, for callers without coroutines:
//   tutti::wait(comm, tutti::all_reduce(comm, data, tutti::sum));
// runs the collective on the communicator's io_context in this thread until
// it completes (polling its transport, see progress.hpp), and returns its
// result or rethrows its error.
#pragma once

#include <exception>
#include <optional>
#include <type_traits>

#include <asio/executor_work_guard.hpp>

#include "core/communicator.hpp"
#include "core/progress.hpp"
#include "core/task.hpp"

namespace tutti {

template <class T>
T wait(const communicator& comm, task<T> work) {
    auto& context = comm.context();
    std::exception_ptr failure;
    bool done = false;
    // The completion runs inside run_one() below, on this thread; a future
    // would be set from Asio's system thread and not wake run_one().
    using stored = std::conditional_t<std::is_void_v<T>, bool, T>;
    std::optional<stored> result;
    if constexpr (std::is_void_v<T>) {
        spawn(context, std::move(work), [&](std::exception_ptr e) {
            failure = e;
            done = true;
        });
    } else {
        spawn(context, std::move(work), [&](std::exception_ptr e, T value) {
            failure = e;
            if (!e) result.emplace(std::move(value));
            done = true;
        });
    }
    auto keep_running = asio::make_work_guard(context);
    drive(context, comm.transport(), [&] { return done; });
    if (failure) std::rethrow_exception(failure);
    if constexpr (!std::is_void_v<T>) return std::move(*result);
}

// A collective's call object (what the typed front ends return), run as the
// task it converts to.
template <converts_to_task Work>
void wait(const communicator& comm, Work work) {
    wait(comm, task<void>(std::move(work)));
}

} // namespace tutti
