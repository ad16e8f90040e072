// The MPI side of tutti's comparisons: times collectives the way
// tutti_collectives.cpp does (OSU style: warm-up, then a barrier before each
// timed call; latency is the largest over ranks of the mean per call; algbw
// is the per-rank buffer divided by it), so both run the same measurement.
// Built only where an MPI is found; run it with that MPI's launcher.
//
//   mpirun -n 2 ./build/benchmarks/mpi_collectives all_reduce 8 16777216
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

int iterations_for(std::size_t bytes) {
    if (bytes <= 64 * 1024) return 2000;
    if (bytes <= 1024 * 1024) return 200;
    return 20;
}

double time_one(const std::string& collective, std::vector<std::int64_t>& send,
                std::vector<std::int64_t>& recv, int size) {
    const int count = static_cast<int>(send.size());
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    if (collective == "all_reduce") {
        MPI_Allreduce(send.data(), recv.data(), count, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    } else if (collective == "broadcast") {
        MPI_Bcast(send.data(), count, MPI_INT64_T, 0, MPI_COMM_WORLD);
    } else if (collective == "barrier") {
        MPI_Barrier(MPI_COMM_WORLD);
    } else if (collective == "all_to_all") {
        MPI_Alltoall(send.data(), count / size, MPI_INT64_T, recv.data(), count / size, MPI_INT64_T,
                     MPI_COMM_WORLD);
    } else if (collective == "all_gather") {
        MPI_Allgather(send.data(), count / size, MPI_INT64_T, recv.data(), count / size,
                      MPI_INT64_T, MPI_COMM_WORLD);
    } else {
        std::fprintf(stderr, "unknown collective %s\n", collective.c_str());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return MPI_Wtime() - start;
}

} // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3) {
        if (rank == 0) std::fprintf(stderr, "usage: %s COLLECTIVE BYTES...\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    const std::string collective = argv[1];
    if (rank == 0)
        std::printf("%-12s %12s %12s %12s\n", "collective", "bytes", "latency_us", "algbw_GB/s");
    for (int a = 2; a < argc; ++a) {
        const std::size_t bytes = std::strtoull(argv[a], nullptr, 10);
        std::size_t count = bytes / 8;
        if (collective == "all_to_all" || collective == "all_gather")
            count = count / static_cast<std::size_t>(size) * static_cast<std::size_t>(size);
        std::vector<std::int64_t> send(count, rank + 1), recv(count);
        const int iterations = iterations_for(bytes);
        for (int i = 0; i < iterations / 10 + 1; ++i)
            time_one(collective, send, recv, size);
        double total = 0;
        for (int i = 0; i < iterations; ++i)
            total += time_one(collective, send, recv, size);
        double mean = total / iterations, worst = 0;
        MPI_Reduce(&mean, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0)
            std::printf("%-12s %12zu %12.2f %12.2f\n", collective.c_str(), count * 8, worst * 1e6,
                        worst > 0 ? static_cast<double>(count * 8) / worst / 1e9 : 0.0);
    }
    MPI_Finalize();
    return 0;
}
