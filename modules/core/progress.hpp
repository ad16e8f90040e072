// The progress engine: runs an io_context and polls a transport that must be
// polled (shared memory, libfabric queues) until a condition holds. Waiting
// spins briefly, then yields the core, then blocks in the transport until a
// peer rings: blocking at once costs ~20 us per wake-up, and spinning without
// yielding costs a scheduler tick (4 ms) when ranks outnumber cores. The
// stages are measured in time, not rounds (a round's cost varies with the
// transport and the number of peers), and the spin is short when the world
// has more ranks than the machine has cores: the peer a rank waits for may
// then be waiting for this very core.
#pragma once

#include <chrono>
#include <cstddef>

#include "core/task.hpp"
#include "core/transport.hpp"

namespace tutti {

class backoff {
public:
    using clock = std::chrono::steady_clock;

    void reset() noexcept { rounds_ = 0; }
    // One idle round: a pause instruction, a yield, or a bounded block.
    void pause(transport& t);

    // Spinning before the first yield: long enough to catch a peer that
    // answers at once, short when ranks outnumber cores.
    static constexpr std::chrono::microseconds spin_dedicated{10};
    static constexpr std::chrono::microseconds spin_oversubscribed{1};
    // Idle time after which a rank blocks in the transport.
    static constexpr std::chrono::microseconds block_after{4000};
    static constexpr std::chrono::microseconds longest_block{2000};

private:
    unsigned rounds_ = 0;
    clock::time_point idle_since_{};
    std::chrono::microseconds spin_{};
};

// Runs context and polls t until done() is true. done is checked after every
// round, from this thread.
template <class Done>
void drive(asio::io_context& context, transport& t, Done done) {
    backoff idle;
    // Polling the io_context takes its lock even when nothing is queued, as
    // much as polling the transport: while idle (nothing completed in the
    // last rounds, so nothing of ours was posted) it is polled every few
    // rounds only.
    constexpr unsigned context_every = 4;
    unsigned idle_rounds = 0;
    while (!done()) {
        if (context.stopped()) context.restart();
        if (!t.needs_polling()) {
            context.run_one();
            continue;
        }
        std::size_t events = idle_rounds % context_every == 0 ? context.poll() : 0;
        events += t.progress();
        if (events) {
            idle.reset();
            idle_rounds = 0;
        } else {
            idle.pause(t);
            ++idle_rounds;
        }
    }
}

} // namespace tutti
