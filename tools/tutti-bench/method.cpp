// The shared measurement method: options, sizes, layouts, schedule, patterns,
// checks and statistics (see method.hpp).
#include "method.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <unistd.h>

#include <fmt/format.h>

namespace tutti_bench {

namespace {

constexpr std::size_t page_bytes = 4096;

std::string trim(const std::string& text) {
    const auto first = text.find_first_not_of(" \t");
    if (first == std::string::npos) return "";
    const auto last = text.find_last_not_of(" \t");
    return text.substr(first, last - first + 1);
}

std::vector<std::string> split(const std::string& text, char separator) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    while (true) {
        const auto end = text.find(separator, start);
        parts.push_back(trim(text.substr(start, end - start)));
        if (end == std::string::npos) break;
        start = end + 1;
    }
    return parts;
}

// Blocks and values are told apart by who made them: rank r's block j,
// element k. Ranks and blocks stay below 2^16 and elements below 2^32.
element encode(int rank, std::size_t block, std::size_t k) {
    return static_cast<element>((static_cast<std::uint64_t>(rank) << 48) |
                                (static_cast<std::uint64_t>(block) << 32) |
                                (static_cast<std::uint64_t>(k) & 0xffffffffu));
}

// Reduced values: rank r contributes (r + 1) * w(i), so a sum over ranks
// 0..r is (r + 1)(r + 2) / 2 * w(i), exactly.
element weight(std::size_t i) {
    return static_cast<element>(i % 1000 + 1);
}
element contribution(int rank, std::size_t i) {
    return (rank + 1) * weight(i);
}
element sum_through(int last_rank, std::size_t i) {
    const element r = last_rank;
    return (r + 1) * (r + 2) / 2 * weight(i);
}

// Under --op compose rank r contributes the map x -> a x + b with an odd a
// that varies with rank and element, and b = (r + 1) w(i).
element affine_contribution(int rank, std::size_t i) {
    const auto a =
        static_cast<std::uint32_t>(2 * ((static_cast<std::size_t>(rank) * 31 + i) % 1000) + 3);
    const auto b = static_cast<std::uint32_t>(contribution(rank, i));
    return static_cast<element>(std::uint64_t{a} << 32 | b);
}

element contribution(reduction op, int rank, std::size_t i) {
    return op == reduction::sum ? contribution(rank, i) : affine_contribution(rank, i);
}

// What ranks 0..last_rank's contributions reduce to, in rank order.
element reduced_through(reduction op, int last_rank, std::size_t i) {
    if (op == reduction::sum) return sum_through(last_rank, i);
    element v = affine_contribution(0, i);
    for (int r = 1; r <= last_rank; ++r)
        v = compose_affine(v, affine_contribution(r, i));
    return v;
}

constexpr element untouched = -1;

std::string mismatch(const layout& l, const char* buffer, std::size_t i, element got,
                     element expected) {
    return fmt::format("{} {} on rank {}: {}[{}] is {:#x}, expected {:#x}", to_string(l.kind),
                       human_bytes(l.bytes), l.rank, buffer, i, static_cast<std::uint64_t>(got),
                       static_cast<std::uint64_t>(expected));
}

} // namespace

element compose_affine(element lower, element higher) {
    const auto low = static_cast<std::uint64_t>(lower), high = static_cast<std::uint64_t>(higher);
    const auto a1 = static_cast<std::uint32_t>(low >> 32), b1 = static_cast<std::uint32_t>(low);
    const auto a2 = static_cast<std::uint32_t>(high >> 32), b2 = static_cast<std::uint32_t>(high);
    // x -> a2 (a1 x + b1) + b2, modulo 2^32.
    const auto a = static_cast<std::uint32_t>(a1 * a2);
    const auto b = static_cast<std::uint32_t>(a2 * b1 + b2);
    return static_cast<element>(std::uint64_t{a} << 32 | b);
}

element combine(reduction op, element lower, element higher) {
    return op == reduction::sum ? lower + higher : compose_affine(lower, higher);
}

