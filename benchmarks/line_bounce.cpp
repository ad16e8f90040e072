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
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include <CLI/CLI.hpp>
#include <pthread.h>

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

} // namespace

int main(int argc, char** argv) {
    long rounds = 1'000'000;
    CLI::App app{"line_bounce: the time one cache line takes between two cores, now"};
    app.add_option("-n,--rounds", rounds, "rounds (each one transfer each way)")
        ->check(CLI::PositiveNumber);
    CLI11_PARSE(app, argc, argv);

    const auto found = tutti_bench::first_two_cpus("line_bounce");
    if (!found) return 2;
    const auto cpus = *found;
    if (!tutti_bench::pin_to(cpus[0])) {
        std::fprintf(stderr, "line_bounce: cannot pin to CPU %d\n", cpus[0]);
        return 2;
    }
    const auto start = std::chrono::steady_clock::now();
    std::thread other([&] {
        // Unpinned, it still bounces (its figure then means less): the
        // main thread waits for it either way.
        if (!tutti_bench::pin_to(cpus[1]))
            std::fprintf(stderr, "line_bounce: cannot pin to CPU %d; running unpinned\n", cpus[1]);
        bounce(second_line, first_line, rounds);
    });
    bounce(first_line, second_line, rounds);
    other.join();
    const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
    std::printf("line bounce: %.1f ns\n", took.count() / static_cast<double>(rounds));
    return 0;
}
