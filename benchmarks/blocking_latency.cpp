// The price of the blocking form: the same small collectives called with
// tutti::wait, one call at a time as a program without coroutines calls them
// (and as MPI programs do), and awaited in a loop inside one coroutine.
// Rounds of the two alternate; the medians of the rounds are printed.
//
//   tuttirun -n 2 --bind core ./build/benchmarks/blocking_latency
//   tuttirun -n 2 ./build/benchmarks/blocking_latency -i 50000 --rounds 9
//
// Each figure is rank 0's wall time over the round divided by its calls:
// back-to-back calls with no barrier between them, unlike tutti-bench's
// (whose per-call figures include no wait for the others).
#include <algorithm>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "tutti.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const auto n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double per_call_us(clock_type::time_point start, int calls) {
    return std::chrono::duration<double, std::micro>(clock_type::now() - start).count() / calls;
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"blocking_latency: small collectives through tutti::wait, one call at a time, "
                 "against the same calls awaited in a coroutine. Run it as the ranks of a job: "
                 "tuttirun -n 2 blocking_latency"};
    int iterations = 20000;
    int rounds = 5;
    app.add_option("-i,--iterations", iterations, "calls per round and way")
        ->check(CLI::PositiveNumber);
    app.add_option("--rounds", rounds, "rounds; each runs both ways, and the median counts")
        ->check(CLI::PositiveNumber);
    CLI11_PARSE(app, argc, argv);

    try {
        tutti::job job;
        const auto& world = job.world();
        if (job.rank() == 0)
            fmt::print("# {} ranks over {}; µs per call, median of {} rounds of {} calls each\n"
                       "{:<16} {:>10} {:>10} {:>8}\n",
                       job.size(), world.transport().name(), rounds, iterations, "collective",
                       "wait", "co_await", "ratio");
        // make(c) gives the call object; the two ways run the same one.
        auto measure = [&](const char* name, auto make) {
            std::vector<double> blocking, awaited;
            for (int round = 0; round < rounds; ++round) {
                // Both ways start together on every rank.
                tutti::wait(world, tutti::barrier(world));
                auto start = clock_type::now();
                for (int i = 0; i < iterations; ++i)
                    tutti::wait(world, make(world));
                blocking.push_back(per_call_us(start, iterations));
                tutti::wait(world, tutti::barrier(world));
                start = clock_type::now();
                job.run([&](tutti::communicator c) -> tutti::task<void> {
                    for (int i = 0; i < iterations; ++i)
                        co_await make(c);
                });
                awaited.push_back(per_call_us(start, iterations));
            }
            if (job.rank() == 0) {
                const double w = median(blocking), a = median(awaited);
                fmt::print("{:<16} {:>10.3f} {:>10.3f} {:>8.2f}\n", name, w, a, w / a);
            }
        };
        // The buffers of the 8-byte calls, one per rank, alive for the run.
        std::vector<std::int64_t> value(1, job.rank()), result(1);
        measure("barrier", [](const tutti::communicator& c) { return tutti::barrier(c); });
        measure("all_reduce 8 B", [&](const tutti::communicator& c) {
            return tutti::all_reduce(c, value, result, tutti::sum);
        });
        measure("broadcast 8 B",
                [&](const tutti::communicator& c) { return tutti::broadcast(c, value); });
    } catch (const std::exception& e) {
        std::fprintf(stderr, "blocking_latency: %s\n", e.what());
        return 1;
    }
    return 0;
}
