#include "runtime/job.hpp"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "algorithms/collectives.hpp"
#include "bootstrap/join.hpp"
#include "core/error.hpp"
#include "core/wait.hpp"

namespace tutti {

namespace {

routed::options routing_options(const job_options& o) {
    routed::options r;
    r.transport = o.transport;
    r.shared_memory = o.shared_memory;
    shm::apply_environment(r.shared_memory);
    r.tcp = o.tcp;
    return r;
}

bool debug_enabled() {
    const char* v = std::getenv("TUTTI_DEBUG");
    return v && *v && std::string_view(v) != "0";
}

} // namespace

job::job(job_options options)
    : bootstrap_(join_job()),
      connected_(routed::connect(*bootstrap_, context_, routing_options(options))),
      world_(connected_.transport) {
    if (debug_enabled()) {
        const auto& t = connected_.routes;
        fmt::print(stderr, "tutti routing: rank {} of {} on node '{}', job {}, transport {}: {}\n",
                   t.rank, t.size(), bootstrap_->node(), bootstrap_->job_id(), t.transport_name,
                   fmt::join(t.describe(), "; "));
        std::fflush(stderr);
    }
}

const shm::transport& job::shared_memory() const {
    if (!connected_.shared_memory)
        throw error(errc::invalid_argument,
                    fmt::format("rank {} has no shared-memory transport: the job's transport is "
                                "{} and no other rank is on node '{}' with it",
                                rank(), connected_.routes.transport_name, bootstrap_->node()));
    return *connected_.shared_memory;
}

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
