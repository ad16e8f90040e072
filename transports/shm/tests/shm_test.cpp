// The shared-memory transport across real processes: each test forks its
// ranks, which build the transport over a test bootstrap, drive collectives
// or raw sends with tutti's progress engine, and report through their
// exit status (details on stderr). The parent asserts on the statuses and
// that no segment is left in /dev/shm.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/progress.hpp"
#include "test_bootstrap.hpp"
#include "transports/shm/shm.hpp"
#include "tutti.hpp"

using namespace tutti;
using tutti::testing::fork_bootstrap;

namespace {

// A failed check inside a child: it ends the child with a message. The
// message is formatted only then: checks run on every element of a message.
template <class... Args>
void expect(bool ok, fmt::format_string<Args...> what, Args&&... args) {
    if (!ok) throw std::runtime_error(fmt::format(what, std::forward<Args>(args)...));
}

std::string unique_job() {
    static int counter = 0;
    return fmt::format("shmtest-{}-{}", getpid(), counter++);
}

bool segment_exists(const std::string& job) {
    return std::filesystem::exists("/dev/shm/tutti-" + job + "-shm");
}

// Runs the work to completion with tutti's progress engine (poll the
// io_context and the transport; spin, yield, then sleep on the doorbell).
// Gives up (errc::timeout) after `limit`.
void drive(shm::transport& t, asio::io_context& io, task<void> work,
           std::chrono::seconds limit = std::chrono::seconds(60)) {
    bool done = false;
    std::exception_ptr failure;
    spawn(io, std::move(work), [&](std::exception_ptr e) {
        failure = e;
        done = true;
    });
    const auto deadline = std::chrono::steady_clock::now() + limit;
    bool late = false;
    tutti::drive(io, t, [&] {
        late = !done && std::chrono::steady_clock::now() > deadline;
        return done || late;
    });
    if (late) throw error(errc::timeout, "a test's collective did not finish in time");
    if (failure) std::rethrow_exception(failure);
}

struct child_outcome {
    bool exited = false;
    int exit_code = -1;
    int signal = 0;
};

// Forks `size` ranks running body(bootstrap); a rank that returns normally
// exits 0, one that throws exits 1 after printing why. Waits for all of them
// (reaping in any order, so a killed rank is not left a zombie that still
// looks alive), killing them all if they take longer than two minutes.
std::vector<child_outcome> run_ranks(int size, const std::function<void(fork_bootstrap&)>& body,
                                     const std::string& job,
                                     const std::function<std::string(int)>& node_of = {}) {
    auto* area = fork_bootstrap::make_area();
    std::vector<pid_t> pids;
    for (int r = 0; r < size; ++r) {
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            alarm(100);
            int code = 0;
            try {
                fork_bootstrap boot(area, r, size, job, node_of ? node_of(r) : "test-node");
                body(boot);
            } catch (const std::exception& e) {
                fmt::print(stderr, "rank {}: {}\n", r, e.what());
                code = 1;
            }
            std::fflush(stderr);
            _exit(code);
        }
        pids.push_back(pid);
    }
    std::vector<child_outcome> outcomes(static_cast<std::size_t>(size));
    int left = size;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (left > 0) {
        int status = 0;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid == 0) {
            if (std::chrono::steady_clock::now() > deadline) {
                for (pid_t p : pids)
                    kill(p, SIGKILL);
            }
            usleep(1000);
            continue;
        }
        REQUIRE(pid > 0);
        auto at = std::find(pids.begin(), pids.end(), pid);
        REQUIRE(at != pids.end());
        auto& o = outcomes[static_cast<std::size_t>(at - pids.begin())];
        o.exited = WIFEXITED(status);
        o.exit_code = o.exited ? WEXITSTATUS(status) : -1;
        o.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        --left;
    }
    fork_bootstrap::free_area(area);
    return outcomes;
}

void check_all_succeeded(const std::vector<child_outcome>& outcomes) {
    for (std::size_t r = 0; r < outcomes.size(); ++r) {
        CAPTURE(r);
        CHECK(outcomes[r].exited);
        CHECK(outcomes[r].exit_code == 0);
    }
}

// Runs `size` ranks of a fresh job and checks that all of them succeeded
// and that the job left no segment behind.
void run_job_and_check(int size, const std::function<void(fork_bootstrap&)>& body) {
    const auto job = unique_job();
    check_all_succeeded(run_ranks(size, body, job));
    CHECK_FALSE(segment_exists(job));
}

std::byte pattern(std::uint64_t message, std::uint64_t i) {
    return static_cast<std::byte>((message * 131 + i * 7 + (i >> 13)) & 0xff);
}

// `bytes` of `storage` that start `place` bytes into a page; storage holds
// two pages more than the bytes (misaligned copies are tested with these).
std::span<std::byte> placed_in_page(std::vector<std::byte>& storage, std::size_t place,
                                    std::size_t bytes) {
    const auto start = reinterpret_cast<std::uintptr_t>(storage.data());
    return {storage.data() + (4096 - start % 4096) % 4096 + place, bytes};
}

// pattern(message, i) repeats every 2 MiB: i * 7 and i >> 13 both move by a
// multiple of 256 when i does by 2^21. The messages of 64 MiB are filled and
// checked a period at a time with memcpy and memcmp: byte by byte they took
// most of these tests' time in the sanitizer build (-O0, every access
// checked), 80 of its 148 s.
constexpr std::size_t pattern_period = std::size_t{1} << 21;

void fill_pattern(std::span<std::byte> out, std::uint64_t message) {
    const std::size_t head = std::min(out.size(), pattern_period);
    for (std::size_t i = 0; i < head; ++i)
        out[i] = pattern(message, i);
    for (std::size_t at = head; at < out.size(); at += head)
        std::memcpy(out.data() + at, out.data(), std::min(head, out.size() - at));
}

std::vector<std::byte> patterned(std::size_t bytes, std::uint64_t message) {
    std::vector<std::byte> v(bytes);
    fill_pattern(v, message);
    return v;
}

// The first byte of `in` that is not pattern(message, i), if any.
std::optional<std::size_t> pattern_differs(std::span<const std::byte> in, std::uint64_t message) {
    const auto expected = patterned(std::min(in.size(), pattern_period), message);
    for (std::size_t at = 0; at < in.size(); at += expected.size()) {
        const std::size_t n = std::min(expected.size(), in.size() - at);
        if (std::memcmp(in.data() + at, expected.data(), n) == 0) continue;
        for (std::size_t i = 0;; ++i)
            if (in[at + i] != expected[i]) return at + i;
    }
    return std::nullopt;
}

// Throws naming message m and the first byte that differs, if one does.
void expect_pattern(std::span<const std::byte> in, std::uint64_t message, std::size_t m) {
    const auto at = pattern_differs(in, message);
    expect(!at, "message {} of {} bytes differs at byte {}", m, in.size(), at.value_or(0));
}

message_header header_for(int source, std::uint64_t step, std::size_t bytes) {
    message_header h;
    h.key = {.communicator = 77, .generation = 1, .step = step, .source = source};
    h.kind = collective::broadcast;
    h.bytes = bytes;
    return h;
}

// Rank 0 sends every size to rank 1 and rank 1 sends them back; rank 1
// posts half of its receives only after everything arrived (unexpected
// messages), the other half before, and receives some by irecv_any_size.
// With `shared`, the send buffers are shared memory (tutti::shared_vector),
// each starting 8 bytes into its region.
void exchange_sizes(shm::transport& t, asio::io_context& io, const std::vector<std::size_t>& sizes,
                    bool shared = false, bool awaited_at_end = false) {
    const int me = t.rank();
    const int peer = 1 - me;
    std::vector<std::vector<std::byte>> private_out(sizes.size()), in(sizes.size());
    std::vector<shared_vector<std::byte>> shared_out(sizes.size());
    std::vector<std::span<std::byte>> out(sizes.size());
    for (std::size_t m = 0; m < sizes.size(); ++m) {
        if (shared) {
            shared_out[m].resize(sizes[m] + 8);
            out[m] = std::span(shared_out[m]).subspan(8);
        } else {
            private_out[m].resize(sizes[m]);
            out[m] = private_out[m];
        }
        fill_pattern(out[m], m + 100u * me);
        in[m].assign(sizes[m], std::byte{0x5a});
    }
    drive(t, io, [&]() -> task<void> {
        std::vector<request> sends, receives;
        std::vector<request> any_size(sizes.size());
        auto post = [&](std::size_t m) {
            if (m % 3 == 2)
                any_size[m] = t.irecv_any_size(header_for(peer, m, sizes[m]));
            else
                receives.push_back(t.irecv(header_for(peer, m, sizes[m]), in[m]));
        };
        for (std::size_t m = 0; m < sizes.size(); m += 2)
            post(m);
        for (std::size_t m = 0; m < sizes.size(); ++m)
            sends.push_back(awaited_at_end
                                ? t.isend_awaited_at_end(peer, header_for(me, m, sizes[m]), out[m])
                                : t.isend(peer, header_for(me, m, sizes[m]), out[m]));
        co_await wait_all(sends);
        for (std::size_t m = 1; m < sizes.size(); m += 2)
            post(m);
        co_await wait_all(receives);
        for (std::size_t m = 0; m < sizes.size(); ++m) {
            if (!any_size[m]) continue;
            co_await any_size[m]->wait();
            in[m] = any_size[m]->take_payload();
        }
    }());
    for (std::size_t m = 0; m < sizes.size(); ++m) {
        expect(in[m].size() == sizes[m], "message {} has {} bytes, not {}", m, in[m].size(),
               sizes[m]);
        expect_pattern(in[m], m + 100u * peer, m);
    }
}

// Makes one system call fail with EPERM in this process from now on, as a
// container's seccomp profile does.
void forbid_system_call(long number) {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<std::uint32_t>(number), 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
    expect(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
               prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0,
           "cannot install the seccomp filter");
}

// process_vm_readv refused after the transport's startup probe.
void forbid_cross_memory_attach() {
    forbid_system_call(SYS_process_vm_readv);
}

call_signature reduction_signature(collective kind, int p, std::size_t count) {
    return {.kind = kind, .comm_size = p, .bytes = count * 8, .count = count, .has_op = true};
}

std::vector<std::string> usable(collective kind, const call_signature& call) {
    std::vector<std::string> names;
    for (const auto* info : algorithms().list(kind))
        if (!info->check(call)) names.push_back(info->name);
    expect(!names.empty(), "no {} algorithm applies", to_string(kind));
    return names;
}

std::int64_t encode(std::int64_t from, std::int64_t to, std::int64_t index) {
    return (from * 100003 + to) * 1000003 + index;
}

// Rank `rank`'s n addends of the reductions below: rank * 1000 + k.
std::vector<std::int64_t> addends_of(int rank, std::size_t n) {
    std::vector<std::int64_t> v(n);
    for (std::size_t k = 0; k < n; ++k)
        v[k] = rank * 1000 + static_cast<std::int64_t>(k);
    return v;
}

// Element k of the addends of ranks [0, ranks) summed.
std::int64_t sum_of_addends(int ranks, std::size_t k) {
    return 1000LL * ranks * (ranks - 1) / 2 + ranks * static_cast<std::int64_t>(k);
}

// Checks that `got` holds the addends of ranks [0, ranks) summed, naming the
// first element that does not.
void expect_sum_of_addends(std::span<const std::int64_t> got, int ranks, std::string_view call) {
    for (std::size_t k = 0; k < got.size(); ++k)
        expect(got[k] == sum_of_addends(ranks, k), "{}: element {} of {} is {}, not {}", call, k,
               got.size(), got[k], sum_of_addends(ranks, k));
}

// Every collective of the checklist on one communicator of processes.
void run_collectives(shm::transport& t, asio::io_context& io, communicator comm) {
    const int p = comm.size();
    const int me = comm.rank();
    for (std::size_t count : {std::size_t{1}, std::size_t{1000}, std::size_t{300000}}) {
        for (const auto& name : usable(collective::all_reduce,
                                       reduction_signature(collective::all_reduce, p, count))) {
            auto data = addends_of(me, count);
            drive(t, io, all_reduce(comm, data, sum, use(name)));
            for (std::size_t k = 0; k < count; ++k) {
                const std::int64_t want = sum_of_addends(p, k);
                expect(data[k] == want, "all_reduce '{}' of {}: element {} is {}, not {}", name,
                       count, k, data[k], want);
            }
        }
    }
    for (std::size_t n : {std::size_t{0}, std::size_t{7}, std::size_t{3001}}) {
        call_signature call{.kind = collective::all_to_all,
                            .comm_size = p,
                            .bytes = n * 8 * static_cast<std::size_t>(p)};
        for (const auto& name : usable(collective::all_to_all, call)) {
            std::vector<std::int64_t> send(n * static_cast<std::size_t>(p));
            std::vector<std::int64_t> recv(send.size(), -1);
            for (int j = 0; j < p; ++j)
                for (std::size_t k = 0; k < n; ++k)
                    send[static_cast<std::size_t>(j) * n + k] =
                        encode(me, j, static_cast<std::int64_t>(k));
            drive(t, io, all_to_all(comm, send, recv, use(name)));
            for (int i = 0; i < p; ++i)
                for (std::size_t k = 0; k < n; ++k)
                    expect(recv[static_cast<std::size_t>(i) * n + k] ==
                               encode(i, me, static_cast<std::int64_t>(k)),
                           "all_to_all '{}' with {} per block: block {} element {} "
                           "is misplaced",
                           name, n, i, k);
        }
    }
    for (const auto& name :
         usable(collective::broadcast,
                {.kind = collective::broadcast, .comm_size = p, .bytes = 70000})) {
        std::string text;
        if (me == p - 1) text = fmt::format("{:->70000}", "from the last rank");
        drive(t, io, broadcast(comm, text, root(p - 1), use(name)));
        expect(text == fmt::format("{:->70000}", "from the last rank"),
               "broadcast '{}' of a string gave {} characters", name, text.size());
    }
    for (const auto& name :
         usable(collective::barrier, {.kind = collective::barrier, .comm_size = p}))
        drive(t, io, barrier(comm, use(name)));
    // The blocking form polls the transport through the same engine.
    std::vector<std::int64_t> one{me};
    tutti::wait(comm, all_reduce(comm, one, sum));
    expect(one[0] == std::int64_t{p} * (p - 1) / 2, "the blocking all_reduce is wrong");
}

} // namespace

TEST_CASE("shm: collectives across 2, 3, 4 and 7 processes, every applicable algorithm") {
    for (int p : {2, 3, 4, 7}) {
        CAPTURE(p);
        const auto job = unique_job();
        auto outcomes = run_ranks(
            p,
            [](fork_bootstrap& boot) {
                asio::io_context io;
                auto t = shm::create_transport(boot, io);
                communicator comm(t);
                run_collectives(*t, io, comm);
            },
            job);
        check_all_succeeded(outcomes);
        CHECK_FALSE(segment_exists(job));
    }
}

