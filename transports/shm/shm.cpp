#include "transports/shm/shm.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/copy.hpp"
#include "core/debug.hpp"
#include "core/error.hpp"
#include "core/mailbox.hpp"
#include "core/progress.hpp"
#include "core/scratch.hpp"
#include "core/shared_memory.hpp"

namespace tutti::shm {

namespace {

constexpr std::uint64_t segment_magic = 0x336d736974747574; // "tuttism3"
constexpr std::uint64_t probe_magic = 0x65626f7270616d63;   // "cmaprobe"
// options::cma_threshold_awaited_at_end where ranks share cores.
constexpr std::size_t oversubscribed_cma_threshold_at_end = 32 * 1024;
// The chunk of a shared copy (options::shared_copy_chunk) for a message
// read by process_vm_readv and shorter than two of those: a sent-at-end
// message from 64 KiB has two (docs/performance.md, fifteenth session).
constexpr std::size_t small_shared_copy_chunk = 32 * 1024;
// options::cma_threshold_exchange_between_steps where each rank has a core.
constexpr std::size_t exchange_between_steps_cells_below = 1024 * 1024;
// options::cma_threshold and cma_threshold_awaited_at_end where each rank has
// a core, lines travel far (line_ns above shared_copy_far_line_ns) and
// process_vm_readv is quick (at most cells_readv_percent). 2 ranks on the
// fiftieth session's Intel VM (lines of 412-460 ns, readv_percent 119-121):
// the broadcast of 16 and 32 KiB took 0.58 and 0.52 of the cells' time, the
// scan and exscan 0.48-0.82, the reduce 0.81-0.83, the 32 KiB gather and
// scatter 0.79 and 0.46; from 8 KiB several calls took 2-3.6 times as long.
constexpr std::size_t far_line_cma_threshold = 16 * 1024;
// options::cma_threshold_exchange there: an exchange that ends the call
// (both ends copying at once) by single copy from 32 KiB. 2 ranks on the
// fifty-first session's Intel VM (lines of 321-550 ns): the all_gather,
// all_to_all and all_to_allv of 64 KiB (blocks of 32 KiB) took 0.85-0.89 of
// the cells' time, 9 of 9 rounds each; from 16 KiB nothing more was gained
// (1.02-1.08 at 32 KiB). Exchanges between steps keep 64 KiB: from 32 KiB
// the 64 KiB all_reduce took 1.30 times as long.
constexpr std::size_t far_line_cma_threshold_exchange = 32 * 1024;
constexpr std::size_t line = 64;
constexpr std::size_t page = 4096;
// options::misaligned: reads shorter than this go direct (the bounce was
// measured from 16 KiB, 4.0 us against 10.7 on the Zen 3 VM; single copy
// starts at 16 KiB unless a threshold is given lower), and longer ones go in
// pieces of bounce_piece, which stay in a core's cache between the copies.
constexpr std::size_t bounce_from = 4 * 1024;
constexpr std::size_t bounce_piece = 128 * 1024;
constexpr std::size_t auto_budget = 128u << 20; // ring bytes of the whole segment

enum class cell_type : std::uint8_t {
    data,
    small,
    rendezvous,
    mapped,
    ack,
    nack,
    share,
    via_cells
};

// The head of every cell. A data cell carries bytes [offset, offset+length)
// of a message of `total` bytes; a rendezvous cell says the message can be
// read at address `offset` in the sender, and a mapped cell is a rendezvous
// whose payload (a mapped_source) says which shared region holds the message,
// for the receiver to map; ack and nack answer one by token, and so does
// via_cells, which asks for that one message through the cells; a share cell
// asks the sender of a single-copy message (by token) to help copy it: the
// receive buffer's address in offset, the message's bytes in total, the chunk
// bytes in length and the share slot in algorithm. A
// small cell is a whole message of at most 16 bytes held where offset and
// token would be, so that it travels in one cache line.
// The stamp, written last, says the cell is full: a receiver polls the cell
// itself rather than an index beside it, so a message costs it one cache
// line transfer less (the index would be a miss, and the cell a second one
// that can only start after it).
struct cell_header {
    std::uint64_t communicator = 0;
    std::uint64_t generation = 0;
    std::uint64_t step = 0;
    std::uint64_t total = 0;
    std::int32_t source = 0;
    std::uint32_t length = 0;
    std::uint32_t algorithm = 0;
    collective kind = collective::barrier;
    cell_type type = cell_type::data;
    std::uint16_t stamp = 0; // (index + 1) mod 2^16 of the cell's message in the ring
    std::uint64_t offset = 0;
    std::uint64_t token = 0;
};
static_assert(sizeof(cell_header) == line);
constexpr std::size_t stamp_offset = offsetof(cell_header, stamp);
constexpr std::size_t small_offset = offsetof(cell_header, offset);
constexpr std::size_t small_bytes = sizeof(cell_header) - small_offset;

std::uint16_t stamp_of(std::uint64_t index) {
    return static_cast<std::uint16_t>(index + 1);
}
std::atomic_ref<std::uint16_t> stamp_in(std::byte* cell) {
    return std::atomic_ref(*reinterpret_cast<std::uint16_t*>(cell + stamp_offset));
}

// Where a mapped message lives in its sender: the payload of a mapped cell.
struct mapped_source {
    std::uint64_t region = 0; // the sender's region id (never reused)
    std::uint64_t region_bytes = 0;
    std::uint64_t offset = 0; // of the message in the region
    std::int32_t fd = -1;     // the region's descriptor in the sender
    std::uint32_t unused = 0;
};

// The meeting point of one message copied by its receiver and its sender
// together (options::shared_copy_chunk): share_slots lines per ordered pair
// of ranks. The receiver opens a slot and names it in a share cell; the
// sender frees it when it has no more to do. Chunks are claimed with one
// compare-exchange on `claims`, the receiver's from the front and the
// sender's from the back, so each chunk is copied once.
struct share_slot {
    std::uint64_t claims;        // chunks taken from the front | from the back << 32
    std::uint32_t sender_done;   // chunks the sender finished writing (or gave up on)
    std::uint32_t sender_failed; // a write failed: the receiver copies the sender's chunks
    std::uint32_t open;          // 1 from the receiver's offer until the sender is done
};
constexpr std::size_t share_slots = 4;
constexpr std::uint64_t front_chunks = 0xffffffff;

struct segment_header {
    std::uint64_t magic;
    std::uint64_t ranks;
    std::uint64_t cell_bytes;
    std::uint64_t depth;
};

// One per rank, each on its own cache line: the futex word peers ring, and
// whether the rank sleeps on it (only then does a sender pay for a wake).
struct rank_block {
    std::uint32_t bell;
    std::uint32_t sleeping;
    std::uint32_t closed; // set when the rank shut its transport down on purpose
    // 1 + the rank whose crash this rank saw first, 0 before. From then on
    // it reads no peer's memory, so its peers fail the sends it has not
    // read: it may be too busy failing to read them ever.
    std::uint32_t failed_on;
    // Setup's line bounce (measure_line_ns): the pair being measured in the
    // high half (rank 0's word), the round in the low half.
    std::uint64_t line_probe;
    // Setup's copy probe (measure_readv_percent): rank 0's word names the
    // peer in the high half and the round in the low half, copy_probe_done
    // when it is over; the peer's echoes the round it has answered, having
    // set its buffer's address (odd rounds) or its streaming copy's time
    // (even rounds).
    std::uint64_t copy_probe;
    std::uint64_t copy_probe_buffer;
    std::uint64_t copy_probe_store_ns;
};
static_assert(sizeof(rank_block) <= line, "each rank's block has a line of its own");
constexpr std::uint64_t copy_probe_done = ~std::uint64_t{0};
// What the copy probe moves (measure_readv_percent): more than the cells of
// one ring may hold only by process_vm_readv, whose time is then counted per
// byte. Large enough that a system call's fixed cost does not count much.
constexpr std::size_t copy_probe_bytes = 256 * 1024;

// The middle of a probe's timed rounds (the mean of the two middle ones for
// an even count); 0 for none.
double median_of(std::vector<double> values) {
    if (values.empty()) return 0;
    const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
    std::nth_element(values.begin(), middle, values.end());
    if (values.size() % 2) return *middle;
    return (*middle + *std::max_element(values.begin(), middle)) / 2;
}

// A probe's elapsed time since `start`, in nanoseconds.
double nanoseconds_since(std::chrono::steady_clock::time_point start) {
    return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now() - start)
                                   .count());
}

// The copy probes' figure: process_vm_readv's time per byte (copy_probe_bytes
// in readv_ns) as a percentage of the cells' (cell_bytes, the slower of their
// two stages, which overlap).
std::uint32_t readv_percent_of(double readv_ns, double store_ns, double load_ns,
                               std::size_t cell_bytes) {
    const double cells_per_byte =
        std::max({load_ns, store_ns, 1.0}) / static_cast<double>(cell_bytes);
    const double readv_per_byte = readv_ns / static_cast<double>(copy_probe_bytes);
    return static_cast<std::uint32_t>(
        std::clamp(100 * readv_per_byte / cells_per_byte + 0.5, 1.0, 1e9));
}

// Spins until `ready` or `limit` has passed, reading the clock now and then
// (setup's probes, whose rounds take ~30-500 ns). No pause at first, as
// benchmarks/line_bounce: one costs ~40 ns here, which a timed round would
// count. Nor a clock read before the first 256 spins: a round would count it.
template <class Ready>
bool spin_until(Ready ready, std::chrono::steady_clock::duration limit) {
    std::chrono::steady_clock::time_point until{};
    for (unsigned spins = 1;; ++spins) {
        if (ready()) return true;
        if (spins > 4096) detail::cpu_relax();
        if (spins % 256 == 0) {
            const auto now = std::chrono::steady_clock::now();
            if (until == std::chrono::steady_clock::time_point{})
                until = now + limit;
            else if (now > until)
                return false;
        }
    }
}

template <class... Args>
void debug(fmt::format_string<Args...> format, Args&&... args) {
    detail::debug_log("shm", format, std::forward<Args>(args)...);
}

// Writes the 64-byte line `whole` to `to` (line-aligned) past the caches, in
// one piece. A direct store is weakly ordered: the first fence keeps it
// behind every earlier store (what the stamp's release store would give),
// the second sends it out now rather than when the write-combining buffer is
// next drained (without it the 2-rank 8-byte barrier took 1.12 times as long
// as with ordinary stores, with it 0.75).
#if defined(__x86_64__)
__attribute__((target("movdir64b"))) void store_line_directly(std::byte* to, const void* whole) {
    _mm_sfence();
    _movdir64b(to, whole);
    _mm_sfence();
}
#else
void store_line_directly(std::byte*, const void*) {
    throw error(errc::invalid_argument, "direct line stores need MOVDIR64B (x86-64)");
}
#endif

// The bookkeeping of an adaptive way of writing into the cells
// (options::stores, options::line_stores): the ordinary writes are timed one
// in so many, and two slow ones in a row switch to the other way (streaming
// or direct stores) for a number of writes, after which timing starts again.
struct timed_switch {
    static constexpr std::uint8_t slow_in_a_row_to_switch = 2;
    std::uint32_t other_left = 0;   // writes left the other way
    std::uint32_t until_timing = 0; // ordinary writes before the next timed one
    std::uint8_t slow_in_a_row = 0;

    // Whether this ordinary write is the one to time.
    bool time_this_one() noexcept { return until_timing-- == 0; }
    // After a timed write: the next is timed `every` writes on.
    void timed(bool slow, std::uint32_t every, std::uint32_t span) noexcept {
        until_timing = every - 1;
        slow_in_a_row = slow ? slow_in_a_row + 1 : 0;
        if (slow_in_a_row >= slow_in_a_row_to_switch) {
            slow_in_a_row = 0;
            other_left = span;
        }
    }
    // One write the other way; true when it was the last of the span.
    bool took_other() noexcept { return other_left > 0 && --other_left == 0; }
};

std::uint64_t load_acquire(std::uint64_t& v) {
    return std::atomic_ref(v).load(std::memory_order_acquire);
}
void store_release(std::uint64_t& v, std::uint64_t x) {
    std::atomic_ref(v).store(x, std::memory_order_release);
}

long futex(std::uint32_t* word, int op, std::uint32_t value, const timespec* limit) {
    return syscall(SYS_futex, word, op, value, limit, nullptr, 0);
}

// Waking a sleeping peer is a Dekker handshake: a sender publishes its ring
// write and then reads the peer's `sleeping` flag; the peer publishes the flag
// and then reads the rings. Each side needs a full barrier between its store
// and its load, or one of them may read stale and the wake is lost. A full
// fence stalls the sender until its ring write has reached the other core
// (~100 ns here, on every message), while a rank goes to sleep only after
// milliseconds of idleness. So the sleeper pays for both:
// membarrier(GLOBAL_EXPEDITED) runs a barrier on every running thread of
// every registered process, and the sender's side is a compiler barrier.
// Where the kernel lacks it, every rank fences (all ranks must agree, see
// setup()).
bool can_use_membarrier() {
    static const bool ok = [] {
        const long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
        if (cmds < 0 || !(cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) ||
            !(cmds & MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED))
            return false;
        return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
    }();
    return ok;
}

// The sender's side of the handshake.
void sender_fence(bool asymmetric) {
    if (asymmetric)
        std::atomic_signal_fence(std::memory_order_seq_cst);
    else
        std::atomic_thread_fence(std::memory_order_seq_cst);
}

// The sleeper's side: a barrier on this thread and on every sender's.
void sleeper_fence(bool asymmetric) {
    if (asymmetric && syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) == 0) return;
    // Registered but refused now: cannot happen by the kernel's contract;
    // the fence keeps this side right, and the sleep is bounded anyway.
    std::atomic_thread_fence(std::memory_order_seq_cst);
}

std::size_t round_up(std::size_t n, std::size_t to) {
    return (n + to - 1) / to * to;
}

struct geometry {
    std::size_t ranks = 0;
    std::size_t cell_bytes = 0;
    std::size_t depth = 0;

    // Cell `index` of a ring is at slot index mod depth. Every message
    // computes it: with the usual power-of-two depth it is a mask, not a
    // division.
    std::size_t slot(std::uint64_t index) const {
        return std::has_single_bit(depth) ? index & (depth - 1) : index % depth;
    }
    // The consumer's tail index on a line of its own, then the cells.
    std::size_t ring_bytes() const { return line + depth * cell_bytes; }
    std::size_t rings_offset() const { return round_up(line + ranks * line, 4096); }
    std::size_t shares_offset() const { return rings_offset() + ranks * ranks * ring_bytes(); }
    std::size_t total() const { return shares_offset() + ranks * ranks * share_slots * line; }
};

geometry choose_geometry(int ranks, const options& opts) {
    geometry g;
    g.ranks = static_cast<std::size_t>(ranks);
    g.depth = opts.ring_depth ? opts.ring_depth : (ranks <= 8 ? 16 : 8);
    if (opts.cell_bytes) {
        g.cell_bytes = opts.cell_bytes;
    } else {
        const std::size_t pairs = std::max<std::size_t>(1, g.ranks * (g.ranks - 1));
        g.cell_bytes =
            std::clamp<std::size_t>(std::bit_floor(auto_budget / (pairs * g.depth)), 4096, 32768);
    }
    if (g.cell_bytes < 2 * line || g.cell_bytes % line != 0 || g.cell_bytes > (1u << 30))
        throw error(errc::invalid_argument,
                    fmt::format("shm cell_bytes {} must be a multiple of {} between {} and 1 GiB",
                                g.cell_bytes, line, 2 * line));
    if (opts.shared_copy_chunk > (1u << 30))
        throw error(errc::invalid_argument,
                    fmt::format("shm shared_copy_chunk {} must be at most 1 GiB (0 turns shared "
                                "copies off)",
                                opts.shared_copy_chunk));
    // A stale stamp differs from the expected one by the depth, mod 2^16.
    if (g.depth < 2 || g.depth > 65535)
        throw error(errc::invalid_argument,
                    fmt::format("shm ring_depth {} must be between 2 and 65535", g.depth));
    return g;
}

