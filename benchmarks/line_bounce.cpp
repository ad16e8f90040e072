// line_bounce: how long one cache line takes to travel between two cores now.
//
// Two threads, pinned to the first two CPUs this process may use, take turns
// writing a counter on a line of their own and waiting for the other's:
// each round costs one transfer of a line each way, overlapped. On the
// project's 2-vCPU machines the figure switches between about 55 ns and
// about 250 ns from one minute to the next (docs/performance.md), and every
// small-message time moves with it, so benchmarks/ab.py --calm-below runs
// this before and after each round and keeps only rounds taken in the quick
// mode. Prints "line bounce: N ns".
//
// With --direct each write is a whole line stored past the caches
// (MOVDIR64B), as the shared-memory transport's one-line messages may be
// (TUTTI_SHM_LINE_STORES): the reader then fetches it from memory rather than
// from the writer's cache, and the figure says which way is quicker here.
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include <CLI/CLI.hpp>
#include <pthread.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "two_cpus.hpp"

namespace {

struct alignas(64) line {
    std::atomic<long> value{0};
};

line first_line, second_line;

void bounce(line& mine, const line& peer, long rounds) {
    for (long k = 1; k <= rounds; ++k) {
        mine.value.store(k, std::memory_order_release);
        while (peer.value.load(std::memory_order_acquire) < k) {
        }
    }
}

#if defined(__x86_64__)
// tutti::shm::has_direct_line_stores's test, repeated: this program stands
// alone, without the library and its headers.
bool has_movdir64b() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 28));
}

// The fences order the store as the transport's store_line_directly does.
__attribute__((target("movdir64b"))) void bounce_directly(line& mine, const line& peer,
                                                          long rounds) {
    alignas(64) long whole[8] = {};
    for (long k = 1; k <= rounds; ++k) {
        whole[0] = k;
        _mm_sfence();
        _movdir64b(&mine, whole);
        _mm_sfence();
        while (peer.value.load(std::memory_order_acquire) < k) {
        }
    }
}
#else
bool has_movdir64b() {
    return false;
}
void bounce_directly(line&, const line&, long) {}
#endif

} // namespace

int main(int argc, char** argv) {
    long rounds = 1'000'000;
    CLI::App app{"line_bounce: the time one cache line takes between two cores, now"};
    app.add_option("-n,--rounds", rounds, "rounds (each one transfer each way)")
        ->check(CLI::PositiveNumber);
    bool direct = false;
    app.add_flag("--direct", direct, "write each line past the caches (MOVDIR64B)");
    CLI11_PARSE(app, argc, argv);
    if (direct && !has_movdir64b()) {
        std::fprintf(stderr, "line_bounce: --direct needs MOVDIR64B, which this CPU lacks\n");
        return 2;
    }
    const auto run = direct ? bounce_directly : bounce;

    const auto found = tutti_bench::first_two_cpus("line_bounce");
    if (!found) return 2;
    const auto cpus = *found;
    if (!tutti_bench::pin_or_say("line_bounce", cpus[0])) return 2;
    const auto start = std::chrono::steady_clock::now();
    std::thread other([&] {
        // Unpinned, it still bounces (its figure then means less): the
        // main thread waits for it either way.
        tutti_bench::pin_or_say("line_bounce", cpus[1], "running unpinned");
        run(second_line, first_line, rounds);
    });
    run(first_line, second_line, rounds);
    other.join();
    const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
    std::printf("line bounce%s: %.1f ns\n", direct ? " (direct stores)" : "",
                took.count() / static_cast<double>(rounds));
    return 0;
}
