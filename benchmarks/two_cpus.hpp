// The two CPUs a two-sided measurement pins its sides to (line_bounce,
// cma_pieces): the first two this process may run on, and the pinning.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <array>
#include <cstdio>
#include <optional>

namespace tutti_bench {

// The first two CPUs of this process's affinity, or nothing after saying on
// stderr, prefixed by `program`, why there are not two.
inline std::optional<std::array<int, 2>> first_two_cpus(const char* program) {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        std::fprintf(stderr, "%s: sched_getaffinity failed\n", program);
        return std::nullopt;
    }
    std::array<int, 2> cpus{-1, -1};
    for (int cpu = 0, found = 0; cpu < CPU_SETSIZE && found < 2; ++cpu)
        if (CPU_ISSET(cpu, &allowed)) cpus[static_cast<std::size_t>(found++)] = cpu;
    if (cpus[1] < 0) {
        std::fprintf(stderr, "%s: this process may run on one CPU only; it needs two\n", program);
        return std::nullopt;
    }
    return cpus;
}

// Pins the calling thread to `cpu`; false if the system refuses.
inline bool pin_to(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// pin_to, saying on stderr, prefixed by `program`, when the system refuses
// and, if `then` is given, what the program does about it.
inline bool pin_or_say(const char* program, int cpu, const char* then = nullptr) {
    if (pin_to(cpu)) return true;
    std::fprintf(stderr, "%s: cannot pin to CPU %d%s%s\n", program, cpu, then ? "; " : "",
                 then ? then : "");
    return false;
}

} // namespace tutti_bench