// Small blobs for the bootstrap exchanges.
class blob_writer {
public:
    template <class T>
    void put(const T& v) {
        const auto* p = reinterpret_cast<const std::byte*>(&v);
        bytes_.insert(bytes_.end(), p, p + sizeof(T));
    }
    void put(const std::string& s) {
        put<std::uint64_t>(s.size());
        const auto* p = reinterpret_cast<const std::byte*>(s.data());
        bytes_.insert(bytes_.end(), p, p + s.size());
    }
    const std::vector<std::byte>& bytes() const { return bytes_; }

private:
    std::vector<std::byte> bytes_;
};

class blob_reader {
public:
    blob_reader(const std::vector<std::byte>& b, int rank) : bytes_(b), rank_(rank) {}
    template <class T>
    T get() {
        need(sizeof(T));
        T v;
        std::memcpy(&v, bytes_.data() + at_, sizeof(T));
        at_ += sizeof(T);
        return v;
    }
    std::string get_string() {
        auto n = get<std::uint64_t>();
        need(n);
        std::string s(reinterpret_cast<const char*>(bytes_.data() + at_), n);
        at_ += n;
        return s;
    }

private:
    void need(std::size_t n) {
        if (bytes_.size() - at_ < n)
            throw error(errc::invalid_argument,
                        fmt::format("shm transport: rank {} sent a malformed bootstrap blob "
                                    "(is every rank running the same tutti?)",
                                    rank_));
    }
    const std::vector<std::byte>& bytes_;
    int rank_;
    std::size_t at_ = 0;
};

std::string errno_text(int e) {
    return std::strerror(e);
}

