// A real multi-process job: every rank is a process, and the ranks talk
// through shared memory. Each collective runs once on the world; rank 0
// prints what every rank gave and got (collected with tutti::gather, so lines
// never interleave) and whether it is exactly what that rank computed it
// should get. Then a table times all_reduce with each algorithm.
//
//   ./build/tools/tuttirun/tuttirun -n 4 ./build/examples/job_demo
//   mpirun -n 4 ./build/examples/job_demo           (Open MPI, through PMIx)
//   TUTTI_RANK=r TUTTI_SIZE=n TUTTI_RENDEZVOUS=127.0.0.1:29500 ./build/examples/job_demo
//                                                    (by hand, one per rank)
//
// Exit status: 0 when every check passed, 1 when one failed or a collective
// threw, 2 when the program was not started as part of a job.
//
// Everything here is the public API, through `import tutti;`.
#include <algorithm>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

import tutti;

namespace {

using clock_type = std::chrono::steady_clock;

// What one rank put into a collective, what it got out, and the verdict of
// comparing that with what it should get: "ok", "WRONG: ...", or empty when
// the rank receives nothing to check.
struct exchange {
    std::string gave;
    std::string got;
    std::string verdict;
};

template <class T>
void expect(exchange& e, const T& got, const T& expected) {
    e.got = fmt::format("{}", got);
    e.verdict = got == expected ? "ok" : fmt::format("WRONG: expected {}", expected);
}

std::string in_quotes(const std::string& text) {
    return "\"" + text + "\"";
}

// Prints, at rank 0, one line per rank of the exchange. Counts this rank's
// failed checks in `failures`.
tutti::task<void> show(tutti::communicator world, std::string_view title, std::string_view meaning,
                       exchange e, int& failures) {
    if (e.verdict.starts_with("WRONG")) ++failures;
    auto lines =
        co_await tutti::gather(world, e.gave + '\t' + e.got + '\t' + e.verdict, tutti::root(0));
    if (world.rank() != 0) co_return;
    std::vector<exchange> table;
    std::size_t width = 0;
    for (const auto& line : lines) {
        const auto a = line.find('\t');
        const auto b = line.find('\t', a + 1);
        table.push_back({line.substr(0, a), line.substr(a + 1, b - a - 1), line.substr(b + 1)});
        width = std::max(width, table.back().gave.size() + 2);
    }
    std::size_t got_width = 0;
    for (const auto& t : table)
        got_width = std::max(got_width, t.got.size() + 2);
    fmt::print("\n{}: {}\n", title, meaning);
    for (std::size_t r = 0; r < table.size(); ++r) {
        const auto& t = table[r];
        if (t.verdict.empty())
            fmt::print("  rank {:>2}  gave {:<{}} got {}\n", r, t.gave, width, t.got);
        else
            fmt::print("  rank {:>2}  gave {:<{}} got {:<{}}{}\n", r, t.gave, width, t.got,
                       got_width, t.verdict);
    }
    std::fflush(stdout); // shown now, even if a rank fails later
}

tutti::task<exchange> barrier_once(tutti::communicator world) {
    // Ranks arrive 2 ms apart; nobody may leave before the last one arrived
    // (steady_clock is the machine's monotonic clock, the same in every process).
    const auto delay = std::chrono::milliseconds(2 * world.rank());
    std::this_thread::sleep_for(delay);
    const auto arrived = clock_type::now();
    co_await tutti::barrier(world);
    const auto left = clock_type::now();
    const std::int64_t arrived_ns = arrived.time_since_epoch().count();
    const auto arrivals = co_await tutti::all_gather(world, arrived_ns);
    const auto last = clock_type::time_point(
        clock_type::duration(*std::max_element(arrivals.begin(), arrivals.end())));
    exchange e{.gave = fmt::format("(arrives after {} ms)", delay.count())};
    e.got = fmt::format("(left {:.0f} µs after the last arrival)",
                        std::chrono::duration<double, std::micro>(left - last).count());
    e.verdict = left >= last ? "ok" : "WRONG: left before the last rank arrived";
    co_return e;
}

tutti::task<exchange> broadcast_once(tutti::communicator world) {
    const int root = world.size() - 1;
    const std::string message = fmt::format("hello from rank {}", root);
    std::string text = world.rank() == root ? message : "";
    exchange e{.gave = in_quotes(text)};
    co_await tutti::broadcast(world, text, tutti::root(root));
    expect(e, in_quotes(text), in_quotes(message));
    co_return e;
}

tutti::task<exchange> reduce_once(tutti::communicator world) {
    const std::int64_t r = world.rank(), p = world.size();
    std::vector<std::int64_t> mine{r + 1, 10 * (r + 1)}, total(2);
    exchange e{.gave = fmt::format("{}", mine)};
    co_await tutti::reduce(world, mine, total, tutti::sum, tutti::root(0));
    if (world.rank() == 0)
        expect(e, total, std::vector<std::int64_t>{p * (p + 1) / 2, 10 * p * (p + 1) / 2});
    else
        e.got = "(not the root: nothing)";
    co_return e;
}

tutti::task<exchange> all_reduce_once(tutti::communicator world) {
    const std::int64_t r = world.rank(), p = world.size();
    std::vector<std::int64_t> data{r + 1, 10 * (r + 1)};
    exchange e{.gave = fmt::format("{}", data)};
    co_await tutti::all_reduce(world, data, tutti::sum); // in place
    expect(e, data, std::vector<std::int64_t>{p * (p + 1) / 2, 10 * p * (p + 1) / 2});
    co_return e;
}

tutti::task<exchange> gather_once(tutti::communicator world) {
    const int square = world.rank() * world.rank();
    exchange e{.gave = fmt::format("{}", square)};
    auto all = co_await tutti::gather(world, square, tutti::root(0));
    if (world.rank() == 0) {
        std::vector<int> expected;
        for (int i = 0; i < world.size(); ++i)
            expected.push_back(i * i);
        expect(e, all, expected);
    } else {
        e.got = "(not the root: nothing)";
    }
    co_return e;
}

tutti::task<exchange> scatter_once(tutti::communicator world) {
    std::vector<int> cards;
    if (world.rank() == 0)
        for (int i = 0; i < world.size(); ++i)
            cards.push_back(100 + i);
    exchange e{.gave = world.rank() == 0 ? fmt::format("{}", cards) : "(not the root: nothing)"};
    const int mine = co_await tutti::scatter(world, cards, tutti::root(0));
    expect(e, mine, 100 + world.rank());
    co_return e;
}

std::string name_of(int rank) {
    return std::string(static_cast<std::size_t>(rank) + 1, static_cast<char>('a' + rank % 26));
}

tutti::task<exchange> all_gather_once(tutti::communicator world) {
    const std::string name = name_of(world.rank());
    exchange e{.gave = in_quotes(name)};
    auto names = co_await tutti::all_gather(world, name);
    std::vector<std::string> expected;
    for (int i = 0; i < world.size(); ++i)
        expected.push_back(name_of(i));
    expect(e, names, expected);
    co_return e;
}

tutti::task<exchange> all_to_all_once(tutti::communicator world) {
    std::vector<int> row, column;
    for (int j = 0; j < world.size(); ++j) {
        row.push_back(10 * world.rank() + j);
        column.push_back(10 * j + world.rank());
    }
    exchange e{.gave = fmt::format("{}", row)};
    auto received = co_await tutti::all_to_all(world, row);
    expect(e, received, column);
    co_return e;
}

tutti::task<exchange> all_to_allv_once(tutti::communicator world) {
    std::vector<std::vector<int>> per_peer, expected;
    for (int j = 0; j < world.size(); ++j) {
        per_peer.emplace_back(static_cast<std::size_t>((world.rank() + j) % 3),
                              10 * world.rank() + j);
        expected.emplace_back(static_cast<std::size_t>((j + world.rank()) % 3),
                              10 * j + world.rank());
    }
    exchange e{.gave = fmt::format("{}", per_peer)};
    auto received = co_await tutti::all_to_allv(world, per_peer);
    expect(e, received, expected);
    co_return e;
}

tutti::task<exchange> reduce_scatter_once(tutti::communicator world) {
    const std::int64_t r = world.rank(), p = world.size();
    std::vector<std::int64_t> mine;
    for (std::int64_t j = 0; j < p; ++j)
        mine.push_back((r + 1) * (j + 1));
    std::vector<std::int64_t> block(1);
    exchange e{.gave = fmt::format("{}", mine)};
    co_await tutti::reduce_scatter(world, mine, block, tutti::sum);
    expect(e, block, std::vector<std::int64_t>{(r + 1) * p * (p + 1) / 2});
    co_return e;
}

tutti::task<exchange> scan_once(tutti::communicator world) {
    const std::int64_t r = world.rank();
    std::vector<std::int64_t> x{r + 1};
    exchange e{.gave = fmt::format("{}", x)};
    co_await tutti::scan(world, x, tutti::sum);
    expect(e, x, std::vector<std::int64_t>{(r + 1) * (r + 2) / 2});
    co_return e;
}

tutti::task<exchange> exscan_once(tutti::communicator world) {
    const std::int64_t r = world.rank();
    std::vector<std::int64_t> x{r + 1}, before{0};
    exchange e{.gave = fmt::format("{}", x)};
    co_await tutti::exscan(world, x, before, tutti::sum);
    expect(e, before, std::vector<std::int64_t>{r * (r + 1) / 2}); // rank 0 keeps its 0
    co_return e;
}

tutti::task<exchange> split_once(tutti::communicator world) {
    const int r = world.rank(), p = world.size();
    auto parity = co_await world.split(r % 2);
    std::vector<std::int64_t> x{r};
    exchange e{.gave = fmt::format("{} (rank {} of {} there)", x, parity.rank(), parity.size())};
    co_await tutti::all_reduce(parity, x, tutti::sum);
    std::int64_t same_parity_sum = 0;
    for (int i = r % 2; i < p; i += 2)
        same_parity_sum += i;
    expect(e, x, std::vector<std::int64_t>{same_parity_sum});
    const int expected_size = r % 2 == 0 ? (p + 1) / 2 : p / 2;
    if (parity.rank() != r / 2 || parity.size() != expected_size)
        e.verdict = fmt::format("WRONG: expected rank {} of {}", r / 2, expected_size);
    co_return e;
}

tutti::task<void> tour(tutti::communicator world, int& failures) {
    co_await show(world, "barrier", "nobody leaves before everybody has arrived",
                  co_await barrier_once(world), failures);
    co_await show(world, "broadcast",
                  "the last rank's string replaces everyone's (strings travel serialized)",
                  co_await broadcast_once(world), failures);
    co_await show(world, "reduce", "element-wise sum, delivered to the root (rank 0) only",
                  co_await reduce_once(world), failures);
    co_await show(world, "all_reduce", "element-wise sum, delivered to every rank",
                  co_await all_reduce_once(world), failures);
    co_await show(world, "gather", "one value from every rank, in rank order, at the root",
                  co_await gather_once(world), failures);
    co_await show(world, "scatter", "the root hands value i to rank i",
                  co_await scatter_once(world), failures);
    co_await show(world, "all_gather", "one value from every rank, in rank order, at every rank",
                  co_await all_gather_once(world), failures);
    co_await show(world, "all_to_all", "rank i sends 10*i + j to rank j: a matrix transpose",
                  co_await all_to_all_once(world), failures);
    co_await show(world, "all_to_allv",
                  "as all_to_all with lengths that differ: (i + j) % 3 copies from i to j",
                  co_await all_to_allv_once(world), failures);
    co_await show(world, "reduce_scatter", "sum of everyone's vectors, block j of it to rank j",
                  co_await reduce_scatter_once(world), failures);
    co_await show(world, "scan", "inclusive prefix sum: rank r gets x0 + ... + xr",
                  co_await scan_once(world), failures);
    co_await show(world, "exscan", "exclusive prefix sum: rank r gets x0 + ... + x(r-1)",
                  co_await exscan_once(world), failures);
    co_await show(world, "split + all_reduce",
                  "even and odd ranks form two communicators; sum inside each",
                  co_await split_once(world), failures);
}

// ---- timing ---------------------------------------------------------------

struct size_case {
    std::string_view label;
    std::size_t bytes;
    int warm_up;
    int iterations;
};

// Few iterations for the large sizes: the whole table takes a few seconds
// even with more ranks than cores.
constexpr size_case sizes[] = {
    {"8 B", 8, 20, 200},
    {"1 MiB", std::size_t{1} << 20, 5, 30},
    {"16 MiB", std::size_t{16} << 20, 2, 7},
};

tutti::call_signature all_reduce_of(int ranks, std::size_t count) {
    return {.kind = tutti::collective::all_reduce,
            .comm_size = ranks,
            .bytes = count * sizeof(std::int64_t),
            .count = count,
            .has_op = true};
}

// OSU style: a barrier lines the ranks up before each call; each rank times
// its own call, and the call's time is the slowest rank's. Returns the median
// of that over the iterations, in microseconds, and checks the last result.
tutti::task<double> median_us(tutti::communicator world, const size_case& s,
                              const std::vector<std::int64_t>& send,
                              std::vector<std::int64_t>& recv, const std::string& algorithm,
                              int& failures) {
    const std::int64_t p = world.size();
    const auto n = static_cast<std::size_t>(s.iterations);
    std::vector<double> mine(n), slowest(n);
    std::ranges::fill(recv, 0);
    for (int i = -s.warm_up; i < s.iterations; ++i) {
        co_await tutti::barrier(world);
        const auto start = clock_type::now();
        co_await tutti::all_reduce(world, send, recv, tutti::sum, tutti::use(algorithm));
        const auto end = clock_type::now();
        if (i >= 0)
            mine[static_cast<std::size_t>(i)] =
                std::chrono::duration<double, std::micro>(end - start).count();
    }
    if (!std::ranges::all_of(recv, [&](std::int64_t v) { return v == p * (p + 1) / 2; })) {
        ++failures;
        fmt::print(stderr, "rank {}: all_reduce with {} at {}: WRONG result\n", world.rank(),
                   algorithm, s.label);
    }
    co_await tutti::all_reduce(world, mine, slowest, tutti::max);
    std::nth_element(slowest.begin(), slowest.begin() + static_cast<std::ptrdiff_t>(n / 2),
                     slowest.end());
    co_return slowest[n / 2];
}

tutti::task<void> timing_table(tutti::communicator world, int& failures) {
    const int p = world.size();
    // Every registered algorithm, and the default choice ("auto", no info).
    std::vector<std::pair<std::string, const tutti::algorithm_info*>> rows{{"auto", nullptr}};
    for (const auto* info : tutti::algorithms().list(tutti::collective::all_reduce))
        rows.emplace_back(info->name, info);

    // us[row][size]; 0 where the algorithm's restrictions fail for the call.
    std::vector<std::vector<double>> us(rows.size(), std::vector<double>(std::size(sizes)));
    for (std::size_t k = 0; k < std::size(sizes); ++k) {
        const auto& s = sizes[k];
        const std::size_t count = s.bytes / sizeof(std::int64_t);
        const std::vector<std::int64_t> send(count, world.rank() + 1);
        std::vector<std::int64_t> recv(count);
        for (std::size_t a = 0; a < rows.size(); ++a) {
            const auto& [name, info] = rows[a];
            // A reason means a restriction fails for this call: skip it.
            if (info && info->check(all_reduce_of(p, count))) continue;
            us[a][k] = co_await median_us(world, s, send, recv, name, failures);
        }
    }
    if (world.rank() != 0) co_return;

    std::size_t width = 12;
    for (const auto& row : rows)
        width = std::max(width, row.first.size() + 2);
    fmt::print("\nall_reduce (sum of int64) over {} processes: median over calls of the "
               "slowest rank's\ntime per call, in µs, and the buffer size divided by it, in "
               "GB/s.\n\n",
               p);
    fmt::print("  {:<{}}", "", width);
    for (const auto& s : sizes)
        fmt::print("{:>20}", s.label);
    fmt::print("\n  {:<{}}", "algorithm", width);
    for (std::size_t k = 0; k < std::size(sizes); ++k)
        fmt::print("{:>11}{:>9}", "µs", "GB/s");
    fmt::print("\n");
    for (std::size_t a = 0; a < rows.size(); ++a) {
        fmt::print("  {:<{}}", rows[a].first, width);
        for (std::size_t k = 0; k < std::size(sizes); ++k) {
            if (us[a][k] > 0)
                fmt::print("{:>11.1f}{:>9.3f}", us[a][k],
                           static_cast<double>(sizes[k].bytes) / (us[a][k] * 1e3));
            else
                fmt::print("{:>11}{:>9}", "n/a", "");
        }
        fmt::print("\n");
    }
    std::vector<std::string> picks;
    for (const auto& s : sizes)
        picks.push_back(fmt::format(
            "{} at {}",
            tutti::choose<tutti::all_reduce_args>(all_reduce_of(p, s.bytes / 8), "").info.name,
            s.label));
    fmt::print("\n  auto picks {}.\n", fmt::join(picks, ", "));
    if (std::ranges::any_of(us, [](const auto& row) { return std::ranges::count(row, 0.0) > 0; }))
        fmt::print("  n/a: the algorithm's restrictions do not hold for the call.\n");
}

tutti::task<void> demo(tutti::communicator world, const tutti::job& job, bool timing,
                       int& failures) {
    if (world.rank() == 0) {
        const auto& shm = job.shared_memory();
        int single_copy_peers = 0;
        for (int r = 0; r < world.size(); ++r)
            if (r != world.rank() && shm.cma_to(r)) ++single_copy_peers;
        fmt::print("tutti job_demo: {} ranks, each a process; joined by {} ({}), node {}\n",
                   job.size(), job.launch().method(),
                   job.launch().method() == "pmix" ? "mpirun or srun"
                                                   : "tuttirun or environment variables",
                   job.launch().node());
        // Where the ranks outnumber the cores (the README's 4 ranks on 2),
        // or cannot read each other, the copy probe is not run.
        const std::string readv_figure =
            shm.readv_percent()
                ? fmt::format("process_vm_readv took {} % of the cells' time at setup",
                              shm.readv_percent())
                : std::string("process_vm_readv not timed at setup");
        fmt::print("transport {}: {}-byte cells, {} per ring; single copy (cross-memory "
                   "attach) to {} of {} peers; {}\n",
                   shm.name(), shm.cell_bytes(), shm.ring_depth(), single_copy_peers,
                   world.size() - 1, readv_figure);
        std::fflush(stdout);
    }
    co_await tour(world, failures);
    if (timing) co_await timing_table(world, failures);

    // Which paths the messages took, over every rank.
    const auto c = job.shared_memory().counters();
    std::vector<std::uint64_t> paths{c.eager,  c.chunked,       c.combined_via_cells, c.cma,
                                     c.staged, c.copies_shared, c.copies_alone_far},
        total(paths.size());
    co_await tutti::all_reduce(world, paths, total, tutti::sum);
    std::vector<int> failed{failures}, all_failed(1);
    co_await tutti::all_reduce(world, failed, all_failed, tutti::sum);
    failures = all_failed[0];
    if (world.rank() == 0) {
        fmt::print("\nmessages, all ranks: {} in one cell, {} in chunks of cells ({} of them "
                   "asked for by a receiver that combines them at once, the cores being far "
                   "apart), {} by single copy ({} of them staged, {} copied by both ends, {} by "
                   "the receiver alone because it combines them at once and the cores are far "
                   "apart)\n",
                   total[0], total[1], total[2], total[3], total[4], total[5], total[6]);
        if (failures == 0)
            fmt::print("every check passed\n");
        else
            fmt::print("{} checks FAILED\n", failures);
    }
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"tutti job demo: every collective once across processes, then all_reduce "
                 "timings. Start it with tuttirun -n N, mpirun -n N, or TUTTI_RANK/TUTTI_SIZE/"
                 "TUTTI_RENDEZVOUS set by hand."};
    bool skip_timing = false;
    app.add_flag("--no-timing", skip_timing, "skip the timing table");
    CLI11_PARSE(app, argc, argv);

    std::optional<tutti::job> job;
    try {
        job.emplace();
    } catch (const tutti::error& e) {
        fmt::print(stderr, "job_demo: cannot join a job: {}\n", e.what());
        return e.code() == tutti::errc::invalid_argument ? 2 : 1;
    }

    int failures = 0;
    try {
        job->run([&](tutti::communicator world) {
            return demo(std::move(world), *job, !skip_timing, failures);
        });
    } catch (const tutti::error& e) {
        fmt::print(stderr, "rank {}: job_demo failed: {} ({})\n", job->rank(), e.what(),
                   tutti::to_string(e.code()));
        return 1;
    }
    std::fflush(stdout);
    return failures == 0 ? 0 : 1;
}
