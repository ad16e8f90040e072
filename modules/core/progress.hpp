// The progress engine: runs an io_context and polls a transport that must be
// polled (shared memory, libfabric queues) until a condition holds. Waiting
// spins briefly, then yields the core, then blocks in the transport until a
// peer rings: blocking at once costs ~20 us per wake-up, and spinning without
// yielding costs a scheduler tick (4 ms) when ranks outnumber cores. The
// stages are measured in time, not rounds (a round's cost varies with the
// transport and the number of peers), and there is no spin when the world
// has more ranks than the machine has cores: the peer a rank waits for may
// then be waiting for this very core, so a rank yields after its first few
// idle rounds (docs/performance.md: a 1 us spin cost up to 2x at 4 and 8
// ranks on 2 cores).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

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
    // answers at once; none when ranks outnumber cores.
    static constexpr std::chrono::microseconds spin_dedicated{10};
    static constexpr std::chrono::microseconds spin_oversubscribed{0};
    // Idle time after which a rank blocks in the transport.
    static constexpr std::chrono::microseconds block_after{4000};
    static constexpr std::chrono::microseconds longest_block{2000};
    // Ranks that outnumber the cores (but not twice over) yield at every
    // idle round for this long, then at every eighth.
    static constexpr std::chrono::microseconds eager_yields{20};

private:
    unsigned rounds_ = 0;
    // Look at the clock (and yield) at every idle round, not every eighth.
    bool every_round_ = false;
    bool eager_ = false; // every_round_ for eager_yields only
    clock::time_point idle_since_{};
    std::chrono::microseconds spin_{};
};

// Whether `ranks` processes of one job, all on this machine, outnumber the
// cores they share (then a rank that waits should give its core up, and work
// split between two ranks runs no faster).
bool ranks_outnumber_cores(int ranks) noexcept;

// Tells the two functions around this one how many cores the job's ranks on
// this machine may run on between them (core/placement.hpp's
// cores_of_machine, agreed when a job is joined). 0, or until it is said:
// the CPUs this process may run on, or the machine's where that is one
// (then taken for a launcher's binding of one rank to each core).
void set_cores_of_this_machines_ranks(int cores) noexcept;

// How many of `ranks` processes of one job, all on this machine, each of its
// cores runs, rounded up (transport_capabilities::ranks_per_core).
int ranks_per_core(int ranks) noexcept;

namespace detail {

// One round of a spin-wait: tells the core this thread only polls.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

// The transport this thread's progress loop polls (nullptr: none, or it
// needs no polling) and how many rounds a coroutine polls it for a message
// before it suspends or posts a receive.
struct polling_budget {
    transport* polled = nullptr;
    unsigned rounds = 0;
};
polling_budget polling_here() noexcept;

// Work run by a resumption scope after its waiters (defer_past_waiters).
class deferred_work {
public:
    virtual ~deferred_work() = default;
    virtual void run() = 0;
};

// While it lives, requests completed on this thread whose waiter runs on
// `context` are not posted to the context but queued here, and resume()
// runs them. A completion found by polling a transport would otherwise take a
// trip through the io_context's queue (a post, an allocation, a poll) before
// its coroutine continues; that trip was a third of an 8-byte all_reduce.
//
// It also names the transport the thread polls, so that a coroutine about
// to suspend on a request polls it a few rounds first: the message it waits
// for is often only a cache-line transfer away (a peer exchanging with it),
// and finding it then costs neither the suspension nor the resumption.
// Not where ranks outnumber the cores: the peer may be waiting for this one.
//
// Work can also wait there until the waiters have run (defer_past_waiters).
class resumption_scope {
public:
    resumption_scope(asio::io_context& context, transport& polled);
    ~resumption_scope();
    resumption_scope(const resumption_scope&) = delete;
    resumption_scope& operator=(const resumption_scope&) = delete;

    // Resumes the waiters queued so far, and those they queue in turn, in
    // order, then the deferred work (and the waiters and work it queues);
    // how many waiters.
    std::size_t resume();

private:
    friend bool park_for_resumption(asio::io_context&, parked_waiter*) noexcept;
    friend bool defer_past_waiters(asio::io_context&, std::unique_ptr<deferred_work>&);
    friend asio::io_context* resumption_context() noexcept;
    friend polling_budget polling_here() noexcept;

    asio::io_context& context_;
    transport* polled_; // nullptr when it needs no polling
    unsigned rounds_;   // how many rounds before a coroutine suspends
    resumption_scope* outer_;
    std::vector<parked_waiter*> parked_;
    std::vector<std::unique_ptr<deferred_work>> deferred_;
};

// Hands `work` to this thread's resumption scope for `context`, which runs
// it in its resume() once the waiters queued before it have run: a
// transport's reader that has just completed a receive looks for the next
// message after the receive's coroutine has gone on (and sent its own),
// not before. False, `work` left with the caller, when no scope for
// `context` is active on this thread.
bool defer_past_waiters(asio::io_context& context, std::unique_ptr<deferred_work>& work);

} // namespace detail

namespace detail {
// drive()'s rounds, once start() has left the work unfinished.
template <class Done>
[[gnu::noinline]] void drive_rounds(asio::io_context& context, transport& t,
                                    resumption_scope& resumptions, Done& done) {
    backoff idle;
    // Polling the io_context takes its lock even when nothing is queued, as
    // much as polling the transport: while idle (nothing completed in the
    // last rounds, so nothing of ours was posted) it is polled every few
    // rounds only.
    constexpr unsigned context_every = 4;
    unsigned idle_rounds = 0;
    // Asking whether the context stopped takes its lock too: asked only
    // before it is run or polled.
    auto run_context = [&context](auto how) {
        if (context.stopped()) context.restart();
        return how(context);
    };
    while (!done()) {
        if (!t.needs_polling()) {
            run_context([](asio::io_context& c) { return c.run_one(); });
            resumptions.resume();
            continue;
        }
        std::size_t events = idle_rounds % context_every == 0
                                 ? run_context([](asio::io_context& c) { return c.poll(); })
                                 : 0;
        events += t.progress();
        events += resumptions.resume();
        if (events) {
            idle.reset();
            idle_rounds = 0;
        } else {
            idle.pause(t);
            ++idle_rounds;
        }
    }
}
} // namespace detail

// Runs context and polls t until done() is true. done is checked after every
// round, from this thread. start() runs first, inside the loop's scope (so
// that what it starts resumes and polls as the loop's own work does). A small
// call often ends within start(), its receives having polled a few rounds:
// then no round is set up (tutti::wait makes one such drive per call).
template <class Start, class Done>
void drive(asio::io_context& context, transport& t, Start start, Done done) {
    detail::resumption_scope resumptions(context, t);
    start();
    if (!done()) detail::drive_rounds(context, t, resumptions, done);
}

template <class Done>
void drive(asio::io_context& context, transport& t, Done done) {
    drive(
        context, t, [] {}, std::move(done));
}

} // namespace tutti
