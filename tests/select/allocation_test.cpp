// Every collective x every registered algorithm, called twice with large
// blocks: the second call must allocate no heap memory of a message's size.
// A temporary made afresh per call (a std::vector of the message's size)
// maps new pages that the kernel clears and faults in at every call: scan
// and exscan of 1 MiB took 8.7 ms instead of 0.4 at 2 ranks, and reduce of
// 1 MiB 7 ms instead of 0.4 at 4 ranks on 2 cores (docs/performance.md,
// twelfth session). Algorithms take their temporaries from the scratch
// cache (core/scratch.hpp) instead. This program replaces operator new to
// count, so it is a program of its own.
#include <atomic>
#include <cstdlib>
#include <new>
#include <numeric>

#include "select_support.hpp"

namespace {

// Allocations of at least this many bytes count while `counting` is set:
// above the few hundred bytes of a call's frames and requests, below the
// test's 64 KiB blocks.
constexpr std::size_t large_bytes = 16 * 1024;
std::atomic<bool> counting{false};
std::atomic<int> large_allocations{0};
// The mailbox's copies to the heap: when counting starts, then how many
// while it lasted (the ranks run on one thread, in turn).
std::size_t copies_counted = 0;

// Out of line, so that a debugger can stop at a counted allocation.
[[gnu::noinline]] void count_large_allocation() {
    large_allocations.fetch_add(1, std::memory_order_relaxed);
}

void* allocate(std::size_t bytes) {
    if (bytes >= large_bytes && counting.load(std::memory_order_relaxed)) count_large_allocation();
    if (void* p = std::malloc(bytes ? bytes : 1)) return p;
    throw std::bad_alloc();
}

} // namespace

void* operator new(std::size_t bytes) {
    return allocate(bytes);
}
void* operator new[](std::size_t bytes) {
    return allocate(bytes);
}
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete[](void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
    std::free(p);
}

using namespace tutti;
using namespace tutti::testing;

namespace {

constexpr std::size_t n = 8192; // elements per block: 64 KiB

// A rank's buffers, made once and used by every call, so that what the
// calls allocate is the library's alone.
struct buffers {
    explicit buffers(int p)
        : send(n * static_cast<std::size_t>(p)), recv(send.size()),
          counts(static_cast<std::size_t>(p), n) {}
    std::vector<std::int64_t> send, recv;
    std::vector<std::size_t> counts;
};

// Sum over ranks [0, last) of encode(r, to, i).
std::int64_t sum_of(int last, int to, std::size_t i) {
    std::int64_t total = 0;
    for (int r = 0; r < last; ++r)
        total += encode(r, to, static_cast<std::int64_t>(i));
    return total;
}

// One call of the collective with block j of rank r's send holding
// encode(r, j, i), checked exactly.
task<void> call_and_check(collective kind, const communicator& comm, buffers& b) {
    const int p = comm.size(), r = comm.rank(), root = p - 1;
    for (int j = 0; j < p; ++j)
        for (std::size_t i = 0; i < n; ++i)
            b.send[static_cast<std::size_t>(j) * n + i] =
                encode(kind == collective::scatter ? root : r, j, static_cast<std::int64_t>(i));
    std::fill(b.recv.begin(), b.recv.end(), -1);
    std::span<std::int64_t> send(b.send), recv(b.recv);
    const auto block = [n = n](std::span<std::int64_t> s, int j) {
        return s.subspan(static_cast<std::size_t>(j) * n, n);
    };
    // The first block of each, named: the collectives write into lvalues.
    std::span<std::int64_t> send_first = block(send, 0), recv_first = block(recv, 0);
    const auto blocks_are = [&](std::span<std::int64_t> got, auto expected_at) {
        for (int j = 0; j < p; ++j)
            for (std::size_t i = 0; i < n; ++i)
                if (got[static_cast<std::size_t>(j) * n + i] != expected_at(j, i)) return false;
        return true;
    };
    const auto sums_are = [&](std::span<std::int64_t> got, int ranks, int to) {
        for (std::size_t i = 0; i < n; ++i)
            if (got[i] != sum_of(ranks, to, i)) return false;
        return true;
    };
    switch (kind) {
    case collective::barrier:
    case collective::split:
        co_await barrier(comm);
        break;
    case collective::broadcast:
        co_await broadcast(comm, send_first, tutti::root(root));
        for (std::size_t i = 0; i < n; ++i)
            expect(send[i] == encode(root, 0, static_cast<std::int64_t>(i)), "broadcast");
        break;
    case collective::reduce:
        co_await reduce(comm, send_first, recv_first, sum, tutti::root(root));
        if (r == root) expect(sums_are(recv, p, 0), "reduce");
        break;
    case collective::all_reduce:
        co_await all_reduce(comm, send_first, recv_first, sum);
        expect(sums_are(recv, p, 0), "all_reduce");
        break;
    case collective::scan:
        co_await scan(comm, send_first, recv_first, sum);
        expect(sums_are(recv, r + 1, 0), "scan");
        break;
    case collective::exscan:
        co_await exscan(comm, send_first, recv_first, sum);
        if (r > 0) expect(sums_are(recv, r, 0), "exscan");
        break;
    case collective::gather:
    case collective::all_gather:
        // Rank r sends block r of its send buffer, which holds encode(r, r, i).
        if (kind == collective::gather)
            co_await gather(comm, block(send, r), recv, tutti::root(root));
        else
            co_await all_gather(comm, block(send, r), recv);
        if (kind == collective::all_gather || r == root)
            expect(blocks_are(recv,
                              [](int j, std::size_t i) {
                                  return encode(j, j, static_cast<std::int64_t>(i));
                              }),
                   "gather");
        break;
    case collective::scatter:
        co_await scatter(comm, send, recv_first, tutti::root(root));
        for (std::size_t i = 0; i < n; ++i)
            expect(recv[i] == encode(root, r, static_cast<std::int64_t>(i)), "scatter");
        break;
    case collective::all_to_all:
    case collective::all_to_allv:
        if (kind == collective::all_to_all)
            co_await all_to_all(comm, send, recv);
        else
            co_await all_to_allv(comm, send, b.counts, recv, b.counts);
        expect(blocks_are(recv,
                          [r](int j, std::size_t i) {
                              return encode(j, r, static_cast<std::int64_t>(i));
                          }),
               "all_to_all: transpose identity");
        break;
    case collective::reduce_scatter:
        co_await reduce_scatter(comm, send, recv_first, b.counts, sum);
        expect(sums_are(recv, p, r), "reduce_scatter");
        break;
    }
}

} // namespace

