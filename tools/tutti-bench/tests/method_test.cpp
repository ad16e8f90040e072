// The shared measurement method without any communication: size parsing,
// layouts, the iteration schedule, and that the checks accept exactly the
// results a correct collective produces (computed here by hand from every
// rank's filled buffers) and reject one wrong element.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "method.hpp"

using namespace tutti_bench;
using tutti::collective;

// The options as the programs parse them.
settings parse_options(std::vector<std::string> args) {
    CLI::App app;
    settings s;
    add_options(app, s);
    args.insert(args.begin(), "tutti-bench");
    std::vector<const char*> argv;
    for (const auto& a : args)
        argv.push_back(a.c_str());
    app.parse(static_cast<int>(argv.size()), argv.data());
    return s;
}

TEST_CASE("sizes: units, lists and power-of-two ranges") {
    CHECK(parse_size("8") == 8);
    CHECK(parse_size("4K") == 4096);
    CHECK(parse_size("16MiB") == 16 * mib);
    CHECK(parse_size("1G") == 1024 * mib);
    CHECK(parse_sizes("8,1K,16M") == std::vector<std::size_t>{8, 1024, 16 * mib});
    CHECK(parse_sizes("8:64") == std::vector<std::size_t>{8, 16, 32, 64});
    CHECK(parse_sizes("3:20") == std::vector<std::size_t>{3, 4, 8, 16, 20});
    CHECK(parse_sizes("8:64M").size() == 24);
    CHECK_THROWS_AS(parse_size("12Q"), std::invalid_argument);
    CHECK_THROWS_AS(parse_size("-1"), std::invalid_argument);
    CHECK_THROWS_AS(parse_sizes("64:8"), std::invalid_argument);
    CHECK_THROWS_AS(parse_sizes("1:2:3"), std::invalid_argument);
    CHECK(parse_collectives("all").size() == tutti::all_collectives.size());
    CHECK(parse_collectives("barrier,scan") ==
          std::vector<collective>{collective::barrier, collective::scan});
    CHECK_THROWS_AS(parse_collectives("allreduce"), std::invalid_argument);
}

TEST_CASE("layouts: bytes are the largest buffer, blocks are whole and non-empty") {
    auto l = layout_for(collective::all_gather, 8, 2, 0, 0);
    CHECK(l.send == 1);
    CHECK(l.recv == 2);
    CHECK(l.bytes == 16);
    l = layout_for(collective::reduce_scatter, 1000, 3, 1, 0);
    CHECK(l.block == 41);
    CHECK(l.send == 123);
    CHECK(l.recv == 41);
    CHECK(l.bytes == 123 * 8);
    l = layout_for(collective::all_reduce, 16 * mib, 4, 2, 0);
    CHECK(l.send == 2 * mib);
    CHECK(l.bytes == 16 * mib);
    CHECK(layout_for(collective::barrier, 1024, 2, 0, 0).bytes == 0);
}

TEST_CASE("schedule: the budget sets the count within its bounds; the time limit cuts it") {
    settings s;
    CHECK(scheduled_iterations(s, layout_for(collective::all_reduce, 8, 2, 0, 0)) == 10000);
    CHECK(scheduled_iterations(s, layout_for(collective::all_reduce, 16 * kib, 2, 0, 0)) == 10000);
    CHECK(scheduled_iterations(s, layout_for(collective::all_reduce, 64 * kib, 2, 0, 0)) == 4096);
    CHECK(scheduled_iterations(s, layout_for(collective::all_reduce, mib, 2, 0, 0)) == 256);
    CHECK(scheduled_iterations(s, layout_for(collective::all_reduce, 64 * mib, 2, 0, 0)) == 10);
    CHECK(warmup_iterations(s, 1000) == 100);
    CHECK(warmup_iterations(s, 10) == 10);
    s.time_limit = 1.0;
    // Warm-up batches: 2, then doubling, until done or the limit is spent.
    CHECK(next_warmup_batch(s, 10, 0, 0) == 2);
    CHECK(next_warmup_batch(s, 10, 2, 0.2) == 2);
    CHECK(next_warmup_batch(s, 10, 4, 0.3) == 4);
    CHECK(next_warmup_batch(s, 10, 8, 0.4) == 2);
    CHECK(next_warmup_batch(s, 10, 10, 0.5) == 0);
    CHECK(next_warmup_batch(s, 10, 2, 1.0) == 0);
    CHECK(next_warmup_batch(s, 1, 0, 0) == 1);
    CHECK(next_warmup_batch(s, 0, 0, 0) == 0);
    CHECK(iterations_within_limit(s, 1000, 0.01) == 100);
    CHECK(iterations_within_limit(s, 1000, 0.0001) == 1000);
    CHECK(iterations_within_limit(s, 1000, 5.0) == 1);
}

