// tutti's side of the comparison with MPI: the same measurement as
// mpi_collectives.cpp (OSU style: warm-up, then a barrier before each timed
// call; latency is the largest over ranks of the mean per call; algbw is the
// per-rank buffer divided by it). Run it under tuttirun or mpirun:
//
//   ./build/tools/tuttirun/tuttirun -n 2 ./build/benchmarks/tutti_collectives all_reduce 8 16777216
//   ./build/benchmarks/tutti_collectives --algorithm ring all_reduce 16777216
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "runtime/job.hpp"
#include "tutti.hpp"

namespace {

int iterations_for(std::size_t bytes) {
    if (bytes <= 64 * 1024) return 2000;
    if (bytes <= 1024 * 1024) return 200;
    return 20;
}

tutti::task<double> time_one(const tutti::communicator& world, const std::string& collective,
                             std::vector<std::int64_t>& send, std::vector<std::int64_t>& recv,
                             const std::string& algorithm) {
    using clock = std::chrono::steady_clock;
    co_await tutti::barrier(world);
    const auto start = clock::now();
    const tutti::use chosen(algorithm);
    if (collective == "all_reduce")
        co_await tutti::all_reduce(world, send, recv, tutti::sum, chosen);
    else if (collective == "broadcast")
        co_await tutti::broadcast(world, send, chosen);
    else if (collective == "barrier")
        co_await tutti::barrier(world, chosen);
    else if (collective == "all_to_all")
        co_await tutti::all_to_all(world, send, recv, chosen);
    else if (collective == "all_gather")
        co_await tutti::all_gather(
            world, std::span(send).first(send.size() / static_cast<std::size_t>(world.size())),
            recv, chosen);
    else if (collective == "reduce_scatter") {
        auto block = std::span(recv).first(send.size() / static_cast<std::size_t>(world.size()));
        co_await tutti::reduce_scatter(world, send, block, tutti::sum, chosen);
    } else
        throw tutti::error(tutti::errc::invalid_argument, "unknown collective " + collective);
    co_return std::chrono::duration<double>(clock::now() - start).count();
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"time a tutti collective the way benchmarks/mpi_collectives.cpp times MPI's"};
    std::string collective;
    std::vector<std::size_t> sizes;
    std::string algorithm = "auto";
    app.add_option("collective", collective,
                   "all_reduce, broadcast, barrier, all_to_all, all_gather or reduce_scatter")
        ->required();
    app.add_option("bytes", sizes, "per-rank buffer sizes in bytes")->required();
    app.add_option("-a,--algorithm", algorithm, "an algorithm name, or auto");
    CLI11_PARSE(app, argc, argv);

    tutti::job job;
    const auto& world = job.world();
    if (job.rank() == 0)
        std::printf("%-14s %12s %12s %12s\n", "collective", "bytes", "latency_us", "algbw_GB/s");
    for (std::size_t bytes : sizes) {
        const auto p = static_cast<std::size_t>(job.size());
        std::size_t count = bytes / 8;
        if (collective == "all_to_all" || collective == "all_gather" ||
            collective == "reduce_scatter")
            count = count / p * p;
        std::vector<std::int64_t> send(count, job.rank() + 1), recv(count);
        const int iterations = iterations_for(bytes);
        for (int i = 0; i < iterations / 10 + 1; ++i)
            tutti::wait(world, time_one(world, collective, send, recv, algorithm));
        double total = 0;
        for (int i = 0; i < iterations; ++i)
            total += tutti::wait(world, time_one(world, collective, send, recv, algorithm));
        std::vector<double> mean{total / iterations}, worst(1);
        tutti::wait(world, tutti::all_reduce(world, mean, worst, tutti::max));
        if (job.rank() == 0)
            std::printf("%-14s %12zu %12.2f %12.2f\n", collective.c_str(), count * 8,
                        worst[0] * 1e6,
                        worst[0] > 0 ? static_cast<double>(count * 8) / worst[0] / 1e9 : 0.0);
    }
    return 0;
}
