// The MPI reference for tutti-bench: the same collectives measured the same
// way (tools/tutti-bench/method.hpp: the same options, sizes, iteration
// schedule, buffers, checks, statistics, table, CSV and JSON). Only the calls
// and the loop that times them are MPI's. Built once per MPI found (the name
// comes from the build: openmpi or mpich); run it with that MPI's launcher:
//
//   mpirun.openmpi -n 2 ./build/benchmarks/mpi_collectives_openmpi all_reduce -m 8:16M
//   mpiexec.mpich -n 2 ./build/benchmarks/mpi_collectives_mpich all_reduce --csv mpich.csv
//
// Exit status: 0 when every check passed, 1 when one failed, 2 for a usage
// error.
#include <mpi.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "method.hpp"
#include "report.hpp"

#ifndef TUTTI_BENCH_MPI_NAME
#define TUTTI_BENCH_MPI_NAME "mpi"
#endif

namespace {

using namespace tutti_bench;

// --op compose for MPI: invec holds the lower ranks' contribution, so
// inoutvec[i] = invec[i] (op) inoutvec[i] (MPI's rule for user operations).
void compose_affine_mpi(void* in, void* inout, int* length, MPI_Datatype*) {
    const auto* lower = static_cast<const element*>(in);
    auto* higher = static_cast<element*>(inout);
    for (int i = 0; i < *length; ++i)
        higher[i] = compose_affine(lower[i], higher[i]);
}

// The MPI operation for --op, created once (MPI_Op_create needs MPI running).
MPI_Op mpi_operation(reduction op) {
    if (op == reduction::sum) return MPI_SUM;
    static const MPI_Op compose = [] {
        MPI_Op made;
        MPI_Op_create(&compose_affine_mpi, 0 /* not commutative */, &made);
        return made;
    }();
    return compose;
}

// One collective at one size on this rank; counts in elements, as MPI wants.
class bench_call {
public:
    explicit bench_call(const layout& l)
        : layout_(l), op_(mpi_operation(l.op)), block_(static_cast<int>(l.block)),
          counts_(static_cast<std::size_t>(l.ranks), static_cast<int>(l.block)),
          offsets_(static_cast<std::size_t>(l.ranks)) {
        for (std::size_t j = 0; j < offsets_.size(); ++j)
            offsets_[j] = static_cast<int>(j * l.block);
    }

