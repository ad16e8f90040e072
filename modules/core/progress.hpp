// The progress engine: runs an io_context and polls a transport that must be
// polled (shared memory, libfabric queues) until a condition holds. Waiting
// spins briefly, then yields the core, then blocks in the transport until a
// peer rings: blocking at once costs ~20 us per wake-up, and spinning without
// yielding costs a scheduler tick (4 ms) when ranks outnumber cores.
#pragma once

#include <chrono>
#include <cstddef>

#include "core/task.hpp"
#include "core/transport.hpp"

namespace tutti {

class backoff {
public:
    void reset() noexcept { idle_rounds_ = 0; }
    // One idle round: a pause instruction, a yield, or a bounded block.
    void pause(transport& t);

    static constexpr unsigned spin_rounds = 64;
    static constexpr unsigned yield_rounds = 64 + 4096;
    static constexpr std::chrono::microseconds longest_block{2000};

private:
    unsigned idle_rounds_ = 0;
};

// Runs context and polls t until done() is true. done is checked after every
// round, from this thread.
template <class Done>
void drive(asio::io_context& context, transport& t, Done done) {
    backoff idle;
    while (!done()) {
        if (context.stopped()) context.restart();
        if (!t.needs_polling()) {
            context.run_one();
            continue;
        }
        std::size_t events = context.poll();
        events += t.progress();
        if (events)
            idle.reset();
        else
            idle.pause(t);
    }
}

} // namespace tutti