TEST_CASE(
    "shm: messages of 0 bytes, one cell, several chunks and 64 MiB, chunked and single-copy") {
    for (bool cma : {false, true}) {
        CAPTURE(cma);
        const auto job = unique_job();
        auto outcomes = run_ranks(
            2,
            [cma](fork_bootstrap& boot) {
                asio::io_context io;
                shm::options opts;
                opts.use_cma = cma;
                opts.cell_bytes = 16384;
                opts.ring_depth = 8;
                // One threshold for every send: whether a send finds a
                // receive of the call still posted (an exchange) is a race.
                opts.cma_threshold_exchange = opts.cma_threshold;
                opts.cma_threshold_exchange_between_steps = opts.cma_threshold;
                // Far lines would send the 64 MiB through the cells.
                opts.slow_readv_cells_threshold = 0;
                auto t = shm::create_transport(boot, io, opts);
                const std::size_t cell = t->cell_bytes() - 64;
                exchange_sizes(
                    *t, io, {0, 1, cell, cell + 1, 5 * cell + 17, 300000, 64u << 20, 0, 3 * cell});
                auto c = t->counters();
                expect(c.eager == 4, "{} eager messages, not 4", c.eager);
                const int peer = 1 - t->rank();
                if (cma && t->cma_to(peer)) {
                    expect(c.cma == 2 && c.chunked == 3, "single copy: {} cma, {} chunked", c.cma,
                           c.chunked);
                } else {
                    if (cma) fmt::print(stderr, "process_vm_readv unavailable here: chunks only\n");
                    expect(c.cma == 0 && c.chunked == 5, "chunks only: {} cma, {} chunked", c.cma,
                           c.chunked);
                }
            },
            job);
        check_all_succeeded(outcomes);
        CHECK_FALSE(segment_exists(job));
    }
}

// Rank 0 sends every size to rank 1 by isend_awaited_at_end, rank 1 only
// receives (a fan-out's leaf: no exchange); rank 1 checks every byte.
void send_one_way(shm::transport& t, asio::io_context& io, const std::vector<std::size_t>& sizes,
                  bool at_end = true) {
    std::vector<std::vector<std::byte>> buffers(sizes.size());
    for (std::size_t m = 0; m < sizes.size(); ++m) {
        buffers[m].assign(sizes[m], std::byte{0x5a});
        if (t.rank() == 0) fill_pattern(buffers[m], m);
    }
    drive(t, io, [&]() -> task<void> {
        std::vector<request> pending;
        for (std::size_t m = 0; m < sizes.size(); ++m)
            pending.push_back(
                t.rank() != 0 ? t.irecv(header_for(0, m, sizes[m]), buffers[m])
                : at_end      ? t.isend_awaited_at_end(1, header_for(0, m, sizes[m]), buffers[m])
                              : t.isend(1, header_for(0, m, sizes[m]), buffers[m]));
        co_await wait_all(pending);
    }());
    if (t.rank() == 1)
        for (std::size_t m = 0; m < sizes.size(); ++m)
            expect_pattern(buffers[m], m, m);
}

// Ranks 0 and 1 send every size to each other (by isend or
// isend_awaited_at_end) with their receives of the sizes posted first, and a
// receive of a last message, sent once the sizes arrived, posted throughout:
// every send finds a receive of its call from its destination posted, an
// exchange. Each rank checks every byte.
void exchange_keeping_a_receive_posted(shm::transport& t, asio::io_context& io,
                                       const std::vector<std::size_t>& sizes, bool at_end) {
    const int me = t.rank();
    const int peer = 1 - me;
    const std::uint64_t last = sizes.size();
    std::vector<std::vector<std::byte>> out(sizes.size()), in(sizes.size());
    for (std::size_t m = 0; m < sizes.size(); ++m) {
        out[m].resize(sizes[m]);
        fill_pattern(out[m], m + 100u * me);
        in[m].assign(sizes[m], std::byte{0x5a});
    }
    std::array<std::byte, 1> token{std::byte{1}}, token_in{};
    drive(t, io, [&]() -> task<void> {
        auto last_in = t.irecv(header_for(peer, last, 1), token_in);
        std::vector<request> pending;
        for (std::size_t m = 0; m < sizes.size(); ++m)
            pending.push_back(t.irecv(header_for(peer, m, sizes[m]), in[m]));
        for (std::size_t m = 0; m < sizes.size(); ++m) {
            const auto h = header_for(me, m, sizes[m]);
            pending.push_back(at_end ? t.isend_awaited_at_end(peer, h, out[m])
                                     : t.isend(peer, h, out[m]));
        }
        co_await wait_all(pending);
        co_await t.isend(peer, header_for(me, last, 1), token)->wait();
        co_await last_in->wait();
    }());
    for (std::size_t m = 0; m < sizes.size(); ++m)
        expect_pattern(in[m], m + 100u * peer, m);
}

TEST_CASE("shm: a send awaited only at the end goes by single copy from its own threshold") {
    run_job_and_check(2, [](fork_bootstrap& boot) {
        asio::io_context io;
        shm::options opts;
        opts.cell_bytes = 16384;
        opts.ring_depth = 8;
        opts.cma_threshold = 256 * 1024;
        opts.cma_threshold_awaited_at_end = 40000;
        opts.cma_threshold_exchange = opts.cma_threshold; // its own test below
        opts.slow_readv_cells_threshold =
            0; // a slow process_vm_readv would send the 100,000 bytes through the cells
        auto t = shm::create_transport(boot, io, opts);
        if (!t->cma_to(1 - t->rank())) {
            fmt::print(stderr, "process_vm_readv unavailable here: nothing to check\n");
            return;
        }
        send_one_way(*t, io, {39999, 40000, 100000});
        auto c = t->counters();
        if (t->rank() == 0)
            expect(c.cma == 2 && c.chunked == 1,
                   "awaited at the end: {} cma, {} chunked, not 2 and 1", c.cma, c.chunked);
        // The same size sent by isend stays below its threshold: chunks.
        const auto before = t->counters();
        exchange_sizes(*t, io, {100000});
        c = t->counters();
        expect(c.cma == before.cma && c.chunked == before.chunked + 1,
               "then by isend: {} cma, {} chunked, from {} and {}", c.cma, c.chunked, before.cma,
               before.chunked);
    });
}

TEST_CASE("shm: with a core each, a send awaited at the end shares its copy from 64 KiB; an "
          "exchange has its own thresholds") {
    // An exchange between steps takes the exchange's 64 KiB where
    // process_vm_readv is quick (as here), or the threshold given.
    for (const std::size_t between_steps : {std::size_t{0}, std::size_t{1} << 20}) {
        CAPTURE(between_steps);
        run_job_and_check(2, [between_steps](fork_bootstrap& boot) {
            asio::io_context io;
            // Lines near and process_vm_readv quick, whatever this machine's
            // mode: where it is slow, exchanges between steps stay in the cells
            // (tested on their own).
            shm::options opts;
            opts.line_ns = 110;
            opts.readv_percent = 100;
            opts.cma_threshold_exchange_between_steps = between_steps;
            auto t = shm::create_transport(boot, io, opts);
            if (!t->cma_to(1 - t->rank())) {
                fmt::print(stderr, "process_vm_readv unavailable here: nothing to check\n");
                return;
            }
            const bool core_each = !ranks_outnumber_cores(2);
            send_one_way(*t, io, {65535, 65536, 200000});
            auto c = t->counters();
            if (core_each) {
                // Single copy from 64 KiB; the receiver offers the sender a
                // share of both copies (32 KiB chunks: 200000 bytes is less
                // than two of shared_copy_chunk's 128 KiB).
                if (t->rank() == 0)
                    expect(c.cma == 2 && c.chunked == 1, "one way: {} cma, {} chunked, not 2 and 1",
                           c.cma, c.chunked);
                else
                    expect(c.copies_shared == 2, "one way: {} shared copies, not 2",
                           c.copies_shared);
            } else if (t->rank() == 0) {
                // Sharing cores, single copy from 32 KiB, by the receiver alone.
                expect(c.cma == 3 && c.chunked == 0,
                       "oversubscribed: {} cma, {} chunked, not 3 and 0", c.cma, c.chunked);
            }
            // An exchange: both ranks send to each other with a receive of the
            // call from the other posted. Sent awaited at the end: with a core
            // each single copy from cma_threshold_exchange's 64 KiB, sharing
            // cores from cma_threshold_awaited_at_end's 32 KiB. By isend: with a
            // core each from cma_threshold_exchange_between_steps (64 KiB, or
            // 1 MiB as given), sharing cores from cma_threshold's 256 KiB.
            for (bool at_end : {false, true}) {
                CAPTURE(at_end);
                const std::vector<std::size_t> sizes{65535, 65536, 200000, 600000, 1u << 20};
                const auto before = t->counters();
                exchange_keeping_a_receive_posted(*t, io, sizes, at_end);
                c = t->counters();
                const std::uint64_t between_steps_by_cma = between_steps ? 1 : 4;
                const std::uint64_t by_cma =
                    at_end ? (core_each ? 4 : 5) : (core_each ? between_steps_by_cma : 2);
                expect(c.cma - before.cma == by_cma &&
                           c.chunked - before.chunked == sizes.size() - by_cma,
                       "exchange: {} cma, {} chunked, not {} and {}", c.cma - before.cma,
                       c.chunked - before.chunked, by_cma, sizes.size() - by_cma);
            }
        });
    }
}

TEST_CASE("shm: with a core each, a far line and a quick copy, a one-way message goes by single "
          "copy from 16 KiB and an exchange that ends the call from 32 KiB, unless a threshold is "
          "given") {
    struct given {
        std::size_t at_end, exchange;
    };
    for (const auto g : {given{0, 0}, given{64 << 10, 0}, given{0, 64 << 10}}) {
        CAPTURE(g.at_end);
        CAPTURE(g.exchange);
        run_job_and_check(2, [g](fork_bootstrap& boot) {
            asio::io_context io;
            shm::options opts;
            opts.line_ns = 450;
            opts.readv_percent = 100;
            opts.cma_threshold_awaited_at_end = g.at_end;
            opts.cma_threshold_exchange = g.exchange;
            auto t = shm::create_transport(boot, io, opts);
            if (!t->cma_to(1 - t->rank())) {
                fmt::print(stderr, "process_vm_readv unavailable here: nothing to check\n");
                return;
            }
            const bool core_each = !ranks_outnumber_cores(2);
            for (bool at_end : {true, false}) {
                CAPTURE(at_end);
                const auto before = t->counters().cma;
                send_one_way(*t, io, {16383, 16384, 40000}, at_end);
                if (t->rank() != 0) continue;
                // The rule lowers both one-way thresholds unless one is
                // given; sharing cores it does not apply (32 KiB at the end,
                // 256 KiB by isend).
                const std::uint64_t by_cma = core_each && !g.at_end ? 2
                                             : at_end && !core_each ? 1
                                                                    : 0;
                expect(t->counters().cma - before == by_cma, "one way: {} cma, not {}",
                       t->counters().cma - before, by_cma);
            }
            // Exchanges: at the end from 32 KiB unless the exchange's
            // threshold is given (sharing cores, cma_threshold_awaited_at_end
            // applies: 32 KiB, or as given); between steps (by isend) from
            // 64 KiB with a core each, 256 KiB sharing cores.
            for (bool at_end : {true, false}) {
                CAPTURE(at_end);
                const auto before = t->counters().cma;
                exchange_keeping_a_receive_posted(*t, io, {32767, 32768, 40000}, at_end);
                const std::uint64_t by_cma = !at_end     ? 0
                                             : core_each ? (g.exchange ? 0 : 2)
                                                         : (g.at_end ? 0 : 2);
                expect(t->counters().cma - before == by_cma, "exchange: {} cma, not {}",
                       t->counters().cma - before, by_cma);
            }
        });
    }
}

// A transport that sends every message through the cells (no single copy),
// with `opts` otherwise.
std::shared_ptr<shm::transport> cells_only_transport(fork_bootstrap& boot, asio::io_context& io,
                                                     shm::options opts = {}) {
    opts.use_cma = false;
    return shm::create_transport(boot, io, opts);
}

TEST_CASE("shm: with a core each, a message of one to four cells goes in pieces unless it is an "
          "exchange") {
    run_job_and_check(2, [](fork_bootstrap& boot) {
        asio::io_context io;
        shm::options opts;
        opts.cell_bytes = 16384;
        opts.pipeline_piece = 4096;
        auto t = cells_only_transport(boot, io, opts);
        expect(!t->single_copy_now() && !t->capabilities().single_copy,
               "rank {}: single copy offered with process_vm_readv turned off", boot.rank());
        const bool core_each = !ranks_outnumber_cores(2);
        const std::size_t cell = t->cell_bytes() - 64;
        // One cell; 40000 bytes: 3 cells, or 10 pieces; more than four cells.
        send_one_way(*t, io, {cell, 40000, 4 * cell + 1});
        auto c = t->counters();
        const std::uint64_t one_way = 1 + (core_each ? 10 : 3) + 5;
        if (t->rank() == 0)
            expect(c.message_cells == one_way, "one way: {} cells, not {}", c.message_cells,
                   one_way);
        // Each rank receives from the other in the same call: whole cells,
        // 3 for the message and 1 for the token after it.
        const auto before = t->counters().message_cells;
        exchange_keeping_a_receive_posted(*t, io, {40000}, false);
        c = t->counters();
        expect(c.message_cells - before == 4, "exchange: {} cells, not 4",
               c.message_cells - before);
    });
}

TEST_CASE("shm: messages written into the cells with streaming stores arrive whole") {
    using stores = shm::options::stores;
    for (const auto kind : {stores::streaming, stores::cached, stores::adaptive}) {
        CAPTURE(static_cast<int>(kind));
        run_job_and_check(2, [kind](fork_bootstrap& boot) {
            asio::io_context io;
            auto t = cells_only_transport(boot, io, {.cell_stores = kind});
            // One cell, odd lengths, several cells, a message under the 4 KiB
            // that adaptive stores leave to ordinary ones.
            send_one_way(*t, io, {1000, 4097, 40001, 200003});
            exchange_keeping_a_receive_posted(*t, io, {5000, 70001}, false);
            const auto c = t->counters();
            // Every cell of message bytes but the exchange's closing one-line
            // message, which travels in the cell's header.
            if (kind == stores::streaming)
                expect(c.streamed_cells + 1 == c.message_cells && c.streamed_cells > 0,
                       "streaming: {} of {} cells streamed", c.streamed_cells, c.message_cells);
            if (kind == stores::cached)
                expect(c.streamed_cells == 0, "cached: {} cells streamed", c.streamed_cells);
            if (kind != stores::adaptive) return;
            // Past the ring's first lap the first timed cell is a probe by
            // streaming stores, whatever the timings say after it.
            const std::size_t lap = (t->ring_depth() + 8) * (t->cell_bytes() - 64);
            send_one_way(*t, io, {lap});
            if (t->rank() == 0)
                expect(t->counters().streamed_cells > 0, "adaptive: none of {} cells streamed",
                       t->counters().message_cells);
        });
    }
}

