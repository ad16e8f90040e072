// The measurement method that tutti-bench and benchmarks/mpi_collectives.cpp
// share, so that tutti and MPI are measured the same way: the same command
// line, sizes, iteration schedule, buffer layouts, data patterns, checks,
// statistics and output. Only the calls themselves and the loop that times
// them (a coroutine in tutti, plain calls in MPI) live in each program.
//
// OSU style: each call is preceded by a barrier and timed alone on every
// rank; a rank's latency is its mean over the timed calls; a row reports the
// average, minimum and maximum of those means over the ranks, and the
// algorithm bandwidth is the row's bytes (the largest buffer any rank holds
// in the call) divided by the maximum.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/collective.hpp"

namespace tutti_bench {

using clock_type = std::chrono::steady_clock;
// Every collective moves 64-bit integers; reductions sum them (--op sum) or
// compose them (--op compose).
using element = std::int64_t;

// The operation the reducing collectives run (--op). `sum`: the built-in sum
// (MPI_SUM), commutative. `compose`: an operation of the program's own whose
// order matters (tutti::make_op with commutativity::non_commutative; in MPI,
// MPI_Op_create with commute 0), so that selection takes its choices for
// non-commutative operations. Each element packs an affine map of 32-bit
// integers, x -> a x + b (a in the high half, b in the low); lower (op) higher
// applies the lower ranks' map first. Composition is associative and exact,
// and a result combined out of rank order differs (every a is odd, so no map
// is constant).
enum class reduction { sum, compose };
element compose_affine(element lower, element higher);
// lower (op) higher for the operation.
element combine(reduction op, element lower, element higher);

inline constexpr std::size_t kib = 1024;
inline constexpr std::size_t mib = 1024 * kib;
inline constexpr std::size_t gib = 1024 * mib;

// What to measure and how; the same options in both programs.
struct settings {
    std::vector<tutti::collective> collectives;
    std::vector<std::size_t> sizes;
    // OSU's count for small messages: 1000 calls of 0.2 µs take 0.2 ms, too
    // short to average out this machine's noise (docs/benchmarks.md).
    int max_iterations = 10000;
    int min_iterations = 10;
    // Timed iterations move about this many bytes per size (fewer calls for
    // large sizes), within [min_iterations, max_iterations].
    std::size_t budget = 256 * mib;
    // Warm-up calls per size; negative: a tenth of the timed ones, at least
    // 10 (OSU's count for large messages). The first calls of a size can
    // take ten times a settled one (pages the kernel copies for the first
    // time: docs/benchmarks.md), and with 2 the time limit cut the timed
    // calls to ones still settling.
    int warmup = -1;
    // Seconds per size: after the warm-up, the timed calls are cut so that
    // they end within this (for implementations that collapse).
    double time_limit = 10.0;
    int buffers = 1;
    // Each rank writes its buffers again before every call, untimed, as an
    // application that has just produced its data would: the lines are then
    // modified in the writer's cache, not shared with the reader from the
    // call before.
    bool rewrite = false;
    // Where in a page the buffers start (--misalign): unset, where the
    // allocator puts them; set, every send buffer at a page's start and every
    // receive buffer this many bytes into one, so each single copy between
    // them lands that far past its source's place in a page (two heap
    // buffers allocated one after the other sit 16 bytes apart so, and some
    // kernels copy such a pair several times slower: docs/benchmarks.md).
    std::optional<std::size_t> misalign;
    // The pool of buffer sets is cut so it stays below this many bytes.
    std::size_t pool_limit = 1024 * mib;
    bool validate = false;
    int root = 0;
    reduction op = reduction::sum;
    std::string csv;
    std::string json;
    std::string label;
    bool quiet = false;
    bool progress = false;
    // The options as given, before parsing into the fields above.
    struct text {
        std::vector<std::string> collectives;
        std::string sizes = "8:64M";
        std::string budget = "256M";
        std::string pool_limit = "1G";
        std::string op = "sum";
    } given;
};

// Registers the shared options on app and fills `s` once app is parsed
// (sizes and collectives are checked in a callback, so a bad value is a
// usage error with CLI11's message).
void add_options(CLI::App& app, settings& s);

// "8", "4K", "16M", "1G" (binary multiples); throws std::invalid_argument.
std::size_t parse_size(const std::string& text);
// "8:64M" (every power of two in between, ends included even when they are
// not powers of two) or "8,1K,16M".
std::vector<std::size_t> parse_sizes(const std::string& text);
// "all", or names separated by commas.
std::vector<tutti::collective> parse_collectives(const std::string& text);
// "8 B", "4 KiB", "16 MiB".
std::string human_bytes(std::size_t bytes);

// The buffers of one call on one rank, in elements, and the bytes a row
// reports. Blocked collectives (one block per rank) round the size down to
// whole blocks of at least one element.
struct layout {
    tutti::collective kind = tutti::collective::barrier;
    int ranks = 1;
    int rank = 0;
    int root = 0;
    std::size_t send = 0;
    std::size_t recv = 0;
    std::size_t block = 0; // elements per rank's block; for reductions, the count
    std::size_t bytes = 0;
    reduction op = reduction::sum; // what reductions combine with
};

layout layout_for(tutti::collective kind, std::size_t nominal_bytes, int ranks, int rank, int root,
                  reduction op = reduction::sum);

// Timed calls and warm-up for a layout, before the time limit applies.
int scheduled_iterations(const settings& s, const layout& l);
int warmup_iterations(const settings& s, int iterations);
// The warm-up runs in batches, 2 calls first, then doubling: the next
// batch's size after `done` calls that took the slowest rank
// `seconds_so_far`, or 0 once `warmup` calls are done or the time limit is
// spent (the warm-up of an implementation that collapses stays within about
// one limit). Every rank reaches the same sizes from the agreed times.
int next_warmup_batch(const settings& s, int warmup, int done, double seconds_so_far);

// The warm-up calls made, and the slowest rank's mean call in the last batch
// (0 if none).
struct warmup_done {
    int calls = 0;
    double settled_seconds = 0;
};
// Runs the warm-up batch by batch; `run_batch(calls)` makes that many calls
// and returns the slowest rank's mean.
template <class RunBatch>
warmup_done warm_up(const settings& s, int warmup, RunBatch run_batch) {
    warmup_done done;
    double spent = 0;
    while (const int batch = next_warmup_batch(s, warmup, done.calls, spent)) {
        done.settled_seconds = run_batch(batch);
        spent += done.settled_seconds * batch;
        done.calls += batch;
    }
    return done;
}
// The timed calls that fit in the time limit, given the slowest rank's mean
// warm-up call (in the last batch, the most settled).
int iterations_within_limit(const settings& s, int iterations, double warmup_mean_seconds);

// A send and a receive buffer; a pool of them cycles so that successive
// calls touch different memory. Their memory comes from a resource: the
// ordinary heap, or (tutti-bench --memory shared) memory the other ranks of
// the node can map.
struct buffer_set {
    // What places the buffers under --misalign; first, so it outlives them.
    std::shared_ptr<const void> placed;
    std::pmr::vector<element> send;
    std::pmr::vector<element> recv;
};

// Allocates the pool for a layout (cut to pool_limit) from `memory` and
// fills every set with the layout's pattern, so pages are touched before
// timing.
std::vector<buffer_set>
make_pool(const settings& s, const layout& l,
          std::pmr::memory_resource* memory = std::pmr::new_delete_resource());
void fill(const layout& l, buffer_set& b);
// The bytes of one buffer set of a layout (the least make_pool allocates).
std::size_t set_bytes(const layout& l);
// This machine's physical memory in bytes (0 if the system does not say).
std::size_t machine_memory_bytes();
// Why a size cannot be measured here, or "" if it can: one buffer set on each
// of the `ranks_on_node` ranks that share this machine's `machine_bytes` of
// memory (0: unknown, no limit) would not fit. Checked before anything is
// allocated: a size the heap grants but the machine cannot hold would be
// ended by the kernel's out-of-memory killer part way through filling it.
std::string memory_shortfall(const layout& l, int ranks_on_node, std::size_t machine_bytes);
// make_pool into `pool` unless memory_shortfall refuses the size or the
// allocation fails: then why, and `pool` stays empty. The ranks then skip
// the size together (a rank without buffers would leave the others waiting
// in the first call): skip_reason gives the row's reason on each.
std::string try_make_pool(std::vector<buffer_set>& pool, const settings& s, const layout& l,
                          int ranks_on_node, std::size_t machine_bytes,
                          std::pmr::memory_resource* memory = std::pmr::new_delete_resource());
std::string skip_reason(const std::string& mine);
// The set the next call uses (the pool cycles), written again first under
// --rewrite; call it before the barrier that starts the call.
buffer_set& next_set(const settings& s, const layout& l, std::vector<buffer_set>& pool,
                     std::size_t& next);
// Empty when this rank's result of one call on freshly filled buffers is
// right; otherwise where it first differs.
std::string check(const layout& l, const buffer_set& b);

// A rank's contribution to a row: its mean call time, its wall time per
// timed iteration (the barrier before the call, the call and the loop), and
// whether its check failed (when validation ran). Doubles only: the MPI
// reference gathers it as sample_doubles MPI_DOUBLEs.
struct rank_sample {
    double mean_us = 0;
    double iteration_us = 0;
    double failed = 0;
};
inline constexpr int sample_doubles = sizeof(rank_sample) / sizeof(double);
static_assert(sizeof(rank_sample) == sample_doubles * sizeof(double));

struct row {
    std::string implementation;
    std::string label;
    std::string transport;
    std::string collective;
    std::string algorithm;
    std::string chosen;
    int ranks = 0;
    std::size_t bytes = 0;
    int iterations = 0;
    int warmup = 0;
    int buffers = 0;
    double avg_us = 0;
    double min_us = 0;
    double max_us = 0;
    double algbw_gbps = 0;
    // The slowest rank's wall time per timed iteration. Where a call's
    // ranks leave it apart, the next barrier absorbs the gap: the latency
    // of a call alone can flatter an implementation, while this counts the
    // barrier and the call together (docs/benchmarks.md).
    double iteration_us = 0;
    std::string valid; // "yes", "NO", or "-" when not checked
};

// Fills the statistics of r from every rank's sample.
void summarize(row& r, std::span<const rank_sample> samples, bool validated);

} // namespace tutti_bench