namespace {

// Every rank's buffers after a correct call, computed from the filled send
// buffers of all ranks; reductions combine in rank order, or in reverse
// rank order where `reversed` (a wrong result for a non-commutative one).
std::vector<buffer_set> simulate(collective kind, std::size_t bytes, int ranks, int root,
                                 reduction op = reduction::sum, bool reversed = false) {
    std::vector<layout> layouts;
    std::vector<buffer_set> b(static_cast<std::size_t>(ranks));
    // Ranks first..last of element i of the send buffers, combined.
    auto fold = [&](std::size_t first, std::size_t last, std::size_t i) {
        element v = b[reversed ? last : first].send[i];
        for (std::size_t k = 1; k <= last - first; ++k)
            v = combine(op, v, b[reversed ? last - k : first + k].send[i]);
        return v;
    };
    for (int r = 0; r < ranks; ++r) {
        layouts.push_back(layout_for(kind, bytes, ranks, r, root, op));
        b[r].send.resize(layouts[r].send);
        b[r].recv.resize(layouts[r].recv);
        fill(layouts[r], b[r]);
    }
    const std::size_t block = layouts[0].block;
    const auto p = static_cast<std::size_t>(ranks);
    for (std::size_t r = 0; r < p; ++r) {
        auto& out = b[r].recv;
        for (std::size_t i = 0; i < out.size(); ++i) {
            element v = 0;
            switch (kind) {
            case collective::all_reduce:
            case collective::reduce:
                v = fold(0, p - 1, i);
                break;
            case collective::scan:
                v = fold(0, r, i);
                break;
            case collective::exscan:
                v = r == 0 ? out[i] : fold(0, r - 1, i);
                break;
            case collective::all_gather:
            case collective::gather:
                v = b[i / block].send[i % block];
                break;
            case collective::scatter:
                v = b[static_cast<std::size_t>(root)].send[r * block + i];
                break;
            case collective::all_to_all:
            case collective::all_to_allv:
                v = b[i / block].send[r * block + i % block];
                break;
            case collective::reduce_scatter:
                v = fold(0, p - 1, r * block + i);
                break;
            default:
                break;
            }
            out[i] = v;
        }
    }
    if (kind == collective::broadcast)
        for (std::size_t r = 0; r < p; ++r)
            b[r].send = b[static_cast<std::size_t>(root)].send;
    return b;
}

} // namespace

TEST_CASE("checks accept a correct result and reject one wrong element") {
    for (auto kind : tutti::all_collectives) {
        if (kind == collective::barrier) continue;
        for (int ranks : {1, 2, 3, 5}) {
            CAPTURE(to_string(kind));
            CAPTURE(ranks);
            const int root = ranks - 1;
            auto results = simulate(kind, 1000, ranks, root);
            for (int r = 0; r < ranks; ++r)
                CHECK(check(layout_for(kind, 1000, ranks, r, root), results[r]).empty());
            // Corrupt the last element a rank checks: the root for rooted
            // collectives, the last rank otherwise (exscan's rank 0 has none).
            const int victim =
                kind == collective::reduce || kind == collective::gather ? root : ranks - 1;
            if (kind == collective::exscan && victim == 0) continue;
            auto& target =
                kind == collective::broadcast ? results[victim].send : results[victim].recv;
            target.back() ^= 1;
            CHECK_FALSE(
                check(layout_for(kind, 1000, ranks, victim, root), results[victim]).empty());
        }
    }
}