TEST_CASE("shm: long messages are copied out of the cells past the caches into their posted "
          "receives, whole, and only those") {
    for (const std::size_t from : {std::size_t{64 * 1024}, std::size_t{0}}) {
        CAPTURE(from);
        run_job_and_check(2, [from](fork_bootstrap& boot) {
            asio::io_context io;
            auto t = cells_only_transport(boot, io, {.streamed_receive_from = from});
            const std::size_t cell = t->cell_bytes() - 64;
            // Below the threshold, then odd lengths past it: the cells' copies
            // land at every offset of a line in the receive buffer.
            send_one_way(*t, io, {40001});
            expect(t->counters().streamed_out_cells == 0, "40001 bytes: {} cells streamed out",
                   t->counters().streamed_out_cells);
            send_one_way(*t, io, {200003, 65536});
            const auto one_way = t->counters().streamed_out_cells;
            if (t->rank() == 1 && from != 0)
                expect(one_way >= (200003 + 65536) / cell,
                       "one way: {} cells streamed out, not at least {}", one_way,
                       (200003 + 65536) / cell);
            else
                expect(one_way == 0, "rank {}: {} cells streamed out", t->rank(), one_way);
            exchange_keeping_a_receive_posted(*t, io, {70001, 300007}, false);
            const auto exchanged = t->counters().streamed_out_cells - one_way;
            if (from != 0)
                expect(exchanged >= (70001 + 300007) / cell,
                       "exchange: {} cells streamed out, not at least {}", exchanged,
                       (70001 + 300007) / cell);
            else
                expect(exchanged == 0, "exchange: {} cells streamed out", exchanged);
            // A receive combined at once is read again at once: its cells keep
            // ordinary stores.
            std::vector<std::byte> message(300007, std::byte{0x5a});
            if (t->rank() == 0) fill_pattern(message, 7);
            const auto before = t->counters().streamed_out_cells;
            drive(*t, io, [&]() -> task<void> {
                const auto h = header_for(0, 7, message.size());
                co_await (t->rank() == 0 ? t->isend(1, h, message)
                                         : t->irecv_combined_at_once(h, message))
                    ->wait();
            }());
            if (t->rank() == 1) expect_pattern(message, 7, 7);
            expect(t->counters().streamed_out_cells == before,
                   "combined at once: {} cells streamed out",
                   t->counters().streamed_out_cells - before);
        });
    }
}

TEST_CASE("shm: one-line messages written by direct stores arrive whole and in order") {
    using kinds = shm::options::line_stores;
    // 0 to 16 bytes, what travels in a cell's header line, for four laps of
    // the ring: each message is checked byte by byte.
    std::vector<std::size_t> sizes;
    for (int lap = 0; lap < 4; ++lap)
        for (std::size_t n = 0; n <= 16; ++n)
            sizes.push_back(n);
    for (const auto kind : {kinds::direct, kinds::cached, kinds::adaptive}) {
        CAPTURE(static_cast<int>(kind));
        run_job_and_check(2, [kind, &sizes](fork_bootstrap& boot) {
            asio::io_context io;
            shm::options opts;
            opts.use_cma = false;
            opts.one_line_stores = kind;
            if (kind == kinds::direct && !shm::has_direct_line_stores()) {
                // Refused before the segment is made, on every rank alike.
                try {
                    shm::create_transport(boot, io, opts);
                    expect(false, "direct line stores were accepted on a CPU without MOVDIR64B");
                } catch (const error& e) {
                    expect(e.code() == errc::invalid_argument &&
                               std::string(e.what()).find("MOVDIR64B") != std::string::npos,
                           "the refusal names MOVDIR64B: {}", e.what());
                }
                return;
            }
            auto t = shm::create_transport(boot, io, opts);
            send_one_way(*t, io, sizes);
            exchange_keeping_a_receive_posted(*t, io, {0, 3, 8, 16}, false);
            // Rank 0 wrote the 68 one-way messages, 4 of the exchange and its
            // closing token; rank 1 the exchange's 5.
            const std::uint64_t written = t->rank() == 0 ? sizes.size() + 5 : 5;
            const auto c = t->counters();
            if (kind == kinds::direct)
                expect(c.direct_lines == written, "direct: {} of {} one-line messages",
                       c.direct_lines, written);
            if (kind == kinds::cached)
                expect(c.direct_lines == 0, "cached: {} written directly", c.direct_lines);
        });
    }
}

TEST_CASE("shm: direct line stores may pay only where their trip is short or the line's long") {
    // The two machines measured: a Zen 5 VM whose lines stored directly took
    // ~500 ns there and back, its ordinary ones 110-650; an Intel VM 650-680
    // against ~390.
    CHECK(shm::direct_lines_can_pay(500, 110));
    CHECK(shm::direct_lines_can_pay(500, 650));
    CHECK_FALSE(shm::direct_lines_can_pay(670, 390));
    // Slower than ordinary lines but still below the switching trip.
    CHECK(shm::direct_lines_can_pay(shm::direct_lines_pay_below_ns - 1, 100));
    CHECK_FALSE(shm::direct_lines_can_pay(shm::direct_lines_pay_below_ns, 100));
    // Two sockets, say: both slow, direct the quicker.
    CHECK(shm::direct_lines_can_pay(900, 1200));
    CHECK_FALSE(shm::direct_lines_can_pay(1200, 900));
}

TEST_CASE("shm: a receiver that prefetches the lines it guesses reads every message whole") {
    // While it polls, rank 1 prefetches as many lines as the last message of
    // one cell had, if it had at most options::prefetch_bytes; 64 one-line
    // cells in a row forget that. Which cells were read under a guess
    // follows from the sizes alone (timing decides only whether a poll came
    // first), and every message is checked byte by byte.
    for (const std::size_t limit : {std::size_t{512}, std::size_t{0}}) {
        CAPTURE(limit);
        run_job_and_check(2, [limit](fork_bootstrap& boot) {
            asio::io_context io;
            shm::options opts;
            opts.use_cma = false;
            opts.prefetch_bytes = limit;
            auto t = shm::create_transport(boot, io, opts);
            std::vector<std::size_t> sizes{64, 64};
            sizes.insert(sizes.end(), 70, 8);
            const std::size_t cells_long = 3 * (t->cell_bytes() - 64);
            sizes.insert(sizes.end(), {64, 600, 100, cells_long, 100, 513, 512});
            send_one_way(*t, io, sizes);
            // Read under a guess: the second 64 bytes; the first 64 one-line
            // cells (the 64th forgets); the 600 (after the third 64), which
            // is itself over the limit; the long message's first cell and
            // the 513 (each after a 100). Not the 512, after the 513.
            const std::uint64_t guessed = t->rank() == 1 && limit ? 1 + 64 + 1 + 1 + 1 : 0;
            const auto c = t->counters();
            expect(c.prefetch_guesses == guessed, "{} cells read under a guess, not {}",
                   c.prefetch_guesses, guessed);
        });
    }
}

TEST_CASE("shm: every rank takes rank 0's figures for a line between the cores, for "
          "process_vm_readv and for the ranks each core runs") {
    // Given on rank 0 alone: the others, told nothing, take them too
    // (selection branches on both, every sender on process_vm_readv's
    // figure) rather than figures of their own.
    for (int p : {2, 3, 5}) {
        CAPTURE(p);
        run_job_and_check(p, [p](fork_bootstrap& boot) {
            asio::io_context io;
            shm::options opts;
            if (boot.rank() == 0) {
                opts.line_ns = 450;
                opts.readv_percent = 321;
            }
            auto t = shm::create_transport(boot, io, opts);
            // Selection sees both figures through the capabilities.
            const auto c = t->capabilities();
            expect(t->single_copy_now() == c.single_copy,
                   "rank {}: single_copy_now() {} where the capabilities say {}", boot.rank(),
                   t->single_copy_now(), c.single_copy);
            expect(c.line_ns == 450 && t->readv_percent() == 321 && c.readv_percent == 321,
                   "rank {} took {} ns and {} % ({} % in its capabilities), not rank 0's 450 "
                   "and 321",
                   boot.rank(), c.line_ns, t->readv_percent(), c.readv_percent);
            // Counted, never unknown: p ranks over this machine's cores.
            expect(c.ranks_per_core == static_cast<std::uint32_t>(ranks_per_core(p)) &&
                       c.ranks_per_core >= 1,
                   "rank {} of {} counts {} ranks to a core, not {}", boot.rank(), p,
                   c.ranks_per_core, ranks_per_core(p));
        });
    }
    for (int p = 1; p <= 64; ++p)
        CHECK((ranks_per_core(p) > 1) == ranks_outnumber_cores(p));
    // Measured (where the ranks do not outnumber the cores): the same figures
    // on every rank, told to each through the bootstrap. 0 when a probe did
    // not answer in time, which a loaded machine may cause. The copy probe
    // wrote into rank 1's cells to rank 0, which must carry messages after
    // it as if new: a 40 KiB all_gather takes two cells each way.
    run_job_and_check(2, [](fork_bootstrap& boot) {
        asio::io_context io;
        auto t = shm::create_transport(boot, io);
        const std::uint32_t line = t->capabilities().line_ns, readv = t->readv_percent();
        std::vector<std::uint32_t> sent(5000, line), everyone(10000);
        sent[1] = readv;
        communicator comm(t);
        drive(*t, io, all_gather(comm, sent, everyone));
        expect(everyone[0] == everyone[5000] && everyone[1] == everyone[5001],
               "rank 0 took {} ns and {} %, rank 1 {} and {}", everyone[0], everyone[1],
               everyone[5000], everyone[5001]);
        for (std::size_t i = 2; i < everyone.size(); ++i)
            if (i % 5000 > 1 && everyone[i] != everyone[i < 5000 ? 0 : 5000])
                throw std::runtime_error(fmt::format("element {} is {}", i, everyone[i]));
        expect(line == 0 || !ranks_outnumber_cores(2),
               "a line of {} ns measured where the ranks outnumber the cores", line);
    });
    // Rank 0 cannot read rank 1: process_vm_readv's figure is unknown, and
    // the probe does not wait for what cannot come.
    run_job_and_check(2, [](fork_bootstrap& boot) {
        if (boot.rank() == 0) forbid_cross_memory_attach();
        asio::io_context io;
        auto t = shm::create_transport(boot, io);
        expect(t->readv_percent() == 0, "rank {} took {} % where rank 0 cannot read rank 1",
               boot.rank(), t->readv_percent());
    });
    // A peer that never answers the line bounce (told a figure of its own,
    // rank 1 does not bounce): rank 0 gives up on it within its bound, the
    // line is unknown on every rank (rank 1 does not keep its own 450), and
    // messages flow. Only where the ranks have a core each is there a
    // bounce to give up on.
    if (ranks_outnumber_cores(2)) return;
    run_job_and_check(2, [](fork_bootstrap& boot) {
        asio::io_context io;
        shm::options opts;
        if (boot.rank() == 1) opts.line_ns = 450;
        const auto began = std::chrono::steady_clock::now();
        auto t = shm::create_transport(boot, io, opts);
        const auto setup = std::chrono::steady_clock::now() - began;
        expect(t->capabilities().line_ns == 0, "rank {} took {} ns where rank 1 never bounced",
               boot.rank(), t->capabilities().line_ns);
        expect(setup < std::chrono::seconds(5), "rank {}'s setup took {} ms", boot.rank(),
               std::chrono::duration_cast<std::chrono::milliseconds>(setup).count());
        communicator comm(t);
        std::vector<std::int64_t> sum(4096);
        drive(*t, io, all_reduce(comm, addends_of(boot.rank(), sum.size()), sum, tutti::sum));
        expect_sum_of_addends(sum, 2, "all_reduce");
    });
}

TEST_CASE("shm: where process_vm_readv is slow, a receive combined at once comes through the "
          "cells; where lines travel far, its receiver copies it alone") {
    // A 2-rank binomial reduce to rank 0: rank 1's 512 KiB are offered for a
    // single copy (sent awaited at the end), into scratch that rank 0
    // combines at once. Near (110 ns) with process_vm_readv quick (100 % of
    // the cells' time) rank 1 helps with that copy; where process_vm_readv
    // is slow (300 %) rank 0 asks for the cells instead, near or far; far
    // (450 ns) with it quick, or the rule off, rank 0 copies it alone. A
    // broadcast's receive is kept, not combined: shared either way.
    struct setting {
        std::uint32_t line_ns;
        std::uint32_t readv_percent;
        std::uint32_t cells_readv_percent;
        std::uint64_t shared, alone, via_cells; // rank 0's reduce
    };
    const std::uint32_t rule = shm::options{}.cells_readv_percent;
    for (const auto s : {setting{110, 100, rule, 1, 0, 0}, setting{110, 300, rule, 0, 0, 1},
                         setting{450, 300, rule, 0, 0, 1}, setting{450, 100, rule, 0, 1, 0},
                         setting{450, 300, 0, 0, 1, 0}}) {
        CAPTURE(s.line_ns);
        CAPTURE(s.readv_percent);
        CAPTURE(s.cells_readv_percent);
        run_job_and_check(2, [s](fork_bootstrap& boot) {
            asio::io_context io;
            shm::options opts;
            opts.line_ns = s.line_ns;
            opts.readv_percent = s.readv_percent;
            opts.cells_readv_percent = s.cells_readv_percent;
            opts.slow_readv_cells_threshold = 0; // else no single copy is offered at all
            auto t = shm::create_transport(boot, io, opts);
            communicator comm(t);
            constexpr std::size_t count = 64 * 1024; // 512 KiB of int64
            const auto send = addends_of(comm.rank(), count);
            std::vector<std::int64_t> recv(count, -1);
            drive(*t, io, reduce(comm, send, recv, sum, root(0), use("binomial")));
            if (comm.rank() == 0) expect_sum_of_addends(recv, 2, "binomial reduce");
            const auto reduced = t->counters();
            std::vector<std::int64_t> bytes(count, comm.rank() == 0 ? 7 : 0);
            drive(*t, io, broadcast(comm, bytes, root(0), use("binomial")));
            if (std::any_of(bytes.begin(), bytes.end(), [](auto b) { return b != 7; }))
                throw std::runtime_error("the broadcast's bytes are wrong");
            const auto broadcast_too = t->counters();
            if (!t->cma_to(1 - comm.rank()) || ranks_outnumber_cores(2)) {
                fmt::print(stderr, "no core for each rank, or no process_vm_readv: copies alone\n");
                expect(broadcast_too.copies_shared == 0 && broadcast_too.copies_alone_far == 0 &&
                           broadcast_too.combined_via_cells == 0,
                       "a copy shared, counted alone or asked through the cells where none is "
                       "shared");
                return;
            }
            // Selection is told what the transport judged (the decision
            // trees' slow_single_copy), so the two cannot part.
            expect(t->capabilities().slow_single_copy == (s.via_cells == 1),
                   "the transport reports slow_single_copy = {} where it keeps the receive {}",
                   t->capabilities().slow_single_copy, s.via_cells ? "in the cells" : "off them");
            if (comm.rank() == 0)
                expect(reduced.copies_shared == s.shared && reduced.copies_alone_far == s.alone &&
                           reduced.combined_via_cells == s.via_cells,
                       "the reduce: {} shared copies, {} alone, {} through the cells",
                       reduced.copies_shared, reduced.copies_alone_far, reduced.combined_via_cells);
            else
                expect(broadcast_too.copies_shared == reduced.copies_shared + 1 &&
                           broadcast_too.copies_alone_far == 0 &&
                           broadcast_too.combined_via_cells == 0 &&
                           reduced.cma == (s.via_cells ? 0u : 1u),
                       "the broadcast: {} shared copies, {} alone, {} through the cells; the "
                       "reduce's {} single copies",
                       broadcast_too.copies_shared - reduced.copies_shared,
                       broadcast_too.copies_alone_far, broadcast_too.combined_via_cells,
                       reduced.cma);
        });
    }
}

