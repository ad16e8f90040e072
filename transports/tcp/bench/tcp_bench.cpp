// tcp-bench: all_reduce and all_to_all over the TCP transport alone, timed
// the way tutti-bench and benchmarks/mpi_collectives.cpp time them (each call
// after a barrier and timed alone; the mean over the timed calls; the
// slowest rank's mean), so the figures sit beside Open MPI's on TCP:
//   tuttirun -n 2 tcp-bench -m 8,1M,16M
//   mpirun --mca btl tcp,self --mca pml ob1 -n 2 mpi_collectives_openmpi all_reduce all_to_all
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bootstrap/join.hpp"
#include "transports/tcp/tcp.hpp"
#include "tutti.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

std::size_t parse_size(const std::string& text) {
    std::size_t value = std::stoull(text);
    switch (text.back()) {
    case 'K':
    case 'k':
        return value << 10;
    case 'M':
    case 'm':
        return value << 20;
    default:
        return value;
    }
}

template <class Call>
double mean_us(const tutti::communicator& world, int warmup, int iterations, Call call) {
    double seconds = 0;
    for (int i = 0; i < warmup + iterations; ++i) {
        tutti::wait(world, tutti::barrier(world));
        const auto start = clock_type::now();
        tutti::wait(world, call());
        if (i >= warmup)
            seconds += std::chrono::duration<double>(clock_type::now() - start).count();
    }
    std::vector<double> mine{seconds / iterations * 1e6}, slowest(1);
    tutti::wait(world, tutti::all_reduce(world, mine, slowest, tutti::max));
    return slowest[0];
}

} // namespace

int main(int argc, char** argv) {
    std::vector<std::string> sizes{"8", "1M", "16M"};
    std::vector<std::string> collectives{"all_reduce", "all_to_all"};
    double budget_s = 1.0;
    CLI::App app{"tcp-bench: all_reduce and all_to_all latency and bandwidth over TCP"};
    app.add_option("-m,--sizes", sizes,
                   "bytes per rank (all_reduce) or per rank's buffer "
                   "(all_to_all); K and M suffixes")
        ->delimiter(',');
    app.add_option("collectives", collectives, "all_reduce, all_to_all");
    app.add_option("-t,--time", budget_s, "seconds per size, roughly");
    CLI11_PARSE(app, argc, argv);

    asio::io_context context;
    auto launch = tutti::join_job();
    auto transport = tutti::tcp::create_transport(*launch, context);
    tutti::communicator world(transport);
    const int p = world.size();
    for (const auto& name : collectives) {
        for (const auto& size_text : sizes) {
            const std::size_t bytes = parse_size(size_text);
            const std::size_t count = std::max<std::size_t>(1, bytes / 8);
            std::vector<std::int64_t> send(count, world.rank() + 1), recv(count);
            auto call = [&]() -> tutti::task<void> {
                if (name == "all_reduce")
                    co_await tutti::all_reduce(world, send, recv, tutti::sum);
                else
                    co_await tutti::all_to_all(world, send, recv);
            };
            if (name != "all_reduce" && name != "all_to_all") {
                std::fprintf(stderr, "tcp-bench: unknown collective %s\n", name.c_str());
                return 2;
            }
            if (name == "all_to_all" && count % static_cast<std::size_t>(p) != 0) continue;
            // A first estimate sets the number of calls within the budget.
            const double first = mean_us(world, 1, 3, call);
            const int iterations =
                std::clamp(static_cast<int>(budget_s * 1e6 / std::max(first, 1.0)), 5, 100000);
            const double us = mean_us(world, iterations / 10 + 1, iterations, call);
            if (world.rank() == 0)
                std::printf("%-11s %9zu B  %5d calls  %11.2f us  %8.3f GB/s\n", name.c_str(),
                            count * 8, iterations, us, static_cast<double>(count * 8) / us / 1e3);
            if (name == "all_reduce" && recv[0] != static_cast<std::int64_t>(p) * (p + 1) / 2) {
                std::fprintf(stderr, "tcp-bench: WRONG RESULT\n");
                return 1;
            }
        }
    }
    tutti::wait(world, tutti::barrier(world));
    return 0;
}