    void run(buffer_set& b) const {
        using tutti::collective;
        const auto comm = MPI_COMM_WORLD;
        const auto type = MPI_INT64_T;
        auto* send = b.send.data();
        auto* recv = b.recv.data();
        const int root = layout_.root;
        switch (layout_.kind) {
        case collective::barrier:
        case collective::split:
            MPI_Barrier(comm);
            break;
        case collective::broadcast:
            MPI_Bcast(send, block_, type, root, comm);
            break;
        case collective::reduce:
            MPI_Reduce(send, recv, block_, type, op_, root, comm);
            break;
        case collective::all_reduce:
            MPI_Allreduce(send, recv, block_, type, op_, comm);
            break;
        case collective::gather:
            MPI_Gather(send, block_, type, recv, block_, type, root, comm);
            break;
        case collective::scatter:
            MPI_Scatter(send, block_, type, recv, block_, type, root, comm);
            break;
        case collective::all_gather:
            MPI_Allgather(send, block_, type, recv, block_, type, comm);
            break;
        case collective::all_to_all:
            MPI_Alltoall(send, block_, type, recv, block_, type, comm);
            break;
        case collective::all_to_allv:
            MPI_Alltoallv(send, counts_.data(), offsets_.data(), type, recv, counts_.data(),
                          offsets_.data(), type, comm);
            break;
        case collective::reduce_scatter:
            MPI_Reduce_scatter_block(send, recv, block_, type, op_, comm);
            break;
        case collective::scan:
            MPI_Scan(send, recv, block_, type, op_, comm);
            break;
        case collective::exscan:
            MPI_Exscan(send, recv, block_, type, op_, comm);
            break;
        }
    }

private:
    layout layout_;
    MPI_Op op_;
    int block_;
    std::vector<int> counts_;
    std::vector<int> offsets_;
};

struct timing {
    rank_sample sample;
    int iterations = 0;
    int warmup = 0;
};

// The method's loop, as tutti-bench runs it: one check on fresh buffers, the
// warm-up, an agreement on how many timed calls fit in the time limit, then
// the timed calls, each after a barrier and timed alone.
timing time_size(const bench_call& call, std::vector<buffer_set>& pool, const layout& l,
                 const settings& s) {
    timing t;
    if (s.validate) {
        MPI_Barrier(MPI_COMM_WORLD);
        call.run(pool[0]);
        if (const auto wrong = check(l, pool[0]); !wrong.empty()) {
            fmt::print(stderr, "mpi_collectives: WRONG RESULT: {}\n", wrong);
            t.sample.failed = 1;
        }
    }
    int iterations = scheduled_iterations(s, l);
    t.warmup = warmup_iterations(s, iterations);
    std::size_t next = 0;
    // `calls` calls, each after a barrier and timed alone: their seconds in
    // all, and the loop's (tutti-bench's run_calls).
    struct calls_made {
        double call_seconds = 0;
        double wall_seconds = 0;
    };
    const auto run_calls = [&](int calls) {
        calls_made made;
        const auto loop_start = clock_type::now();
        for (int i = 0; i < calls; ++i) {
            auto& set = next_set(s, l, pool, next);
            MPI_Barrier(MPI_COMM_WORLD);
            const auto start = clock_type::now();
            call.run(set);
            made.call_seconds += std::chrono::duration<double>(clock_type::now() - start).count();
        }
        made.wall_seconds = std::chrono::duration<double>(clock_type::now() - loop_start).count();
        return made;
    };
    // The slowest rank's mean over `calls` warm-up calls.
    const auto warm_batch = [&](int calls) {
        double mine = run_calls(calls).call_seconds / calls, slowest = 0;
        MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        return slowest;
    };
    const auto warm = warm_up(s, t.warmup, warm_batch);
    t.warmup = warm.calls;
    if (warm.calls > 0) iterations = iterations_within_limit(s, iterations, warm.settled_seconds);
    const auto timed = run_calls(iterations);
    t.iterations = iterations;
    t.sample.mean_us = timed.call_seconds / iterations * 1e6;
    t.sample.iteration_us = timed.wall_seconds / iterations * 1e6;
    return t;
}

int run(const settings& s, const std::string& transport, const std::vector<std::string>& command) {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const bool lead = rank == 0;
    if (s.root >= size) {
        if (lead)
            fmt::print(stderr, "mpi_collectives: --root {} is not a rank of this {}-rank job\n",
                       s.root, size);
        return 2;
    }
    const std::string implementation = TUTTI_BENCH_MPI_NAME;
    std::optional<report> out;
    int bad_file = 0;
    if (lead) {
        out.emplace(s, run_info{.tool = "mpi_collectives",
                                .implementation = implementation,
                                .transport = transport,
                                .launch = "mpi",
                                .ranks = size,
                                .command = command});
        try {
            out->begin();
        } catch (const std::exception& e) {
            fmt::print(stderr, "mpi_collectives: {}\n", e.what());
            bad_file = 1;
        }
    }
    int any_bad = 0;
    MPI_Allreduce(&bad_file, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_bad) return 2;
    std::size_t steps = 0;
    for (auto kind : s.collectives)
        steps += kind == tutti::collective::barrier ? 1 : s.sizes.size();
    progress shown(lead ? s : settings{.quiet = true}, steps);
    bool failed = false;
    bool measured = false;
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int ranks_here = 1;
    MPI_Comm_size(node, &ranks_here);
    MPI_Comm_free(&node);
    const std::size_t memory_here = machine_memory_bytes();

    for (auto kind : s.collectives) {
        const std::string name{to_string(kind)};
        for (std::size_t bytes : s.sizes) {
            const auto l = layout_for(kind, bytes, size, rank, s.root, s.op);
            shown.step(fmt::format("{} {}", name, human_bytes(l.bytes)));
            std::vector<buffer_set> pool;
            const auto cannot = try_make_pool(pool, s, l, ranks_here, memory_here);
            // The ranks skip a size together, as tutti-bench's do.
            int mine_short = cannot.empty() ? 0 : 1, any_short = 0;
            MPI_Allreduce(&mine_short, &any_short, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            if (any_short) {
                if (lead) out->skip(name, l.bytes, skip_reason(cannot));
                if (kind == tutti::collective::barrier) break;
                continue;
            }
            measured = true;
            const bench_call call(l);
            const auto t = time_size(call, pool, l, s);
            std::vector<rank_sample> samples(lead ? static_cast<std::size_t>(size) : 0);
            MPI_Gather(&t.sample, sample_doubles, MPI_DOUBLE, samples.data(), sample_doubles,
                       MPI_DOUBLE, 0, MPI_COMM_WORLD);
            if (lead) {
                row r{.implementation = implementation,
                      .label = s.label.empty() ? implementation : s.label,
                      .transport = transport,
                      .collective = name,
                      .algorithm = "auto",
                      .chosen = "",
                      .ranks = size,
                      .bytes = l.bytes,
                      .iterations = t.iterations,
                      .warmup = t.warmup,
                      .buffers = static_cast<int>(pool.size())};
                summarize(r, samples, s.validate);
                failed = failed || r.valid == "NO";
                out->add(r);
            }
            if (kind == tutti::collective::barrier) break; // no message, one size
        }
    }
    shown.done();
    if (lead) {
        try {
            out->finish();
        } catch (const std::exception& e) {
            fmt::print(stderr, "mpi_collectives: {}\n", e.what());
            failed = true;
        }
    }
    int mine = failed ? 1 : 0, any = 0;
    MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any) return 1;
    if (!measured) {
        if (lead) fmt::print(stderr, "mpi_collectives: nothing measured: every size was skipped\n");
        return 2;
    }
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    settings s;
    std::string transport = "default";
    CLI::App app{"mpi_collectives: the MPI reference for tutti-bench; the same options, the same "
                 "measurement, the same files"};
    add_options(app, s);
    app.add_option("--transport", transport,
                   "what the launcher was told to use (shm, tcp), recorded in the files")
        ->capture_default_str();
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // Every rank parsed the same line; one message is enough.
        int rank = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        const int code = e.get_exit_code();
        if (rank == 0) app.exit(e);
        MPI_Finalize();
        return code == 0 ? 0 : 2;
    }
    int status = 0;
    try {
        status = run(s, transport, std::vector<std::string>(argv, argv + argc));
    } catch (const std::exception& e) {
        // Only rank 0 writes files; the others wait in a collective for it.
        fmt::print(stderr, "mpi_collectives failed: {}\n", e.what());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    return status;
}
