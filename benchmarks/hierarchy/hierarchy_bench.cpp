// Benchmark of the hierarchical compositions against the flat collectives
// (after the HPX design's §13, seed 000). Not a test: it prints figures.
//
//   hierarchy-bench messages   messages and bytes one all_to_all issues, flat
//                              (pairwise: N(N-1)) against hierarchical, for N
//                              up to 1024 ranks in one process, measured by a
//                              counting transport around the in-process one
//   hierarchy-bench time       time per call of every collective, flat and
//                              hierarchical (arity 2, 4, 8; flat fallback
//                              threshold 0 and the default), payloads from
//                              8 B to MiBs, ranks as coroutines in one thread
//   tuttirun -n 4 hierarchy-bench job
//                              the same over shared memory, one process a rank
//
// Messages are counted as the difference between two runs that do the same
// except the measured call (building the hierarchy also sends messages), so
// the figure is exactly the call's.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "tutti.hpp"

namespace {

using namespace tutti;

struct tally {
    std::uint64_t messages = 0;
    std::uint64_t bytes = 0;
};

// Forwards to the in-process endpoint and counts what is sent. The ranks run
// in one thread, so plain counters do.
class counting_transport final : public transport {
public:
    counting_transport(std::shared_ptr<transport> inner, tally& counts)
        : inner_(std::move(inner)), counts_(counts) {}