TEST_CASE("shm: where process_vm_readv is slow, exchanges between steps stay in the cells") {
    // A 2-rank Rabenseifner all_reduce of 2 MiB: each rank sends 1 MiB in the
    // halving exchange and 1 MiB in the doubling one, both exchanges whose
    // send the next step waits for. Where process_vm_readv takes 100 % of
    // the cells' time they go by single copy (from 1 MiB); where it takes
    // 300 %, through the cells. Given explicitly, the threshold holds either
    // way.
    struct setting {
        std::uint32_t readv_percent;
        std::size_t between_steps; // 0: the default
        bool by_cells;
    };
    for (const auto s : {setting{100, 0, false}, setting{300, 0, true},
                         setting{300, std::size_t{1} << 20, false}}) {
        CAPTURE(s.readv_percent);
        CAPTURE(s.between_steps);
        run_job_and_check(2, [s](fork_bootstrap& boot) {
            asio::io_context io;
            shm::options opts;
            opts.readv_percent = s.readv_percent;
            opts.cma_threshold_exchange_between_steps = s.between_steps;
            opts.slow_readv_cells_threshold = 0; // else the 1 MiB sends skip single copy anyway
            auto t = shm::create_transport(boot, io, opts);
            communicator comm(t);
            constexpr std::size_t count = 256 * 1024; // 2 MiB of int64
            const auto send = addends_of(comm.rank(), count);
            std::vector<std::int64_t> recv(count, -1);
            drive(*t, io, all_reduce(comm, send, recv, sum, use("rabenseifner")));
            expect_sum_of_addends(recv, 2, "rabenseifner all_reduce");
            const auto c = t->counters();
            if (!t->cma_to(1 - comm.rank()) || ranks_outnumber_cores(2)) {
                fmt::print(stderr, "no core for each rank, or no process_vm_readv: "
                                   "the exchanges' thresholds are not the ones tested\n");
                return;
            }
            expect(s.by_cells ? c.cma == 0 && c.chunked == 2 : c.cma == 2,
                   "{} exchanges by single copy, {} through the cells", c.cma, c.chunked);
        });
    }
}

TEST_CASE("shm: where process_vm_readv is slow, messages from private buffers come through the "
          "cells") {
    // Each rank sends the other 256 KiB and then 4 MiB, from private buffers
    // and then from shared ones, awaited at the end (single copy from 64
    // KiB, and no rule for exchanges between steps applies). Where
    // process_vm_readv takes 100 % of the cells' time both private ones go
    // by single copy; where it takes 300 %, through the cells from
    // slow_readv_cells_threshold up; shared buffers are copied out of the
    // mapping either way.
    struct setting {
        std::uint32_t readv_percent;
        std::size_t slow_readv_cells_threshold;
        std::uint64_t cma, chunked; // of the private pair
    };
    const std::size_t by_default = shm::options{}.slow_readv_cells_threshold;
    for (const auto s : {setting{100, by_default, 2, 0}, setting{300, by_default, 0, 2},
                         setting{300, std::size_t{1} << 20, 1, 1}, setting{300, 0, 2, 0}}) {
        CAPTURE(s.readv_percent);
        CAPTURE(s.slow_readv_cells_threshold);
        run_job_and_check(2, [s](fork_bootstrap& boot) {
            asio::io_context io;
            shm::options opts;
            opts.readv_percent = s.readv_percent;
            opts.slow_readv_cells_threshold = s.slow_readv_cells_threshold;
            auto t = shm::create_transport(boot, io, opts);
            const std::vector<std::size_t> sizes{256 * 1024, 4 * 1024 * 1024};
            exchange_sizes(*t, io, sizes, false, true);
            const auto c = t->counters();
            exchange_sizes(*t, io, sizes, true, true);
            const auto shared = t->counters();
            expect(shared.mapped - c.mapped == 2, "{} shared buffers mapped, not 2",
                   shared.mapped - c.mapped);
            if (!t->cma_to(1 - t->rank()) || ranks_outnumber_cores(2)) {
                fmt::print(stderr, "no core for each rank, or no process_vm_readv: "
                                   "the slow-readv threshold does not apply\n");
                return;
            }
            expect(c.cma == s.cma && c.chunked == s.chunked,
                   "private buffers: {} by single copy, {} through the cells", c.cma, c.chunked);
        });
    }
}

TEST_CASE("shm: where ranks share cores and process_vm_readv is slow, messages that fit in a "
          "ring stay in the cells") {
    // Two ranks to a core (one rank more than this machine's cores): a
    // linear broadcast's 256 KiB (one-way, within a ring) and a linear
    // all_to_all's 256 KiB blocks (an exchange within a ring) come through
    // the cells, a broadcast's 1 MiB (more than a ring holds) by single
    // copy. Three to a core: the all_to_all's blocks by single copy too.
    // Where process_vm_readv takes 100 % of the cells' time, every one of
    // them by single copy, as without the rule.
    int two_to_a_core = 2;
    while (!ranks_outnumber_cores(two_to_a_core))
        ++two_to_a_core;
    int three_to_a_core = two_to_a_core;
    while (ranks_per_core(three_to_a_core) < 3)
        ++three_to_a_core;
    if (three_to_a_core > 9) {
        MESSAGE("this machine has too many cores to make ranks share them in a test");
        return;
    }
    // Not told a figure, rank 0 measures one in its own memory (no peer to
    // time against where they share cores), and every rank takes it.
    run_job_and_check(two_to_a_core, [](fork_bootstrap& boot) {
        asio::io_context io;
        auto t = shm::create_transport(boot, io);
        std::vector<std::uint32_t> mine{t->readv_percent()}, everyone(boot.size());
        communicator comm(t);
        drive(*t, io, all_gather(comm, mine, everyone));
        expect(std::all_of(everyone.begin(), everyone.end(),
                           [&](auto figure) { return figure == everyone[0]; }),
               "rank {} took {} %, rank 0 {}", boot.rank(), mine[0], everyone[0]);
        expect(everyone[0] > 0 || !t->cma_to((boot.rank() + 1) % boot.size()),
               "no figure where rank 0 can use process_vm_readv");
    });
    struct setting {
        int ranks;
        std::uint32_t readv_percent;
        bool small_in_cells, blocks_in_cells;
    };
    for (const auto s :
         {setting{two_to_a_core, 1000, true, true}, setting{two_to_a_core, 100, false, false},
          setting{three_to_a_core, 1000, true, false}}) {
        CAPTURE(s.ranks);
        CAPTURE(s.readv_percent);
        run_job_and_check(s.ranks, [s](fork_bootstrap& boot) {
            asio::io_context io;
            shm::options opts;
            opts.readv_percent = s.readv_percent;
            auto t = shm::create_transport(boot, io, opts);
            const int p = s.ranks, me = t->rank();
            if (!t->cma_to((me + 1) % p)) {
                fmt::print(stderr, "no process_vm_readv here: nothing to keep off it\n");
                return;
            }
            const bool slow = s.readv_percent > shm::options{}.cells_readv_percent;
            expect(t->capabilities().slow_single_copy == slow,
                   "rank {} reports slow_single_copy = {} at {} %", me,
                   t->capabilities().slow_single_copy, s.readv_percent);
            communicator comm(t);
            const auto broadcast_of = [&](std::size_t bytes, std::int64_t value) {
                std::vector<std::int64_t> data(bytes / 8, me == 0 ? value : -1);
                drive(*t, io, broadcast(comm, data, root(0), use("linear")));
                expect(std::all_of(data.begin(), data.end(), [&](auto x) { return x == value; }),
                       "rank {}: the broadcast of {} bytes arrived wrong", me, bytes);
                return t->counters().cma;
            };
            const auto before = t->counters().cma;
            const auto after_small = broadcast_of(256 * 1024, 5);
            const auto after_large = broadcast_of(1024 * 1024, 9);
            constexpr std::size_t block = 32 * 1024; // 256 KiB of int64
            std::vector<std::int64_t> send(block * static_cast<std::size_t>(p)),
                recv(send.size(), -1);
            for (int j = 0; j < p; ++j)
                for (std::size_t k = 0; k < block; ++k)
                    send[static_cast<std::size_t>(j) * block + k] =
                        encode(me, j, static_cast<std::int64_t>(k));
            drive(*t, io, all_to_all(comm, send, recv, use("linear")));
            for (int i = 0; i < p; ++i)
                for (std::size_t k = 0; k < block; ++k)
                    expect(recv[static_cast<std::size_t>(i) * block + k] ==
                               encode(i, me, static_cast<std::int64_t>(k)),
                           "rank {}: all_to_all block {} element {} is misplaced", me, i, k);
            const auto blocks = t->counters().cma - after_large;
            const std::uint64_t others = static_cast<std::uint64_t>(p - 1);
            // Three to a core, a block counts as an exchange's only while this
            // rank's receive from its destination waits: one whose message
            // came first goes as a one-way message. Of each pair's two blocks
            // the one sent first found that receive waiting, so at least half
            // of them all went by single copy.
            std::vector<std::int64_t> total{static_cast<std::int64_t>(blocks)};
            drive(*t, io, all_reduce(comm, total, sum));
            const auto pairs = static_cast<std::int64_t>(p) * (p - 1) / 2;
            const bool all_by_single_copy = s.readv_percent <= shm::options{}.cells_readv_percent;
            expect(s.blocks_in_cells    ? blocks == 0
                   : all_by_single_copy ? blocks == others
                                        : blocks <= others && total[0] >= pairs,
                   "rank {}: {} of its {} all_to_all blocks by single copy ({} of all ranks' {})",
                   me, blocks, others, total[0], 2 * pairs);
            if (me != 0) return;
            expect(after_small - before == (s.small_in_cells ? 0 : others),
                   "the root sent {} of its 256 KiB broadcasts by single copy",
                   after_small - before);
            expect(after_large - after_small == others,
                   "the root sent {} of its {} 1 MiB broadcasts by single copy",
                   after_large - after_small, others);
        });
    }
}

TEST_CASE("shm: single copy refused at run time falls back to chunks, one direction only") {
    const auto job = unique_job();
    auto outcomes = run_ranks(
        2,
        [](fork_bootstrap& boot) {
            asio::io_context io;
            shm::options opts;
            opts.cma_threshold_exchange = opts.cma_threshold; // as in the first test
            opts.cma_threshold_exchange_between_steps = opts.cma_threshold;
            opts.slow_readv_cells_threshold = 0;
            auto t = shm::create_transport(boot, io, opts);
            const int peer = 1 - t->rank();
            if (!t->cma_to(peer)) {
                fmt::print(stderr,
                           "process_vm_readv unavailable here: nothing to fall back from\n");
                return;
            }
            // Rank 1 can no longer read rank 0; rank 0 can still read rank 1.
            if (t->rank() == 1) forbid_cross_memory_attach();
            const std::size_t cell = t->cell_bytes() - 64;
            exchange_sizes(*t, io, {1, 300000, 5 * cell, 64u << 20, 400000, 2 * cell});
            auto c = t->counters();
            if (t->rank() == 0) {
                expect(c.cma == 0 && c.chunked == 5 && !t->cma_to(1),
                       "rank 0 to rank 1: {} cma, {} chunked", c.cma, c.chunked);
            } else {
                expect(c.cma == 3 && c.chunked == 2 && t->cma_to(0),
                       "rank 1 to rank 0: {} cma, {} chunked", c.cma, c.chunked);
            }
        },
        job);
    check_all_succeeded(outcomes);
    CHECK_FALSE(segment_exists(job));
}

// Rank 0 broadcasts 4 MiB to rank 1 from a private and then a shared buffer
// until it has helped copy both kinds (a chunk or more each), or
// `max_rounds`; every round's bytes are checked. Returns how many rounds ran.
// The private buffers sit 16 bytes into a page (a heap buffer's place),
// rank 1's `receiver_past` bytes further.
int broadcast_until_helped(shm::transport& t, asio::io_context& io, communicator& comm,
                           int max_rounds, std::size_t receiver_past = 0) {
    constexpr std::size_t bytes = 4u << 20;
    std::vector<std::byte> storage(bytes + 2 * 4096);
    const auto plain = placed_in_page(storage, 16 + (comm.rank() == 1 ? receiver_past : 0), bytes);
    shared_vector<std::byte> shared(bytes);
    int round = 0;
    std::uint64_t helped_before = t.counters().chunks_helped;
    std::int64_t kinds_helped = 0; // bit 0: private, bit 1: shared
    for (; round < max_rounds && kinds_helped != 3; ++round) {
        const bool from_shared = round % 2 == 1;
        std::span<std::byte> buffer = from_shared ? std::span<std::byte>(shared) : plain;
        if (comm.rank() == 0)
            fill_pattern(buffer, round);
        else
            std::ranges::fill(buffer, std::byte{0});
        drive(t, io, broadcast(comm, buffer, root(0), use("binomial")));
        const auto at = pattern_differs(buffer, round);
        expect(!at, "round {} ({} buffer): byte {} differs", round,
               from_shared ? "shared" : "private", at.value_or(0));
        const auto helped = t.counters().chunks_helped;
        std::vector<std::int64_t> flag{helped > helped_before ? (from_shared ? 2 : 1) : 0};
        helped_before = helped;
        drive(t, io, all_reduce(comm, flag, bit_or));
        kinds_helped |= flag[0];
    }
    return round;
}