// Reads into `into` from `address` in process `pid`, or (write) writes
// `into` there; 0 or the errno.
int cma_copy(pid_t pid, std::span<std::byte> into, std::uint64_t address, bool write = false) {
    std::size_t done = 0;
    while (done < into.size()) {
        iovec local{into.data() + done, into.size() - done};
        iovec remote{reinterpret_cast<void*>(address + done), into.size() - done};
        ssize_t n = write ? process_vm_writev(pid, &local, 1, &remote, 1, 0)
                          : process_vm_readv(pid, &local, 1, &remote, 1, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (n == 0) return EFAULT;
        done += static_cast<std::size_t>(n);
    }
    return 0;
}

// Whether a copy's destination sits 1-63 bytes past its source's place in a
// page: where `rep movsb` crawls (options::misaligned; on the Zen 3 VM 1-31
// bytes past read 4-7 times as slow, 32-63 and 64 not, the other way none).
bool lands_just_past(std::uint64_t source, std::uint64_t destination) {
    const auto ahead = (destination - source) % page;
    return ahead != 0 && ahead < line;
}

// Whether the kernel's copy of such a pair is slow here (options::
// misaligned's probe): process_vm_readv of this process's own memory, 64 KiB
// to a whole number of pages further and 16 bytes past that, the quickest
// of 8 each; also returns both times for the debug line.
bool misaligned_reads_slow(std::chrono::nanoseconds& aligned,
                           std::chrono::nanoseconds& misaligned) {
    constexpr std::size_t n = 64 * 1024;
    std::vector<std::byte> memory(2 * n + 3 * page, std::byte{1});
    const auto base = reinterpret_cast<std::uintptr_t>(memory.data());
    std::byte* from = memory.data() + (round_up(base, page) - base);
    std::byte* to = from + n + page;
    const auto source = reinterpret_cast<std::uint64_t>(from);
    const auto quickest = [&](std::size_t shift) {
        auto best = std::chrono::nanoseconds::max();
        for (int round = 0; round < 8; ++round) {
            const auto start = std::chrono::steady_clock::now();
            if (cma_copy(getpid(), {to + shift, n}, source) != 0)
                return std::chrono::nanoseconds::zero();
            best = std::min(best, std::chrono::duration_cast<std::chrono::nanoseconds>(
                                      std::chrono::steady_clock::now() - start));
        }
        return best;
    };
    aligned = quickest(0);
    misaligned = quickest(16);
    return aligned.count() > 0 && misaligned.count() > 0 && misaligned * 2 > aligned * 3;
}

class endpoint final : public shm::transport {
public:
    endpoint(bootstrap& boot, asio::io_context& context, options opts);
    ~endpoint() override;

    std::string_view name() const noexcept override { return "shm"; }
    int rank() const noexcept override { return rank_; }
    int size() const noexcept override { return size_; }
    asio::io_context& context() noexcept override { return context_; }
    bool single_copy_now() const noexcept override { return cma_to_any_ && opts_.use_cma; }
    transport_capabilities capabilities() const noexcept override {
        const bool single = cma_to_any_;
        return {.single_copy = single_copy_now(),
                .remote_memory_access = false,
                .latency_us = 0.3,
                .bandwidth_gb_per_s = single ? 10.0 : 8.0,
                .one_thread = true,
                .segment_bytes = payload_capacity(),
                .line_ns = line_ns_,
                .readv_percent = readv_percent_,
                .slow_single_copy = cells_over_readv_,
                .ranks_per_core = ranks_per_core_};
    }

    request isend(int dest, const message_header& header,
                  std::span<const std::byte> data) override {
        return send(dest, header, data,
                    threshold_for(dest, header, data.size(), opts_.cma_threshold,
                                  opts_.cma_threshold_exchange_between_steps));
    }
    request isend_awaited_at_end(int dest, const message_header& header,
                                 std::span<const std::byte> data) override {
        // The lower threshold pays where the sender is free to share the
        // copy; an exchange, where it is busy receiving, has its own.
        return send(dest, header, data,
                    threshold_for(dest, header, data.size(), opts_.cma_threshold_awaited_at_end,
                                  opts_.cma_threshold_exchange));
    }
    bool try_send(int dest, const message_header& header, std::span<const std::byte> data) override;
    // Whether a send to dest is part of an exchange: a receive of the same
    // call from dest is posted and waits.
    bool exchanging_with(int dest, const message_header& header) const {
        return mailbox_.expects({header.key.communicator, header.key.generation, dest});
    }
    // The single-copy threshold for a send of `bytes` to dest: `in_exchange`
    // if it is part of an exchange (with a core each, a receive of the same
    // call from dest is posted), else `otherwise`. The mailbox is asked only
    // for sizes the two thresholds disagree on: with the defaults, never for
    // a send awaited at the end (both are 64 KiB).
    std::size_t threshold_for(int dest, const message_header& header, std::size_t bytes,
                              std::size_t otherwise, std::size_t in_exchange) const {
        const bool decides = share_copies_ && bytes >= std::min(otherwise, in_exchange) &&
                             bytes < std::max(otherwise, in_exchange);
        return decides && exchanging_with(dest, header) ? in_exchange : otherwise;
    }
    request irecv(const message_header& expected, std::span<std::byte> into) override {
        return post_receive(expected, into, false, false);
    }
    request irecv_combined_at_once(const message_header& expected,
                                   std::span<std::byte> into) override {
        return post_receive(expected, into, false, true);
    }
    // Cells and mappings of the sender's buffer hand the observer their
    // pieces (landing_observer::take) where it takes them.
    request irecv_observed(const message_header& expected, std::span<std::byte> into,
                           landing_observer& observer, bool combined_at_once) override {
        return post_receive(expected, into, false, combined_at_once,
                            observer.takes_pieces() ? &observer : nullptr);
    }
    request irecv_any_size(const message_header& expected) override {
        return post_receive(expected, {}, true, false);
    }
    bool withdraw(const request& receive) override { return mailbox_.withdraw(receive); }
    try_result try_recv(const message_header& expected, std::span<std::byte> into) override {
        return mailbox_.take_arrived(expected, into) ? try_result::received : try_result::not_yet;
    }
    try_result poll_recv(const message_header& expected, std::span<std::byte> into) override;
    std::size_t progress() override;
    void await_activity(std::chrono::microseconds limit) override;
    bool needs_polling() const noexcept override { return true; }
    bool progress_finds_messages() const noexcept override { return true; }

    shm::counters counters() const noexcept override { return counters_; }
    bool cma_to(int dest) const noexcept override {
        return opts_.use_cma && dest >= 0 && dest < size_ &&
               cma_to_[static_cast<std::size_t>(dest)];
    }
    std::size_t cell_bytes() const noexcept override { return geo_.cell_bytes; }
    std::size_t ring_depth() const noexcept override { return geo_.depth; }
    std::uint32_t readv_percent() const noexcept override { return readv_percent_; }
    bool bounces_misaligned_reads() const noexcept override { return bounce_misaligned_; }

private:
    struct outgoing {
        message_header header;
        std::span<const std::byte> data;
        request done;
        std::uint64_t offset = 0;
        bool cma = false;
        std::optional<shared_region_ref> region; // sent as a mapped rendezvous
        std::size_t piece = 0;                   // bytes per data cell
    };
    struct peer_out {
        std::deque<outgoing> sends;
        std::deque<cell_header> control; // acks and nacks to write
        std::uint64_t head = 0;          // ours alone: we are the ring's only producer
        std::uint64_t cached_tail = 0;
        std::byte* ring = nullptr; // ring(rank_, dest), found once: every send writes to it
        timed_switch cells;        // options::stores::adaptive: to streaming stores
        // options::stores::adaptive: what the last streamed probe cost per
        // byte (0: none yet), and the timed cells before the next probe.
        double streamed_ns_per_byte = 0;
        std::uint32_t timings_to_probe = 0;
        timed_switch lines; // options::line_stores::adaptive: to direct stores
    };
    // A message arriving in chunks: straight into its receive, or staged.
    struct partial {
        bool active = false;
        message_header header;
        std::optional<mailbox::claimed_receive> claimed;
        std::optional<scratch_block> staging;
        std::span<std::byte> into; // mailbox::landing
        std::uint64_t received = 0;
    };
    // A peer's shared region, mapped here.
    struct peer_mapping {
        std::uint64_t region;
        const std::byte* base;
        std::size_t bytes;
        std::uint64_t last_use;
    };
    struct peer_in {
        std::uint64_t tail = 0;    // ours alone: we are the ring's only consumer
        std::byte* ring = nullptr; // ring(src, rank_), found once: every poll reads it
        partial incoming;
        std::vector<peer_mapping> mappings; // its shared regions we mapped
        bool can_map = true;                // false once taking its descriptor failed
        // drain's guess at the next cell (options::prefetch_bytes): its
        // payload lines to prefetch, and the one-line cells since the last
        // message that set them.
        std::uint32_t prefetch_lines = 0;
        std::uint32_t one_line_cells = 0;
    };
    struct rendezvous {
        int source;
        message_header header;
        std::uint64_t address;
        std::uint64_t token;
        std::chrono::steady_clock::time_point since;
        std::optional<mapped_source> region; // a mapped cell: read from our mapping of it
    };
    // A receive claimed for a single copy that failed; its data follows in chunks.
    struct reserved {
        int source;
        message_key key;
        mailbox::claimed_receive receive;
    };

    std::byte* base() const { return static_cast<std::byte*>(base_); }
    rank_block& block(int r) const {
        return *reinterpret_cast<rank_block*>(base() + line + static_cast<std::size_t>(r) * line);
    }
    std::byte* ring(int src, int dst) const {
        return base() + geo_.rings_offset() +
               (static_cast<std::size_t>(src) * geo_.ranks + static_cast<std::size_t>(dst)) *
                   geo_.ring_bytes();
    }
    bool has_message(int src) const {
        const auto& in = in_[static_cast<std::size_t>(src)];
        return stamp_in(cell_of(in.ring, in.tail)).load(std::memory_order_acquire) ==
               stamp_of(in.tail);
    }
    std::byte* cell_of(std::byte* ring, std::uint64_t index) const {
        return ring + line + geo_.slot(index) * geo_.cell_bytes;
    }
    static std::uint64_t& tail_in(std::byte* ring) {
        return *reinterpret_cast<std::uint64_t*>(ring);
    }
    std::size_t payload_capacity() const { return geo_.cell_bytes - sizeof(cell_header); }
    // Whether a private buffer's message of cells_from_ bytes or more goes
    // through the cells (the slow-copy rule), not by single copy. With a
    // core for each rank, always. Where ranks share cores, only while it
    // fits in its ring: a longer one keeps its sender waiting for the
    // receiver's drains, each a turn of a shared core. With more than two
    // ranks to a core, not an exchange's (a receive of the call from dest is
    // posted) either. Measured on the Zen 3 VM against single copy at every
    // size (docs/performance.md, fifty-eighth session): 4 ranks, the 256
    // KiB-1 MiB all_to_all, all_gather, broadcast and scan 0.48-0.66 of the
    // time in the cells, the 4 MiB all_to_all and reduce_scatter 1.42 and
    // 1.34, the 16 MiB scatter 1.41; 8 ranks, the 1 MiB all_gather and
    // all_to_all 1.39 and 1.31, the 64-256 KiB broadcast and 1 MiB scatter
    // 0.38-0.64.
    bool in_cells_by_the_rule(int dest, const message_header& header, std::size_t bytes) const {
        if (!cores_shared_) return true;
        if (bytes > geo_.depth * payload_capacity()) return false;
        return ranks_per_core_ <= 2 || !exchanging_with(dest, header);
    }
    share_slot& slot(int sender, int receiver, std::size_t i) const {
        return *reinterpret_cast<share_slot*>(
            base() + geo_.shares_offset() +
            ((static_cast<std::size_t>(sender) * geo_.ranks + static_cast<std::size_t>(receiver)) *
                 share_slots +
             i) *
                line);
    }

    void setup(bootstrap& boot);
    void agree_link_figures(bootstrap& boot);
    struct line_figure {
        std::uint32_t ns = 0;
        int slowest_peer = 1;
        // The same round trip with lines stored directly (MOVDIR64B), the
        // slowest pair's; 0 where not measured.
        std::uint32_t direct_ns = 0;
    };
    line_figure measure_line_ns();
    // The line each side of a pair stores directly in setup's bounce: the
    // first cell of its ring to the other, unused until setup ends.
    std::byte* direct_probe_line(int from, int to) const { return ring(from, to) + line; }
    std::size_t copy_probe_cell_bytes() const {
        return std::min<std::size_t>(copy_probe_bytes, geo_.depth * geo_.cell_bytes);
    }
    std::uint32_t measure_readv_percent(int peer);
    std::uint32_t measure_own_readv_percent() const;
    void answer_copy_probe();
    // Throws errc::invalid_argument for a rank outside the world (inline:
    // every send checks).
    void check_destination(int dest) const {
        if (dest < 0 || dest >= size_) [[unlikely]]
            outside_the_world(dest);
    }
    [[noreturn]] void outside_the_world(int dest) const;
    bool write_now(int dest, const message_header& header, std::span<const std::byte> data);
    std::size_t piece_for(int dest, const message_header& header, std::size_t bytes) const;
    bool has_space(int dest);
    void write_cell(int dest, const cell_header& h, const std::byte* payload);
    void write_one_line(peer_out& o, std::byte* cell, const cell_header& h,
                        const std::byte* payload);
    void copy_into_cell(peer_out& o, std::byte* to, const std::byte* from, std::size_t bytes);
    void ring_bell(int peer);
    std::size_t pump(int dest);
    std::size_t drain(int src);
    bool take_awaited_at_head(const message_header& expected, std::span<std::byte> into);
    void expect_next_like(peer_in& in, const cell_header& h);
    void prefetch_arrived_payload(const std::byte* cell, const cell_header& h) const;
    void handle_data(int src, const cell_header& h, const std::byte* payload);
    void handle_rendezvous(int src, const cell_header& h, const std::byte* payload);
    // Whether a message of `bytes` is written into its posted receive past
    // the caches (options::streamed_receive_from).
    bool streams_into_receive(std::uint64_t bytes) const noexcept {
        return opts_.streamed_receive_from != 0 && bytes >= opts_.streamed_receive_from;
    }
    int read_from_peer(const rendezvous& r, std::span<std::byte> into, std::uint64_t at,
                       bool streamed);
    const std::byte* mapped_message(const rendezvous& r, std::uint64_t bytes);
    int copy_by_cma(pid_t pid, std::span<std::byte> local, std::uint64_t remote, bool write);
    int copy_in(const rendezvous& r, std::span<std::byte> into, bool combined_at_once,
                bool streamed);
    request post_receive(const message_header& expected, std::span<std::byte> into, bool any_size,
                         bool combined_at_once, landing_observer* taker = nullptr) {
        auto done = mailbox_.post(expected, into, any_size, combined_at_once, taker);
        if (any_lost_) fail_receives_from_closed(expected.key.source);
        return done;
    }
    int await_helper(const rendezvous& r, share_slot& s, std::uint64_t claimed);
    void handle_share(int receiver, const cell_header& h);
    const std::byte* mapping_of(int src, const mapped_source& m);
    void handle_answer(int src, const cell_header& h);
    bool single_copy(rendezvous& r, bool stage);
    request send(int dest, const message_header& header, std::span<const std::byte> data,
                 std::size_t cma_from);
    std::size_t retry_unclaimed(bool stage_all);
    bool exited(int r);
    void check_liveness();
    // Fails the receives pending from `source` if it closed its transport
    // (or vanished): nothing more will come from it, and whoever waits for
    // it would wait forever. What it sent before is matched first.
    void fail_receives_from_closed(int source);
    void lose(int peer, bool clean);
    void fail_sends_to(int peer, std::uint32_t failed_on);
    void fail_sends(int peer, const std::exception_ptr& failure);
    void fail_all(const std::exception_ptr& failure);
    // Recounts cma_to_any_ after cma_to_ changed.
    void note_single_copy() {
        cma_to_any_ = std::any_of(cma_to_.begin(), cma_to_.end(), [](char c) { return c != 0; });
    }
    void queue_control(int dest, cell_type type, std::uint64_t token);

    int rank_ = 0;
    int size_ = 0;
    asio::io_context& context_;
    options opts_;
    std::string segment_name_;
    geometry geo_;
    void* base_ = nullptr;
    std::size_t mapped_bytes_ = 0;

    // Read by peers through process_vm_readv at startup: proves CMA works.
    std::uint64_t probe_word_ = probe_magic;
    std::vector<pid_t> pids_;
    std::vector<char> cma_to_;      // per destination: it can read our memory
    bool cma_to_any_ = false;       // some destination can (every call asks)
    std::vector<char> map_to_;      // per destination: it can map our shared regions
    std::vector<char> cannot_help_; // per receiver: writing into its memory failed
    bool share_copies_ = false;     // options::shared_copy_chunk, and a core for each rank
    bool cores_shared_ = false;     // the node's ranks outnumber its cores
    bool pipeline_cells_ = false;   // options::pipeline_piece, and a core for each rank
    // The lower of the two single-copy thresholds: try_send, which is not
    // told how its send is awaited, leaves messages this large to isend.
    std::size_t single_copy_from_ = 0;
    std::vector<char> lost_;        // per peer: found gone
    bool any_lost_ = false;         // some lost_ is set (keeps receives from looking)
    std::vector<char> peer_failed_; // per peer: its failed_on was seen, its sends failed
    bool failed_ = false;           // this rank saw a crash (rank_block::failed_on)
    std::vector<pollfd> pidfds_;    // per peer, fd -1 where pidfd_open is unavailable

    mailbox mailbox_{mailbox::threads::owner_only};
    std::vector<peer_out> out_;
    std::vector<peer_in> in_;
    std::unordered_map<std::uint64_t, std::pair<int, outgoing>> awaiting_ack_;
    std::vector<rendezvous> unclaimed_;
    std::vector<reserved> reserved_;
    std::uint64_t next_token_ = 1;
    shm::counters counters_;
    std::chrono::steady_clock::time_point next_liveness_check_{};
    std::uint64_t idle_rounds_ = 0;
    std::uint64_t mapping_clock_ = 0; // orders uses of peer mappings (least recent is dropped)
    std::exception_ptr first_crash_;
    bool asymmetric_fences_ = false;   // every rank can use membarrier
    bool adaptive_lines_ = false;      // options::line_stores::adaptive, and it can choose direct
    std::uint32_t line_ns_ = 0;        // options::line_ns as agreed at setup
    std::uint32_t direct_line_ns_ = 0; // the same with direct stores (0: not measured)
    std::uint32_t readv_percent_ = 0;  // options::readv_percent as agreed at setup
    std::uint32_t ranks_per_core_ = 0; // rank 0's ranks_per_core(size_), agreed at setup
    bool cells_over_readv_ = false;    // options::cells_readv_percent applies
    // Messages of this many bytes or more are not read by process_vm_readv
    // (options::slow_readv_cells_threshold, where it applies).
    std::size_t cells_from_ = std::numeric_limits<std::size_t>::max();
    // options::misaligned, decided: reads that land just past their
    // source's place in a page (lands_just_past) go through bounce_
    // (allocated at the first).
    bool bounce_misaligned_ = false;
    std::unique_ptr<std::byte[]> bounce_;
};

endpoint::endpoint(bootstrap& boot, asio::io_context& context, options opts)
    : rank_(boot.rank()), size_(boot.size()), context_(context), opts_(opts) {
    geo_ = choose_geometry(size_, opts_);
    const auto n = static_cast<std::size_t>(size_);
    out_.resize(n);
    in_.resize(n);
    lost_.assign(n, 0);
    peer_failed_.assign(n, 0);
    cma_to_.assign(n, 0);
    map_to_.assign(n, opts_.use_mapped ? 1 : 0);
    cannot_help_.assign(n, 0);
    cores_shared_ = ranks_outnumber_cores(size_);
    share_copies_ = opts_.shared_copy_chunk > 0 && !cores_shared_;
    pipeline_cells_ = opts_.pipeline_piece > 0 && !cores_shared_;
    // Given, or left to the defaults below (which setup's figures may lower).
    const bool one_way_thresholds_given =
        opts_.cma_threshold != options{}.cma_threshold || opts_.cma_threshold_awaited_at_end != 0;
    if (opts_.cma_threshold_awaited_at_end == 0)
        opts_.cma_threshold_awaited_at_end =
            std::min(opts_.cma_threshold, cores_shared_   ? oversubscribed_cma_threshold_at_end
                                          : share_copies_ ? 2 * small_shared_copy_chunk
                                                          : opts_.cma_threshold);
    const bool exchange_threshold_given = opts_.cma_threshold_exchange != 0;
    if (!exchange_threshold_given)
        opts_.cma_threshold_exchange =
            share_copies_ ? std::min(opts_.cma_threshold, 2 * small_shared_copy_chunk)
                          : opts_.cma_threshold;
    const bool between_steps_given = opts_.cma_threshold_exchange_between_steps != 0;
    if (!between_steps_given)
        opts_.cma_threshold_exchange_between_steps =
            share_copies_ ? std::max(opts_.cma_threshold, exchange_between_steps_cells_below)
                          : opts_.cma_threshold;
    single_copy_from_ = std::min(
        {opts_.cma_threshold, opts_.cma_threshold_awaited_at_end, opts_.cma_threshold_exchange});
    for (auto& in : in_)
        in.can_map = opts_.use_mapped;
    if (opts_.one_line_stores == options::line_stores::direct && !has_direct_line_stores())
        throw error(errc::invalid_argument,
                    "shm one_line_stores = direct (TUTTI_SHM_LINE_STORES=direct) needs the "
                    "MOVDIR64B instruction, which this CPU does not have");
    // Where ranks share cores a timed line may include a preemption, and a
    // receiver is often not polling at all: adaptive means cached there.
    adaptive_lines_ = opts_.one_line_stores == options::line_stores::adaptive &&
                      has_direct_line_stores() && !cores_shared_;
    try {
        setup(boot);
    } catch (...) {
        if (base_) munmap(base_, mapped_bytes_);
        throw;
    }
    if (opts_.use_cma && cma_to_any_) {
        using misaligned = options::misaligned_reads;
        auto aligned_ns = std::chrono::nanoseconds::zero(), misaligned_ns = aligned_ns;
        bounce_misaligned_ = opts_.misaligned == misaligned::bounced ||
                             (opts_.misaligned == misaligned::probe &&
                              misaligned_reads_slow(aligned_ns, misaligned_ns));
        debug("rank {}: misaligned single-copy reads and help {}{}", rank_,
              bounce_misaligned_ ? "through a bounce buffer" : "direct",
              aligned_ns.count() ? fmt::format(" (64 KiB of its own memory: {} ns aligned, {} ns "
                                               "misaligned)",
                                               aligned_ns.count(), misaligned_ns.count())
                                 : std::string());
    }
    // Known only now that the ranks agreed on readv_percent.
    cells_over_readv_ = (share_copies_ || cores_shared_) && opts_.cells_readv_percent &&
                        readv_percent_ > opts_.cells_readv_percent &&
                        opts_.cell_stores != options::stores::cached;
    // (Where ranks share cores, cells_from_ below keeps them in the cells
    // as in_cells_by_the_rule says, which this would not let go.)
    if (cells_over_readv_ && !cores_shared_ && !between_steps_given)
        opts_.cma_threshold_exchange_between_steps = std::numeric_limits<std::size_t>::max();
    // Where process_vm_readv is measured no slower than the rule allows, an
    // exchange between steps is one copy each instead of the cells' two, as
    // an exchange that ends the call is (options::cma_threshold_exchange).
    const bool readv_measured_quick = readv_percent_ > 0 && opts_.cells_readv_percent &&
                                      readv_percent_ <= opts_.cells_readv_percent;
    if (share_copies_ && readv_measured_quick && !between_steps_given)
        opts_.cma_threshold_exchange_between_steps = opts_.cma_threshold_exchange;
    // Where lines travel far but the kernel's copy is quick, a one-way
    // message goes by single copy from far_line_cma_threshold: the cells'
    // two copies take each line across one at a time; an exchange that ends
    // the call from far_line_cma_threshold_exchange. Exchanges between steps
    // keep the threshold they took above.
    const bool far_line_quick_copy = share_copies_ && readv_measured_quick &&
                                     opts_.shared_copy_far_line_ns &&
                                     line_ns_ > opts_.shared_copy_far_line_ns;
    if (far_line_quick_copy && !one_way_thresholds_given) {
        opts_.cma_threshold = std::min(opts_.cma_threshold, far_line_cma_threshold);
        opts_.cma_threshold_awaited_at_end =
            std::min(opts_.cma_threshold_awaited_at_end, far_line_cma_threshold);
        single_copy_from_ = std::min(single_copy_from_, far_line_cma_threshold);
    }
    if (far_line_quick_copy && !exchange_threshold_given) {
        opts_.cma_threshold_exchange =
            std::min(opts_.cma_threshold_exchange, far_line_cma_threshold_exchange);
        single_copy_from_ = std::min(single_copy_from_, opts_.cma_threshold_exchange);
    }
    if (cells_over_readv_ && opts_.slow_readv_cells_threshold)
        cells_from_ = opts_.slow_readv_cells_threshold;
    for (int r = 0; r < size_; ++r) {
        out_[static_cast<std::size_t>(r)].ring = ring(rank_, r);
        in_[static_cast<std::size_t>(r)].ring = ring(r, rank_);
    }
    for (int r = 0; r < size_; ++r) {
        int fd = -1;
        if (r != rank_)
            fd = static_cast<int>(syscall(SYS_pidfd_open, pids_[static_cast<std::size_t>(r)], 0));
        pidfds_.push_back({fd, POLLIN, 0});
    }
    const auto limit = [](std::size_t bytes) {
        return bytes == std::numeric_limits<std::size_t>::max() ? std::string("never")
                                                                : std::to_string(bytes);
    };
    // Where process_vm_readv is slow, cells_from_ may leave no size to
    // single copy but out of a mapping.
    const std::string by_readv =
        cells_from_ <= single_copy_from_
            ? fmt::format("never by process_vm_readv (it took {} % of the cells' time: the cells "
                          "from {} bytes)",
                          readv_percent_, cells_from_)
            : fmt::format("from {} bytes ({} in exchanges; {} for sends awaited at the end, {} "
                          "in exchanges){}",
                          opts_.cma_threshold, limit(opts_.cma_threshold_exchange_between_steps),
                          opts_.cma_threshold_awaited_at_end, opts_.cma_threshold_exchange,
                          cells_from_ == std::numeric_limits<std::size_t>::max()
                              ? std::string()
                              : fmt::format(", the cells from {} bytes", cells_from_));
    for (int r = 0; r < size_; ++r)
        if (r != rank_)
            debug("rank {} to rank {}: {} bytes per cell, {} cells, single copy {}, wake-ups {}",
                  rank_, r, geo_.cell_bytes, geo_.depth, cma_to(r) ? by_readv : "off",
                  asymmetric_fences_ ? "fenced by the sleeper (membarrier)" : "fenced by both");
    debug("rank {}: a line takes {} between the ranks' cores{}, process_vm_readv {} of the "
          "cells' time; one-line messages by {}",
          rank_, line_ns_ ? fmt::format("{} ns", line_ns_) : std::string("an unknown time"),
          direct_line_ns_ ? fmt::format(" ({} ns stored directly)", direct_line_ns_)
                          : std::string(),
          readv_percent_ ? fmt::format("{} %", readv_percent_) : std::string("an unknown share"),
          opts_.one_line_stores == options::line_stores::direct ? "direct stores (MOVDIR64B)"
          : adaptive_lines_ ? "ordinary or direct stores, as a timed line's trip says (adaptive)"
                            : "ordinary stores");
}

void endpoint::setup(bootstrap& boot) {
    const auto& job = boot.job_id();
    if (job.empty() || job.size() > 200 || job.find('/') != std::string::npos)
        throw error(errc::invalid_argument,
                    fmt::format("shm transport: job id '{}' cannot name a shared-memory segment "
                                "(it must be 1 to 200 characters without '/')",
                                job));
    segment_name_ = "/tutti-" + job + "-shm";

    // 1: who is where, and where each rank's probe word lives.
    blob_writer hello;
    hello.put<std::int64_t>(getpid());
    hello.put<std::uint64_t>(reinterpret_cast<std::uintptr_t>(&probe_word_));
    hello.put(boot.node());
    hello.put<std::uint8_t>(can_use_membarrier() ? 1 : 0);
    auto hellos = boot.all_gather(hello.bytes());
    if (hellos.size() != static_cast<std::size_t>(size_))
        throw error(errc::invalid_argument,
                    fmt::format("shm transport: the bootstrap returned {} blobs for {} ranks",
                                hellos.size(), size_));
    std::vector<std::uint64_t> probes;
    std::vector<std::string> nodes;
    asymmetric_fences_ = true;
    for (int r = 0; r < size_; ++r) {
        blob_reader in(hellos[static_cast<std::size_t>(r)], r);
        pids_.push_back(static_cast<pid_t>(in.get<std::int64_t>()));
        probes.push_back(in.get<std::uint64_t>());
        nodes.push_back(in.get_string());
        asymmetric_fences_ = asymmetric_fences_ && in.get<std::uint8_t>() != 0;
    }
    for (int r = 0; r < size_; ++r)
        if (nodes[static_cast<std::size_t>(r)] != nodes[0])
            throw error(errc::invalid_argument,
                        fmt::format("shm transport: rank {} is on node '{}' and rank 0 on '{}'; "
                                    "ranks on other nodes need the TCP transport",
                                    r, nodes[static_cast<std::size_t>(r)], nodes[0]));

    // Can this rank read each peer's memory? (ptrace rules, seccomp, containers.)
    // A rank without use_cma answers no, so nobody sends to it by single copy.
    std::vector<char> can_read(static_cast<std::size_t>(size_), 0);
    for (int r = 0; r < size_; ++r) {
        if (r == rank_ || !opts_.use_cma) continue;
        std::uint64_t word = 0;
        int e = cma_copy(pids_[static_cast<std::size_t>(r)],
                         std::as_writable_bytes(std::span(&word, 1)),
                         probes[static_cast<std::size_t>(r)]);
        can_read[static_cast<std::size_t>(r)] = e == 0 && word == probe_magic;
        if (e != 0)
            debug("rank {} cannot read rank {} by process_vm_readv: {}", rank_, r, errno_text(e));
    }

    // 2: rank 0 creates the segment; everyone learns whether it could.
    std::string failure;
    // Whatever happens from here (a peer that never arrives makes the
    // bootstrap throw), the name leaves /dev/shm when setup ends.
    struct unlink_guard {
        const std::string& name;
        bool armed = false;
        ~unlink_guard() {
            if (armed) shm_unlink(name.c_str());
        }
    } created{segment_name_};
    if (rank_ == 0) {
        try {
            int fd = shm_open(segment_name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
            if (fd < 0)
                throw error(errc::invalid_argument,
                            errno == EEXIST
                                ? fmt::format("shared-memory segment {} already exists (another "
                                              "job with the same id, or a stale segment: remove "
                                              "/dev/shm{})",
                                              segment_name_, segment_name_)
                                : fmt::format("cannot create shared-memory segment {}: {}",
                                              segment_name_, errno_text(errno)));
            created.armed = true;
            const auto bytes = geo_.total();
            int e = ftruncate(fd, static_cast<off_t>(bytes)) == 0 ? 0 : errno;
            if (e == 0) e = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
            if (e == 0) {
                base_ = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                if (base_ == MAP_FAILED) {
                    base_ = nullptr;
                    e = errno;
                }
            }
            close(fd);
            if (e != 0)
                throw error(errc::invalid_argument,
                            fmt::format("cannot size or map shared-memory segment {} of {} bytes "
                                        "({} ranks, {} cells of {} bytes per ring): {}",
                                        segment_name_, bytes, size_, geo_.depth, geo_.cell_bytes,
                                        errno_text(e)));
            mapped_bytes_ = bytes;
            auto* h = reinterpret_cast<segment_header*>(base_);
            h->ranks = geo_.ranks;
            h->cell_bytes = geo_.cell_bytes;
            h->depth = geo_.depth;
            store_release(h->magic, segment_magic);
        } catch (const std::exception& e) {
            failure = e.what();
        }
    }
    blob_writer status;
    status.put<std::uint8_t>(failure.empty() ? 1 : 0);
    status.put(failure);
    for (char c : can_read)
        status.put<std::uint8_t>(static_cast<std::uint8_t>(c));
    auto statuses = boot.all_gather(status.bytes());
    auto unmap = [&] {
        if (base_) munmap(base_, mapped_bytes_);
        base_ = nullptr;
    };
    for (int r = 0; r < size_; ++r) {
        blob_reader in(statuses[static_cast<std::size_t>(r)], r);
        bool ok = in.get<std::uint8_t>() != 0;
        auto why = in.get_string();
        for (int d = 0; d < size_; ++d) {
            bool readable = in.get<std::uint8_t>() != 0;
            // Rank r reading rank d's memory lets d send to r by single copy.
            if (d == rank_) cma_to_[static_cast<std::size_t>(r)] = readable;
        }
        if (r == 0 && !ok) {
            unmap();
            throw error(errc::invalid_argument,
                        rank_ == 0 ? why
                                   : fmt::format("rank 0 could not set up shared memory: {}", why));
        }
    }
    note_single_copy();

    // 3: the others map it; then rank 0 removes the name.
    if (rank_ != 0) {
        try {
            int fd = shm_open(segment_name_.c_str(), O_RDWR, 0);
            if (fd < 0)
                throw error(errc::invalid_argument,
                            fmt::format("cannot open shared-memory segment {}: {}", segment_name_,
                                        errno_text(errno)));
            struct stat st {};
            int e = fstat(fd, &st) == 0 ? 0 : errno;
            if (e == 0 && static_cast<std::size_t>(st.st_size) != geo_.total()) e = EINVAL;
            if (e == 0) {
                base_ = mmap(nullptr, geo_.total(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                if (base_ == MAP_FAILED) {
                    base_ = nullptr;
                    e = errno;
                }
            }
            close(fd);
            if (e == EINVAL)
                throw error(errc::invalid_argument,
                            fmt::format("shared-memory segment {} has {} bytes where this rank "
                                        "expected {}: do all ranks pass the same shm options?",
                                        segment_name_, st.st_size, geo_.total()));
            if (e != 0)
                throw error(errc::invalid_argument,
                            fmt::format("cannot map shared-memory segment {}: {}", segment_name_,
                                        errno_text(e)));
            mapped_bytes_ = geo_.total();
            auto* h = reinterpret_cast<segment_header*>(base_);
            if (load_acquire(h->magic) != segment_magic || h->ranks != geo_.ranks ||
                h->cell_bytes != geo_.cell_bytes || h->depth != geo_.depth)
                throw error(errc::invalid_argument,
                            fmt::format("shared-memory segment {} was laid out for {} ranks, {} "
                                        "cells of {} bytes; this rank expected {}, {} of {}",
                                        segment_name_, h->ranks, h->depth, h->cell_bytes,
                                        geo_.ranks, geo_.depth, geo_.cell_bytes));
        } catch (const std::exception& e) {
            failure = e.what();
            unmap();
        }
    }
    blob_writer opened;
    opened.put<std::uint8_t>(failure.empty() ? 1 : 0);
    opened.put(failure);
    auto opens = boot.all_gather(opened.bytes());
    if (created.armed) shm_unlink(segment_name_.c_str());
    created.armed = false;
    for (int r = 0; r < size_; ++r) {
        blob_reader in(opens[static_cast<std::size_t>(r)], r);
        bool ok = in.get<std::uint8_t>() != 0;
        auto why = in.get_string();
        if (!ok) {
            unmap();
            throw error(
                errc::invalid_argument,
                r == rank_ ? why : fmt::format("rank {} could not map shared memory: {}", r, why));
        }
    }
    agree_link_figures(boot);
}

// 4: how far apart the ranks' cores are (options::line_ns), how slowly
// process_vm_readv copies (options::readv_percent), and how many ranks each
// core runs. Every rank takes rank 0's figures, so that selection, which
// reads them, chooses alike on all (ranks bound differently could count
// the cores differently), and so that every rank's messages take the same
// paths.
void endpoint::agree_link_figures(bootstrap& boot) {
    // Where ranks share cores, a bounce or a timed copy measures the scheduler.
    const bool measure = size_ > 1 && !cores_shared_;
    line_figure line;
    if (opts_.line_ns)
        line.ns = *opts_.line_ns;
    else if (measure)
        line = measure_line_ns();
    // A pair past every rank: whoever still waits for its turn (told nothing
    // while rank 0 was given the figure, or behind a pair that did not
    // answer) goes on.
    if (rank_ == 0)
        std::atomic_ref(block(0).line_probe)
            .store(static_cast<std::uint64_t>(size_) << 32, std::memory_order_release);
    std::uint32_t readv = opts_.readv_percent.value_or(0);
    if (measure && rank_ == 0) {
        if (!opts_.readv_percent && opts_.use_cma) readv = measure_readv_percent(line.slowest_peer);
        std::atomic_ref(block(0).copy_probe).store(copy_probe_done, std::memory_order_release);
    } else if (measure) {
        answer_copy_probe();
    } else if (cores_shared_ && rank_ == 0 && !opts_.readv_percent && opts_.use_cma) {
        readv = measure_own_readv_percent();
    }
    blob_writer figure;
    figure.put<std::uint32_t>(line.ns);
    figure.put<std::uint32_t>(readv);
    figure.put<std::uint32_t>(line.direct_ns);
    figure.put<std::uint32_t>(static_cast<std::uint32_t>(ranks_per_core(size_)));
    auto figures = boot.all_gather(figure.bytes());
    blob_reader rank0(figures.at(0), 0);
    line_ns_ = rank0.get<std::uint32_t>();
    readv_percent_ = rank0.get<std::uint32_t>();
    direct_line_ns_ = rank0.get<std::uint32_t>();
    ranks_per_core_ = rank0.get<std::uint32_t>();
    if (direct_line_ns_ && !direct_lines_can_pay(direct_line_ns_, line_ns_))
        adaptive_lines_ = false;
}

// Rank 0 and each other rank in turn bounce a counter between their probe
// words: rank 0 writes round k on its line, the peer waits for it and then
// writes k on its own, which rank 0 waits for. A round is a round trip, two
// transfers one after the other, where benchmarks/line_bounce's threads
// both write first and overlap theirs: this reads twice its figure (110
// and 450 ns here against 55 and 250). Where one-line messages may go by
// direct stores (adaptive_lines_), the pair then bounces as many rounds
// with each line stored directly (MOVDIR64B), on the first cell of its
// rings to each other; round last_round + 1 on rank 0's word tells the peer
// so. Rank 0 returns the slowest pair's ns per round (each pair's quickest
// of a few windows, which a preemption cannot make quicker), that pair's
// peer and its direct figure, or 0 ns if any pair did not answer in time
// (agree_link_figures then lets the others go); the others return 0 ns.
// Bounded: a peer that does not answer costs rank 0 20 ms, and a rank whose
// turn does not come gives up.
endpoint::line_figure endpoint::measure_line_ns() {
    using clock = std::chrono::steady_clock;
    constexpr std::uint32_t warmup_rounds = 128, window_rounds = 128, windows = 4;
    constexpr std::uint32_t last_round = warmup_rounds + windows * window_rounds;
    constexpr std::uint32_t direct_rounds_follow = last_round + 1;
    constexpr std::uint64_t round_bits = 0xffffffff; // of rank 0's word
    if (size_ == 1) return {};
    const auto probe = [this](int r) { return std::atomic_ref(block(r).line_probe); };
    const auto direct_word = [this](int from, int to) {
        return std::atomic_ref(*reinterpret_cast<std::uint64_t*>(direct_probe_line(from, to)));
    };
    // Round k stored directly on the line `from` bounces to `to`.
    const auto store_direct = [this](int from, int to, std::uint64_t k) {
        alignas(line) std::array<std::uint64_t, line / sizeof(std::uint64_t)> whole{};
        whole[0] = k;
        store_line_directly(direct_probe_line(from, to), whole.data());
    };
    if (rank_ != 0) {
        // The pairs before ours take ~30 us each, 20 ms if a peer is gone.
        const auto turn_limit = std::chrono::milliseconds(50 + 25 * rank_);
        const auto me = static_cast<std::uint64_t>(rank_);
        for (std::uint32_t k = 1; k <= direct_rounds_follow; ++k) {
            bool ours = false;
            const bool answered = spin_until(
                [&] {
                    const auto v = probe(0).load(std::memory_order_acquire);
                    ours = (v >> 32) == me && (v & round_bits) >= k;
                    return ours || (v >> 32) > me; // or rank 0 has gone past us
                },
                k == 1 ? clock::duration(turn_limit) : std::chrono::milliseconds(50));
            if (!answered || !ours) return {};
            if (k == direct_rounds_follow) break;
            probe(rank_).store(k, std::memory_order_release);
        }
        for (std::uint32_t k = 1; k <= last_round; ++k) {
            if (!spin_until(
                    [&] { return direct_word(0, rank_).load(std::memory_order_acquire) >= k; },
                    std::chrono::milliseconds(50)))
                return {};
            store_direct(rank_, 0, k);
        }
        return {};
    }
    // Rank 0's side of one pair's bounce: ns per round (the quickest
    // window's), 0 if the peer did not answer in time.
    const auto bounce = [&](int peer, auto write, auto answered_by) -> std::uint32_t {
        clock::duration quickest = clock::duration::max();
        auto window_start = clock::now();
        for (std::uint32_t k = 1; k <= last_round; ++k) {
            write(k);
            if (!spin_until([&] { return answered_by() >= k; },
                            std::chrono::milliseconds(k == 1 ? 20 : 5))) {
                debug("rank {} did not answer the line bounce in time: line_ns unknown", peer);
                return 0;
            }
            if (k >= warmup_rounds && (k - warmup_rounds) % window_rounds == 0) {
                const auto now = clock::now();
                if (k > warmup_rounds) quickest = std::min(quickest, now - window_start);
                window_start = now;
            }
        }
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(quickest).count();
        return static_cast<std::uint32_t>(
            std::max<std::int64_t>(1, (ns + window_rounds / 2) / window_rounds));
    };
    line_figure slowest{};
    for (int peer = 1; peer < size_; ++peer) {
        const auto pair = static_cast<std::uint64_t>(peer) << 32;
        const auto ns = bounce(
            peer, [&](std::uint32_t k) { probe(0).store(pair | k, std::memory_order_release); },
            [&] { return probe(peer).load(std::memory_order_acquire); });
        if (ns == 0) return {};
        std::uint32_t direct_ns = 0;
        if (adaptive_lines_) {
            probe(0).store(pair | direct_rounds_follow, std::memory_order_release);
            direct_ns = bounce(
                peer, [&](std::uint32_t k) { store_direct(0, peer, k); },
                [&] { return direct_word(peer, 0).load(std::memory_order_acquire); });
            // The rings' first cells as they were (the peer wrote its last).
            std::memset(direct_probe_line(0, peer), 0, line);
            std::memset(direct_probe_line(peer, 0), 0, line);
            if (direct_ns == 0) return {};
        }
        if (ns > slowest.ns) slowest = {ns, peer, direct_ns};
    }
    return slowest;
}

// Rank 0 and `peer` time the two ways a private buffer its owner has just
// written can travel. Each round the peer writes its buffer (ordinary
// stores: the lines are then in its cache, as an application's fresh data).
// Odd rounds: rank 0 reads it by process_vm_readv. Even rounds: the peer
// copies it into its cells to rank 0 with streaming stores, timing that,
// and rank 0 copies them out. The cells' time is the slower of those two
// copies (in a message they overlap), per byte; rank 0 returns
// process_vm_readv's time per byte as a percentage of it, each copy's
// quickest round counting (a preemption cannot make a copy quicker), or 0
// if the peer did not answer in time or could not be read. The cells are
// unused until setup ends (the peer clears them after). Bounded like
// measure_line_ns.
std::uint32_t endpoint::measure_readv_percent(int peer) {
    using clock = std::chrono::steady_clock;
    // Rounds of each copy, of which the first warm_rounds are not counted:
    // the copies out of the cells still got quicker over them (35-40 us for
    // 256 KiB after 8 rounds, 24 us after 24). Each copy's figure is the
    // median of the rest, not the minimum: the cells' stores now and then
    // took two thirds of their usual time in one round, and the quickest of
    // 24 rounds then put the probe at 150-170 % on a machine that otherwise
    // read 96-120 % (the quickest of 8: 76-128 %, across the 125 % that
    // cells_readv_percent was then in 2 of 55 setups; fifty-first session,
    // docs/performance.md).
    constexpr std::uint64_t rounds = 24, warm_rounds = 8;
    const std::size_t cell_bytes = copy_probe_cell_bytes();
    std::vector<std::byte> into(copy_probe_bytes, std::byte{1}); // no page faults timed
    std::byte* cells = ring(peer, 0) + line;
    auto& theirs = block(peer);
    std::vector<double> readv_ns, load_ns, store_ns;
    std::uint32_t percent = 0;
    const auto began = clock::now();
    for (std::uint64_t k = 1; k <= 2 * rounds; ++k) {
        std::atomic_ref(block(0).copy_probe)
            .store(static_cast<std::uint64_t>(peer) << 32 | k, std::memory_order_release);
        if (!spin_until(
                [&] {
                    return std::atomic_ref(theirs.copy_probe).load(std::memory_order_acquire) >= k;
                },
                std::chrono::milliseconds(k <= 2 ? 50 : 20))) { // first touches fault
            debug("rank {} did not answer the copy probe in time: readv_percent unknown", peer);
            break;
        }
        const bool counted = (k + 1) / 2 > warm_rounds;
        const auto start = clock::now();
        if (k % 2) {
            const int e =
                cma_copy(pids_[static_cast<std::size_t>(peer)], into, theirs.copy_probe_buffer);
            if (e != 0) {
                debug("rank 0 cannot read rank {} by process_vm_readv: {}; readv_percent unknown",
                      peer, errno_text(e));
                break;
            }
            if (counted) readv_ns.push_back(nanoseconds_since(start));
        } else {
            copy_bytes(into.data(), cells, cell_bytes);
            if (counted) {
                load_ns.push_back(nanoseconds_since(start));
                store_ns.push_back(static_cast<double>(theirs.copy_probe_store_ns));
            }
        }
        if (k == 2 * rounds) {
            const double readv = median_of(readv_ns), load = median_of(load_ns),
                         store = median_of(store_ns);
            percent = readv_percent_of(readv, store, load, cell_bytes);
            debug("copy probe with rank {}: process_vm_readv {:.0f} ns for {} bytes; the cells "
                  "{:.0f} ns to store and {:.0f} ns to copy out for {} bytes (medians of {} "
                  "rounds): {} % ({:.0f} us in all)",
                  peer, readv, copy_probe_bytes, store, load, cell_bytes, rounds - warm_rounds,
                  percent, nanoseconds_since(began) / 1000);
        }
    }
    return percent;
}

// The copy probe where ranks share cores, which measure_readv_percent's
// timing against a peer cannot be (a round would time the scheduler): rank 0
// alone, in its own memory, takes both stages of the cells as that probe
// does (streaming stores into a cell's worth of bytes, the copy out of them
// from memory) and process_vm_readv of freshly written bytes of its own, the
// median of each over the same rounds. No peer, so a preemption only slows a
// round, which the median leaves out. Its own bytes sit in its own cache
// where the probe's peer's sat in the peer's, so it reads below that probe
// if anything: on the Zen 3 VM of the fifty-eighth session (docs/
// performance.md) 168-190 % where the peer probe read 202-219 %.
std::uint32_t endpoint::measure_own_readv_percent() const {
    constexpr int rounds = 24, warm_rounds = 8;
    const std::size_t cell_bytes = copy_probe_cell_bytes();
    std::vector<std::byte> source(copy_probe_bytes, std::byte{1}), into(copy_probe_bytes),
        cells(cell_bytes, std::byte{1});
    std::vector<double> readv_ns, load_ns, store_ns;
    const auto timed = [](auto&& copy) {
        const auto start = std::chrono::steady_clock::now();
        copy();
        return nanoseconds_since(start);
    };
    const auto address = reinterpret_cast<std::uint64_t>(source.data());
    for (int k = 0; k < rounds; ++k) {
        std::memset(source.data(), k, source.size());
        int failed = 0;
        const double readv = timed([&] { failed = cma_copy(getpid(), into, address); });
        if (failed != 0) {
            debug("rank 0 cannot read its own memory by process_vm_readv: {}; readv_percent "
                  "unknown",
                  errno_text(failed));
            return 0;
        }
        const double store =
            timed([&] { copy_bytes_streaming(cells.data(), source.data(), cell_bytes); });
        const double load = timed([&] { copy_bytes(into.data(), cells.data(), cell_bytes); });
        if (k < warm_rounds) continue;
        readv_ns.push_back(readv);
        store_ns.push_back(store);
        load_ns.push_back(load);
    }
    const double readv = median_of(readv_ns), store = median_of(store_ns),
                 load = median_of(load_ns);
    const auto percent = readv_percent_of(readv, store, load, cell_bytes);
    debug("copy probe of rank 0's own memory (its ranks share cores): process_vm_readv {:.0f} ns "
          "for {} bytes; the cells {:.0f} ns to store and {:.0f} ns to copy out for {} bytes "
          "(medians of {} rounds): {} %",
          readv, copy_probe_bytes, store, load, cell_bytes, rounds - warm_rounds, percent);
    return percent;
}

// A rank other than 0, while rank 0 probes: answers the rounds addressed to
// it (measure_readv_percent) until rank 0 says the probe is over. Bounded:
// gives up if no round or end comes in time. Clears the cells it wrote, as
// they were: the ring's first message must not find a stamp there, and only
// this rank writes them (rank 0 may have given up on it mid-copy).
void endpoint::answer_copy_probe() {
    constexpr std::uint64_t round_bits = 0xffffffff;
    const auto me = static_cast<std::uint64_t>(rank_);
    auto& mine = block(rank_);
    std::byte* cells = ring(rank_, 0) + line;
    std::vector<std::byte> buffer;
    std::uint64_t answered = 0;
    // Rank 0 first bounces lines with the ranks after this one (~30 us each,
    // 20 ms if one is gone).
    std::chrono::steady_clock::duration limit = std::chrono::milliseconds(100 + 25 * size_);
    for (;;) {
        std::uint64_t v = 0;
        if (!spin_until(
                [&] {
                    v = std::atomic_ref(block(0).copy_probe).load(std::memory_order_acquire);
                    return v == copy_probe_done || ((v >> 32) == me && (v & round_bits) > answered);
                },
                limit) ||
            v == copy_probe_done) {
            if (!buffer.empty()) std::memset(cells, 0, copy_probe_cell_bytes());
            return;
        }
        const std::uint64_t k = v & round_bits;
        if (buffer.empty()) buffer.resize(copy_probe_bytes);
        // Fresh data either way: streaming lines rank 0 has just read took
        // up to twice as long here.
        std::memset(buffer.data(), static_cast<int>(k), buffer.size());
        if (k % 2) {
            mine.copy_probe_buffer = reinterpret_cast<std::uintptr_t>(buffer.data());
        } else {
            const auto start = std::chrono::steady_clock::now();
            copy_bytes_streaming(cells, buffer.data(), copy_probe_cell_bytes());
            mine.copy_probe_store_ns = static_cast<std::uint64_t>(nanoseconds_since(start));
        }
        std::atomic_ref(mine.copy_probe).store(k, std::memory_order_release);
        answered = k;
        limit = std::chrono::milliseconds(50);
    }
}

endpoint::~endpoint() {
    if (base_) {
        // Acks still queued would leave their senders waiting: send what fits.
        // (Data sends are not continued: their buffers may be gone by now.)
        for (int dest = 0; dest < size_; ++dest) {
            auto& o = out_[static_cast<std::size_t>(dest)];
            if (lost_[static_cast<std::size_t>(dest)] || o.control.empty()) continue;
            while (!o.control.empty() && has_space(dest)) {
                write_cell(dest, o.control.front(), nullptr);
                o.control.pop_front();
            }
            ring_bell(dest);
        }
        std::atomic_ref(block(rank_).closed).store(1, std::memory_order_release);
    }
    fail_all(std::make_exception_ptr(
        error(errc::peer_lost,
              fmt::format(
                  "the shared-memory transport of rank {} was shut down with this request pending",
                  rank_))));
    for (auto& p : pidfds_)
        if (p.fd >= 0) close(p.fd);
    for (auto& in : in_)
        for (auto& m : in.mappings)
            munmap(const_cast<std::byte*>(m.base), m.bytes);
    if (base_) munmap(base_, mapped_bytes_);
}

cell_header header_cell(const message_header& m, cell_type type) {
    cell_header h;
    h.communicator = m.key.communicator;
    h.generation = m.key.generation;
    h.step = m.key.step;
    h.source = m.key.source;
    h.kind = m.kind;
    h.algorithm = m.algorithm;
    h.type = type;
    return h;
}

message_header message_of(const cell_header& h) {
    message_header m;
    m.key = {h.communicator, h.generation, h.step, h.source};
    m.kind = h.kind;
    m.algorithm = h.algorithm;
    m.bytes = h.total;
    return m;
}

void endpoint::outside_the_world(int dest) const {
    throw error(errc::invalid_argument,
                fmt::format("send to rank {} outside the world of {}", dest, size_));
}

// Most messages: one cell, nothing queued ahead of it, room in the ring. It
// is written now and the send is complete before it returns, with no queue
// entry and no request of its own.
bool endpoint::write_now(int dest, const message_header& header, std::span<const std::byte> data) {
    auto& o = out_[static_cast<std::size_t>(dest)];
    if (data.size() > payload_capacity() || !o.sends.empty() || !o.control.empty() ||
        !has_space(dest))
        return false;
    auto h = header_cell(header, data.size() <= small_bytes ? cell_type::small : cell_type::data);
    h.total = data.size();
    h.length = static_cast<std::uint32_t>(data.size());
    write_cell(dest, h, data.data());
    ++counters_.eager;
    ++counters_.message_cells;
    // No fence: the sender goes on while its cell drains. A fence here made
    // an exchange's ranks leave together, but per whole iteration of the
    // benchmark (its barrier and the call) it cost the exchanges 0.03–0.09
    // µs and gained the rooted calls nothing: it only moved their time into
    // the barrier (docs/performance.md, eighteenth session).
    ring_bell(dest);
    return true;
}

bool endpoint::try_send(int dest, const message_header& header, std::span<const std::byte> data) {
    check_destination(dest);
    if (dest == rank_) {
        mailbox_.deliver(header, data);
        return true;
    }
    const auto d = static_cast<std::size_t>(dest);
    // A lost peer's failure, and a message that may go by single copy, are
    // isend's (or isend_awaited_at_end's) to handle.
    if (lost_[d] || (data.size() >= opts_.mapped_threshold && map_to_[d]) ||
        (data.size() >= single_copy_from_ && cma_to(dest)))
        return false;
    return write_now(dest, header, data);
}

// The bytes of each data cell of a message to dest (options::pipeline_piece).
// Asked only for a message queued for the cells: one that fits a cell went
// at once (write_now), and only longer ones are cut.
std::size_t endpoint::piece_for(int dest, const message_header& header, std::size_t bytes) const {
    const std::size_t whole = payload_capacity();
    if (!pipeline_cells_ || bytes <= whole || bytes > 4 * whole || opts_.pipeline_piece >= whole)
        return whole;
    return exchanging_with(dest, header) ? whole : opts_.pipeline_piece;
}

// isend, with messages of cma_from bytes or more read by single copy.
request endpoint::send(int dest, const message_header& header, std::span<const std::byte> data,
                       std::size_t cma_from) {
    check_destination(dest);
    if (dest == rank_) {
        mailbox_.deliver(header, data);
        return completed_request();
    }
    if (lost_[static_cast<std::size_t>(dest)]) {
        auto done = make_request();
        done->complete(std::make_exception_ptr(
            error(errc::peer_lost, fmt::format("rank {} (pid {}) exited; cannot send to it", dest,
                                               pids_[static_cast<std::size_t>(dest)]))));
        return done;
    }
    // A shared send buffer is read by the receiver through its own mapping.
    // Where ranks share cores, only from the size at which a send of its
    // kind goes by single copy anyway (cma_from): the sender waits for the
    // receiver's acknowledgement, and until then holds up its own next step
    // (a chain's hop: 8 ranks, 64-128 KiB exscan 0.33-0.38 of the time by
    // the cells), where the cells would have let it go at once
    // (docs/performance.md, forty-eighth session).
    const std::size_t mapped_from =
        cores_shared_ ? std::max(opts_.mapped_threshold, cma_from) : opts_.mapped_threshold;
    std::optional<shared_region_ref> region;
    if (data.size() >= mapped_from && map_to_[static_cast<std::size_t>(dest)])
        region = find_shared_region(data.data(), data.size());
    const bool cma =
        !region && cma_to(dest) && data.size() >= cma_from &&
        (data.size() < cells_from_ || !in_cells_by_the_rule(dest, header, data.size()));
    if (!cma && !region && write_now(dest, header, data)) return completed_request();
    auto done = make_request();
    const std::size_t piece =
        cma || region ? payload_capacity() : piece_for(dest, header, data.size());
    out_[static_cast<std::size_t>(dest)].sends.push_back(
        {header, data, done, 0, cma, region, piece});
    if (out_[static_cast<std::size_t>(dest)].sends.size() == 1) pump(dest);
    return done;
}

bool endpoint::has_space(int dest) {
    auto& o = out_[static_cast<std::size_t>(dest)];
    if (o.head - o.cached_tail < geo_.depth) return true;
    o.cached_tail = load_acquire(tail_in(o.ring));
    return o.head - o.cached_tail < geo_.depth;
}

// options::stores::adaptive: cells shorter than this are not timed (the two
// kinds of stores cost alike there), and of longer ones one in
// cells_per_timing, each until its stores are done (a full fence). Of the
// timed cells one in timings_per_probe is written by streaming stores
// instead, a probe of the other way to the same receiver under the same
// conditions; an ordinary cell is slow where it took streaming_faster_by
// times as long per byte as the last probe, and two slow in a row switch so
// many cells to streaming stores before timing starts again. The margin is
// for the receiver, which reads streamed lines from memory rather than from
// the sender's cache. Measured here (thirty-eighth session), ns per byte:
// in the slow mode (a line ~320 ns there and back) ordinary 0.15-0.25,
// streamed 0.045, and streaming made the 16-128 KiB calls 1.6-2 times as
// quick; in the quick mode (~80 ns) ordinary 0.029-0.042, streamed
// 0.015-0.022, and streaming made them 1.3-1.9 times as slow. A margin of
// 2 switched in the quick mode too, and so did 3 now and then (the 4-32
// KiB reduce and all_reduce 1.5-1.7 times as slow there). So a cell is slow
// only where it also took more than slow_cell_ns_per_byte: 2.4 times the
// quick mode's slowest tenth, two thirds of the slow mode's quickest. The
// fixed threshold before (0.25 ns per byte, from an older machine's 0.25-1
// in its slow mode and 0.016-0.125 in its quick one) never switched here.
constexpr std::size_t timed_cell_bytes = 4096;
constexpr std::uint8_t cells_per_timing = 4;
constexpr std::uint32_t timings_per_probe = 16;
constexpr double streaming_faster_by = 3;
constexpr double slow_cell_ns_per_byte = 0.1;
constexpr std::uint32_t streamed_cells_between_timings = 1024;

void endpoint::copy_into_cell(peer_out& o, std::byte* to, const std::byte* from,
                              std::size_t bytes) {
    using stores = options::stores;
    const bool stream = opts_.cell_stores == stores::streaming ||
                        (opts_.cell_stores == stores::adaptive && o.cells.other_left > 0);
    if (stream) {
        o.cells.took_other();
        copy_bytes_streaming(to, from, bytes);
        ++counters_.streamed_cells;
        return;
    }
    // The first lap of a ring writes pages never touched before: their faults
    // would read as a far core.
    if (opts_.cell_stores == stores::cached || bytes < timed_cell_bytes || o.head < geo_.depth ||
        !o.cells.time_this_one()) {
        copy_bytes(to, from, bytes);
        return;
    }
    const bool probe = o.timings_to_probe-- == 0;
    const auto start = std::chrono::steady_clock::now();
    if (probe) {
        copy_bytes_streaming(to, from, bytes); // fenced
        ++counters_.streamed_cells;
    } else {
        copy_bytes(to, from, bytes);
        std::atomic_thread_fence(std::memory_order_seq_cst);
    }
    const double ns_per_byte =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
        static_cast<double>(bytes);
    if (probe) {
        o.streamed_ns_per_byte = ns_per_byte;
        o.timings_to_probe = timings_per_probe - 1;
        o.cells.until_timing = cells_per_timing - 1;
        return;
    }
    o.cells.timed(o.streamed_ns_per_byte > 0 && ns_per_byte > slow_cell_ns_per_byte &&
                      ns_per_byte > streaming_faster_by * o.streamed_ns_per_byte,
                  cells_per_timing, streamed_cells_between_timings);
}

void endpoint::write_cell(int dest, const cell_header& h, const std::byte* payload) {
    auto& o = out_[static_cast<std::size_t>(dest)];
    std::byte* c = cell_of(o.ring, o.head);
    if (h.type == cell_type::small) {
        write_one_line(o, c, h, payload);
        ++o.head;
        return;
    }
    if (h.type == cell_type::data && h.length)
        copy_into_cell(o, c + sizeof h, payload, h.length);
    else if (h.type == cell_type::mapped && h.length)
        copy_bytes(c + sizeof h, payload, h.length);
    std::memcpy(c, &h, stamp_offset);
    std::memcpy(c + small_offset, &h.offset, small_bytes);
    stamp_in(c).store(stamp_of(o.head), std::memory_order_release);
    ++o.head;
}

// options::line_stores::adaptive. Timed lines (two clock reads included)
// read 140-200 ns in this machine's slow mode and 40-100 in its quick one
// (thirty-seventh session). A line written by direct stores is fetched from
// memory by its receiver, so an ordinary store timed among direct ones finds
// no far copy to take back and reads quick whatever the mode: the direct
// stores stop after a while instead, and the ordinary ones are timed again
// once the ring has gone round.
constexpr std::uint32_t lines_per_timing = 64;
constexpr auto slow_line = std::chrono::nanoseconds(120);
constexpr std::uint32_t direct_lines_between_timings = 4096;

// A message of one line: its header, payload and stamp.
void endpoint::write_one_line(peer_out& o, std::byte* c, const cell_header& h,
                              const std::byte* payload) {
    if (opts_.one_line_stores == options::line_stores::direct || o.lines.other_left > 0) {
        if (o.lines.took_other()) o.lines.until_timing = static_cast<std::uint32_t>(geo_.depth);
        alignas(line) cell_header whole = h;
        whole.stamp = stamp_of(o.head);
        if (h.length) std::memcpy(&whole.offset, payload, h.length);
        store_line_directly(c, &whole);
        ++counters_.direct_lines;
        return;
    }
    // The first lap of a ring writes pages never touched before: their
    // faults would read as a far core.
    const bool timed = adaptive_lines_ && o.head >= geo_.depth && o.lines.time_this_one();
    std::chrono::steady_clock::time_point start;
    if (timed) start = std::chrono::steady_clock::now();
    std::memcpy(c, &h, stamp_offset);
    if (h.length) std::memcpy(c + small_offset, payload, h.length);
    stamp_in(c).store(stamp_of(o.head), std::memory_order_release);
    if (!timed) return;
    // Waits until the stores are done: until the line, which the receiver
    // polls, has come over to this core.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    o.lines.timed(std::chrono::steady_clock::now() - start > slow_line, lines_per_timing,
                  direct_lines_between_timings);
}

// Wakes `peer` if it sleeps. The fence orders our ring writes before reading
// its flag, against its flag write before reading our rings (await_activity).
void endpoint::ring_bell(int peer) {
    sender_fence(asymmetric_fences_);
    auto& b = block(peer);
    if (std::atomic_ref(b.sleeping).load(std::memory_order_relaxed) == 0) return;
    std::atomic_ref(b.bell).fetch_add(1, std::memory_order_release);
    futex(&b.bell, FUTEX_WAKE, INT_MAX, nullptr);
}

std::size_t endpoint::pump(int dest) {
    auto& o = out_[static_cast<std::size_t>(dest)];
    std::size_t cells = 0;
    while (!o.control.empty() && has_space(dest)) {
        write_cell(dest, o.control.front(), nullptr);
        o.control.pop_front();
        ++cells;
    }
    const std::size_t capacity = payload_capacity();
    while (o.control.empty() && !o.sends.empty()) {
        auto& s = o.sends.front();
        if (!has_space(dest)) break;
        if (s.cma || s.region) {
            auto h = header_cell(s.header, s.region ? cell_type::mapped : cell_type::rendezvous);
            h.total = s.data.size();
            // The address too: a receiver that cannot map reads it by CMA.
            h.offset = reinterpret_cast<std::uintptr_t>(s.data.data());
            h.token = next_token_++;
            mapped_source m;
            if (s.region) {
                m = {s.region->id, s.region->region_bytes, s.region->offset, s.region->fd, 0};
                h.length = sizeof m;
            }
            write_cell(dest, h, reinterpret_cast<const std::byte*>(&m));
            ++cells;
            awaiting_ack_.emplace(h.token, std::make_pair(dest, std::move(s)));
            o.sends.pop_front();
            continue;
        }
        // Data cells, as many as the ring takes; the receiver copies the
        // first while we write the next. A message that fits the header line
        // travels in it, as write_now writes it.
        bool finished = false;
        const auto type = s.data.size() <= small_bytes ? cell_type::small : cell_type::data;
        do {
            auto h = header_cell(s.header, type);
            h.total = s.data.size();
            h.offset = s.offset;
            h.length =
                static_cast<std::uint32_t>(std::min<std::uint64_t>(s.piece, h.total - s.offset));
            write_cell(dest, h, s.data.data() + s.offset);
            ++cells;
            ++counters_.message_cells;
            s.offset += h.length;
            finished = s.offset >= h.total;
        } while (!finished && has_space(dest));
        if (!finished) break;
        ++(s.data.size() <= capacity ? counters_.eager : counters_.chunked);
        s.done->complete();
        o.sends.pop_front();
    }
    if (cells) ring_bell(dest);
    return cells;
}

std::size_t endpoint::drain(int src) {
    auto& in = in_[static_cast<std::size_t>(src)];
    std::size_t cells = 0;
    // At most one ring's worth, so one busy peer cannot starve the others.
    for (; cells < geo_.depth; ++cells) {
        std::byte* c = cell_of(in.ring, in.tail);
        if (stamp_in(c).load(std::memory_order_acquire) != stamp_of(in.tail)) {
            for (std::size_t l = 1; l <= in.prefetch_lines; ++l)
                __builtin_prefetch(c + l * line, 0, 3);
            break;
        }
        cell_header h;
        std::memcpy(&h, c, sizeof h);
        prefetch_arrived_payload(c, h);
        expect_next_like(in, h);
        switch (h.type) {
        case cell_type::small:
            h.offset = 0;
            handle_data(src, h, c + small_offset);
            break;
        case cell_type::data:
            handle_data(src, h, c + sizeof h);
            break;
        case cell_type::rendezvous:
        case cell_type::mapped:
            handle_rendezvous(src, h, c + sizeof h);
            break;
        case cell_type::ack:
        case cell_type::nack:
        case cell_type::via_cells:
            handle_answer(src, h);
            break;
        case cell_type::share:
            handle_share(src, h);
            break;
        }
        store_release(tail_in(in.ring), ++in.tail);
    }
    // The sender may sleep waiting for room in this ring.
    if (cells) ring_bell(src);
    return cells;
}

// A polled receive's usual find: its message is the next cell of its
// source's ring (a peer exchanging with this rank wrote it a moment ago). It
// is read straight from the cell into the receive, as drain() would consume
// it, without the round of progress() and the mailbox's delivery between:
// that path lies between a message arriving and the receiver's next one
// leaving, and the 2-rank 8-byte calls took 4-17 % less time without it
// (docs/performance.md, sixtieth session). Anything else at the head
// (another message, one that does not fit, a longer one) is left to
// progress(), which keeps its order and reports a mismatch.
bool endpoint::take_awaited_at_head(const message_header& expected, std::span<std::byte> into) {
    const int src = expected.key.source;
    if (src < 0 || src >= size_ || src == rank_ || !reserved_.empty()) return false;
    auto& in = in_[static_cast<std::size_t>(src)];
    std::byte* c = cell_of(in.ring, in.tail);
    if (stamp_in(c).load(std::memory_order_acquire) != stamp_of(in.tail)) return false;
    cell_header h;
    std::memcpy(&h, c, sizeof h);
    const bool small = h.type == cell_type::small;
    const bool whole = small || (h.type == cell_type::data && h.offset == 0);
    const auto arrived = message_of(h);
    if (!whole || h.length != h.total || !(arrived.key == expected.key) ||
        !fits(expected, arrived, false) || arrived.bytes != into.size())
        return false;
    prefetch_arrived_payload(c, h);
    expect_next_like(in, h);
    if (small) {
        if (h.length) std::memcpy(into.data(), c + small_offset, h.length);
    } else {
        copy_bytes(into.data(), c + sizeof h, h.length);
    }
    store_release(tail_in(in.ring), ++in.tail);
    // The sender may sleep waiting for room in this ring.
    ring_bell(src);
    return true;
}

// The first lines of a data cell's payload, asked for all at once before the
// copy that reads them in order. They come from the sender's cache, or from
// memory where it streamed them, and the copy alone keeps only a few misses
// in flight until the hardware prefetcher has seen the stream: the 2-rank
// calls of 4-64 KiB took 0.77-0.96 of the time in the slow mode (a line
// ~255 ns), about as long in the quick one. Below 4 KiB it gained nothing; prefetching a
// whole 32 KiB cell made the 256 KiB-1 MiB calls, streams of full cells,
// 3-15 % slower, while 8 KiB of it keeps them level
// (docs/performance.md, sixty-fourth session).
constexpr std::size_t prefetch_arrived_from = 4096;
constexpr std::size_t prefetch_arrived_head = 8192;

void endpoint::prefetch_arrived_payload(const std::byte* cell, const cell_header& h) const {
    if (h.type != cell_type::data || h.length < prefetch_arrived_from) return;
    const std::size_t bytes =
        std::min({std::size_t{h.length}, payload_capacity(), prefetch_arrived_head});
    for (std::size_t at = sizeof h; at < sizeof h + bytes; at += line)
        __builtin_prefetch(cell + at, 0, 3);
}

// options::prefetch_bytes. Message sizes repeat, so the next cell is taken
// to be like the last message of one cell, which one-line cells between (a
// barrier's, say) do not change; only after many in a row is it forgotten.
// Called for each cell read (`h`), which counts the guess made for it.
constexpr std::uint32_t one_line_cells_to_forget = 64;

void endpoint::expect_next_like(peer_in& in, const cell_header& h) {
    if (in.prefetch_lines) ++counters_.prefetch_guesses;
    if (h.type != cell_type::data) {
        if (in.prefetch_lines && ++in.one_line_cells >= one_line_cells_to_forget)
            in.prefetch_lines = 0;
        return;
    }
    in.one_line_cells = 0;
    const bool one_cell = h.offset == 0 && h.length == h.total;
    in.prefetch_lines = one_cell && h.length <= opts_.prefetch_bytes
                            ? static_cast<std::uint32_t>(round_up(h.length, line) / line)
                            : 0;
}

void endpoint::handle_data(int src, const cell_header& h, const std::byte* payload) {
    const auto m = message_of(h);
    // A message in one cell goes straight to the mailbox, unless its receive
    // was already claimed for a single copy that failed.
    if (h.offset == 0 && h.length == h.total && reserved_.empty()) {
        mailbox_.deliver(m, std::span(payload, h.length));
        return;
    }
    auto& p = in_[static_cast<std::size_t>(src)].incoming;
    if (h.offset == 0) {
        p = partial{};
        p.active = true;
        p.header = m;
        auto found = std::find_if(reserved_.begin(), reserved_.end(), [&](const reserved& r) {
            return r.source == src && r.key == m.key;
        });
        if (found != reserved_.end()) {
            p.claimed = found->receive;
            reserved_.erase(found);
        } else {
            p.claimed = mailbox_.claim(m);
        }
        p.into = mailbox::landing(p.claimed, h.total, p.staging);
    }
    if (!p.active || !(p.header.key == m.key) || h.offset + h.length > h.total) return;
    if (p.claimed && p.claimed->observer) {
        p.claimed->observer->take(h.offset, std::span(payload, h.length));
    } else {
        const bool streamed =
            p.claimed && !p.claimed->combined_at_once && streams_into_receive(h.total);
        copy_block(p.into.data() + h.offset, payload, h.length, streamed);
        counters_.streamed_out_cells += streamed ? 1 : 0;
    }
    p.received += h.length;
    if (p.received < h.total) return;
    mailbox_.land(m, p.claimed, p.staging);
    p = partial{};
}

void endpoint::handle_rendezvous(int src, const cell_header& h, const std::byte* payload) {
    rendezvous r{src, message_of(h), h.offset, h.token, std::chrono::steady_clock::now(), {}};
    if (h.type == cell_type::mapped && h.length == sizeof(mapped_source)) {
        mapped_source m;
        std::memcpy(&m, payload, sizeof m);
        r.region = m;
    }
    if (!single_copy(r, false)) unclaimed_.push_back(r);
}

// Our mapping of region m of rank src, made on first use and kept (up to
// max_cached_mappings per peer); nullptr if the region cannot be mapped.
const std::byte* endpoint::mapping_of(int src, const mapped_source& m) {
    auto& in = in_[static_cast<std::size_t>(src)];
    if (!in.can_map) return nullptr;
    ++mapping_clock_;
    for (auto& known : in.mappings)
        if (known.region == m.region) {
            known.last_use = mapping_clock_;
            return known.base;
        }
    const int pidfd = pidfds_[static_cast<std::size_t>(src)].fd;
    const int fd = pidfd < 0 ? -1 : static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, m.fd, 0));
    void* base = MAP_FAILED;
    int e = fd < 0 ? (pidfd < 0 ? ENOSYS : errno) : 0;
    if (fd >= 0) {
        // Populated now: faulting the pages in one by one during the copy
        // costs more than the copy.
        base = mmap(nullptr, m.region_bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
        if (base == MAP_FAILED) e = errno;
        close(fd);
    }
    if (base == MAP_FAILED) {
        debug("rank {} cannot map rank {}'s shared memory ({}); reading it by CMA from now on",
              rank_, src, errno_text(e));
        in.can_map = false;
        return nullptr;
    }
    if (in.mappings.size() >= opts_.max_cached_mappings) {
        auto oldest = std::min_element(
            in.mappings.begin(), in.mappings.end(),
            [](const peer_mapping& a, const peer_mapping& b) { return a.last_use < b.last_use; });
        munmap(const_cast<std::byte*>(oldest->base), oldest->bytes);
        in.mappings.erase(oldest);
    }
    in.mappings.push_back(
        {m.region, static_cast<const std::byte*>(base), m.region_bytes, mapping_clock_});
    ++counters_.regions_mapped;
    return in.mappings.back().base;
}

// Copies bytes [at, at + into.size()) of a rendezvous message into `into`:
// from our mapping of its region (with `streamed`, by stores past the
// caches: streams_into_receive), else by CMA from its address; 0 or the
// errno.
int endpoint::read_from_peer(const rendezvous& r, std::span<std::byte> into, std::uint64_t at,
                             bool streamed) {
    if (const std::byte* from = mapped_message(r, at + into.size())) {
        copy_block(into.data(), from + at, into.size(), streamed);
        counters_.streamed_mapped_copies += streamed ? 1 : 0;
        return 0;
    }
    return copy_by_cma(pids_[static_cast<std::size_t>(r.source)], into, r.address + at, false);
}

// Where the first `bytes` of a rendezvous message are in our mapping of its
// region; nullptr if it has none, or they are not there.
const std::byte* endpoint::mapped_message(const rendezvous& r, std::uint64_t bytes) {
    if (!r.region || r.region->offset > r.region->region_bytes ||
        bytes > r.region->region_bytes - r.region->offset)
        return nullptr;
    const std::byte* base = mapping_of(r.source, *r.region);
    return base ? base + r.region->offset : nullptr;
}

// cma_copy, through the bounce buffer where the destination sits 1-63 bytes
// past the source's place in a page and that is slow here (options::
// misaligned): the kernel copies each piece between the other process and
// a bounce placed as the remote bytes are, and copy_bytes, whose vector loop
// does not mind, moves it between the bounce and `local` while it is in the
// cache: after a read, before a write (the sender's help, handle_share).
int endpoint::copy_by_cma(pid_t pid, std::span<std::byte> local, std::uint64_t remote, bool write) {
    const auto here = reinterpret_cast<std::uintptr_t>(local.data());
    if (!bounce_misaligned_ || local.size() < bounce_from ||
        !(write ? lands_just_past(here, remote) : lands_just_past(remote, here)))
        return cma_copy(pid, local, remote, write);
    if (!bounce_) bounce_ = std::make_unique_for_overwrite<std::byte[]>(bounce_piece + 2 * page);
    ++(write ? counters_.writes_bounced : counters_.reads_bounced);
    // make_unique's array is aligned for std::max_align_t only: find a page.
    const auto base = reinterpret_cast<std::uintptr_t>(bounce_.get());
    std::byte* bounce = bounce_.get() + (round_up(base, page) - base) + remote % page;
    for (std::size_t done = 0; done < local.size(); done += bounce_piece) {
        const std::size_t n = std::min(bounce_piece, local.size() - done);
        if (write) copy_bytes(bounce, local.data() + done, n);
        if (const int e = cma_copy(pid, {bounce, n}, remote + done, write)) return e;
        if (!write) copy_bytes(local.data() + done, bounce, n);
    }
    return 0;
}

// Copies a whole rendezvous message into `into`, its sender helping when it
// may (options::shared_copy_chunk); 0 or the errno. Returns only once the
// sender no longer writes into `into`.
int endpoint::copy_in(const rendezvous& r, std::span<std::byte> into, bool combined_at_once,
                      bool streamed) {
    const std::uint64_t total = into.size();
    // A message read from our mapping of the sender's buffer is copied at
    // memcpy speed: below two full chunks the sender's help costs more than
    // it saves (2 ranks, 64 KiB broadcast from shared buffers: 1.8 -> 4.7 us).
    const std::uint64_t chunk = total >= 2 * opts_.shared_copy_chunk || r.region
                                    ? opts_.shared_copy_chunk
                                    : std::min(opts_.shared_copy_chunk, small_shared_copy_chunk);
    // A sender that is itself reading a single-copy message of ours (an
    // exchange) has no time to spare: its help would only contend with us.
    const auto peer_busy = [&] {
        return std::any_of(awaiting_ack_.begin(), awaiting_ack_.end(),
                           [&](const auto& waiting) { return waiting.second.first == r.source; });
    };
    if (!share_copies_ || total < 2 * chunk || total / chunk >= front_chunks || !cma_to(r.source) ||
        peer_busy() || !has_space(r.source))
        return read_from_peer(r, into, 0, streamed);
    // What the sender would write stays in its cache, and combining it at
    // once fetches it back line by line: where lines travel far, that costs
    // more than the help saves (options::shared_copy_far_line_ns).
    if (combined_at_once && opts_.shared_copy_far_line_ns &&
        line_ns_ > opts_.shared_copy_far_line_ns) {
        ++counters_.copies_alone_far;
        return read_from_peer(r, into, 0, streamed);
    }
    share_slot* s = nullptr;
    std::uint32_t index = 0;
    for (; index < share_slots; ++index) {
        auto& candidate = slot(r.source, rank_, index);
        if (std::atomic_ref(candidate.open).load(std::memory_order_acquire) == 0) {
            s = &candidate;
            break;
        }
    }
    if (!s) return read_from_peer(r, into, 0, streamed); // earlier offers not yet answered
    s->claims = 0;
    s->sender_done = 0;
    s->sender_failed = 0;
    std::atomic_ref(s->open).store(1, std::memory_order_release);
    cell_header offer;
    offer.type = cell_type::share;
    offer.token = r.token;
    offer.offset = reinterpret_cast<std::uintptr_t>(into.data());
    offer.total = total;
    offer.length = static_cast<std::uint32_t>(chunk);
    offer.algorithm = index;
    write_cell(r.source, offer, nullptr);
    ring_bell(r.source);
    ++counters_.copies_shared;

    const std::uint64_t n = (total + chunk - 1) / chunk;
    auto part = [&](std::uint64_t k) {
        return into.subspan(k * chunk, std::min(chunk, total - k * chunk));
    };
    std::atomic_ref claims(s->claims);
    int e = 0;
    std::uint64_t back = 0;
    for (;;) {
        auto c = claims.load(std::memory_order_relaxed);
        const std::uint64_t front = c & front_chunks;
        back = c >> 32;
        if (front + back >= n) break;
        // After a failure, every chunk left is claimed at once: none is
        // copied, and the sender writes no more.
        const auto take = e == 0 ? c + 1 : c + (n - front - back);
        if (!claims.compare_exchange_weak(c, take, std::memory_order_acq_rel,
                                          std::memory_order_relaxed))
            continue;
        if (e == 0) e = read_from_peer(r, part(front), front * chunk, streamed);
    }
    if (const int lost = await_helper(r, *s, back)) return lost;
    if (e == 0 && back > 0 && std::atomic_ref(s->sender_failed).load(std::memory_order_acquire))
        for (auto k = n - back; k < n && e == 0; ++k)
            e = read_from_peer(r, part(k), k * chunk, streamed);
    return e;
}

// Waits until the sender finished the `claimed` chunks it took; 0, or ESRCH
// if it died meanwhile. A chunk takes the sender tens of microseconds, so
// this spins, then yields, and looks for the sender's death every
// millisecond.
int endpoint::await_helper(const rendezvous& r, share_slot& s, std::uint64_t claimed) {
    std::atomic_ref done(s.sender_done);
    auto since = std::chrono::steady_clock::now();
    for (unsigned round = 0; done.load(std::memory_order_acquire) < claimed; ++round) {
        if (round < 4096) {
            detail::cpu_relax();
            continue;
        }
        sched_yield();
        const auto now = std::chrono::steady_clock::now();
        if (now - since < std::chrono::milliseconds(1)) continue;
        since = now;
        if (exited(r.source)) return ESRCH;
    }
    return 0;
}

// A receiver of a single-copy message of ours offers us a share of the copy:
// we write chunks from the back into its buffer until we meet its own, then
// free the slot.
void endpoint::handle_share(int receiver, const cell_header& h) {
    if (h.algorithm >= share_slots) return;
    auto& s = slot(rank_, receiver, h.algorithm);
    const auto i = static_cast<std::size_t>(receiver);
    const auto found = awaiting_ack_.find(h.token);
    if (!cannot_help_[i] && found != awaiting_ack_.end() && found->second.first == receiver &&
        found->second.second.data.size() == h.total && h.length > 0) {
        // The bytes are only read (process_vm_writev takes a non-const iovec).
        const auto data = found->second.second.data;
        const std::uint64_t chunk = h.length;
        const std::uint64_t n = (h.total + chunk - 1) / chunk;
        std::atomic_ref claims(s.claims);
        std::atomic_ref done(s.sender_done);
        for (;;) {
            auto c = claims.load(std::memory_order_relaxed);
            const std::uint64_t back = c >> 32;
            if ((c & front_chunks) + back >= n) break;
            if (!claims.compare_exchange_weak(c, c + (std::uint64_t{1} << 32),
                                              std::memory_order_acq_rel, std::memory_order_relaxed))
                continue;
            const auto k = n - 1 - back;
            const auto bytes = data.subspan(k * chunk, std::min(chunk, h.total - k * chunk));
            const int e =
                copy_by_cma(pids_[i], {const_cast<std::byte*>(bytes.data()), bytes.size()},
                            h.offset + k * chunk, true);
            if (e != 0) {
                debug("rank {} cannot write into rank {} by process_vm_writev ({}); it copies "
                      "alone from now on",
                      rank_, receiver, errno_text(e));
                cannot_help_[i] = 1;
                std::atomic_ref(s.sender_failed).store(1, std::memory_order_relaxed);
                done.fetch_add(1, std::memory_order_release);
                break;
            }
            done.fetch_add(1, std::memory_order_release);
            ++counters_.chunks_helped;
        }
    }
    std::atomic_ref(s.open).store(0, std::memory_order_release);
}

void endpoint::queue_control(int dest, cell_type type, std::uint64_t token) {
    cell_header h;
    h.type = type;
    h.token = token;
    out_[static_cast<std::size_t>(dest)].control.push_back(h);
}

// Reads a rendezvous message into its posted receive, or (stage) into a
// staging buffer; false when its receive is not posted and stage is false.
bool endpoint::single_copy(rendezvous& r, bool stage) {
    // Its peers fail their sends to a failed rank once they see it failed
    // (check_liveness): none of their memory may be read after that.
    if (failed_) return true;
    auto claimed = mailbox_.claim(r.header);
    if (!claimed && !stage) return false;
    // Combined at once where lines travel far, the receiver would read it
    // alone (copy_in); where process_vm_readv is slow, through streaming
    // cells instead: its sender copies too, and the receiver combines from
    // lines it has just copied.
    if (claimed && claimed->combined_at_once && cells_over_readv_ && !r.region) {
        ++counters_.combined_via_cells;
        reserved_.push_back({r.source, r.header.key, *claimed});
        queue_control(r.source, cell_type::via_cells, r.token);
        return true;
    }
    std::optional<scratch_block> staging;
    const auto into = mailbox::landing(claimed, r.header.bytes, staging);
    const pid_t pid = pids_[static_cast<std::size_t>(r.source)];
    // An observer that takes pieces takes it straight from our mapping of
    // the sender's buffer.
    const std::byte* mapped =
        claimed && claimed->observer ? mapped_message(r, into.size()) : nullptr;
    if (mapped) claimed->observer->take(0, std::span(mapped, into.size()));
    const bool combined_at_once = claimed && claimed->combined_at_once;
    const bool streamed = claimed && !combined_at_once && streams_into_receive(into.size());
    const int e = mapped ? 0 : copy_in(r, into, combined_at_once, streamed);
    if (e == 0) {
        if (!claimed) ++counters_.staged;
        mailbox_.land(r.header, claimed, staging);
        queue_control(r.source, cell_type::ack, r.token);
        return true;
    }
    if (e == ESRCH) {
        // The peer is gone; the liveness check fails everything else.
        if (claimed)
            claimed->done->complete(std::make_exception_ptr(error(
                errc::peer_lost,
                fmt::format("rank {} (pid {}) exited during a single-copy read", r.source, pid))));
        return true;
    }
    debug("rank {} cannot read rank {} by process_vm_readv ({}); asking for chunks from now on",
          rank_, r.source, errno_text(e));
    if (claimed) reserved_.push_back({r.source, r.header.key, *claimed});
    queue_control(r.source, cell_type::nack, r.token);
    return true;
}

void endpoint::handle_answer(int src, const cell_header& h) {
    auto found = awaiting_ack_.find(h.token);
    if (found == awaiting_ack_.end()) return;
    auto [dest, s] = std::move(found->second);
    awaiting_ack_.erase(found);
    if (h.type == cell_type::ack) {
        ++(s.region ? counters_.mapped : counters_.cma);
        s.done->complete();
        return;
    }
    if (h.type == cell_type::nack) {
        debug("rank {} cannot read our memory; rank {} sends to it in chunks from now on", src,
              rank_);
        cma_to_[static_cast<std::size_t>(dest)] = 0;
        note_single_copy();
        map_to_[static_cast<std::size_t>(dest)] = 0;
    }
    s.cma = false;
    s.region.reset();
    s.offset = 0;
    out_[static_cast<std::size_t>(dest)].sends.push_back(std::move(s));
}

std::size_t endpoint::retry_unclaimed(bool stage_all) {
    std::size_t events = 0;
    const auto now = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < unclaimed_.size();) {
        auto& r = unclaimed_[i];
        if (single_copy(r, stage_all || now - r.since >= opts_.stage_unclaimed_after)) {
            unclaimed_.erase(unclaimed_.begin() + static_cast<std::ptrdiff_t>(i));
            ++events;
        } else {
            ++i;
        }
    }
    return events;
}

// The receive waits in the mailbox for this round only, so the message is
// copied once, from its cell, with no queue entry in between. A message of
// more than one cell would be staged whole and then copied: such a receive
// is better posted, and handle_data copies each cell into it.
transport::try_result endpoint::poll_recv(const message_header& expected,
                                          std::span<std::byte> into) {
    if (into.size() > payload_capacity()) return try_result::unsupported;
    if (take_awaited_at_head(expected, into)) return try_result::received;
    mailbox::awaited_receive here{.expected = expected, .into = into, .done = false, .failed = {}};
    mailbox_.await_here(&here);
    try {
        progress();
    } catch (...) {
        mailbox_.await_here(nullptr);
        throw;
    }
    mailbox_.await_here(nullptr);
    if (here.failed) std::rethrow_exception(here.failed);
    return here.done ? try_result::received : try_result::not_yet;
}

std::size_t endpoint::progress() {
    std::size_t events = 0;
    for (int src = 0; src < size_; ++src)
        if (src != rank_) events += drain(src);
    if (!unclaimed_.empty()) events += retry_unclaimed(false);
    for (int dest = 0; dest < size_; ++dest) {
        auto& o = out_[static_cast<std::size_t>(dest)];
        if (!o.control.empty() || !o.sends.empty()) events += pump(dest);
    }
    // Reading the clock costs as much as a round of polling: an idle rank
    // looks at it only every few rounds.
    if (events == 0 && ++idle_rounds_ % 64 == 0) check_liveness();
    return events;
}

void endpoint::await_activity(std::chrono::microseconds limit) {
    // Single-copy messages whose receive is not posted: their senders may be
    // waiting on them before posting the very receive we wait for, so sleep
    // no longer than until the oldest is due to be staged, and stage it then.
    if (!unclaimed_.empty()) {
        if (retry_unclaimed(false) > 0) {
            for (int dest = 0; dest < size_; ++dest)
                if (!out_[static_cast<std::size_t>(dest)].control.empty()) pump(dest);
            return;
        }
        const auto due = unclaimed_.front().since + opts_.stage_unclaimed_after -
                         std::chrono::steady_clock::now();
        limit = std::min(limit, std::chrono::ceil<std::chrono::microseconds>(due));
    }
    limit = std::clamp(limit, std::chrono::microseconds(0), opts_.liveness_interval);
    auto& me = block(rank_);
    const std::uint32_t seen = std::atomic_ref(me.bell).load(std::memory_order_acquire);
    std::atomic_ref(me.sleeping).store(1, std::memory_order_relaxed);
    sleeper_fence(asymmetric_fences_);
    bool ready = false;
    for (int src = 0; src < size_ && !ready; ++src)
        if (src != rank_) ready = has_message(src);
    for (int dest = 0; dest < size_ && !ready; ++dest) {
        auto& o = out_[static_cast<std::size_t>(dest)];
        if (!o.control.empty() || !o.sends.empty()) ready = has_space(dest);
    }
    if (!ready && limit.count() > 0) {
        timespec ts{static_cast<time_t>(limit.count() / 1000000),
                    static_cast<long>(limit.count() % 1000000) * 1000};
        futex(&me.bell, FUTEX_WAIT, seen, &ts);
    }
    std::atomic_ref(me.sleeping).store(0, std::memory_order_relaxed);
    check_liveness();
}

// Whether rank r's process has exited. Its pidfd turns readable then;
// without one, kill(pid, 0) (which still finds an exited child its parent
// has not reaped).
bool endpoint::exited(int r) {
    auto& p = pidfds_[static_cast<std::size_t>(r)];
    if (p.fd < 0) return kill(pids_[static_cast<std::size_t>(r)], 0) != 0 && errno == ESRCH;
    p.revents = 0;
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP)) != 0;
}