TEST_CASE("--op compose: checks accept rank order and reject any other") {
    // The affine maps compose associatively: a fold split anywhere agrees.
    const element f = compose_affine(element{3} << 32 | 5, element{7} << 32 | 11);
    CHECK(f == (element{21} << 32 | 46)); // x -> 7 (3 x + 5) + 11
    const element g = element{9} << 32 | 2;
    CHECK(compose_affine(compose_affine(element{3} << 32 | 5, element{7} << 32 | 11), g) ==
          compose_affine(element{3} << 32 | 5, compose_affine(element{7} << 32 | 11, g)));
    CHECK(compose_affine(g, f) != compose_affine(f, g));
    for (auto kind : {collective::reduce, collective::all_reduce, collective::reduce_scatter,
                      collective::scan, collective::exscan}) {
        for (int ranks : {2, 3, 5}) {
            CAPTURE(to_string(kind));
            CAPTURE(ranks);
            const int root = ranks - 1;
            const auto in_order = simulate(kind, 1000, ranks, root, reduction::compose);
            for (int r = 0; r < ranks; ++r)
                CHECK(check(layout_for(kind, 1000, ranks, r, root, reduction::compose), in_order[r])
                          .empty());
            // Combined from the last rank down: wrong wherever two or more
            // ranks' maps meet (scan's rank 0 and exscan's ranks 0-1 have
            // one or none).
            const auto reversed = simulate(kind, 1000, ranks, root, reduction::compose, true);
            const int checked = kind == collective::scan || kind == collective::exscan ? ranks - 1
                                : kind == collective::reduce                           ? root
                                                                                       : 0;
            if (kind == collective::exscan && ranks == 2) continue;
            CHECK_FALSE(check(layout_for(kind, 1000, ranks, checked, root, reduction::compose),
                              reversed[checked])
                            .empty());
        }
    }
    // The sum's check does not take a composed result, nor the other way.
    const auto summed = simulate(collective::all_reduce, 64, 3, 0);
    CHECK_FALSE(
        check(layout_for(collective::all_reduce, 64, 3, 0, 0, reduction::compose), summed[0])
            .empty());
}

TEST_CASE("the pool cycles, and --rewrite writes a set again before its call") {
    const auto l = layout_for(collective::all_to_all, 1024, 2, 0, 0);
    for (bool rewrite : {false, true}) {
        CAPTURE(rewrite);
        settings s;
        s.buffers = 2;
        s.rewrite = rewrite;
        auto pool = make_pool(s, l);
        REQUIRE(pool.size() == 2);
        const auto filled = pool[0].send;
        pool[0].send.front() = filled.front() + 1; // a call's leftover, say
        std::size_t next = 0;
        CHECK(&next_set(s, l, pool, next) == &pool[0]);
        CHECK(&next_set(s, l, pool, next) == &pool[1]);
        CHECK(&next_set(s, l, pool, next) == &pool[0]);
        CHECK(next == 3);
        CHECK((pool[0].send.front() == filled.front()) == rewrite);
    }
}

TEST_CASE("--misalign places send buffers at a page's start and receive buffers so far into one") {
    const auto l = layout_for(collective::all_to_all, 64 * 1024, 2, 0, 0);
    const auto place = [](const std::pmr::vector<element>& v) {
        return reinterpret_cast<std::uintptr_t>(v.data()) % 4096;
    };
    for (std::size_t misalign : {0u, 16u, 4088u}) {
        CAPTURE(misalign);
        settings s;
        s.buffers = 3;
        s.misalign = misalign;
        const auto pool = make_pool(s, l);
        REQUIRE(pool.size() == 3);
        for (const auto& set : pool) {
            CHECK(place(set.send) == 0);
            CHECK(place(set.recv) == misalign);
            CHECK(check(l, set).empty() == false); // filled: the result is not there yet
        }
    }

    const auto parse = [](std::vector<std::string> args) {
        return parse_options(std::move(args)).misalign;
    };
    CHECK(parse({}) == std::nullopt);
    CHECK(parse({"--misalign", "16"}) == 16u);
    CHECK_THROWS_WITH_AS(parse({"--misalign", "12"}),
                         "--misalign 12: not a multiple of 8 bytes (an element)",
                         CLI::ValidationError);
    CHECK_THROWS_AS(parse({"--misalign", "4096"}), CLI::ValidationError);
}