TEST_CASE("shm: a large single-copy message is copied by its receiver and its sender together") {
    run_job_and_check(2, [](fork_bootstrap& boot) {
        asio::io_context io;
        shm::options opts;
        opts.slow_readv_cells_threshold =
            0; // a slow process_vm_readv would send the 4 MiB through the cells
        auto t = shm::create_transport(boot, io, opts);
        communicator comm(t);
        const int rounds = broadcast_until_helped(*t, io, comm, 200);
        const auto c = t->counters();
        if (!t->cma_to(1 - t->rank()) || ranks_outnumber_cores(2)) {
            fmt::print(stderr, "no core for each rank, or no process_vm_readv: copies alone\n");
            expect(c.copies_shared == 0 && c.chunks_helped == 0,
                   "{} shared copies, {} chunks helped", c.copies_shared, c.chunks_helped);
            return;
        }
        // The receiver offers every time (the slot of the last message is
        // free again before its acknowledgement); the root helped both
        // kinds of buffer before 200 rounds were over.
        if (t->rank() == 1)
            expect(c.copies_shared == static_cast<std::uint64_t>(rounds) && rounds < 200,
                   "{} shared copies in {} rounds", c.copies_shared, rounds);
        else
            expect(c.chunks_helped > 0 && c.copies_shared == 0 && rounds < 200,
                   "the root helped {} chunks in {} rounds", c.chunks_helped, rounds);
    });
}

TEST_CASE("shm: a sender's help into a buffer just past its own place in a page is bounced, and "
          "arrives whole") {
    // Rank 1's private buffer sits 16 bytes past rank 0's place in a page,
    // where process_vm_writev may crawl as the reads do. Bounced, the
    // chunks the root helps with into it go through the bounce buffer;
    // direct, none do.
    using misaligned = shm::options::misaligned_reads;
    for (const auto mode : {misaligned::bounced, misaligned::direct}) {
        CAPTURE(static_cast<int>(mode));
        run_job_and_check(2, [mode](fork_bootstrap& boot) {
            asio::io_context io;
            shm::options opts;
            opts.misaligned = mode;
            opts.slow_readv_cells_threshold = 0; // the 4 MiB by single copy, whatever its speed
            auto t = shm::create_transport(boot, io, opts);
            communicator comm(t);
            const int rounds = broadcast_until_helped(*t, io, comm, 200, 16);
            const auto c = t->counters();
            if (!t->cma_to(1 - t->rank()) || ranks_outnumber_cores(2)) {
                fmt::print(stderr, "no core for each rank, or no process_vm_readv: no help\n");
                expect(c.writes_bounced == 0, "{} chunks of help bounced", c.writes_bounced);
                return;
            }
            if (t->rank() == 1) return;
            expect(c.chunks_helped > 0 && rounds < 200, "the root helped {} chunks in {} rounds",
                   c.chunks_helped, rounds);
            // The shared buffers' help is not misaligned: at most the private ones bounce.
            if (mode == misaligned::bounced)
                expect(c.writes_bounced > 0 && c.writes_bounced <= c.chunks_helped,
                       "{} of {} chunks of help bounced", c.writes_bounced, c.chunks_helped);
            else
                expect(c.writes_bounced == 0, "{} chunks of help bounced", c.writes_bounced);
        });
    }
}

TEST_CASE("shm: a single-copy read whose destination sits just past its source's place in a "
          "page is bounced, and arrives whole") {
    // Rank 1 sends from 16 bytes into a page (a heap buffer's place) to rank
    // 0, whose receive buffers sit 16 bytes into a page (where the sender's
    // bytes sit) or 32 (16 bytes past them, where `rep movsb` may crawl).
    // Bounced, only the second kind go through the bounce buffer; direct,
    // none; probed, whatever this machine says. 300000 bytes end in a
    // partial piece; 5 MiB take 40 pieces.
    using misaligned = shm::options::misaligned_reads;
    for (const auto mode : {misaligned::bounced, misaligned::direct, misaligned::probe}) {
        CAPTURE(static_cast<int>(mode));
        run_job_and_check(2, [mode](fork_bootstrap& boot) {
            asio::io_context io;
            shm::options opts;
            opts.misaligned = mode;
            opts.shared_copy_chunk = 0;          // the receiver reads alone: one read a message
            opts.slow_readv_cells_threshold = 0; // a slow process_vm_readv would take the cells
            auto t = shm::create_transport(boot, io, opts);
            const int me = t->rank();
            const std::vector<std::size_t> sizes = {300000, 5u << 20};
            const std::vector<std::size_t> offsets = {16, 32};
            std::vector<std::vector<std::byte>> storage;
            std::vector<std::span<std::byte>> buffers;
            for (std::size_t m = 0; m < 2 * sizes.size(); ++m) {
                const std::size_t bytes = sizes[m / 2];
                storage.emplace_back(bytes + 2 * 4096);
                buffers.push_back(
                    placed_in_page(storage.back(), me == 1 ? 16 : offsets[m % 2], bytes));
                if (me == 1) fill_pattern(buffers.back(), m);
            }
            const auto before = t->counters();
            // Rank 1 sends once rank 0's receives are posted: a message that
            // found none would be staged, read into a buffer of its own.
            std::vector<std::byte> ready(1);
            const std::uint64_t ready_tag = buffers.size();
            drive(*t, io, [&]() -> task<void> {
                std::vector<request> requests;
                if (me == 1) co_await t->irecv(header_for(0, ready_tag, 1), ready)->wait();
                for (std::size_t m = 0; m < buffers.size(); ++m)
                    requests.push_back(
                        me == 1 ? t->isend(0, header_for(1, m, buffers[m].size()), buffers[m])
                                : t->irecv(header_for(1, m, buffers[m].size()), buffers[m]));
                if (me == 0) requests.push_back(t->isend(1, header_for(0, ready_tag, 1), ready));
                co_await wait_all(requests);
            }());
            if (me == 1) return;
            for (std::size_t m = 0; m < buffers.size(); ++m)
                expect_pattern(buffers[m], m, m);
            const auto bounced = t->counters().reads_bounced - before.reads_bounced;
            const auto single = t->counters();
            if (!t->cma_to(1)) {
                expect(bounced == 0, "{} reads bounced without single copy", bounced);
                return;
            }
            const bool bounces = mode == misaligned::bounced ||
                                 (mode == misaligned::probe && t->bounces_misaligned_reads());
            expect(t->bounces_misaligned_reads() == bounces, "bounces_misaligned_reads() says {}",
                   t->bounces_misaligned_reads());
            expect(bounced == (bounces ? sizes.size() : 0u), "{} reads bounced ({} single copies)",
                   bounced, single.cma + single.staged);
        });
    }
}

TEST_CASE("shm: a sender that cannot write into its receiver leaves the copy to the receiver") {
    for (bool off : {false, true}) {
        CAPTURE(off);
        run_job_and_check(2, [off](fork_bootstrap& boot) {
            asio::io_context io;
            shm::options opts;
            if (off) opts.shared_copy_chunk = 0;
            opts.slow_readv_cells_threshold = 0;
            auto t = shm::create_transport(boot, io, opts);
            communicator comm(t);
            // The root's help fails from the first chunk it claims; the
            // receiver copies that chunk again.
            if (t->rank() == 0) forbid_system_call(SYS_process_vm_writev);
            const std::size_t cell = t->cell_bytes() - 64;
            exchange_sizes(*t, io, {300000, 4u << 20, 5 * cell, 64u << 20});
            const int rounds = broadcast_until_helped(*t, io, comm, 20);
            const auto c = t->counters();
            if (t->rank() == 0)
                expect(rounds == 20 && c.chunks_helped == 0, "{} chunks helped in {} rounds",
                       c.chunks_helped, rounds);
            if (off)
                expect(c.copies_shared == 0 && c.chunks_helped == 0,
                       "shared copies while turned off");
        });
    }
}

// The receiver can no longer take a peer's shared-memory descriptor.
void forbid_taking_descriptors() {
    forbid_system_call(SYS_pidfd_getfd);
}

TEST_CASE("shm: messages from shared buffers are copied out of the receiver's mapping") {
    const auto job = unique_job();
    auto outcomes = run_ranks(
        2,
        [](fork_bootstrap& boot) {
            asio::io_context io;
            shm::options opts;
            opts.cell_bytes = 16384;
            opts.max_cached_mappings = 3;
            // The receiver alone copies: a sender sharing the 64 MiB copy
            // may write every chunk before its receiver reads one (a loaded
            // machine), and the receiver then never maps that region, which
            // the counts below would take for a cached mapping.
            opts.shared_copy_chunk = 0;
            auto t = shm::create_transport(boot, io, opts);
            // Below the mapped threshold (cells), above it up to 64 MiB, an
            // empty message; then the same sizes again from new buffers, more
            // regions than the cache keeps.
            const std::vector<std::size_t> sizes{1, 16383, 16384, 300000, 64u << 20, 0, 20000};
            exchange_sizes(*t, io, sizes, true);
            auto c = t->counters();
            expect(c.mapped == 4 && c.cma == 0 && c.regions_mapped == 4,
                   "first round: {} mapped ({} regions), {} cma", c.mapped, c.regions_mapped,
                   c.cma);
            // Only the 64 MiB message reaches options::streamed_receive_from
            // (8 MiB) and goes into its posted receive past the caches.
            expect(c.streamed_mapped_copies == 1, "first round: {} copies streamed",
                   c.streamed_mapped_copies);
            exchange_sizes(*t, io, sizes, true);
            c = t->counters();
            expect(c.mapped == 8 && c.regions_mapped == 8, "second round: {} mapped ({} regions)",
                   c.mapped, c.regions_mapped);
            // Private buffers still take the other paths.
            exchange_sizes(*t, io, {300000, 20000});
            c = t->counters();
            expect(c.mapped == 8, "private buffers: {} mapped", c.mapped);
            // A receive combined at once is read again at once: its copy out
            // of the mapping keeps ordinary stores.
            {
                shared_vector<std::byte> message(9u << 20);
                std::vector<std::byte> in(message.size(), std::byte{0x5a});
                fill_pattern(message, 9);
                drive(*t, io, [&]() -> task<void> {
                    const int peer = 1 - t->rank();
                    auto received = t->irecv_combined_at_once(header_for(peer, 9, in.size()), in);
                    co_await t->isend(peer, header_for(t->rank(), 9, message.size()), message)
                        ->wait();
                    co_await received->wait();
                }());
                expect_pattern(in, 9, 9);
            }
            c = t->counters();
            expect(c.streamed_mapped_copies == 2 && c.mapped == 9,
                   "combined at once: {} copies streamed, {} mapped", c.streamed_mapped_copies,
                   c.mapped);
            expect(shared_usage().regions == 0, "a shared region outlived its vector");
        },
        job);
    check_all_succeeded(outcomes);
    CHECK_FALSE(segment_exists(job));
}

namespace {

// Takes the pieces of a message as a reduction does (landing_observer::
// take), keeping a copy of each where it belongs, and records their order.
struct piece_taker final : landing_observer {
    explicit piece_taker(std::size_t bytes) : whole(bytes, std::byte{0x5a}) {}
    void landed(std::size_t) noexcept override {}
    bool takes_pieces() const noexcept override { return true; }
    void take(std::size_t at, std::span<const std::byte> piece) noexcept override {
        if (at != taken || at + piece.size() > whole.size())
            out_of_order = true;
        else
            std::copy(piece.begin(), piece.end(), whole.begin() + static_cast<std::ptrdiff_t>(at));
        taken = at + piece.size();
        ++pieces;
    }
    std::vector<std::byte> whole;
    std::size_t taken = 0, pieces = 0;
    bool out_of_order = false;
};

} // namespace

TEST_CASE("shm: an observer that takes pieces gets a message from the cells, or from the mapping "
          "of a shared buffer, in order, and its receive's buffer stays as it was") {
    // Rank 1 sends 300,000 bytes from a private buffer (cells of 16 KiB: no
    // single copy here) and from a shared one (the mapping: one piece), and
    // 100 bytes (one cell, delivered into the buffer as ever); rank 0
    // receives them through takers, posted before and after they arrive.
    for (const bool posted_first : {true, false}) {
        CAPTURE(posted_first);
        run_job_and_check(2, [posted_first](fork_bootstrap& boot) {
            asio::io_context io;
            shm::options opts;
            opts.cell_bytes = 16384;
            opts.use_cma = false;
            auto t = shm::create_transport(boot, io, opts);
            constexpr std::size_t large = 300000, small = 100;
            if (t->rank() == 1) {
                std::vector<std::byte> private_out(large);
                shared_vector<std::byte> shared_out(large + 8);
                const auto shared_span = std::span(shared_out).subspan(8);
                std::vector<std::byte> small_out(small);
                fill_pattern(private_out, 1);
                fill_pattern(shared_span, 2);
                fill_pattern(small_out, 3);
                drive(*t, io, [&]() -> task<void> {
                    std::vector<request> sends{t->isend(0, header_for(1, 1, large), private_out),
                                               t->isend(0, header_for(1, 2, large), shared_span),
                                               t->isend(0, header_for(1, 3, small), small_out)};
                    // Behind them in the ring: rank 0's sign that they came.
                    std::array<std::byte, 1> sign{};
                    sends.push_back(t->isend(0, header_for(1, 5, 1), sign));
                    co_await wait_all(sends);
                    // Told that rank 0 has them all before the segment goes.
                    std::array<std::byte, 1> done{};
                    co_await t->irecv(header_for(0, 4, 1), done)->wait();
                }());
                return;
            }
            std::vector<std::vector<std::byte>> into{
                std::vector<std::byte>(large, std::byte{0x5a}),
                std::vector<std::byte>(large, std::byte{0x5a}),
                std::vector<std::byte>(small, std::byte{0x5a})};
            std::vector<piece_taker> takers{piece_taker(large), piece_taker(large),
                                            piece_taker(small)};
            drive(*t, io, [&]() -> task<void> {
                std::array<std::byte, 1> sign{};
                auto signed_off = t->irecv(header_for(1, 5, 1), sign);
                // Or let the messages arrive first: the private one is then
                // staged, and copied into the buffer when the receive comes.
                if (!posted_first) co_await signed_off->wait();
                std::vector<request> receives{signed_off};
                for (std::size_t m = 0; m < 3; ++m)
                    receives.push_back(t->irecv_observed(header_for(1, m + 1, into[m].size()),
                                                         into[m], takers[m], true));
                co_await wait_all(receives);
                std::array<std::byte, 1> done{};
                co_await t->isend(1, header_for(0, 4, 1), done)->wait();
            }());
            for (std::size_t m = 0; m < 3; ++m) {
                const auto& k = takers[m];
                expect(!k.out_of_order, "message {}: a piece out of order", m + 1);
                if (k.pieces == 0) {
                    // Delivered into the buffer whole.
                    expect_pattern(into[m], m + 1, m + 1);
                    continue;
                }
                expect(k.taken == into[m].size(), "message {}: {} of {} bytes taken", m + 1,
                       k.taken, into[m].size());
                expect_pattern(k.whole, m + 1, m + 1);
                expect(std::all_of(into[m].begin(), into[m].end(),
                                   [](std::byte b) { return b == std::byte{0x5a}; }),
                       "message {}: its pieces were taken, yet its buffer was written", m + 1);
            }
            expect(takers[2].pieces == 0, "the one-cell message came in {} pieces",
                   takers[2].pieces);
            if (posted_first) {
                // Pieces of at most a cell from the cells; one from the mapping.
                expect(takers[0].pieces >= large / 16384, "the cells' message came in {} pieces",
                       takers[0].pieces);
                expect(takers[1].pieces == 1, "the mapped message came in {} pieces",
                       takers[1].pieces);
            }
        });
    }
}