void endpoint::check_liveness() {
    const auto now = std::chrono::steady_clock::now();
    if (now < next_liveness_check_) return;
    next_liveness_check_ = now + opts_.liveness_interval;
    std::vector<int> gone;
    for (int r = 0; r < size_; ++r) {
        const auto i = static_cast<std::size_t>(r);
        if (r == rank_ || lost_[i]) continue;
        // A rank that shut its transport down is gone for us even if its
        // process lives on.
        if (std::atomic_ref(block(r).closed).load(std::memory_order_acquire) != 0 || exited(r))
            gone.push_back(r);
    }
    // A crashed rank is the cause; ranks that then closed on purpose (having
    // failed because of it) are consequences, so the crash is reported first.
    auto closed = [&](int r) {
        return std::atomic_ref(block(r).closed).load(std::memory_order_acquire) != 0;
    };
    std::partition(gone.begin(), gone.end(), [&](int r) { return !closed(r); });
    for (int r : gone) {
        // Take what it sent before it went, then declare it lost.
        drain(r);
        lose(r, closed(r));
    }
    for (int r = 0; r < size_; ++r) {
        const auto i = static_cast<std::size_t>(r);
        if (r == rank_ || lost_[i] || peer_failed_[i]) continue;
        if (const auto on = std::atomic_ref(block(r).failed_on).load(std::memory_order_acquire))
            fail_sends_to(r, on);
    }
}