std::size_t parse_size(const std::string& text) {
    const std::string t = trim(text);
    std::size_t used = 0;
    unsigned long long value = 0;
    try {
        value = std::stoull(t, &used);
    } catch (const std::exception&) {
        throw std::invalid_argument("'" + text + "' is not a size (examples: 8, 4K, 16M, 1G)");
    }
    if (t.empty() || t[0] == '-')
        throw std::invalid_argument("'" + text + "' is not a size (examples: 8, 4K, 16M, 1G)");
    std::string unit = t.substr(used);
    if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
    if (unit.size() == 2 && (unit[1] == 'i' || unit[1] == 'I')) unit.pop_back();
    std::size_t factor = 1;
    if (unit == "K" || unit == "k")
        factor = kib;
    else if (unit == "M" || unit == "m")
        factor = mib;
    else if (unit == "G" || unit == "g")
        factor = gib;
    else if (!unit.empty())
        throw std::invalid_argument("'" + text + "': unknown unit (use K, M or G: binary)");
    if (value > std::numeric_limits<std::size_t>::max() / factor)
        throw std::invalid_argument("'" + text + "' is too large");
    return static_cast<std::size_t>(value) * factor;
}

std::vector<std::size_t> parse_sizes(const std::string& text) {
    std::vector<std::size_t> sizes;
    if (text.find(':') != std::string::npos) {
        const auto ends = split(text, ':');
        if (ends.size() != 2)
            throw std::invalid_argument("'" + text + "': a range is MIN:MAX, e.g. 8:64M");
        const std::size_t low = parse_size(ends[0]), high = parse_size(ends[1]);
        if (low == 0 || low > high)
            throw std::invalid_argument("'" + text + "': a range needs 0 < MIN <= MAX");
        sizes.push_back(low);
        std::size_t next = std::bit_ceil(low) == low ? low * 2 : std::bit_ceil(low);
        for (; next < high; next *= 2)
            sizes.push_back(next);
        if (high != low) sizes.push_back(high);
        return sizes;
    }
    for (const auto& part : split(text, ','))
        if (!part.empty()) sizes.push_back(parse_size(part));
    if (sizes.empty()) throw std::invalid_argument("no sizes given");
    return sizes;
}

std::vector<tutti::collective> parse_collectives(const std::string& text) {
    std::vector<tutti::collective> kinds;
    for (const auto& name : split(text, ',')) {
        if (name.empty()) continue;
        if (name == "all") {
            kinds.insert(kinds.end(), tutti::all_collectives.begin(), tutti::all_collectives.end());
            continue;
        }
        const auto kind = tutti::collective_from_string(name);
        if (!kind) {
            std::string known;
            for (auto c : tutti::all_collectives)
                known += std::string(known.empty() ? "" : ", ") + std::string(to_string(c));
            throw std::invalid_argument("unknown collective '" + name + "' (known: " + known +
                                        ", or all)");
        }
        kinds.push_back(*kind);
    }
    return kinds;
}

std::string human_bytes(std::size_t bytes) {
    if (bytes >= gib && bytes % gib == 0) return fmt::format("{} GiB", bytes / gib);
    if (bytes >= mib && bytes % mib == 0) return fmt::format("{} MiB", bytes / mib);
    if (bytes >= kib && bytes % kib == 0) return fmt::format("{} KiB", bytes / kib);
    return fmt::format("{} B", bytes);
}

namespace {
// CLI11's PositiveNumber and NonNegativeNumber say "Value 0 not in range
// 0.000000 to 1.797693e+308"; these say what is wanted. Text that is not a
// number passes here and fails CLI11's conversion, which names it.
// Numbers at least `low`, or (low_allowed false) above it.
CLI::Validator number_from(double low, bool low_allowed, const char* wanted, const char* name) {
    return CLI::Validator(
        [low, low_allowed, wanted](std::string& text) -> std::string {
            double value = 0;
            try {
                value = std::stod(text);
            } catch (const std::exception&) {
                return "";
            }
            const bool ok = low_allowed ? value >= low : value > low;
            return ok ? "" : fmt::format("must be {} (got {})", wanted, text);
        },
        name);
}
const CLI::Validator positive = number_from(0, false, "above 0", "POSITIVE");
const CLI::Validator non_negative = number_from(0, true, "0 or more", "NONNEGATIVE");
} // namespace