TEST_CASE("memory: a size whose buffers the machine cannot hold is refused, saying why") {
    const auto l = layout_for(collective::all_to_all, 4 * gib, 2, 0, 0);
    CHECK(set_bytes(l) == 8 * gib); // send and receive, 4 GiB each
    CHECK(memory_shortfall(l, 2, 64 * gib).empty());
    CHECK(memory_shortfall(l, 1, 8 * gib).empty());
    CHECK(memory_shortfall(l, 2, 0).empty()); // the machine does not say: no limit
    CHECK(memory_shortfall(l, 2, 12 * gib) ==
          "its buffers take 8.0 GiB on each rank, 16.0 GiB for the 2 rank(s) on this machine, "
          "which has 12.0 GiB of memory");
    CHECK(memory_shortfall(layout_for(collective::barrier, 4 * gib, 2, 0, 0), 2, kib).empty());

    // The largest size that parses does not wrap around.
    const auto huge =
        layout_for(collective::all_reduce, std::numeric_limits<std::size_t>::max(), 2, 0, 0);
    CHECK(set_bytes(huge) == std::numeric_limits<std::size_t>::max());
    CHECK_FALSE(memory_shortfall(huge, 1, 64 * gib).empty());
    CHECK(machine_memory_bytes() > 0);

    // Refused before allocating, or refused by the allocation: the pool
    // stays empty and the reason says which.
    std::vector<buffer_set> pool;
    settings s;
    CHECK(try_make_pool(pool, s, l, 2, 12 * gib).starts_with("its buffers take 8.0 GiB"));
    CHECK(pool.empty());
    struct refusing final : std::pmr::memory_resource {
        void* do_allocate(std::size_t, std::size_t) override { throw std::bad_alloc(); }
        void do_deallocate(void*, std::size_t, std::size_t) override {}
        bool do_is_equal(const std::pmr::memory_resource& o) const noexcept override {
            return this == &o;
        }
    } refuse;
    const auto small = layout_for(collective::all_reduce, 64, 2, 0, 0);
    CHECK(try_make_pool(pool, s, small, 2, 64 * gib, &refuse) ==
          "its buffers (128 B on each rank) could not be allocated: std::bad_alloc");
    CHECK(pool.empty());
    CHECK(try_make_pool(pool, s, small, 2, 64 * gib).empty());
    CHECK(pool.size() == 1);
    CHECK(skip_reason("") == "another rank could not allocate its buffers");
    CHECK(skip_reason("why") == "why");
    CHECK(human_bytes(100 * gib) == "100 GiB");
}

TEST_CASE("options: counts and times out of range name what is wanted") {
    const auto parse = parse_options;
    CHECK(parse({"--buffers", "3"}).buffers == 3);
    CHECK_THROWS_WITH_AS(parse({"--buffers", "0"}), "--buffers: must be above 0 (got 0)",
                         CLI::ValidationError);
    CHECK_THROWS_WITH_AS(parse({"--time-limit", "-1"}), "--time-limit: must be above 0 (got -1)",
                         CLI::ValidationError);
    CHECK_THROWS_WITH_AS(parse({"--root", "-2"}), "--root: must be 0 or more (got -2)",
                         CLI::ValidationError);
    CHECK(parse({"--root", "0"}).root == 0);
    CHECK_THROWS_AS(parse({"-i", "many"}), CLI::ConversionError);
}