void endpoint::lose(int peer, bool clean) {
    const auto i = static_cast<std::size_t>(peer);
    lost_[i] = 1;
    any_lost_ = true;
    const auto why =
        clean ? fmt::format("rank {} (pid {}) closed its shared-memory transport", peer, pids_[i])
              : fmt::format("rank {} (pid {}) exited", peer, pids_[i]);
    debug("rank {}: {}", rank_, why);
    auto failure = std::make_exception_ptr(error(errc::peer_lost, why));
    // Once a rank crashed, ranks that close afterwards most likely failed
    // because of it: name the crash, not them.
    if (!clean && !first_crash_) first_crash_ = failure;
    if (clean && first_crash_) failure = first_crash_;
    fail_sends(peer, failure);
    out_[i].control.clear();
    std::erase_if(unclaimed_, [&](const rendezvous& r) { return r.source == peer; });
    std::erase_if(reserved_, [&](const reserved& r) {
        if (r.source != peer) return false;
        r.receive.done->complete(failure);
        return true;
    });
    auto& p = in_[i].incoming;
    if (p.active && p.claimed) p.claimed->done->complete(failure);
    p = partial{};
    // A peer that vanished without closing leaves its collectives unfinished
    // for everyone: fail every pending and later receive, naming it. Sends
    // to live peers stay: a peer may be reading one right now. Saying that
    // this rank failed lets them fail their sends to it instead. One that
    // closed on purpose fails only the receives from it.
    if (clean) {
        fail_receives_from_closed(peer);
        return;
    }
    mailbox_.fail(failure);
    if (!failed_) {
        failed_ = true;
        std::atomic_ref(block(rank_).failed_on)
            .store(static_cast<std::uint32_t>(peer) + 1, std::memory_order_release);
    }
}