void add_options(CLI::App& app, settings& s) {
    app.add_option("collectives", s.given.collectives,
                   "collectives to measure: names (barrier, broadcast, reduce, all_reduce, "
                   "gather, scatter, all_gather, all_to_all, all_to_allv, reduce_scatter, scan, "
                   "exscan), comma lists, or all (the default)");
    app.add_option("-m,--sizes", s.given.sizes,
                   "message sizes: MIN:MAX (powers of two in between) or a list 8,1K,16M; the "
                   "size is the largest buffer a rank holds in the call")
        ->capture_default_str();
    app.add_option("-i,--iterations", s.max_iterations, "timed calls per size, at most")
        ->capture_default_str()
        ->check(positive);
    app.add_option("--min-iterations", s.min_iterations,
                   "timed calls per size, at least (large sizes)")
        ->capture_default_str()
        ->check(positive);
    app.add_option("--budget", s.given.budget,
                   "bytes the timed calls of one size move, which sets their number between the "
                   "two bounds above")
        ->capture_default_str();
    app.add_option(
           "-w,--warmup", s.warmup,
           "calls before the timed ones, not counted (default: a tenth of them, at least 10; "
           "fewer once they have taken --time-limit)")
        ->check(non_negative);
    app.add_option("--time-limit", s.time_limit,
                   "seconds per size: fewer timed calls when the warm-up shows they would take "
                   "longer")
        ->capture_default_str()
        ->check(positive);
    app.add_option("--buffers", s.buffers,
                   "buffer sets cycled through, one per call, so caches do not flatter results")
        ->capture_default_str()
        ->check(positive);
    app.add_flag("--rewrite", s.rewrite,
                 "each rank writes its buffers again before every call (untimed), as an "
                 "application that has just produced its data would");
    app.add_option("--misalign", s.misalign,
                   "bytes into a page every receive buffer starts, every send buffer starting "
                   "a page (a multiple of 8 below 4096); single copies then land that far past "
                   "their source's place in a page, as between heap buffers allocated one "
                   "after the other (16)")
        ->check(CLI::Range(std::size_t{0}, page_bytes - 1));
    app.add_option("--pool-limit", s.given.pool_limit,
                   "the buffer sets of one size stay below this")
        ->capture_default_str();
    app.add_flag("--validate", s.validate,
                 "check each size's result once (on fresh buffers, before the warm-up)");
    app.add_option("--op", s.given.op,
                   "what reductions combine with: sum (built in, commutative) or compose (the "
                   "program's own operation whose order matters: affine maps of 32-bit integers, "
                   "one per element, composed in rank order)")
        ->check(CLI::IsMember({"sum", "compose"}))
        ->capture_default_str();
    app.add_option("--root", s.root, "the root of rooted collectives")
        ->capture_default_str()
        ->check(non_negative);
    app.add_option("--csv", s.csv, "write the rows to this CSV file");
    app.add_option("--json", s.json, "write the run and its rows to this JSON file");
    app.add_option("--label", s.label,
                   "the series name in the files and plots (default: the implementation)");
    app.add_flag("-q,--quiet", s.quiet, "no progress on stderr");
    app.add_flag("--progress", s.progress,
                 "progress on stderr, one line per step, also when stderr is not a terminal");
    app.callback([&s] {
        try {
            s.collectives.clear();
            for (const auto& names : s.given.collectives) {
                const auto some = parse_collectives(names);
                s.collectives.insert(s.collectives.end(), some.begin(), some.end());
            }
            if (s.given.collectives.empty()) s.collectives = parse_collectives("all");
            s.sizes = parse_sizes(s.given.sizes);
            s.budget = parse_size(s.given.budget);
            s.pool_limit = parse_size(s.given.pool_limit);
            s.op = s.given.op == "compose" ? reduction::compose : reduction::sum;
            if (s.misalign && *s.misalign % sizeof(element) != 0)
                throw std::invalid_argument(
                    fmt::format("--misalign {}: not a multiple of {} bytes (an element)",
                                *s.misalign, sizeof(element)));
        } catch (const std::invalid_argument& e) {
            throw CLI::ValidationError(e.what());
        }
        // A small --iterations for a quick run lowers the floor with it.
        s.min_iterations = std::min(s.min_iterations, s.max_iterations);
    });
}

