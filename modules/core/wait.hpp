// The blocking form, for callers without coroutines:
//   tutti::wait(comm, tutti::all_reduce(comm, data, tutti::sum));
// runs the collective on the communicator's io_context in this thread until
// it completes, and returns its result or rethrows its error.
#pragma once

#include <chrono>
#include <future>

#include <asio/executor_work_guard.hpp>

#include "core/communicator.hpp"
#include "core/task.hpp"

namespace tutti {

template <class T>
T wait(const communicator& comm, task<T> work) {
    auto& context = comm.context();
    auto result = asio::co_spawn(context, std::move(work), asio::use_future);
    auto keep_running = asio::make_work_guard(context);
    while (result.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
        if (context.stopped()) context.restart();
        context.run_one();
    }
    return result.get();
}

} // namespace tutti