namespace {

// Seven words whose combination keeps rank order (x op y = 3x + y, word by
// word, modulo 2^64): 56 bytes, so that the cells' pieces cut elements.
struct seven_words {
    std::array<std::uint64_t, 7> w;
    friend bool operator==(const seven_words&, const seven_words&) = default;
};
seven_words thrice_plus(const seven_words& x, const seven_words& y) {
    seven_words out;
    for (std::size_t i = 0; i < 7; ++i)
        out.w[i] = 3 * x.w[i] + y.w[i];
    return out;
}
seven_words contribution_of(int rank, std::size_t k) {
    seven_words v;
    for (std::size_t i = 0; i < 7; ++i)
        v.w[i] = static_cast<std::uint64_t>(rank) * 1000003u + k * 7 + i;
    return v;
}
// Ranks [0, ranks) folded in order at element k.
seven_words folded(int ranks, std::size_t k) {
    seven_words out = contribution_of(0, k);
    for (int r = 1; r < ranks; ++r)
        out = thrice_plus(out, contribution_of(r, k));
    return out;
}

// Every algorithm of every reduction, on `count` elements per rank (per
// block for reduce_scatter), a sum of int64 and the ordered operation.
void run_large_reductions(shm::transport& t, asio::io_context& io, communicator comm,
                          std::size_t count) {
    const int p = comm.size();
    const int me = comm.rank();
    const auto ordered = make_op(thrice_plus, commutativity::non_commutative);
    const std::size_t total = count * static_cast<std::size_t>(p);
    auto mine_ordered = [&](std::size_t n) {
        std::vector<seven_words> v(n);
        for (std::size_t k = 0; k < n; ++k)
            v[k] = contribution_of(me, k);
        return v;
    };
    auto signature = [&](collective kind, std::size_t n, bool commutative) {
        return call_signature{.kind = kind,
                              .comm_size = p,
                              .bytes = n * (commutative ? 8 : sizeof(seven_words)),
                              .count = n,
                              .has_op = true,
                              .commutative = commutative,
                              .builtin_op = commutative};
    };
    // Every usable algorithm of `kind`: run(send, recv, op, algorithm) on
    // `sent` elements of this rank's, `received` back, element k of them
    // checked against want_sum(k) or want_ordered(k) where `checked`.
    auto each_algorithm = [&](collective kind, bool commutative, std::size_t sent,
                              std::size_t received, bool checked, auto run, auto want_sum,
                              auto want_ordered) {
        for (const auto& name : usable(kind, signature(kind, sent, commutative))) {
            std::size_t wrong = received;
            if (commutative) {
                const auto send = addends_of(me, sent);
                std::vector<std::int64_t> recv(received, -1);
                drive(t, io, run(send, recv, sum, use(name)));
                for (std::size_t k = 0; k < received && wrong == received; ++k)
                    if (recv[k] != want_sum(k)) wrong = k;
            } else {
                const auto send = mine_ordered(sent);
                std::vector<seven_words> recv(received);
                drive(t, io, run(send, recv, ordered, use(name)));
                for (std::size_t k = 0; k < received && wrong == received; ++k)
                    if (!(recv[k] == want_ordered(k))) wrong = k;
            }
            expect(!checked || wrong == received, "{}{} '{}' of {} elements: element {} is wrong",
                   commutative ? "" : "ordered ", to_string(kind), name, sent, wrong);
        }
    };
    const int last = p - 1;
    const auto base = static_cast<std::size_t>(me) * count;
    for (const bool commutative : {true, false}) {
        each_algorithm(
            collective::all_reduce, commutative, count, count, true,
            [&](const auto& send, auto& recv, auto op, auto algorithm) {
                return all_reduce(comm, send, recv, op, algorithm);
            },
            [&](std::size_t k) { return sum_of_addends(p, k); },
            [&](std::size_t k) { return folded(p, k); });
        each_algorithm(
            collective::reduce, commutative, count, count, me == last,
            [&](const auto& send, auto& recv, auto op, auto algorithm) {
                return reduce(comm, send, recv, op, root(last), algorithm);
            },
            [&](std::size_t k) { return sum_of_addends(p, k); },
            [&](std::size_t k) { return folded(p, k); });
        each_algorithm(
            collective::reduce_scatter, commutative, total, count, true,
            [&](const auto& send, auto& recv, auto op, auto algorithm) {
                return reduce_scatter(comm, send, recv, op, algorithm);
            },
            [&](std::size_t k) { return sum_of_addends(p, base + k); },
            [&](std::size_t k) { return folded(p, base + k); });
        each_algorithm(
            collective::scan, commutative, count, count, true,
            [&](const auto& send, auto& recv, auto op, auto algorithm) {
                return scan(comm, send, recv, op, algorithm);
            },
            [&](std::size_t k) { return sum_of_addends(me + 1, k); },
            [&](std::size_t k) { return folded(me + 1, k); });
        each_algorithm(
            collective::exscan, commutative, count, count, me > 0,
            [&](const auto& send, auto& recv, auto op, auto algorithm) {
                return exscan(comm, send, recv, op, algorithm);
            },
            [&](std::size_t k) { return sum_of_addends(me, k); },
            [&](std::size_t k) { return folded(me, k); });
    }
}

} // namespace

TEST_CASE("shm: reductions of vectors that come through the cells in many pieces, every "
          "algorithm, exact") {
    // 2 MiB of int64 per rank, or 2.6 MiB of 56-byte elements, whose cells
    // (16 KiB) cut elements: the receives that combine what arrives take it
    // from the cells (landing_observer::take); kept ones land whole.
    for (int p : {2, 3}) {
        CAPTURE(p);
        run_job_and_check(p, [](fork_bootstrap& boot) {
            asio::io_context io;
            shm::options opts;
            opts.cell_bytes = 16384;
            opts.use_cma = false;
            opts.use_mapped = false;
            auto t = shm::create_transport(boot, io, opts);
            communicator comm(t);
            run_large_reductions(*t, io, comm, (std::size_t{1} << 18) + 3);
        });
    }
}

// A transport on which Rabenseifner's all_reduce runs its last halving and
// first doubling rounds together in segments (from pieces of 2 MiB): no
// single copy, and each of the job's `ranks` counted as having a core.
std::shared_ptr<shm::transport> segmented_rounds_transport(fork_bootstrap& boot,
                                                           asio::io_context& io, int ranks) {
    set_cores_of_this_machines_ranks(ranks);
    return cells_only_transport(boot, io);
}

TEST_CASE("shm: Rabenseifner's all_reduce whose last halving and first doubling run together "
          "in segments, exact") {
    // Pieces of 2 MiB and more (+ a few elements, so that the two pieces of
    // a pair and their segments differ in length): at 2 ranks the send
    // buffer is what the fused rounds send; at 4 and 5 (one rank folded in)
    // earlier rounds have combined into the receive buffer, which they then
    // send from while the partner's segments land in it.
    for (int p : {2, 4, 5}) {
        CAPTURE(p);
        run_job_and_check(p, [p](fork_bootstrap& boot) {
            asio::io_context io;
            auto t = segmented_rounds_transport(boot, io, p);
            communicator comm(t);
            const std::size_t count =
                p == 2 ? (std::size_t{1} << 19) + 5 : (std::size_t{1} << 20) + 7;
            const auto addends = addends_of(comm.rank(), count);
            for (const char* name : {"rabenseifner", "rabenseifner_nearest_first"}) {
                std::vector<std::int64_t> recv(count, -1);
                drive(*t, io, all_reduce(comm, addends, recv, sum, use(name)));
                expect_sum_of_addends(recv, p, fmt::format("'{}' from private buffers", name));
                auto in_place = addends;
                drive(*t, io, all_reduce(comm, in_place, sum, use(name)));
                expect_sum_of_addends(in_place, p, fmt::format("'{}' in place", name));
                shared_vector<std::int64_t> shared_send(addends.begin(), addends.end());
                shared_vector<std::int64_t> shared_recv(count, -1);
                drive(*t, io, all_reduce(comm, shared_send, shared_recv, sum, use(name)));
                expect_sum_of_addends(shared_recv, p,
                                      fmt::format("'{}' from shared buffers", name));
            }
        });
    }
}

TEST_CASE("shm: an operation that throws in Rabenseifner's segmented rounds fails the call on "
          "both ranks, and the next call works") {
    // The poisoned elements are in the last segment of each rank's piece:
    // earlier segments have gone back to the partner and later receives are
    // posted when the combination throws.
    run_job_and_check(2, [](fork_bootstrap& boot) {
        asio::io_context io;
        auto t = segmented_rounds_transport(boot, io, 2);
        communicator comm(t);
        constexpr std::int64_t poison = -7;
        const auto checked_sum = make_op(
            [](std::int64_t a, std::int64_t b) {
                if (a == poison || b == poison) throw std::domain_error("a poisoned element");
                return a + b;
            },
            commutativity::commutative);
        const std::size_t count = (std::size_t{1} << 19) + 2;
        auto send = addends_of(comm.rank(), count);
        send[count / 2 - 3] = poison;
        send[count - 3] = poison;
        std::vector<std::int64_t> recv(count, -1);
        std::string failure;
        try {
            drive(*t, io, all_reduce(comm, send, recv, checked_sum, use("rabenseifner")));
        } catch (const std::domain_error& e) {
            failure = e.what();
        }
        expect(failure == "a poisoned element", "the call ended with '{}'", failure);
        const auto addends = addends_of(comm.rank(), count);
        drive(*t, io, all_reduce(comm, addends, recv, checked_sum, use("rabenseifner")));
        expect_sum_of_addends(recv, 2, "after the failure");
    });
}

TEST_CASE("shm: one shared buffer sent again and again is mapped once") {
    const auto job = unique_job();
    auto outcomes = run_ranks(
        2,
        [](fork_bootstrap& boot) {
            asio::io_context io;
            auto t = shm::create_transport(boot, io);
            communicator comm(t);
            const std::size_t n = 1 << 17; // 1 MiB of int64
            shared_vector<std::int64_t> send(n), recv(n);
            for (int round = 0; round < 5; ++round) {
                for (std::size_t k = 0; k < n; ++k)
                    send[k] = comm.rank() * 7 + round + static_cast<std::int64_t>(k);
                drive(*t, io, all_reduce(comm, send, recv, sum, use("rabenseifner")));
                for (std::size_t k = 0; k < n; ++k)
                    expect(recv[k] == 7 + 2 * (round + static_cast<std::int64_t>(k)),
                           "round {}: element {} is {}", round, k, recv[k]);
            }
            const auto c = t->counters();
            // Each round sends from both vectors: one region each, mapped once.
            expect(c.mapped == 10 && c.regions_mapped == 2, "{} mapped sends, {} regions mapped",
                   c.mapped, c.regions_mapped);
        },
        job);
    check_all_succeeded(outcomes);
    CHECK_FALSE(segment_exists(job));
}

TEST_CASE("shm: a receiver that cannot map reads shared buffers by CMA, or else in chunks") {
    for (bool cma_too : {false, true}) {
        CAPTURE(cma_too);
        const auto job = unique_job();
        auto outcomes = run_ranks(
            2,
            [cma_too](fork_bootstrap& boot) {
                asio::io_context io;
                auto t = shm::create_transport(boot, io);
                const int peer = 1 - t->rank();
                if (!t->cma_to(peer)) {
                    fmt::print(stderr, "process_vm_readv unavailable here: nothing to compare\n");
                    return;
                }
                // Rank 1 cannot take rank 0's descriptors (and, with cma_too,
                // cannot read its memory either); rank 0 maps rank 1's.
                if (t->rank() == 1) {
                    forbid_taking_descriptors();
                    if (cma_too) forbid_cross_memory_attach();
                }
                exchange_sizes(*t, io, {300000, 64u << 20, 20000, 1}, true);
                const auto c = t->counters();
                if (t->rank() == 1) {
                    // Its own sends are mapped by rank 0; it mapped nothing.
                    expect(c.mapped == 3 && c.regions_mapped == 0,
                           "rank 1: {} mapped sends, {} regions mapped", c.mapped,
                           c.regions_mapped);
                } else if (cma_too) {
                    // Refused, then sent again in chunks (20000 bytes fit one cell).
                    expect(c.mapped == 0 && c.chunked == 2 && c.regions_mapped == 3,
                           "rank 0: {} mapped, {} chunked, {} regions mapped", c.mapped, c.chunked,
                           c.regions_mapped);
                } else {
                    // Acknowledged after rank 1 read them by CMA instead.
                    expect(c.mapped == 3 && c.chunked == 0 && c.regions_mapped == 3,
                           "rank 0: {} mapped, {} chunked, {} regions mapped", c.mapped, c.chunked,
                           c.regions_mapped);
                }
            },
            job);
        check_all_succeeded(outcomes);
        CHECK_FALSE(segment_exists(job));
    }
}