layout layout_for(tutti::collective kind, std::size_t nominal_bytes, int ranks, int rank, int root,
                  reduction op) {
    using tutti::collective;
    layout l{.kind = kind, .ranks = ranks, .rank = rank, .root = root, .op = op};
    const std::size_t n = std::max<std::size_t>(1, nominal_bytes / sizeof(element));
    const auto p = static_cast<std::size_t>(ranks);
    const std::size_t block = std::max<std::size_t>(1, n / p);
    switch (kind) {
    case collective::barrier:
    case collective::split:
        return l;
    case collective::broadcast:
        l.send = l.block = n;
        break;
    case collective::reduce:
    case collective::all_reduce:
    case collective::scan:
    case collective::exscan:
        l.send = l.recv = l.block = n;
        break;
    case collective::gather:
    case collective::all_gather:
        l.block = l.send = block;
        l.recv = block * p;
        break;
    case collective::scatter:
    case collective::reduce_scatter:
        l.block = l.recv = block;
        l.send = block * p;
        break;
    case collective::all_to_all:
    case collective::all_to_allv:
        l.block = block;
        l.send = l.recv = block * p;
        break;
    }
    l.bytes = std::max(l.send, l.recv) * sizeof(element);
    return l;
}

int scheduled_iterations(const settings& s, const layout& l) {
    const std::size_t by_budget = s.budget / std::max<std::size_t>(l.bytes, 1);
    return static_cast<int>(std::clamp<std::size_t>(by_budget,
                                                    static_cast<std::size_t>(s.min_iterations),
                                                    static_cast<std::size_t>(s.max_iterations)));
}

int warmup_iterations(const settings& s, int iterations) {
    return s.warmup >= 0 ? s.warmup : std::max(10, iterations / 10);
}

int next_warmup_batch(const settings& s, int warmup, int done, double seconds_so_far) {
    if (done >= warmup) return 0;
    if (done == 0) return std::min(warmup, 2);
    if (seconds_so_far >= s.time_limit) return 0;
    return std::min(done, warmup - done);
}

int iterations_within_limit(const settings& s, int iterations, double warmup_mean_seconds) {
    if (warmup_mean_seconds <= 0) return iterations;
    const double fit = std::floor(s.time_limit / warmup_mean_seconds);
    if (fit >= iterations) return iterations;
    return std::max(1, static_cast<int>(fit));
}

namespace {

// Blocks that start `place` bytes into a page (--misalign), carved from
// larger ones of `upstream`, whose address is kept just before each.
class placed_resource : public std::pmr::memory_resource {
public:
    placed_resource(std::size_t place, std::pmr::memory_resource* upstream)
        : place_(place), upstream_(upstream) {}

private:
    static constexpr std::size_t kept = sizeof(void*);
    std::size_t whole(std::size_t bytes) const { return bytes + kept + page_bytes + place_; }

    void* do_allocate(std::size_t bytes, std::size_t) override {
        auto* block = static_cast<std::byte*>(upstream_->allocate(whole(bytes)));
        const auto start = reinterpret_cast<std::uintptr_t>(block) + kept;
        auto* placed = block + (kept + (page_bytes - start % page_bytes) % page_bytes + place_);
        std::memcpy(placed - kept, &block, kept);
        return placed;
    }
    void do_deallocate(void* p, std::size_t bytes, std::size_t) override {
        std::byte* block = nullptr;
        std::memcpy(&block, static_cast<std::byte*>(p) - kept, kept);
        upstream_->deallocate(block, whole(bytes));
    }
    bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
        return this == &other;
    }

