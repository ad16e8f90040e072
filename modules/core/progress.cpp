#include "core/progress.hpp"

#include <sched.h>
#include <unistd.h>

namespace tutti {

namespace {

void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

struct placement {
    int cores = 1;      // the cores the ranks of this machine share
    bool bound = false; // this process may run on one core only
};

// Where this process may run, read once.
const placement& here() noexcept {
    static const placement p = [] {
        placement p;
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

} // namespace

void backoff::pause(transport& t) {
    // The clock is read only every few rounds: a round of polling is ~50 ns.
    constexpr unsigned clock_every = 8;
    if (rounds_++ == 0) {
        idle_since_ = clock::now();
        // The world's ranks may share this machine's cores: the shared-memory
        // and in-process transports' worlds do entirely. A rank bound to a
        // core of its own (as launchers bind when ranks do not outnumber
        // cores) never needs to give it up for a peer, and a yield would only
        // hand it to another program for a time slice: it spins, as MPI does,
        // until it blocks.
        const auto& p = here();
        const bool oversubscribed = t.size() > p.cores;
        spin_ = oversubscribed ? spin_oversubscribed : p.bound ? block_after : spin_dedicated;
    }
    if (rounds_ % clock_every != 0) {
        cpu_relax();
        return;
    }
    const auto idle = clock::now() - idle_since_;
    if (idle < spin_) {
        cpu_relax();
        return;
    }
    if (idle < block_after) {
        sched_yield();
        return;
    }
    t.await_activity(longest_block);
}

} // namespace tutti