    std::string_view name() const noexcept override { return inner_->name(); }
    int rank() const noexcept override { return inner_->rank(); }
    int size() const noexcept override { return inner_->size(); }
    asio::io_context& context() noexcept override { return inner_->context(); }
    transport_capabilities capabilities() const noexcept override { return inner_->capabilities(); }
    request isend(int dest, const message_header& header,
                  std::span<const std::byte> data) override {
        ++counts_.messages;
        counts_.bytes += data.size();
        return inner_->isend(dest, header, data);
    }
    request irecv(const message_header& expected, std::span<std::byte> into) override {
        return inner_->irecv(expected, into);
    }
    request irecv_any_size(const message_header& expected) override {
        return inner_->irecv_any_size(expected);
    }

private:
    std::shared_ptr<transport> inner_;
    tally& counts_;
};

// Runs body on n ranks as coroutines in this thread; what they sent.
tally run_counted(int n, const std::function<task<void>(communicator)>& body) {
    auto world = std::make_shared<inproc::world>(n);
    asio::io_context context;
    tally counts;
    int finished = 0;
    std::exception_ptr failure;
    for (int r = 0; r < n; ++r) {
        communicator comm(
            std::make_shared<counting_transport>(world->endpoint(r, context), counts));
        tutti::spawn(context, body(comm), [&](std::exception_ptr e) {
            if (e && !failure) failure = e;
            ++finished;
        });
    }
    // Bounded: a rank that never finishes is reported, not waited for.
    context.run_for(std::chrono::minutes(10));
    if (failure) std::rethrow_exception(failure);
    if (finished != n)
        throw error(errc::timeout, fmt::format("{} of {} ranks did not finish", n - finished, n));
    return counts;
}

// The communicator a configuration runs on: the plain one (flat), or a
// hierarchy of the given arity and threshold.
struct configuration {
    std::string label;
    int arity = 0; // 0: flat
    int threshold = 0;
};

task<communicator> prepare(communicator comm, const configuration& c) {
    if (c.arity == 0) co_return comm;
    co_return co_await make_arity_hierarchy(
        comm, {.arity = c.arity, .flat_fallback_threshold = c.threshold});
}

// ---- messages ---------------------------------------------------------------

void count_messages(const std::vector<int>& sizes, std::size_t block) {
    struct variant {
        std::string label;
        int arity;
        std::string algorithm;
    };
    std::vector<variant> variants{
        {"flat pairwise", 0, "pairwise"}, {"flat bruck", 0, "bruck"}, {"flat auto", 0, "auto"}};
    for (int a : {2, 4, 8}) {
        variants.push_back({fmt::format("hier ragged a={}", a), a, "hierarchical"});
        variants.push_back({fmt::format("hier padded a={}", a), a, "hierarchical_padded"});
    }
    fmt::print("# all_to_all, {} B per block: messages (and bytes) one call sends in total\n",
               block);
    fmt::print("{:>6} {:>22} {:>12} {:>14} {:>10}\n", "N", "algorithm", "messages", "bytes",
               "N(N-1)");
    for (int n : sizes) {
        for (const auto& v : variants) {
            auto run = [&](bool call) {
                return run_counted(n, [&, call](communicator comm) -> task<void> {
                    auto h = co_await prepare(comm, {v.label, v.arity == 0 ? 2 : v.arity, 0});
                    if (!call) co_return;
                    std::vector<std::byte> row(block * static_cast<std::size_t>(n)),
                        out(row.size());
                    for (std::size_t i = 0; i < row.size(); ++i)
                        row[i] = static_cast<std::byte>(i + static_cast<std::size_t>(comm.rank()));
                    co_await all_to_all(v.arity == 0 ? comm : h, row, out, use(v.algorithm));
                });
            };
            const auto without = run(false);
            const auto with = run(true);
            fmt::print("{:>6} {:>22} {:>12} {:>14} {:>10}\n", n, v.label,
                       with.messages - without.messages, with.bytes - without.bytes,
                       static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(n - 1));
            std::fflush(stdout);
        }
    }
}

// ---- time -------------------------------------------------------------------

using clock_type = std::chrono::steady_clock;

// One call of `kind` with `bytes` per rank (all_to_all: per row, at least 8
// B per block) on comm, with the algorithm named.
task<void> one_call(const communicator& comm, const std::string& kind, std::size_t bytes,
                    const std::string& algorithm, std::vector<std::int64_t>& a,
                    std::vector<std::int64_t>& b) {
    const auto alg = use(algorithm);
    const auto n = static_cast<std::size_t>(comm.size());
    const int root = comm.size() - 1; // not a representative for arity < N
    const std::size_t count = std::max<std::size_t>(1, bytes / 8);
    if (kind == "barrier") {
        co_await barrier(comm, alg);
    } else if (kind == "broadcast") {
        a.resize(count);
        co_await broadcast(comm, a, tutti::root(root), alg);
    } else if (kind == "reduce") {
        a.resize(count);
        b.resize(count);
        co_await reduce(comm, a, b, tutti::sum, tutti::root(root), alg);
    } else if (kind == "all_reduce") {
        a.resize(count);
        b.resize(count);
        co_await all_reduce(comm, a, b, tutti::sum, alg);
    } else if (kind == "gather") {
        a.resize(count);
        b.resize(count * n);
        co_await gather(comm, a, b, tutti::root(root), alg);
    } else if (kind == "scatter") {
        a.resize(count * n);
        b.resize(count);
        co_await scatter(comm, a, b, tutti::root(root), alg);
    } else if (kind == "all_gather") {
        a.resize(count);
        b.resize(count * n);
        co_await all_gather(comm, a, b, alg);
    } else {
        const std::size_t per_block = std::max<std::size_t>(1, count / n);
        a.resize(per_block * n);
        b.resize(per_block * n);
        co_await all_to_all(comm, a, b, alg);
    }
}

// Microseconds per call (all ranks' work, as they share one thread).
double time_calls(int n, const std::string& kind, std::size_t bytes, const configuration& c,
                  const std::string& algorithm) {
    // About 64 MiB moved per measurement, between 3 and 200 calls.
    const auto moved = std::max<std::size_t>(bytes * static_cast<std::size_t>(n), 1);
    const int iterations =
        static_cast<int>(std::clamp<std::size_t>((std::size_t{64} << 20) / moved, 3, 200));
    double microseconds = 0;
    run_counted(n, [&](communicator comm) -> task<void> {
        auto h = co_await prepare(comm, c);
        std::vector<std::int64_t> a, b;
        co_await one_call(h, kind, bytes, algorithm, a, b); // warm-up
        co_await barrier(comm);
        const auto start = clock_type::now();
        for (int i = 0; i < iterations; ++i)
            co_await one_call(h, kind, bytes, algorithm, a, b);
        co_await barrier(comm);
        if (comm.rank() == 0)
            microseconds =
                std::chrono::duration<double, std::micro>(clock_type::now() - start).count() /
                iterations;
    });
    return microseconds;
}

void time_everything(const std::vector<int>& sizes, const std::vector<std::size_t>& payloads,
                     const std::vector<std::string>& kinds) {
    std::vector<configuration> configurations{{"flat", 0, 0}};
    for (int a : {2, 4, 8})
        configurations.push_back({fmt::format("a={} t=0", a), a, 0});
    configurations.push_back({"a=4 t=16", 4, 16});
    fmt::print("# microseconds per call, every rank's work in one thread (compare ratios)\n");
    fmt::print("{:>11} {:>5} {:>9}", "collective", "N", "bytes");
    for (const auto& c : configurations)
        fmt::print(" {:>10}", c.label);
    fmt::print("\n");
    for (const auto& kind : kinds)
        for (int n : sizes)
            for (std::size_t bytes : payloads) {
                if (kind == "barrier" && bytes != payloads.front()) continue;
                fmt::print("{:>11} {:>5} {:>9}", kind, n, bytes);
                for (const auto& c : configurations) {
                    const auto algorithm =
                        c.arity == 0 ? std::string("auto") : std::string("hierarchical");
                    fmt::print(" {:>10.1f}", time_calls(n, kind, bytes, c, algorithm));
                    std::fflush(stdout);
                }
                fmt::print("\n");
            }
}

// ---- as a job (shared memory under tuttirun) --------------------------------

void time_in_job(const std::vector<std::size_t>& payloads, const std::vector<std::string>& kinds,
                 int repetitions) {
    job j;
    std::vector<configuration> configurations{{"flat", 0, 0}};
    for (int a : {2, 4, 8})
        if (a < j.size()) configurations.push_back({fmt::format("a={} t=0", a), a, 0});
    j.run([&](communicator world) -> task<void> {
        std::vector<communicator> comms;
        for (const auto& c : configurations)
            comms.push_back(co_await prepare(world, c));
        if (world.rank() == 0) {
            fmt::print("# microseconds per call, {} processes (median of {} runs)\n", world.size(),
                       repetitions);
            fmt::print("{:>11} {:>9}", "collective", "bytes");
            for (const auto& c : configurations)
                fmt::print(" {:>10}", c.label);
            fmt::print("\n");
        }
        std::vector<std::int64_t> a, b;
        for (const auto& kind : kinds)
            for (std::size_t bytes : payloads) {
                if (kind == "barrier" && bytes != payloads.front()) continue;
                if (world.rank() == 0) fmt::print("{:>11} {:>9}", kind, bytes);
                const auto moved = std::max<std::size_t>(bytes, 1);
                const int iterations = static_cast<int>(
                    std::clamp<std::size_t>((std::size_t{16} << 20) / moved, 3, 1000));
                for (std::size_t i = 0; i < configurations.size(); ++i) {
                    const auto algorithm =
                        configurations[i].arity == 0 ? std::string("auto") : "hierarchical";
                    std::vector<double> runs;
                    co_await one_call(comms[i], kind, bytes, algorithm, a, b);
                    for (int r = 0; r < repetitions; ++r) {
                        co_await barrier(world);
                        const auto start = clock_type::now();
                        for (int k = 0; k < iterations; ++k)
                            co_await one_call(comms[i], kind, bytes, algorithm, a, b);
                        runs.push_back(
                            std::chrono::duration<double, std::micro>(clock_type::now() - start)
                                .count() /
                            iterations);
                    }
                    std::sort(runs.begin(), runs.end());
                    if (world.rank() == 0) {
                        fmt::print(" {:>10.2f}", runs[runs.size() / 2]);
                        std::fflush(stdout);
                    }
                }
                if (world.rank() == 0) fmt::print("\n");
            }
    });
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"Hierarchical compositions against flat collectives"};
    app.require_subcommand(1);
    auto* messages = app.add_subcommand("messages", "messages one all_to_all sends, N up to 1024");
    std::vector<int> message_sizes{16, 64, 256, 1024};
    std::size_t block = 8;
    messages->add_option("--sizes", message_sizes, "numbers of ranks");
    messages->add_option("--block", block, "bytes per block");
    auto* timing = app.add_subcommand("time", "time per call, flat and hierarchical");
    std::vector<int> time_sizes{16, 64};
    std::vector<std::size_t> payloads{8, 1024, 65536, 1 << 20, 4 << 20};
    std::vector<std::string> kinds{"barrier", "broadcast",  "reduce",  "all_reduce",
                                   "gather",  "all_gather", "scatter", "all_to_all"};
    timing->add_option("--sizes", time_sizes, "numbers of ranks");
    timing->add_option("--payloads", payloads, "bytes per rank");
    timing->add_option("--collectives", kinds, "which collectives");
    auto* in_job = app.add_subcommand("job", "time per call as the ranks of a job (tuttirun)");
    std::vector<std::size_t> job_payloads{8, 1024, 65536, 1 << 20};
    int repetitions = 5;
    in_job->add_option("--payloads", job_payloads, "bytes per rank");
    in_job->add_option("--collectives", kinds, "which collectives");
    in_job->add_option("--repetitions", repetitions, "runs per figure (the median is shown)");
    CLI11_PARSE(app, argc, argv);
    try {
        if (messages->parsed()) count_messages(message_sizes, block);
        if (timing->parsed()) time_everything(time_sizes, payloads, kinds);
        if (in_job->parsed()) time_in_job(job_payloads, kinds, repetitions);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "hierarchy-bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