void endpoint::fail_receives_from_closed(int source) {
    if (source < 0 || source >= size_ || !lost_[static_cast<std::size_t>(source)]) return;
    mailbox_.fail_source(
        source, first_crash_
                    ? first_crash_
                    : std::make_exception_ptr(error(
                          errc::peer_lost,
                          fmt::format("rank {} (pid {}) closed its shared-memory "
                                      "transport while rank {} still waited for its "
                                      "message",
                                      source, pids_[static_cast<std::size_t>(source)], rank_))));
}

// A live peer failed on a crash (rank_block::failed_on): it will read none of
// the messages we sent it, so those sends fail, naming the crash.
void endpoint::fail_sends_to(int peer, std::uint32_t failed_on) {
    const auto i = static_cast<std::size_t>(peer);
    peer_failed_[i] = 1;
    auto failure = first_crash_;
    if (!failure) {
        const auto crashed = static_cast<std::size_t>(failed_on - 1);
        failure = std::make_exception_ptr(
            error(errc::peer_lost, crashed < pids_.size()
                                       ? fmt::format("rank {} (pid {}) exited, as rank {} found",
                                                     failed_on - 1, pids_[crashed], peer)
                                       : fmt::format("rank {} failed on a lost peer", peer)));
    }
    fail_sends(peer, failure);
}

