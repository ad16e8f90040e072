// Writing your own algorithm: an all_reduce called "halves", registered in
// tutti's catalog next to the built-in ones and run with tutti::use("halves").
//
// The communicator is split into a lower and an upper half. Each half runs
// an all_reduce of its own (with whichever built-in algorithm tutti picks
// for the half), the two half leaders swap their partial results point to
// point, and each leader broadcasts the total inside its half:
//
//     lower half: ranks 0 .. h-1            upper half: ranks h .. p-1
//     1. all_reduce inside the half         1. all_reduce inside the half
//     2. rank 0  <-- partial results -->    rank h
//     3. broadcast from rank 0              3. broadcast from rank h
//
// So it is a hierarchical composition: point-to-point messages on the call's
// own context and sub-collectives on a split communicator. The program checks
// that it gives exactly the built-in all_reduce's integers, and times both.
//
//   ./build/examples/user_all_reduce              6 ranks
//   ./build/examples/user_all_reduce --ranks 9
#include <algorithm>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

import tutti;

namespace {

// Splitting is itself a collective on the parent communicator (it uses one
// of its generations), so each rank splits a communicator once, on the first
// call, and keeps its half for later calls. The cache lives as long as the
// program; one that creates and drops many communicators would evict entries.
tutti::task<tutti::communicator> half_of(const tutti::communicator& comm) {
    static std::mutex mutex;
    static std::vector<std::pair<tutti::communicator, tutti::communicator>> halves;
    {
        std::lock_guard lock(mutex);
        for (const auto& [parent, half] : halves)
            if (parent == comm) co_return half;
    }
    const bool upper = comm.rank() >= comm.size() / 2;
    auto half = co_await comm.split(upper ? 1 : 0);
    std::lock_guard lock(mutex);
    halves.emplace_back(comm, half);
    co_return half;
}

tutti::task<void> halves(const tutti::call_context& ctx, const tutti::all_reduce_args& a) {
    const std::size_t bytes = a.count * a.op->element_size;
    const auto result = a.recv.first(bytes);
    if (bytes && a.send.data() != result.data()) std::memcpy(result.data(), a.send.data(), bytes);
    if (ctx.size() == 1 || bytes == 0) co_return;

    const auto half = co_await half_of(ctx.comm());
    // The sub-collectives of user generation k take generations 3k-2 and 3k
    // on the half, so calls with different generations never meet there.
    const std::uint64_t k = ctx.generation();

    // 1. In place inside the half; the half's leader (its rank 0) then holds
    //    x_0 op ... op x_(h-1), or x_h op ... op x_(p-1).
    co_await tutti::run_collective(half, tutti::all_reduce_args{result, result, a.count, a.op},
                                   tutti::generation(3 * k - 2));

    // 2. The leaders swap partial results. The lower half's is the left
    //    operand, so even a non-commutative operation gives x_0 op ... op x_(p-1).
    if (half.rank() == 0) {
        const bool lower = ctx.rank() == 0;
        const int partner = lower ? ctx.size() / 2 : 0;
        std::vector<std::byte> theirs(bytes);
        co_await ctx.send_recv(partner, result, partner, theirs, 0);
        if (lower)
            a.op->combine(result.data(), theirs.data(), result.data(), a.count);
        else
            a.op->combine(theirs.data(), result.data(), result.data(), a.count);
    }

    // 3. Each leader hands the total to the rest of its half.
    co_await tutti::run_collective(half, tutti::broadcast_args{result, 0},
                                   tutti::generation(3 * k));
}

using clock_type = std::chrono::steady_clock;

struct outcome {
    double median_us = 0;
    std::vector<std::vector<std::int64_t>> results; // per rank, from the last call
};

// all_reduce(sum) of `count` int64 on every rank with the named algorithm:
// the median time from the first rank entering to the last leaving, and what
// every rank got.
outcome measure(int ranks, std::size_t count, int iterations, const std::string& algorithm) {
    const auto n = static_cast<std::size_t>(iterations);
    std::vector<clock_type::time_point> first_in(n, clock_type::time_point::max());
    std::vector<clock_type::time_point> last_out(n, clock_type::time_point::min());
    outcome out;
    out.results.resize(static_cast<std::size_t>(ranks));
    tutti::inproc::run(ranks, [&](tutti::communicator comm) -> tutti::task<void> {
        std::vector<std::int64_t> send(count), recv(count);
        for (std::size_t i = 0; i < count; ++i)
            send[i] = comm.rank() * 1'000'003 + static_cast<std::int64_t>(i) * 7 - 5;
        for (std::size_t i = 0; i < n; ++i) {
            co_await tutti::barrier(comm);
            const auto start = clock_type::now();
            co_await tutti::all_reduce(comm, send, recv, tutti::sum, tutti::use(algorithm));
            const auto end = clock_type::now();
            first_in[i] = std::min(first_in[i], start);
            last_out[i] = std::max(last_out[i], end);
        }
        out.results[static_cast<std::size_t>(comm.rank())] = recv;
    });
    std::vector<double> us(n);
    for (std::size_t i = 0; i < n; ++i)
        us[i] = std::chrono::duration<double, std::micro>(last_out[i] - first_in[i]).count();
    std::nth_element(us.begin(), us.begin() + static_cast<std::ptrdiff_t>(n / 2), us.end());
    out.median_us = us[n / 2];
    return out;
}

bool exact(const outcome& o, int ranks, std::size_t count) {
    const std::int64_t p = ranks;
    for (const auto& got : o.results) {
        if (got.size() != count) return false;
        for (std::size_t i = 0; i < count; ++i)
            if (got[i] != 1'000'003 * p * (p - 1) / 2 + p * (static_cast<std::int64_t>(i) * 7 - 5))
                return false;
    }
    return true;
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"a user-defined all_reduce next to the built-in one"};
    int ranks = 6;
    app.add_option("-r,--ranks", ranks, "how many ranks to run in this process")
        ->check(CLI::Range(1, 64));
    CLI11_PARSE(app, argc, argv);