TEST_CASE("shm: try_send writes a message at once or sends nothing") {
    run_job_and_check(2, [](fork_bootstrap& boot) {
        asio::io_context io;
        auto t = shm::create_transport(boot, io);
        const std::size_t depth = t->ring_depth();
        const std::size_t too_big = t->cell_bytes(); // more than a cell's payload
        std::vector<std::uint64_t> word(1);
        if (t->rank() == 0) {
            try {
                t->try_send(2, header_for(0, 0, 8), std::as_bytes(std::span(word)));
                throw std::runtime_error("a send to rank 2 of 2 was accepted");
            } catch (const tutti::error& e) {
                expect(e.code() == errc::invalid_argument, "rank 2 of 2: not invalid_argument");
            }
            // To itself: delivered to its own mailbox at once.
            word[0] = 4242;
            expect(t->try_send(0, header_for(0, 5, 8), std::as_bytes(std::span(word))),
                   "a send to itself was not done at once");
            std::vector<std::uint64_t> own(1);
            expect(t->try_recv(header_for(0, 5, 8), std::as_writable_bytes(std::span(own))) ==
                           transport::try_result::received &&
                       own[0] == 4242,
                   "the send to itself did not arrive");
            // Larger than a cell: refused, and nothing is sent.
            std::vector<std::byte> big(too_big, std::byte{1});
            expect(!t->try_send(1, header_for(0, 999, too_big), big),
                   "a message larger than a cell was sent at once");
            // Until the ring is full: each at once; then refused.
            const auto eager = t->counters().eager;
            std::size_t sent = 0;
            for (; sent <= depth; ++sent) {
                word[0] = 1000 + sent;
                if (!t->try_send(1, header_for(0, sent, 8), std::as_bytes(std::span(word)))) break;
            }
            expect(sent == depth, "{} sent at once into a ring of {}", sent, depth);
            expect(t->counters().eager == eager + depth, "the eager count is off");
            // isend queues what try_send refused, behind the ring's messages.
            word[0] = 1000 + depth;
            auto queued = t->isend(1, header_for(0, depth, 8), std::as_bytes(std::span(word)));
            boot.barrier();
            drive(*t, io, [&]() -> task<void> { co_await queued->wait(); }());
            boot.barrier();
        } else {
            boot.barrier();
            for (std::size_t m = 0; m <= depth; ++m) {
                std::vector<std::uint64_t> got(1, 0);
                drive(*t, io, [&]() -> task<void> {
                    co_await t->irecv(header_for(0, m, 8), std::as_writable_bytes(std::span(got)))
                        ->wait();
                }());
                expect(got[0] == 1000 + m, "message {} holds {}", m, got[0]);
            }
            // Everything rank 0 sent before its last message has arrived: the
            // refused one is not among it.
            std::vector<std::byte> big(too_big);
            expect(t->try_recv(header_for(0, 999, too_big), big) == transport::try_result::not_yet,
                   "the refused message arrived");
            boot.barrier();
        }
    });
}

// A small receive polls for its message rather than posting (call_context's
// receive_now): a message of one cell must go from the cell straight into
// it, and a longer one must be left for a posted receive, which takes each
// cell as it comes instead of a staged copy of the whole.
TEST_CASE("shm: poll_recv takes a one-cell message from its cell and refuses a longer receive") {
    run_job_and_check(2, [](fork_bootstrap& boot) {
        asio::io_context io;
        auto t = shm::create_transport(boot, io);
        const std::size_t cell = t->cell_bytes() - 64; // one cell's payload
        if (t->rank() == 0) {
            const auto one = patterned(cell, 1), longer = patterned(cell + 1, 2);
            boot.barrier(); // rank 1 polls from now on
            auto first = t->isend(1, header_for(0, 1, one.size()), one);
            auto second = t->isend(1, header_for(0, 2, longer.size()), longer);
            drive(*t, io, [&]() -> task<void> {
                co_await first->wait();
                co_await second->wait();
            }());
            boot.barrier();
        } else {
            std::vector<std::byte> into(cell), wide(cell + 1);
            expect(t->poll_recv(header_for(0, 2, wide.size()), wide) ==
                       transport::try_result::unsupported,
                   "a receive longer than a cell was polled");
            boot.barrier();
            const auto copied = mailbox::payloads_copied_to_heap();
            transport::try_result got = transport::try_result::not_yet;
            for (int round = 0; round < 10'000'000 && got == transport::try_result::not_yet;
                 ++round)
                got = t->poll_recv(header_for(0, 1, into.size()), into);
            expect(got == transport::try_result::received, "the one-cell message never came");
            expect(into == patterned(cell, 1), "the one-cell message arrived wrong");
            expect(mailbox::payloads_copied_to_heap() == copied,
                   "the one-cell message was queued before it reached the receive");
            drive(*t, io, [&]() -> task<void> {
                co_await t->irecv(header_for(0, 2, wide.size()), wide)->wait();
            }());
            expect(wide == patterned(cell + 1, 2), "the longer message arrived wrong");
            boot.barrier();
        }
    });
}

// poll_recv reads its message straight from the head of its source's ring
// when it is the next cell there, and leaves anything else to progress():
// a message ahead of it stays queued for its own receive, in order, and a
// message that does not fit the receive fails it with the mailbox's error.
TEST_CASE("shm: poll_recv takes its message from its ring's head and leaves the rest to "
          "progress") {
    run_job_and_check(2, [](fork_bootstrap& boot) {
        asio::io_context io;
        auto t = shm::create_transport(boot, io);
        // As call_context's receive_now looks: what already arrived, then polls.
        const auto poll_until_done = [&](const message_header& h, std::span<std::byte> into) {
            auto got = t->try_recv(h, into);
            for (int round = 0; round < 10'000'000 && got == transport::try_result::not_yet;
                 ++round)
                got = t->poll_recv(h, into);
            return got;
        };
        // The error a receive that must be refused fails with.
        const auto refusal = [&](const message_header& h, std::span<std::byte> into,
                                 std::string_view what) {
            try {
                poll_until_done(h, into);
            } catch (const tutti::error& e) {
                return e;
            }
            throw std::runtime_error(std::string(what));
        };
        const auto small = patterned(8, 3), ahead = patterned(8, 4), cell = patterned(100, 5);
        auto as_barrier = header_for(0, 12, 8);
        as_barrier.kind = collective::barrier;
        if (t->rank() == 0) {
            // Each stage sent whole before rank 1 looks.
            expect(t->try_send(1, header_for(0, 10, ahead.size()), ahead) &&
                       t->try_send(1, header_for(0, 11, small.size()), small),
                   "the first two messages did not go at once");
            boot.barrier();
            boot.barrier();
            expect(t->try_send(1, as_barrier, small), "the barrier's message did not go at once");
            boot.barrier();
            boot.barrier();
            expect(t->try_send(1, header_for(0, 13, cell.size()), cell) &&
                       t->try_send(1, header_for(0, 14, small.size()), small) &&
                       t->try_send(1, header_for(0, 15, small.size()), small),
                   "the last messages did not go at once");
            boot.barrier();
            boot.barrier();
        } else {
            boot.barrier();
            // Step 10's message is ahead of step 11's: progress() queues it.
            std::vector<std::byte> into(8), later(8);
            expect(poll_until_done(header_for(0, 11, 8), into) == transport::try_result::received,
                   "step 11's message never came");
            expect(into == small, "step 11's message arrived wrong");
            expect(t->try_recv(header_for(0, 10, 8), later) == transport::try_result::received,
                   "step 10's message was not kept for its receive");
            expect(later == ahead, "step 10's message was kept wrong");
            boot.barrier();
            boot.barrier();
            // A barrier's message where a broadcast's is awaited.
            const auto other_kind = refusal(header_for(0, 12, 8), into,
                                            "a barrier's message filled a broadcast's receive");
            expect(other_kind.code() == errc::mismatched_collective,
                   "not mismatched_collective: {}", other_kind.what());
            expect(std::string_view(other_kind.what()).find("called barrier") !=
                       std::string_view::npos,
                   "the error does not name the barrier: {}", other_kind.what());
            boot.barrier();
            boot.barrier();
            // A one-cell message at the head, then one of the wrong size.
            std::vector<std::byte> whole(100), wider(16);
            expect(poll_until_done(header_for(0, 13, 100), whole) ==
                       transport::try_result::received,
                   "step 13's message never came");
            expect(whole == cell, "step 13's message arrived wrong");
            const auto other_size =
                refusal(header_for(0, 14, 16), wider, "8 bytes filled a receive of 16");
            expect(other_size.code() == errc::message_size_mismatch,
                   "not message_size_mismatch: {}", other_size.what());
            // The ring goes on after both (progress() took step 15's message
            // along with step 14's).
            expect(poll_until_done(header_for(0, 15, 8), into) == transport::try_result::received,
                   "step 15's message never came");
            expect(into == small, "step 15's message arrived wrong");
            boot.barrier();
        }
    });
}

TEST_CASE("shm: a rank that closes its transport early does not disturb the others") {
    const auto job = unique_job();
    auto outcomes = run_ranks(
        3,
        [](fork_bootstrap& boot) {
            asio::io_context io;
            auto t = shm::create_transport(boot, io);
            if (boot.rank() == 2) {
                t.reset();
                boot.barrier();
                return;
            }
            boot.barrier(); // rank 2 has closed by now
            const std::size_t cell = t->cell_bytes() - 64;
            exchange_sizes(*t, io, {0, 1, 3 * cell, 1u << 20});
        },
        job);
    check_all_succeeded(outcomes);
    CHECK_FALSE(segment_exists(job));
}

TEST_CASE("shm: a receive from a rank that closed its transport fails, naming it") {
    run_job_and_check(2, [](fork_bootstrap& boot) {
        asio::io_context io;
        auto t = shm::create_transport(boot, io);
        if (boot.rank() == 1) {
            // One message arrives before the close and is still received.
            drive(*t, io, [&]() -> task<void> {
                std::vector<std::byte> early(100, std::byte{7});
                co_await t->isend(0, header_for(1, 0, early.size()), early)->wait();
            }());
            boot.barrier();
            t.reset();
            boot.barrier();
            return;
        }
        std::vector<std::byte> early(100), pending(100), later(100);
        auto early_done = t->irecv(header_for(1, 0, early.size()), early);
        auto pending_done = t->irecv(header_for(1, 1, pending.size()), pending);
        boot.barrier(); // rank 1 closes now
        const auto failure_of = [&](request r) {
            std::string why;
            drive(
                *t, io,
                [](request r, std::string& why) -> task<void> {
                    try {
                        co_await r->wait();
                    } catch (const error& e) {
                        if (e.code() == errc::peer_lost) why = e.what();
                    }
                }(r, why),
                std::chrono::seconds(10));
            return why;
        };
        expect(failure_of(early_done).empty() && early[99] == std::byte{7},
               "the message sent before the close was lost");
        const auto why = failure_of(pending_done);
        expect(why.find("rank 1") != std::string::npos &&
                   why.find("closed its shared-memory transport") != std::string::npos,
               "the pending receive failed with '{}'", why);
        boot.barrier(); // rank 1 has closed; a receive posted now fails too
        const auto late = failure_of(t->irecv(header_for(1, 2, later.size()), later));
        expect(late.find("closed its shared-memory transport") != std::string::npos,
               "the later receive failed with '{}'", late);
    });
}

TEST_CASE("shm: a rank killed mid-job makes the others fail with peer_lost naming it") {
    for (int p : {2, 4}) {
        CAPTURE(p);
        const int victim = p - 1;
        const auto job = unique_job();
        auto outcomes = run_ranks(
            p,
            [victim](fork_bootstrap& boot) {
                asio::io_context io;
                auto t = shm::create_transport(boot, io);
                communicator comm(t);
                // The victim dies between two all_reduces; a peer may notice in
                // the first (it may still wait for the victim) or the second.
                for (int round = 0; round < 3; ++round) {
                    if (round == 1 && comm.rank() == victim) raise(SIGKILL);
                    std::vector<std::int64_t> data(100000, 1);
                    try {
                        drive(*t, io, all_reduce(comm, data, sum));
                    } catch (const error& e) {
                        expect(e.code() == errc::peer_lost,
                               "failed with {} instead of peer_lost: {}", to_string(e.code()),
                               e.what());
                        expect(std::string(e.what()).find(fmt::format("rank {} ", victim)) !=
                                   std::string::npos,
                               "the failure does not name rank {}: {}", victim, e.what());
                        return;
                    }
                    expect(round == 0, "an all_reduce succeeded without the killed rank");
                    expect(data[0] == comm.size(), "the first all_reduce is wrong");
                }
            },
            job);
        for (int r = 0; r < p; ++r) {
            CAPTURE(r);
            const auto& o = outcomes[static_cast<std::size_t>(r)];
            if (r == victim) {
                CHECK(o.signal == SIGKILL);
            } else {
                CHECK(o.exited);
                CHECK(o.exit_code == 0);
            }
        }
        CHECK_FALSE(segment_exists(job));
    }
}