    std::size_t place_;
    std::pmr::memory_resource* upstream_;
};

// The two resources of --misalign, kept alive by every set that uses them.
struct placed_pair {
    placed_pair(std::size_t recv_place, std::pmr::memory_resource* upstream)
        : send(0, upstream), recv(recv_place, upstream) {}
    placed_resource send;
    placed_resource recv;
};

} // namespace

std::size_t set_bytes(const layout& l) {
    // Saturates: sizes up to the largest std::size_t parse.
    constexpr std::size_t most = std::numeric_limits<std::size_t>::max() / sizeof(element);
    if (l.send > most || l.recv > most - l.send) return std::numeric_limits<std::size_t>::max();
    return std::max<std::size_t>(1, (l.send + l.recv) * sizeof(element));
}

std::size_t machine_memory_bytes() {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return 0;
    return static_cast<std::size_t>(pages) * static_cast<std::size_t>(page);
}

std::string memory_shortfall(const layout& l, int ranks_on_node, std::size_t machine_bytes) {
    const std::size_t per_rank = set_bytes(l);
    const auto ranks = static_cast<std::size_t>(std::max(ranks_on_node, 1));
    if (machine_bytes == 0 || per_rank <= machine_bytes / ranks) return "";
    const auto gibibytes = [](double bytes) {
        return fmt::format("{:.1f} GiB", bytes / static_cast<double>(gib));
    };
    const auto need = static_cast<double>(per_rank);
    return fmt::format("its buffers take {} on each rank, {} for the {} rank(s) on this machine, "
                       "which has {} of memory",
                       gibibytes(need), gibibytes(need * static_cast<double>(ranks)), ranks,
                       gibibytes(static_cast<double>(machine_bytes)));
}

std::string try_make_pool(std::vector<buffer_set>& pool, const settings& s, const layout& l,
                          int ranks_on_node, std::size_t machine_bytes,
                          std::pmr::memory_resource* memory) {
    pool.clear();
    if (auto why = memory_shortfall(l, ranks_on_node, machine_bytes); !why.empty()) return why;
    try {
        pool = make_pool(s, l, memory);
    } catch (const std::exception& e) {
        pool.clear();
        return fmt::format("its buffers ({} on each rank) could not be allocated: {}",
                           human_bytes(set_bytes(l)), e.what());
    }
    return "";
}

std::string skip_reason(const std::string& mine) {
    return mine.empty() ? "another rank could not allocate its buffers" : mine;
}

std::vector<buffer_set> make_pool(const settings& s, const layout& l,
                                  std::pmr::memory_resource* memory) {
    const std::size_t fit = std::max<std::size_t>(1, s.pool_limit / set_bytes(l));
    const std::size_t sets = std::min(static_cast<std::size_t>(s.buffers), fit);
    std::vector<buffer_set> pool;
    pool.reserve(sets);
    const auto placement =
        s.misalign ? std::make_shared<placed_pair>(*s.misalign, memory) : nullptr;
    for (std::size_t i = 0; i < sets; ++i) {
        if (placement)
            pool.push_back({placement, std::pmr::vector<element>(l.send, &placement->send),
                            std::pmr::vector<element>(l.recv, &placement->recv)});
        else
            pool.push_back({nullptr, std::pmr::vector<element>(l.send, memory),
                            std::pmr::vector<element>(l.recv, memory)});
        fill(l, pool.back());
    }
    return pool;
}

buffer_set& next_set(const settings& s, const layout& l, std::vector<buffer_set>& pool,
                     std::size_t& next) {
    auto& set = pool[next++ % pool.size()];
    if (s.rewrite) fill(l, set);
    return set;
}

