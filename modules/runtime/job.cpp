#include "runtime/job.hpp"

#include <exception>

#include "algorithms/collectives.hpp"
#include "bootstrap/join.hpp"
#include "core/wait.hpp"

namespace tutti {

job::job(job_options options)
    : bootstrap_(join_job()),
      transport_(shm::create_transport(*bootstrap_, context_, options.shared_memory)),
      world_(transport_) {}

void job::run(const std::function<task<void>(communicator)>& body) {
    tutti::wait(world_, body(world_));
    tutti::wait(world_, barrier(world_));
    finished_ = true;
}

job::~job() {
    // A rank leaving while a peer still reads its memory (single copy) or
    // its last messages would look lost to that peer; meet once more unless
    // we are unwinding from a failure, when the peers must see us go.
    if (finished_ || std::uncaught_exceptions() > 0) return;
    try {
        tutti::wait(world_, barrier(world_));
    } catch (...) {
        // Leaving anyway; peers that still wait learn it from the transport.
    }
}

} // namespace tutti
