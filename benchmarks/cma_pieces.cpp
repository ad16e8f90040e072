// cma_pieces: what reading another process's message piece by piece costs.
//
// A reduction's root reads its child's vector by single copy
// (process_vm_readv) into scratch, then combines it with its own into the
// result. Reading and combining piece by piece would keep each piece in the
// root's cache, but costs a system call per piece. This program measures the
// two: a child process, pinned to the second CPU this process may use, holds
// the vector (and, with --sender-writes, rewrites it before every round, so
// its lines start in the child's cache, as a sender's freshly computed data
// would); the parent, pinned to the first, reads it in pieces of each given
// length and adds each piece into its result at once (32-bit integers).
// Prints the median time per vector for each piece length, whole vector
// first. (Twenty-third session: pieces lost at every length, see
// docs/performance.md.)
#include <sched.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

#include <CLI/CLI.hpp>

#include "two_cpus.hpp"

namespace {

// The two processes' handshake, in a shared anonymous mapping.
struct rendezvous {
    std::atomic<long> go{0};      // the parent's round number, or -1: exit
    std::atomic<long> written{0}; // the last round the child has prepared
    std::atomic<std::uintptr_t> address{0};
    std::atomic<pid_t> pid{0};
};

[[noreturn]] void run_child(rendezvous& r, int cpu, std::size_t count, bool writes) {
    tutti_bench::pin_to(cpu);
    std::vector<std::int32_t> vector(count, 1);
    r.address.store(reinterpret_cast<std::uintptr_t>(vector.data()));
    r.pid.store(getpid());
    for (long round = 1;; ++round) {
        long go;
        while ((go = r.go.load(std::memory_order_acquire)) < round && go >= 0) {
        }
        if (go < 0) _exit(0);
        if (writes)
            for (std::size_t i = 0; i < count; ++i)
                vector[i] = static_cast<std::int32_t>(i + static_cast<std::size_t>(round));
        r.written.store(round, std::memory_order_release);
    }
}

// Spins until `ready` holds; false if the child exited meanwhile (it is
// looked for every so many rounds, so that a dead holder is no hang).
template <typename Ready>
bool spin_until(Ready ready, pid_t child) {
    for (unsigned long spins = 1; !ready(); ++spins)
        if (spins % (1u << 20) == 0 && waitpid(child, nullptr, WNOHANG) == child) {
            std::fprintf(stderr, "cma_pieces: the holder process exited\n");
            return false;
        }
    return true;
}

} // namespace

int main(int argc, char** argv) {
    std::size_t kib = 512;
    std::vector<std::size_t> pieces_kib{0, 256, 128, 64, 32, 16};
    int rounds = 400;
    bool sender_writes = false;
    CLI::App app{"cma_pieces: a single-copy read of a peer's vector, whole or piece by piece, "
                 "each piece combined at once"};
    app.add_option("-m,--kib", kib, "the vector's length in KiB")->check(CLI::Range(1, 1 << 20));
    app.add_option("-p,--pieces", pieces_kib, "piece lengths in KiB (0: the whole vector)")
        ->delimiter(',');
    app.add_option("-n,--rounds", rounds, "timed reads per piece length")
        ->check(CLI::PositiveNumber);
    app.add_flag("--sender-writes", sender_writes,
                 "the holder rewrites its vector before every read");
    CLI11_PARSE(app, argc, argv);

    const auto found = tutti_bench::first_two_cpus("cma_pieces");
    if (!found) return 2;
    const auto cpus = *found;

    const std::size_t bytes = kib * 1024;
    const std::size_t count = bytes / sizeof(std::int32_t);
    void* shared = mmap(nullptr, sizeof(rendezvous), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) {
        std::perror("cma_pieces: mmap");
        return 2;
    }
    auto& r = *new (shared) rendezvous;
    const pid_t child = fork();
    if (child < 0) {
        std::perror("cma_pieces: fork");
        return 2;
    }
    if (child == 0) run_child(r, cpus[1], count, sender_writes);
    tutti_bench::pin_to(cpus[0]);
    if (!spin_until([&] { return r.pid.load() != 0; }, child)) return 1;

    std::vector<std::int32_t> mine(count, 2), result(count);
    std::vector<std::byte> incoming(bytes);
    long round = 0;
    int status = 0;
    std::printf("# %zu KiB, %d reads each, holder %s its vector; median per vector\n", kib, rounds,
                sender_writes ? "rewrites" : "leaves");
    for (const std::size_t piece_kib : pieces_kib) {
        const std::size_t piece = piece_kib == 0 ? bytes : std::min(piece_kib * 1024, bytes);
        std::vector<double> took;
        for (int k = 0; k < rounds && status == 0; ++k) {
            r.go.store(++round, std::memory_order_release);
            if (!spin_until([&] { return r.written.load(std::memory_order_acquire) >= round; },
                            child)) {
                status = 1;
                break;
            }
            const auto start = std::chrono::steady_clock::now();
            for (std::size_t at = 0; at < bytes && status == 0; at += piece) {
                const std::size_t length = std::min(piece, bytes - at);
                iovec local{incoming.data(), length};
                iovec remote{reinterpret_cast<void*>(r.address.load() + at), length};
                if (process_vm_readv(r.pid.load(), &local, 1, &remote, 1, 0) !=
                    static_cast<ssize_t>(length)) {
                    std::fprintf(stderr, "cma_pieces: process_vm_readv: %s\n",
                                 std::strerror(errno));
                    status = 1;
                    break;
                }
                const auto* in = reinterpret_cast<const std::int32_t*>(incoming.data());
                const std::size_t first = at / sizeof(std::int32_t);
                for (std::size_t i = 0; i < length / sizeof(std::int32_t); ++i)
                    result[first + i] = mine[first + i] + in[i];
            }
            took.push_back(
                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                    .count());
        }
        if (status != 0) break;
        // The last read must have brought the holder's last vector.
        const std::size_t last = count - 1;
        const auto expected = 2 + (sender_writes ? static_cast<std::int32_t>(last + round) : 1);
        if (result[last] != expected) {
            std::fprintf(stderr, "cma_pieces: read %d at the end, expected %d\n", result[last],
                         expected);
            status = 1;
            break;
        }
        std::sort(took.begin(), took.end());
        std::printf("%8zu KiB pieces: %8.1f us\n", piece / 1024, took[took.size() / 2]);
        std::fflush(stdout);
    }
    r.go.store(-1, std::memory_order_release);
    waitpid(child, nullptr, 0);
    return status;
}
