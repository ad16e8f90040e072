#include "core/progress.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

namespace tutti {

namespace {

// What this process sees alone; the job's ranks may know better
// (set_cores_of_this_machines_ranks).
struct own_view {
    int cores = 1;      // the cores it takes this machine's ranks to share
    bool bound = false; // this process may run on one core only
};

// Where this process may run, read once.
const own_view& here() noexcept {
    static const own_view p = [] {
        own_view p;
        cpu_set_t set;
        CPU_ZERO(&set);
        const int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
        p.bound = n == 1;
        // A rank bound to one core still shares the machine with its peers.
        p.cores = n > 1 ? n : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
        if (p.cores < 1) p.cores = 1;
        return p;
    }();
    return p;
}

// The job's ranks' own word on it (set_cores_of_this_machines_ranks), 0
// until said.
std::atomic<int> agreed_cores{0};

// The cores this machine's ranks share: the agreed count, else here()'s.
int cores_shared() noexcept {
    const int agreed = agreed_cores.load(std::memory_order_relaxed);
    return agreed > 0 ? agreed : here().cores;
}

} // namespace

void set_cores_of_this_machines_ranks(int cores) noexcept {
    agreed_cores.store(std::max(cores, 0), std::memory_order_relaxed);
}

bool ranks_outnumber_cores(int ranks) noexcept {
    return ranks > cores_shared();
}

int ranks_per_core(int ranks) noexcept {
    const int cores = cores_shared();
    return (std::max(ranks, 1) + cores - 1) / cores;
}

void backoff::pause(transport& t) {
    // The clock is read only every few rounds: a round of polling is ~50 ns.
    constexpr unsigned clock_every = 8;
    if (rounds_++ == 0) {
        // With more than two ranks per core, the peer a rank waits for is
        // most likely waiting for this very core: it is given up at every
        // idle round, not every eighth (docs/performance.md, tenth session:
        // 8 ranks on 2 cores took 4-29 % less in all 13 cells of three A/B
        // runs). With fewer, it is so only for the first eager_yields of a
        // wait: at 3-4 ranks on 2 cores the small calls took 0.64-0.93 of
        // the time, while yielding at every round of a long wait lost 12 %
        // on a 1 MiB all_reduce (forty-sixth session). Only where each round
        // looks at every peer: over TCP, whose messages come through the
        // io_context looked at every fourth round, small calls took 1.3
        // times as long.
        const int sharing = t.ranks_on_this_machine();
        const bool crowded = sharing > 2 * cores_shared();
        eager_ = !crowded && ranks_outnumber_cores(sharing) && t.progress_finds_messages();
        every_round_ = crowded || eager_;
        idle_since_ = clock::now();
        // The world's ranks may share this machine's cores: the shared-memory
        // and in-process transports' worlds do entirely. A rank bound to a
        // core of its own (as launchers bind when ranks do not outnumber
        // cores) never needs to give it up for a peer, and a yield would only
        // hand it to another program for a time slice: it spins, as MPI does,
        // until it blocks.
        spin_ = ranks_outnumber_cores(sharing) ? spin_oversubscribed
                : here().bound                 ? block_after
                                               : spin_dedicated;
    }
    if (!every_round_ && rounds_ % clock_every != 0) {
        detail::cpu_relax();
        return;
    }
    const auto idle = clock::now() - idle_since_;
    if (idle < spin_) {
        detail::cpu_relax();
        return;
    }
    if (idle < block_after) {
        if (eager_ && idle >= eager_yields) {
            eager_ = false;
            every_round_ = false;
        }
        sched_yield();
        return;
    }
    t.await_activity(longest_block);
}

namespace detail {

namespace {
thread_local resumption_scope* current_scope = nullptr;
} // namespace

resumption_scope::resumption_scope(asio::io_context& context, transport& polled)
    : context_(context), polled_(polled.needs_polling() ? &polled : nullptr),
      // A peer that shares this core cannot answer while we poll: where
      // ranks outnumber cores a coroutine suspends at once, and the drive
      // loop's rounds, which yield between them, look for its message. Four
      // rounds here (each a look at every peer's ring, a far line in a slow
      // mode) cost the small calls of 3-8 ranks on 2 cores 5-25 % per
      // iteration (fiftieth session, docs/performance.md).
      rounds_(ranks_outnumber_cores(polled.ranks_on_this_machine()) ? 0 : 64),
      outer_(current_scope) {
    current_scope = this;
}

resumption_scope::~resumption_scope() {
    current_scope = outer_;
    // Left over only when the loop ended by an exception: Asio runs them.
    for (auto* w : parked_)
        w->resume_soon();
    for (auto& work : deferred_)
        asio::post(context_, [work = std::move(work)] { work->run(); });
}

std::size_t resumption_scope::resume() {
    std::size_t i = 0;
    for (;;) {
        // Resumed coroutines may queue more waiters: parked_ grows meanwhile.
        for (; i < parked_.size(); ++i)
            parked_[i]->resume_here();
        if (deferred_.empty()) break;
        // Deferred work may defer more, and complete receives.
        auto now = std::move(deferred_);
        deferred_.clear();
        for (std::size_t k = 0; k < now.size(); ++k) {
            try {
                now[k]->run();
            } catch (...) {
                // What is left runs later (the destructor hands it to Asio).
                for (++k; k < now.size(); ++k)
                    deferred_.push_back(std::move(now[k]));
                throw;
            }
        }
    }
    parked_.clear();
    return i;
}

void poll_before_suspending(const request_state& r) {
    const auto polling = polling_here();
    for (unsigned i = 0; i < polling.rounds && !r.done(); ++i)
        polling.polled->progress();
}

polling_budget polling_here() noexcept {
    auto* scope = current_scope;
    if (!scope || !scope->polled_) return {};
    return {scope->polled_, scope->rounds_};
}

asio::io_context* resumption_context() noexcept {
    return current_scope ? &current_scope->context_ : nullptr;
}

bool defer_past_waiters(asio::io_context& context, std::unique_ptr<deferred_work>& work) {
    auto* scope = current_scope;
    if (!scope || &scope->context_ != &context) return false;
    scope->deferred_.push_back(std::move(work));
    return true;
}

bool park_for_resumption(asio::io_context& context, parked_waiter* waiter) noexcept {
    auto* scope = current_scope;
    if (!scope || &scope->context_ != &context) return false;
    try {
        scope->parked_.push_back(waiter);
        return true;
    } catch (...) {
        return false; // out of memory: Asio's queue takes it
    }
}

} // namespace detail

} // namespace tutti
