// A tour of tutti. Several ranks run in this process (as coroutines on one
// thread, through the in-process transport); each collective runs once and
// every rank's contribution and result is printed. Then a small table times
// all_reduce with each algorithm in the catalog.
//
//   ./build/examples/demo              4 ranks
//   ./build/examples/demo --ranks 7    any number from 1 to 64
//
// Everything here is the public API, through `import tutti;`.
#include <algorithm>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

import tutti;

namespace {

// What one rank put into a collective and what it got out, as text.
struct exchange {
    std::string gave;
    std::string got;
};

using rank_body = std::function<tutti::task<void>(tutti::communicator, exchange&)>;

// Runs body on every rank of a new in-process world of `ranks` ranks, then
// prints one line per rank.
void show(int ranks, std::string_view title, std::string_view meaning, const rank_body& body) {
    std::vector<exchange> table(static_cast<std::size_t>(ranks));
    tutti::inproc::run(ranks, [&](tutti::communicator comm) -> tutti::task<void> {
        co_await body(comm, table[static_cast<std::size_t>(comm.rank())]);
    });
    std::size_t width = 0;
    for (const auto& e : table)
        width = std::max(width, e.gave.size() + 2);
    fmt::print("\n{}: {}\n", title, meaning);
    for (std::size_t r = 0; r < table.size(); ++r)
        fmt::print("  rank {:>2}  gave {:<{}} got {}\n", r, table[r].gave, width, table[r].got);
}

void tour(int p) {
    show(p, "barrier", "nobody leaves before everybody has arrived",
         [](tutti::communicator comm, exchange& e) -> tutti::task<void> {
             e.gave = "(arrives)";
             co_await tutti::barrier(comm);
             e.got = "(leaves)";
         });

    show(p, "broadcast", "rank 0's string replaces everyone's (strings travel serialized)",
         [](tutti::communicator comm, exchange& e) -> tutti::task<void> {
             std::string text = comm.rank() == 0 ? "hello from rank 0" : "";
             e.gave = fmt::format("\"{}\"", text);
             co_await tutti::broadcast(comm, text, tutti::root(0));
             e.got = fmt::format("\"{}\"", text);
         });

    show(p, "reduce", "element-wise sum, delivered to the root (rank 0) only",
         [](tutti::communicator comm, exchange& e) -> tutti::task<void> {
             const std::int64_t r = comm.rank();
             std::vector<std::int64_t> mine{r + 1, 10 * (r + 1)};
             std::vector<std::int64_t> total(2);
             e.gave = fmt::format("{}", mine);
             co_await tutti::reduce(comm, mine, total, tutti::sum, tutti::root(0));
             e.got = comm.rank() == 0 ? fmt::format("{}", total) : "(not the root: nothing)";
         });

    show(p, "all_reduce", "element-wise sum, delivered to every rank",
         [](tutti::communicator comm, exchange& e) -> tutti::task<void> {
             const std::int64_t r = comm.rank();
             std::vector<std::int64_t> data{r + 1, 10 * (r + 1)};
             e.gave = fmt::format("{}", data);
             co_await tutti::all_reduce(comm, data, tutti::sum); // in place
             e.got = fmt::format("{}", data);
         });

    show(p, "gather", "one value from every rank, in rank order, at the root",
         [](tutti::communicator comm, exchange& e) -> tutti::task<void> {
             const int square = comm.rank() * comm.rank();
             e.gave = fmt::format("{}", square);
             auto all = co_await tutti::gather(comm, square, tutti::root(0));
             e.got = comm.rank() == 0 ? fmt::format("{}", all) : "(not the root: nothing)";
         });

    show(p, "scatter", "the root hands value i to rank i",
         [](tutti::communicator comm, exchange& e) -> tutti::task<void> {
             std::vector<int> cards;
             if (comm.rank() == 0)
                 for (int i = 0; i < comm.size(); ++i)
                     cards.push_back(100 + i);
             e.gave = comm.rank() == 0 ? fmt::format("{}", cards) : "(not the root: nothing)";
             const int mine = co_await tutti::scatter(comm, cards, tutti::root(0));
             e.got = fmt::format("{}", mine);
         });

    show(p, "all_gather", "one value from every rank, in rank order, at every rank",
         [](tutti::communicator comm, exchange& e) -> tutti::task<void> {
             const std::string name = std::string(static_cast<std::size_t>(comm.rank()) + 1,
                                                  static_cast<char>('a' + comm.rank() % 26));
             e.gave = fmt::format("\"{}\"", name);
             auto names = co_await tutti::all_gather(comm, name);
             e.got = fmt::format("{}", names);
         });

    show(p, "all_to_all", "rank i sends 10*i + j to rank j: a matrix transpose",
         [](tutti::communicator comm, exchange& e) -> tutti::task<void> {
             std::vector<int> row;
             for (int j = 0; j < comm.size(); ++j)
                 row.push_back(10 * comm.rank() + j);
             e.gave = fmt::format("{}", row);
             auto column = co_await tutti::all_to_all(comm, row);
             e.got = fmt::format("{}", column);
         });

    show(p, "all_to_allv", "as all_to_all with lengths that differ: rank i sends i copies",
         [](tutti::communicator comm, exchange& e) -> tutti::task<void> {
             std::vector<std::vector<int>> per_peer;
             for (int j = 0; j < comm.size(); ++j)
                 per_peer.emplace_back(static_cast<std::size_t>(comm.rank()), 10 * comm.rank() + j);
             e.gave = fmt::format("{}", per_peer);
             auto received = co_await tutti::all_to_allv(comm, per_peer);
             e.got = fmt::format("{}", received);
         });

    show(p, "reduce_scatter", "sum of everyone's vectors, block j of it to rank j",
         [](tutti::communicator comm, exchange& e) -> tutti::task<void> {
             std::vector<std::int64_t> mine;
             for (int j = 0; j < comm.size(); ++j)
                 mine.push_back((comm.rank() + 1) * (j + 1));
             std::vector<std::int64_t> block(1);
             e.gave = fmt::format("{}", mine);
             co_await tutti::reduce_scatter(comm, mine, block, tutti::sum);
             e.got = fmt::format("{}", block);
         });

    show(p, "scan", "inclusive prefix sum: rank r gets x0 + ... + xr",
         [](tutti::communicator comm, exchange& e) -> tutti::task<void> {
             std::vector<std::int64_t> x{comm.rank() + 1};
             e.gave = fmt::format("{}", x);
             co_await tutti::scan(comm, x, tutti::sum);
             e.got = fmt::format("{}", x);
         });

    show(p, "exscan", "exclusive prefix sum: rank r gets x0 + ... + x(r-1); rank 0 keeps its own",
         [](tutti::communicator comm, exchange& e) -> tutti::task<void> {
             std::vector<std::int64_t> x{comm.rank() + 1};
             std::vector<std::int64_t> before{0};
             e.gave = fmt::format("{}", x);
             co_await tutti::exscan(comm, x, before, tutti::sum);
             e.got = fmt::format("{}", before);
         });

    show(p, "split + all_reduce", "even and odd ranks form two communicators; sum inside each",
         [](tutti::communicator comm, exchange& e) -> tutti::task<void> {
             auto parity = co_await comm.split(comm.rank() % 2);
             std::vector<std::int64_t> x{comm.rank()};
             e.gave = fmt::format("{} (rank {} of {} there)", x, parity.rank(), parity.size());
             co_await tutti::all_reduce(parity, x, tutti::sum);
             e.got = fmt::format("{}", x);
         });

    // Mistakes are tutti::error exceptions with a code (docs/errors.md) and a
    // message in the caller's terms.
    fmt::print("\na mistake, caught: all_reduce into a receive buffer of the wrong length\n");
    try {
        tutti::inproc::run(p, [](tutti::communicator comm) -> tutti::task<void> {
            std::vector<int> send(3, 1), recv(2);
            co_await tutti::all_reduce(comm, send, recv, tutti::sum);
        });
    } catch (const tutti::error& e) {
        fmt::print("  tutti::error, code {}: {}\n", tutti::to_string(e.code()), e.what());
    }
}

using clock_type = std::chrono::steady_clock;

// The median time of one all_reduce of `count` int64 elements, from the first
// rank entering to the last rank leaving, over `iterations` calls (after two
// calls of warm-up). A barrier before each call lines the ranks up.
double median_us(int ranks, std::size_t count, int iterations, const std::string& algorithm) {
    const auto n = static_cast<std::size_t>(iterations);
    std::vector<clock_type::time_point> first_in(n, clock_type::time_point::max());
    std::vector<clock_type::time_point> last_out(n, clock_type::time_point::min());
    tutti::inproc::run(ranks, [&](tutti::communicator comm) -> tutti::task<void> {
        std::vector<std::int64_t> send(count, comm.rank()), recv(count);
        for (int i = -2; i < iterations; ++i) {
            co_await tutti::barrier(comm);
            const auto start = clock_type::now();
            co_await tutti::all_reduce(comm, send, recv, tutti::sum, tutti::use(algorithm));
            const auto end = clock_type::now();
            if (i < 0) continue;
            const auto k = static_cast<std::size_t>(i);
            first_in[k] = std::min(first_in[k], start);
            last_out[k] = std::max(last_out[k], end);
        }
    });
    std::vector<double> us(n);
    for (std::size_t k = 0; k < n; ++k)
        us[k] = std::chrono::duration<double, std::micro>(last_out[k] - first_in[k]).count();
    std::nth_element(us.begin(), us.begin() + static_cast<std::ptrdiff_t>(n / 2), us.end());
    return us[n / 2];
}

tutti::call_signature all_reduce_of(int ranks, std::size_t count) {
    return {.kind = tutti::collective::all_reduce,
            .comm_size = ranks,
            .bytes = count * sizeof(std::int64_t),
            .count = count,
            .has_op = true};
}

void timing_table(int p) {
    struct size_case {
        std::string label;
        std::size_t count;
        int iterations;
    };
    const std::vector<size_case> sizes{{"8 B", 1, 200}, {"1 MiB", (1u << 20) / 8, 10}};

    fmt::print("\nall_reduce (sum of int64) on {} ranks: median time per call, in microseconds.\n"
               "In-process ranks share one thread, so this measures each algorithm's own work\n"
               "(copies, additions, message matching), not a network.\n\n",
               p);
    // The default choice ("auto") depends on the size; say what it picked.
    std::vector<std::string> names{"auto"}, labels;
    for (const auto* info : tutti::algorithms().list(tutti::collective::all_reduce))
        names.push_back(info->name);
    for (const auto& name : names) {
        if (name != "auto") {
            labels.push_back(name);
            continue;
        }
        std::vector<std::string> picks;
        for (const auto& s : sizes)
            picks.push_back(
                tutti::choose<tutti::all_reduce_args>(all_reduce_of(p, s.count), "").info.name);
        labels.push_back(fmt::format("auto: {}", fmt::join(picks, " / ")));
    }
    std::size_t width = 0;
    for (const auto& label : labels)
        width = std::max(width, label.size() + 2);

    fmt::print("  {:<{}}", "algorithm", width);
    for (const auto& s : sizes)
        fmt::print("{:>12}", s.label);
    fmt::print("{:>14}\n", "1 MiB GB/s");
    for (std::size_t a = 0; a < names.size(); ++a) {
        fmt::print("  {:<{}}", labels[a], width);
        double large_us = 0;
        for (const auto& s : sizes) {
            const auto* chosen = tutti::algorithms().find<tutti::all_reduce_args>(names[a]);
            if (chosen && chosen->info.check(all_reduce_of(p, s.count))) {
                fmt::print("{:>12}", "n/a");
                continue;
            }
            const double us = median_us(p, s.count, s.iterations, names[a]);
            fmt::print("{:>12.1f}", us);
            if (&s == &sizes.back()) large_us = us;
        }
        if (large_us > 0)
            fmt::print("{:>14.2f}\n", static_cast<double>(1u << 20) / (large_us * 1e3));
        else
            fmt::print("{:>14}\n", "n/a");
    }
    fmt::print("\n  n/a: the algorithm's restrictions do not hold for this call.\n");
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"tutti demo: every collective once, then all_reduce timings"};
    int ranks = 4;
    bool skip_timing = false;
    app.add_option("-r,--ranks", ranks, "how many ranks to run in this process")
        ->check(CLI::Range(1, 64));
    app.add_flag("--no-timing", skip_timing, "skip the timing table");
    CLI11_PARSE(app, argc, argv);

    fmt::print("tutti demo: {} ranks in this process (in-process transport)\n", ranks);
    try {
        tour(ranks);
        if (!skip_timing) timing_table(ranks);
    } catch (const tutti::error& e) {
        fmt::print(stderr, "demo failed: {} ({})\n", e.what(), tutti::to_string(e.code()));
        return 1;
    }
    std::fflush(stdout);
    return 0;
}