void fill(const layout& l, buffer_set& b) {
    using tutti::collective;
    std::ranges::fill(b.recv, untouched);
    switch (l.kind) {
    case collective::barrier:
    case collective::split:
        break;
    case collective::broadcast:
    case collective::gather:
    case collective::all_gather:
        for (std::size_t k = 0; k < b.send.size(); ++k)
            b.send[k] = encode(l.rank, 0, k);
        break;
    case collective::scatter:
    case collective::all_to_all:
    case collective::all_to_allv:
        for (std::size_t i = 0; i < b.send.size(); ++i)
            b.send[i] = encode(l.rank, i / l.block, i % l.block);
        break;
    case collective::reduce:
    case collective::all_reduce:
    case collective::scan:
    case collective::exscan:
    case collective::reduce_scatter:
        for (std::size_t i = 0; i < b.send.size(); ++i)
            b.send[i] = contribution(l.op, l.rank, i);
        break;
    }
}

std::string check(const layout& l, const buffer_set& b) {
    using tutti::collective;
    const int last = l.ranks - 1;
    auto expect = [&](const char* buffer, std::span<const element> got,
                      auto&& expected) -> std::string {
        for (std::size_t i = 0; i < got.size(); ++i)
            if (got[i] != expected(i)) return mismatch(l, buffer, i, got[i], expected(i));
        return "";
    };
    switch (l.kind) {
    case collective::barrier:
    case collective::split:
        return "";
    case collective::broadcast:
        return expect("buffer", b.send, [&](std::size_t k) { return encode(l.root, 0, k); });
    case collective::reduce:
        if (l.rank != l.root) return "";
        [[fallthrough]];
    case collective::all_reduce:
        return expect("recv", b.recv,
                      [&](std::size_t i) { return reduced_through(l.op, last, i); });
    case collective::scan:
        return expect("recv", b.recv,
                      [&](std::size_t i) { return reduced_through(l.op, l.rank, i); });
    case collective::exscan:
        if (l.rank == 0) return ""; // rank 0's result is undefined in MPI, untouched in tutti
        return expect("recv", b.recv,
                      [&](std::size_t i) { return reduced_through(l.op, l.rank - 1, i); });
    case collective::gather:
        if (l.rank != l.root) return "";
        [[fallthrough]];
    case collective::all_gather:
        return expect("recv", b.recv, [&](std::size_t i) {
            return encode(static_cast<int>(i / l.block), 0, i % l.block);
        });
    case collective::scatter:
        return expect("recv", b.recv, [&](std::size_t k) {
            return encode(l.root, static_cast<std::size_t>(l.rank), k);
        });
    case collective::all_to_all:
    case collective::all_to_allv:
        return expect("recv", b.recv, [&](std::size_t i) {
            return encode(static_cast<int>(i / l.block), static_cast<std::size_t>(l.rank),
                          i % l.block);
        });
    case collective::reduce_scatter:
        return expect("recv", b.recv, [&](std::size_t k) {
            return reduced_through(l.op, last, static_cast<std::size_t>(l.rank) * l.block + k);
        });
    }
    return "";
}

void summarize(row& r, std::span<const rank_sample> samples, bool validated) {
    double sum = 0, low = std::numeric_limits<double>::infinity(), high = 0, iteration = 0;
    bool failed = false;
    for (const auto& s : samples) {
        iteration = std::max(iteration, s.iteration_us);
        sum += s.mean_us;
        low = std::min(low, s.mean_us);
        high = std::max(high, s.mean_us);
        failed = failed || s.failed != 0;
    }
    r.avg_us = samples.empty() ? 0 : sum / static_cast<double>(samples.size());
    r.min_us = samples.empty() ? 0 : low;
    r.max_us = high;
    r.algbw_gbps = high > 0 ? static_cast<double>(r.bytes) / high / 1e3 : 0;
    r.iteration_us = iteration;
    r.valid = validated ? (failed ? "NO" : "yes") : "-";
}

} // namespace tutti_bench