// Fails what we send to `peer`: queued, and waiting for it to read.
void endpoint::fail_sends(int peer, const std::exception_ptr& failure) {
    auto& o = out_[static_cast<std::size_t>(peer)];
    for (auto& s : o.sends)
        s.done->complete(failure);
    o.sends.clear();
    for (auto it = awaiting_ack_.begin(); it != awaiting_ack_.end();) {
        if (it->second.first == peer) {
            it->second.second.done->complete(failure);
            it = awaiting_ack_.erase(it);
        } else {
            ++it;
        }
    }
}

void endpoint::fail_all(const std::exception_ptr& failure) {
    for (auto& o : out_) {
        for (auto& s : o.sends)
            s.done->complete(failure);
        o.sends.clear();
    }
    for (auto& [token, entry] : awaiting_ack_)
        entry.second.done->complete(failure);
    awaiting_ack_.clear();
    for (auto& r : reserved_)
        r.receive.done->complete(failure);
    reserved_.clear();
    for (auto& in : in_)
        if (in.incoming.active && in.incoming.claimed) in.incoming.claimed->done->complete(failure);
    mailbox_.fail(failure);
}

} // namespace

namespace {

// A byte count from the environment: digits with an optional K, M or G
// (powers of 1024); nullopt when the variable is unset or empty.
std::optional<std::size_t> size_from_environment(const char* name) {
    const char* text = std::getenv(name);
    if (!text || !*text) return std::nullopt;
    const std::string value = text;
    std::size_t used = 0;
    unsigned long long n = 0;
    try {
        n = std::stoull(value, &used, 10);
    } catch (const std::exception&) {
        used = 0;
    }
    std::size_t scale = 1;
    if (used > 0 && used + 1 == value.size()) {
        switch (value.back()) {
        case 'K':
        case 'k':
            scale = std::size_t{1} << 10;
            break;
        case 'M':
        case 'm':
            scale = std::size_t{1} << 20;
            break;
        case 'G':
        case 'g':
            scale = std::size_t{1} << 30;
            break;
        default:
            used = 0;
        }
        if (used) ++used;
    }
    if (used == 0 || used != value.size() || value.front() == '-')
        throw error(errc::invalid_argument,
                    fmt::format("{}='{}' is not a byte count (digits, optionally followed by K, "
                                "M or G)",
                                name, value));
    // A count that wrapped would be taken as a small one, silently.
    if (n > std::numeric_limits<std::size_t>::max() / scale)
        throw error(errc::invalid_argument,
                    fmt::format("{}='{}' is more bytes than a size_t can count", name, value));
    return static_cast<std::size_t>(n) * scale;
}

// A variable holding a count of `unit` (nanoseconds, a percentage), digits
// only; nullopt when unset or empty.
std::optional<std::uint32_t> digits_from_environment(const char* name, std::string_view unit) {
    const char* v = std::getenv(name);
    if (!v || !*v) return std::nullopt;
    const std::string_view text(v);
    std::uint32_t n = 0;
    const auto [end, failed] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (failed != std::errc{} || end != text.data() + text.size())
        throw error(errc::invalid_argument,
                    fmt::format("{}='{}' is not {} (digits only, at most {})", name, text, unit,
                                std::numeric_limits<std::uint32_t>::max()));
    return n;
}

std::optional<std::uint32_t> nanoseconds_from_environment(const char* name) {
    return digits_from_environment(name, "a number of nanoseconds");
}

std::optional<std::uint32_t> percentage_from_environment(const char* name) {
    return digits_from_environment(name, "a percentage");
}

// A variable naming one of `kinds` (name, value); nullopt when unset or
// empty, a tutti::error listing the names when it is none of them.
template <class Kind>
std::optional<Kind>
kind_from_environment(const char* variable,
                      std::initializer_list<std::pair<std::string_view, Kind>> kinds) {
    const char* v = std::getenv(variable);
    if (!v || !*v) return std::nullopt;
    const std::string_view text(v);
    std::string names;
    for (const auto& [name, kind] : kinds) {
        if (name == text) return kind;
        names += names.empty() ? std::string(name) : fmt::format(", {}", name);
    }
    throw error(errc::invalid_argument,
                fmt::format("{}='{}' is none of {}", variable, text, names));
}

} // namespace