// A rank that failed on a crash (as a collective does when a peer dies) may
// be busy failing for a long time and read none of the messages sent to it.
// A send waiting for it must then fail, naming the crash: it used to wait
// until that rank exited and then named it instead.
TEST_CASE("shm: a send to a rank that failed on a crash fails, naming the crash") {
    const auto job = unique_job();
    // Set by rank 0 once its send failed, so that rank 1 stays until then.
    auto* concluded = static_cast<std::atomic<int>*>(mmap(nullptr, sizeof(std::atomic<int>),
                                                          PROT_READ | PROT_WRITE,
                                                          MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    REQUIRE(concluded != MAP_FAILED);
    new (concluded) std::atomic<int>(0);
    auto outcomes = run_ranks(
        3,
        [concluded](fork_bootstrap& boot) {
            asio::io_context io;
            shm::options o;
            // Rank 1 must not read rank 0's message on its own before the
            // crash makes it fail.
            o.stage_unclaimed_after = std::chrono::seconds(30);
            auto t = shm::create_transport(boot, io, o);
            std::vector<std::byte> data(1 << 20, std::byte{7});
            request pending;
            if (boot.rank() == 0) pending = t->isend(1, header_for(0, 0, data.size()), data);
            boot.all_gather({}); // the send is under way before anyone stops
            if (boot.rank() == 2) raise(SIGKILL);
            if (boot.rank() == 1) {
                // Fails on the crash, then reads nothing more, then goes
                // without closing.
                std::vector<std::byte> from2(8);
                try {
                    drive(*t, io, [&]() -> task<void> {
                        co_await t->irecv(header_for(2, 0, from2.size()), from2)->wait();
                    }());
                } catch (const error& e) {
                    expect(e.code() == errc::peer_lost, "rank 1 did not fail with peer_lost");
                }
                for (int ms = 0; ms < 10000 && concluded->load() == 0; ++ms)
                    usleep(1000);
                _exit(0);
            }
            try {
                drive(*t, io, [&]() -> task<void> { co_await pending->wait(); }());
            } catch (const error& e) {
                concluded->store(1);
                expect(e.code() == errc::peer_lost, "failed with {}: {}", to_string(e.code()),
                       e.what());
                expect(std::string(e.what()).find("rank 2 ") != std::string::npos,
                       "the failure does not name rank 2: {}", e.what());
                return;
            }
            concluded->store(1);
            throw std::runtime_error("a send to a rank that never received completed");
        },
        job);
    munmap(concluded, sizeof(std::atomic<int>));
    CHECK(outcomes[0].exit_code == 0);
    CHECK(outcomes[1].exit_code == 0);
    CHECK(outcomes[2].signal == SIGKILL);
    CHECK_FALSE(segment_exists(job));
}

TEST_CASE("shm: a rank dying during setup leaves no segment behind") {
    // Rank 1 dies on entering the second exchange (after rank 0 created the
    // segment, before anyone unlinked it); the others time out in the
    // bootstrap and must still remove the name.
    const auto job = unique_job();
    auto outcomes = run_ranks(
        3,
        [](fork_bootstrap& boot) {
            asio::io_context io;
            boot.set_timeout(std::chrono::milliseconds(500));
            if (boot.rank() == 1) boot.die_at_round(2);
            try {
                auto t = shm::create_transport(boot, io);
            } catch (const error& e) {
                expect(e.code() == errc::timeout, "failed with {}: {}", to_string(e.code()),
                       e.what());
                return;
            }
            throw std::runtime_error("a transport was built without rank 1");
        },
        job);
    CHECK(outcomes[1].signal == SIGKILL);
    CHECK(outcomes[0].exit_code == 0);
    CHECK(outcomes[2].exit_code == 0);
    CHECK_FALSE(segment_exists(job));
}

TEST_CASE("shm: 16 and 64 processes fit, with cells scaled down") {
    for (int p : {16, 64}) {
        CAPTURE(p);
        const auto job = unique_job();
        auto outcomes = run_ranks(
            p,
            [p](fork_bootstrap& boot) {
                asio::io_context io;
                auto t = shm::create_transport(boot, io);
                expect(p < 64 || t->cell_bytes() == 4096, "{} ranks got cells of {} bytes", p,
                       t->cell_bytes());
                communicator comm(t);
                std::vector<std::int64_t> data(5000, comm.rank());
                drive(*t, io, all_reduce(comm, data, sum));
                expect(data[4999] == std::int64_t{p} * (p - 1) / 2, "the all_reduce sum is wrong");
                drive(*t, io, barrier(comm));
            },
            job);
        check_all_succeeded(outcomes);
        CHECK_FALSE(segment_exists(job));
    }
}

TEST_CASE("shm: ranks on different nodes are refused") {
    const auto job = unique_job();
    auto outcomes = run_ranks(
        2,
        [](fork_bootstrap& boot) {
            asio::io_context io;
            try {
                auto t = shm::create_transport(boot, io);
            } catch (const error& e) {
                expect(e.code() == errc::invalid_argument, "wrong code for ranks on two nodes");
                expect(std::string(e.what()).find("TCP transport") != std::string::npos,
                       "the error does not point to TCP: {}", e.what());
                return;
            }
            throw std::runtime_error("a transport was built across two nodes");
        },
        job, [](int r) { return fmt::format("node-{}", r); });
    check_all_succeeded(outcomes);
    CHECK_FALSE(segment_exists(job));
}

TEST_CASE("shm: an existing segment of the same name is reported, not reused") {
    const auto job = unique_job();
    const auto name = "/tutti-" + job + "-shm";
    int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    REQUIRE(fd >= 0);
    close(fd);
    auto outcomes = run_ranks(
        3,
        [&name](fork_bootstrap& boot) {
            asio::io_context io;
            try {
                auto t = shm::create_transport(boot, io);
            } catch (const error& e) {
                const std::string what = e.what();
                expect(what.find(name) != std::string::npos &&
                           what.find("already exists") != std::string::npos,
                       "the error does not name the existing segment: {}", what);
                if (boot.rank() != 0)
                    expect(what.find("rank 0") != std::string::npos,
                           "the error does not say rank 0 failed: {}", what);
                return;
            }
            throw std::runtime_error("a transport was built over an existing segment");
        },
        job);
    check_all_succeeded(outcomes);
    CHECK(segment_exists(job)); // the stale one is not ours to remove
    shm_unlink(name.c_str());
}

TEST_CASE("shm: bad options are refused with a clear error") {
    struct bad_option {
        const char* what;     // for the failure message
        shm::options options; // one option out of range
        const char* named;    // what the error must say
    };
    shm::options small_cell, huge_chunk;
    small_cell.cell_bytes = 1000;
    huge_chunk.shared_copy_chunk = std::size_t{2} << 30;
    for (const auto& bad :
         {bad_option{"a cell of 1000 bytes", small_cell, "cell_bytes 1000"},
          bad_option{"a shared-copy chunk of 2 GiB", huge_chunk, "shared_copy_chunk 2147483648"}}) {
        CAPTURE(bad.what);
        const auto job = unique_job();
        auto outcomes = run_ranks(
            1,
            [&bad](fork_bootstrap& boot) {
                asio::io_context io;
                try {
                    auto t = shm::create_transport(boot, io, bad.options);
                } catch (const error& e) {
                    expect(e.code() == errc::invalid_argument &&
                               std::string(e.what()).find(bad.named) != std::string::npos,
                           "unclear error: {}", e.what());
                    return;
                }
                throw std::runtime_error(fmt::format("{} was accepted", bad.what));
            },
            job);
        check_all_succeeded(outcomes);
    }
}

TEST_CASE("shm: no segment of these tests is left in /dev/shm") {
    const auto prefix = fmt::format("tutti-shmtest-{}-", getpid());
    std::vector<std::string> left;
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm"))
        if (entry.path().filename().string().starts_with(prefix))
            left.push_back(entry.path().filename().string());
    CHECK(left.empty());
}

TEST_CASE("shm: tuning from the environment takes byte counts and refuses anything else") {
    shm::options opts;
    // A setting refused with a tutti::error whose message holds each of `named`.
    const auto expect_refused_naming = [&opts](const char* variable, const char* value,
                                               std::initializer_list<std::string> named) {
        INFO(fmt::format("{}='{}'", variable, value));
        ::setenv(variable, value, 1);
        try {
            shm::apply_environment(opts);
            FAIL("the setting was accepted");
        } catch (const tutti::error& e) {
            CHECK(e.code() == errc::invalid_argument);
            for (const auto& text : named)
                CHECK_MESSAGE(std::string(e.what()).find(text) != std::string::npos,
                              "'" << text << "' not in: " << e.what());
        }
        ::unsetenv(variable);
    };
    // A value the variable cannot take is a tutti::error naming both.
    const auto expect_refused = [&](const char* variable, const char* bad) {
        expect_refused_naming(variable, bad, {fmt::format("{}='{}'", variable, bad)});
    };
    ::setenv("TUTTI_SHM_CMA_THRESHOLD_AT_END", "48K", 1);
    shm::apply_environment(opts);
    CHECK(opts.cma_threshold_awaited_at_end == 48 * 1024);
    expect_refused("TUTTI_SHM_CMA_THRESHOLD_AT_END", "lots");
    ::setenv("TUTTI_SHM_CMA_THRESHOLD_EXCHANGE", "1M", 1);
    shm::apply_environment(opts);
    CHECK(opts.cma_threshold_exchange == 1024 * 1024);
    ::unsetenv("TUTTI_SHM_CMA_THRESHOLD_EXCHANGE");
    ::setenv("TUTTI_SHM_CMA_THRESHOLD_EXCHANGE_BETWEEN_STEPS", "2M", 1);
    shm::apply_environment(opts);
    CHECK(opts.cma_threshold_exchange_between_steps == 2 * 1024 * 1024);
    ::unsetenv("TUTTI_SHM_CMA_THRESHOLD_EXCHANGE_BETWEEN_STEPS");
    ::setenv("TUTTI_SHM_PIPELINE_PIECE", "0", 1);
    shm::apply_environment(opts);
    CHECK(opts.pipeline_piece == 0);
    ::unsetenv("TUTTI_SHM_PIPELINE_PIECE");
    ::setenv("TUTTI_SHM_PREFETCH_BYTES", "1K", 1);
    shm::apply_environment(opts);
    CHECK(opts.prefetch_bytes == 1024);
    ::unsetenv("TUTTI_SHM_PREFETCH_BYTES");
    ::setenv("TUTTI_SHM_STREAMED_RECEIVE_FROM", "0", 1);
    shm::apply_environment(opts);
    CHECK(opts.streamed_receive_from == 0);
    ::setenv("TUTTI_SHM_STREAMED_RECEIVE_FROM", "4M", 1);
    shm::apply_environment(opts);
    CHECK(opts.streamed_receive_from == 4 * 1024 * 1024);
    ::unsetenv("TUTTI_SHM_STREAMED_RECEIVE_FROM");
    ::setenv("TUTTI_SHM_SLOW_READV_CELLS_THRESHOLD", "16M", 1);
    shm::apply_environment(opts);
    CHECK(opts.slow_readv_cells_threshold == 16 * 1024 * 1024);
    ::unsetenv("TUTTI_SHM_SLOW_READV_CELLS_THRESHOLD");
    // Every byte count refuses what is not one, naming its variable: a
    // negative or wrapped count would otherwise pass as a huge or tiny one.
    for (const char* variable :
         {"TUTTI_SHM_CELL_BYTES", "TUTTI_SHM_RING_DEPTH", "TUTTI_SHM_CMA_THRESHOLD",
          "TUTTI_SHM_CMA_THRESHOLD_AT_END", "TUTTI_SHM_CMA_THRESHOLD_EXCHANGE",
          "TUTTI_SHM_CMA_THRESHOLD_EXCHANGE_BETWEEN_STEPS", "TUTTI_SHM_MAPPED_THRESHOLD",
          "TUTTI_SHM_SHARED_COPY_CHUNK", "TUTTI_SHM_PIPELINE_PIECE", "TUTTI_SHM_PREFETCH_BYTES",
          "TUTTI_SHM_STREAMED_RECEIVE_FROM", "TUTTI_SHM_SLOW_READV_CELLS_THRESHOLD"}) {
        for (const char* bad : {"lots", "-1", "4X", "1KB", "17179869184G"})
            expect_refused(variable, bad);
    }
    ::setenv("TUTTI_SHM_CELL_STORES", "streaming", 1);
    shm::apply_environment(opts);
    CHECK(opts.cell_stores == shm::options::stores::streaming);
    expect_refused("TUTTI_SHM_CELL_STORES", "fast");
    ::setenv("TUTTI_SHM_LINE_STORES", "direct", 1);
    shm::apply_environment(opts);
    CHECK(opts.one_line_stores == shm::options::line_stores::direct);
    ::setenv("TUTTI_SHM_LINE_STORES", "cached", 1);
    shm::apply_environment(opts);
    CHECK(opts.one_line_stores == shm::options::line_stores::cached);
    expect_refused("TUTTI_SHM_LINE_STORES", "nontemporal");
    using misaligned = shm::options::misaligned_reads;
    for (const auto& [text, kind] :
         {std::pair{"direct", misaligned::direct}, std::pair{"bounced", misaligned::bounced},
          std::pair{"probe", misaligned::probe}}) {
        ::setenv("TUTTI_SHM_MISALIGNED_READS", text, 1);
        shm::apply_environment(opts);
        CHECK(opts.misaligned == kind);
    }
    expect_refused("TUTTI_SHM_MISALIGNED_READS", "aligned");
    ::setenv("TUTTI_SHM_LINE_NS", "250", 1);
    shm::apply_environment(opts);
    CHECK(opts.line_ns == std::optional<std::uint32_t>(250));
    ::unsetenv("TUTTI_SHM_LINE_NS");
    ::setenv("TUTTI_SHM_SHARED_COPY_FAR_LINE_NS", "400", 1);
    shm::apply_environment(opts);
    CHECK(opts.shared_copy_far_line_ns == 400);
    ::unsetenv("TUTTI_SHM_SHARED_COPY_FAR_LINE_NS");
    // Variables of earlier versions are refused, naming what replaced them.
    for (const auto& [gone, instead] :
         {std::pair<const char*, const char*>{"TUTTI_SHM_CELLS_FAR_LINE_NS",
                                              "TUTTI_SHM_CELLS_READV_PERCENT"},
          {"TUTTI_SHM_CELLS_FAR_THRESHOLD", "TUTTI_SHM_SLOW_READV_CELLS_THRESHOLD"}}) {
        expect_refused_naming(gone, "0", {gone, instead});
    }
    ::setenv("TUTTI_SHM_READV_PERCENT", "320", 1);
    shm::apply_environment(opts);
    CHECK(opts.readv_percent == std::optional<std::uint32_t>(320));
    ::unsetenv("TUTTI_SHM_READV_PERCENT");
    ::setenv("TUTTI_SHM_CELLS_READV_PERCENT", "0", 1);
    shm::apply_environment(opts);
    CHECK(opts.cells_readv_percent == 0);
    ::unsetenv("TUTTI_SHM_CELLS_READV_PERCENT");
    for (const char* variable : {"TUTTI_SHM_LINE_NS", "TUTTI_SHM_SHARED_COPY_FAR_LINE_NS",
                                 "TUTTI_SHM_READV_PERCENT", "TUTTI_SHM_CELLS_READV_PERCENT"}) {
        for (const char* bad : {"250ns", "-1", "", "99999999999", "150%"}) {
            CAPTURE(variable);
            CAPTURE(bad);
            ::setenv(variable, bad, 1);
            opts = {};
            try {
                shm::apply_environment(opts);
                // An empty variable is no setting at all.
                CHECK(std::string_view(bad).empty());
                CHECK_FALSE(opts.line_ns.has_value());
                CHECK(opts.shared_copy_far_line_ns == shm::options{}.shared_copy_far_line_ns);
                CHECK_FALSE(opts.readv_percent.has_value());
                CHECK(opts.cells_readv_percent == shm::options{}.cells_readv_percent);
            } catch (const tutti::error& e) {
                CHECK(e.code() == errc::invalid_argument);
                CHECK(std::string(e.what()).find(fmt::format("{}='{}'", variable, bad)) !=
                      std::string::npos);
                const bool percent = std::string_view(variable).ends_with("PERCENT");
                CHECK(std::string(e.what()).find(percent ? "a percentage" : "nanoseconds") !=
                      std::string::npos);
            }
        }
        ::unsetenv(variable);
    }
}