    // Register once, before any call; from now on "halves" is an all_reduce
    // algorithm like the others: listed, checked, chosen by name.
    tutti::algorithms().add(tutti::algorithm<tutti::all_reduce_args>{
        .info = {.name = "halves",
                 .form = tutti::algorithm_kind::hierarchical,
                 .summary = "all_reduce in each half, the leaders swap, broadcast in each half"},
        .run = halves,
    });

    fmt::print("all_reduce algorithms in the catalog:\n");
    for (const auto* info : tutti::algorithms().list(tutti::collective::all_reduce))
        fmt::print("  {:<20} {:<26} {}\n", info->name, tutti::to_string(info->form), info->summary);

    fmt::print("\n{} ranks in this process, all_reduce(sum) of int64 vectors; median time per\n"
               "call in microseconds (in-process: the algorithms' own work, not a network).\n\n",
               ranks);
    fmt::print("  {:>10}  {:>14}  {:>12}  {}\n", "elements", "built-in (us)", "halves (us)",
               "results");
    struct size_case {
        std::size_t count;
        int iterations;
    };
    bool all_exact = true;
    try {
        for (auto [count, iterations] :
             {size_case{1, 100}, size_case{1000, 50}, size_case{(1u << 20) / 8, 10}}) {
            const auto builtin = measure(ranks, count, iterations, "auto");
            const auto mine = measure(ranks, count, iterations, "halves");
            const bool same = builtin.results == mine.results && exact(builtin, ranks, count);
            all_exact = all_exact && same;
            fmt::print("  {:>10}  {:>14.1f}  {:>12.1f}  {}\n", count, builtin.median_us,
                       mine.median_us, same ? "identical, and exact" : "DIFFERENT");
        }
    } catch (const tutti::error& e) {
        fmt::print(stderr, "failed: {} ({})\n", e.what(), tutti::to_string(e.code()));
        return 1;
    }
    return all_exact ? 0 : 1;
}