void apply_environment(options& opts) {
    // Variables of earlier versions are refused: ignored, they would leave
    // their user believing in a tuning that no longer happens.
    for (const auto& [gone, instead] :
         {std::pair<const char*, const char*>{"TUTTI_SHM_CELLS_FAR_LINE_NS",
                                              "TUTTI_SHM_CELLS_READV_PERCENT (the rule now "
                                              "follows a copy probe at setup, not the line)"},
          {"TUTTI_SHM_CELLS_FAR_THRESHOLD", "TUTTI_SHM_SLOW_READV_CELLS_THRESHOLD"}})
        if (const char* v = std::getenv(gone); v && *v)
            throw error(errc::invalid_argument,
                        fmt::format("{} is no longer read: use {}", gone, instead));
    if (auto v = size_from_environment("TUTTI_SHM_CELL_BYTES")) opts.cell_bytes = *v;
    if (auto v = size_from_environment("TUTTI_SHM_RING_DEPTH")) opts.ring_depth = *v;
    if (auto v = size_from_environment("TUTTI_SHM_CMA_THRESHOLD")) opts.cma_threshold = *v;
    if (auto v = size_from_environment("TUTTI_SHM_CMA_THRESHOLD_AT_END"))
        opts.cma_threshold_awaited_at_end = *v;
    if (auto v = size_from_environment("TUTTI_SHM_CMA_THRESHOLD_EXCHANGE"))
        opts.cma_threshold_exchange = *v;
    if (auto v = size_from_environment("TUTTI_SHM_CMA_THRESHOLD_EXCHANGE_BETWEEN_STEPS"))
        opts.cma_threshold_exchange_between_steps = *v;
    if (auto v = size_from_environment("TUTTI_SHM_MAPPED_THRESHOLD")) opts.mapped_threshold = *v;
    if (auto v = size_from_environment("TUTTI_SHM_SHARED_COPY_CHUNK")) opts.shared_copy_chunk = *v;
    if (auto v = size_from_environment("TUTTI_SHM_PIPELINE_PIECE")) opts.pipeline_piece = *v;
    if (auto v = size_from_environment("TUTTI_SHM_PREFETCH_BYTES")) opts.prefetch_bytes = *v;
    if (auto v = size_from_environment("TUTTI_SHM_STREAMED_RECEIVE_FROM"))
        opts.streamed_receive_from = *v;
    if (auto ns = nanoseconds_from_environment("TUTTI_SHM_LINE_NS")) opts.line_ns = *ns;
    if (auto ns = nanoseconds_from_environment("TUTTI_SHM_SHARED_COPY_FAR_LINE_NS"))
        opts.shared_copy_far_line_ns = *ns;
    if (auto percent = percentage_from_environment("TUTTI_SHM_READV_PERCENT"))
        opts.readv_percent = *percent;
    if (auto percent = percentage_from_environment("TUTTI_SHM_CELLS_READV_PERCENT"))
        opts.cells_readv_percent = *percent;
    if (auto v = size_from_environment("TUTTI_SHM_SLOW_READV_CELLS_THRESHOLD"))
        opts.slow_readv_cells_threshold = *v;
    using stores = options::stores;
    if (auto kind = kind_from_environment<stores>("TUTTI_SHM_CELL_STORES",
                                                  {{"adaptive", stores::adaptive},
                                                   {"cached", stores::cached},
                                                   {"streaming", stores::streaming}}))
        opts.cell_stores = *kind;
    using misaligned = options::misaligned_reads;
    if (auto kind = kind_from_environment<misaligned>("TUTTI_SHM_MISALIGNED_READS",
                                                      {{"probe", misaligned::probe},
                                                       {"direct", misaligned::direct},
                                                       {"bounced", misaligned::bounced}}))
        opts.misaligned = *kind;
    using line_stores = options::line_stores;
    if (auto kind = kind_from_environment<line_stores>("TUTTI_SHM_LINE_STORES",
                                                       {{"adaptive", line_stores::adaptive},
                                                        {"cached", line_stores::cached},
                                                        {"direct", line_stores::direct}}))
        opts.one_line_stores = *kind;
}

bool direct_lines_can_pay(std::uint32_t direct_ns, std::uint32_t line_ns) noexcept {
    return direct_ns < std::max(direct_lines_pay_below_ns, line_ns);
}

// CPUID leaf 7, ECX bit 28.
bool has_direct_line_stores() noexcept {
#if defined(__x86_64__)
    static const bool has = [] {
        unsigned a = 0, b = 0, c = 0, d = 0;
        return __get_cpuid_count(7, 0, &a, &b, &c, &d) != 0 && (c & (1u << 28)) != 0;
    }();
    return has;
#else
    return false;
#endif
}

std::shared_ptr<shm::transport> create_transport(bootstrap& boot, asio::io_context& context,
                                                 options opts) {
    return std::make_shared<endpoint>(boot, context, opts);
}

} // namespace tutti::shm
