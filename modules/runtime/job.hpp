// A process's place in a multi-process job: joins the job the way it was
// launched (PMIx under mpirun or srun; the environment under tuttirun or by
// hand), connects the ranks through shared memory, and hands out the world
// communicator. One per process.
//
//   int main() {
//       tutti::job job;
//       job.run([](tutti::communicator world) -> tutti::task<void> {
//           std::vector<double> x{1.0};
//           co_await tutti::all_reduce(world, x, tutti::sum);
//       });
//   }
#pragma once

#include <functional>
#include <memory>

#include "bootstrap/bootstrap.hpp"
#include "core/communicator.hpp"
#include "core/task.hpp"
#include "transports/shm/shm.hpp"

namespace tutti {

struct job_options {
    shm::options shared_memory;
};

class job {
public:
    // Throws tutti::error when the launch information is missing or bad
    // (saying how to launch), or when peers do not arrive in time.
    explicit job(job_options options = {});
    ~job();
    job(const job&) = delete;
    job& operator=(const job&) = delete;

    int rank() const noexcept { return world_.rank(); }
    int size() const noexcept { return world_.size(); }
    const communicator& world() const noexcept { return world_; }
    asio::io_context& context() noexcept { return context_; }
    const tutti::bootstrap& launch() const noexcept { return *bootstrap_; }
    const shm::transport& shared_memory() const noexcept { return *transport_; }

    // Runs body(world) to completion on this thread, then waits at a barrier
    // so no rank leaves while others still read from it.
    void run(const std::function<task<void>(communicator)>& body);

private:
    asio::io_context context_;
    std::unique_ptr<tutti::bootstrap> bootstrap_;
    std::shared_ptr<shm::transport> transport_;
    communicator world_;
    bool finished_ = false;
};

} // namespace tutti