TEST_CASE("a repeated call of any algorithm allocates no message-sized heap memory") {
    int runs = 0;
    for (auto kind : all_collectives)
        for (const auto* info : algorithms().list(kind)) {
            const bool composition = info->form != algorithm_kind::pure;
            const auto variable = override_variable(kind, *info);
            scoped_env env{{variable, info->name}, {"TUTTI_COLL_FALLBACK", "error"}};
            for (int p : {3, 4}) {
                if (info->check(signature_for(kind, p, composition, n, true))) continue;
                CAPTURE(info->name);
                CAPTURE(p);
                large_allocations = 0;
                inproc::run(p, [kind, composition](communicator comm) -> task<void> {
                    if (composition)
                        comm = co_await make_arity_hierarchy(
                            comm, {.arity = 2, .flat_fallback_threshold = 0});
                    buffers b(comm.size());
                    co_await call_and_check(kind, comm, b);
                    // A rank leaves a barrier only once every rank entered it:
                    // every first call has ended before any second one starts
                    // to count, and every second one before counting stops.
                    co_await barrier(comm);
                    if (!counting.exchange(true))
                        copies_counted = mailbox::payloads_copied_to_heap();
                    co_await call_and_check(kind, comm, b);
                    co_await barrier(comm);
                    if (counting.exchange(false))
                        copies_counted = mailbox::payloads_copied_to_heap() - copies_counted;
                });
                // A message that arrives before its receive is copied by the
                // mailbox (the in-process transport delivers at once): that
                // copy is the transport's, counted apart. The only other
                // calls that count are the second ones and the barrier's,
                // whose empty messages are kept inline.
                const auto transport_copies = static_cast<int>(copies_counted);
                CHECK_MESSAGE(large_allocations <= transport_copies, to_string(kind), " ",
                              info->name,
                              " allocated memory of a message's size when called "
                              "again: ",
                              large_allocations.load(), " allocations, ", transport_copies,
                              " of them the mailbox's");
                ++runs;
            }
        }
    MESSAGE(runs << " runs");
    CHECK(runs > 50);
}
