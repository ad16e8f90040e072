// cell_copy: how quickly a message written by one core into a shared cell
// is copied out by another, three ways.
//
// The writer copies the message into the cell and says so; the reader copies
// it out of the cell and answers; the writer's clock runs from its first
// store to the answer (one round: the write, a line each way, the copy out).
// The ways the reader copies:
//   whole        after the writer's flag, in order (the shared-memory
//                transport before the sixty-fourth session);
//   prefetched   the same, after asking for the first --head bytes' lines
//                at once (the transport's receiver since then);
//   progressive  as the writer goes: it publishes the bytes written so far
//                after each --chunk, and the reader copies what has landed
//                (a way the transport did not take: docs/performance.md,
//                sixty-fourth session).
// Prints one line per size and way: "N bytes <way>: T ns" (median round).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "two_cpus.hpp"

namespace {

constexpr std::size_t line = 64;
constexpr std::size_t largest = 1 << 20;

struct alignas(line) counter {
    std::atomic<std::uint64_t> value{0};
};

// The cell and the two counters the sides answer by, each on a line of its
// own; `landed` counts bytes written over all rounds (progressive), `round`
// the rounds written (whole, prefetched) and `done` the rounds copied out.
struct shared_cell {
    counter round, landed, done;
    alignas(4096) unsigned char bytes[largest];
};

enum class way { whole, prefetched, progressive };

struct setup {
    std::size_t bytes = 0;
    way how = way::whole;
    std::size_t head = 8192;
    std::size_t chunk = 1024;
    long rounds = 0;
};

void read_side(shared_cell& cell, const setup& s, unsigned char* into) {
    std::uint64_t landed_before = 0;
    for (long k = 1; k <= s.rounds; ++k) {
        if (s.how == way::progressive) {
            std::size_t copied = 0;
            while (copied < s.bytes) {
                std::uint64_t now;
                while ((now = cell.landed.value.load(std::memory_order_acquire)) <=
                       landed_before + copied) {
                }
                const std::size_t upto = static_cast<std::size_t>(now - landed_before);
                std::memcpy(into + copied, cell.bytes + copied, upto - copied);
                copied = upto;
            }
            landed_before += s.bytes;
        } else {
            while (cell.round.value.load(std::memory_order_acquire) <
                   static_cast<std::uint64_t>(k)) {
            }
            if (s.how == way::prefetched)
                for (std::size_t at = 0; at < std::min(s.bytes, s.head); at += line)
                    __builtin_prefetch(cell.bytes + at, 0, 3);
            std::memcpy(into, cell.bytes, s.bytes);
        }
        cell.done.value.store(static_cast<std::uint64_t>(k), std::memory_order_release);
    }
}

double write_side(shared_cell& cell, const setup& s, const unsigned char* from) {
    std::vector<double> took;
    took.reserve(static_cast<std::size_t>(s.rounds));
    std::uint64_t landed = 0;
    for (long k = 1; k <= s.rounds; ++k) {
        const auto start = std::chrono::steady_clock::now();
        if (s.how == way::progressive) {
            for (std::size_t at = 0; at < s.bytes; at += s.chunk) {
                const std::size_t n = std::min(s.chunk, s.bytes - at);
                std::memcpy(cell.bytes + at, from + at, n);
                cell.landed.value.store(landed + at + n, std::memory_order_release);
            }
            landed += s.bytes;
        } else {
            std::memcpy(cell.bytes, from, s.bytes);
            cell.round.value.store(static_cast<std::uint64_t>(k), std::memory_order_release);
        }
        while (cell.done.value.load(std::memory_order_acquire) < static_cast<std::uint64_t>(k)) {
        }
        took.push_back(
            std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
                .count());
    }
    std::nth_element(took.begin(), took.begin() + static_cast<long>(took.size() / 2), took.end());
    return took[took.size() / 2];
}

const char* name_of(way how) {
    switch (how) {
    case way::whole:
        return "whole";
    case way::prefetched:
        return "prefetched";
    case way::progressive:
        return "progressive";
    }
    return "?";
}

} // namespace

int main(int argc, char** argv) {
    std::vector<std::size_t> sizes{2048, 4096, 8192, 16384, 32768};
    setup s;
    s.rounds = 20000;
    CLI::App app{"cell_copy: a message written into a shared cell by one core, copied out by "
                 "another: whole, prefetched, or progressively as it is written"};
    app.add_option("-m,--bytes", sizes, "message sizes in bytes, a comma list (at most 1 MiB each)")
        ->delimiter(',')
        ->check(CLI::Range(std::size_t{1}, largest));
    app.add_option("-n,--rounds", s.rounds, "timed rounds per size and way")
        ->check(CLI::PositiveNumber);
    app.add_option("--head", s.head, "bytes whose lines `prefetched` asks for first")
        ->check(CLI::PositiveNumber);
    app.add_option("--chunk", s.chunk, "bytes between `progressive`'s published counts")
        ->check(CLI::Range(std::size_t{64}, largest));
    CLI11_PARSE(app, argc, argv);

    const auto found = tutti_bench::first_two_cpus("cell_copy");
    if (!found) return 2;
    const auto cpus = *found;
    if (!tutti_bench::pin_or_say("cell_copy", cpus[0])) return 2;
    auto cell = std::make_unique<shared_cell>();
    std::vector<unsigned char> from(largest, 1), into(largest, 0);
    for (const std::size_t bytes : sizes) {
        for (const way how : {way::whole, way::prefetched, way::progressive}) {
            // Each way starts from counters of zero.
            cell->round.value = 0;
            cell->landed.value = 0;
            cell->done.value = 0;
            s.bytes = bytes;
            s.how = how;
            std::thread reader([&] {
                tutti_bench::pin_or_say("cell_copy", cpus[1], "running unpinned");
                read_side(*cell, s, into.data());
            });
            const double median = write_side(*cell, s, from.data());
            reader.join();
            std::printf("%zu bytes %s: %.0f ns\n", bytes, name_of(how), median);
            std::fflush(stdout);
        }
    }
    return 0;
}
