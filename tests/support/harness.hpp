// Shared by the test suites: run a body on every rank of a world, and the
// sizes and counts every sweep uses. The same test cases run in two modes:
// in one process (inproc::run, every size of the sweep), and as one rank of a
// multi-process job (tests/multiprocess/), where the world is the job's and
// smaller sizes run on a part of it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "tutti.hpp"

namespace tutti::testing {

// Set by the multi-process driver to the job's world; empty in one process.
inline communicator& job_world() {
    static communicator world;
    return world;
}

// Runs body on p ranks: a new in-process world, or the first p ranks of the
// job's world (the others wait at the end). Sizes above the job's are skipped.
inline void run_ranks(int p, const std::function<task<void>(communicator)>& body) {
    communicator& world = job_world();
    if (!world.valid()) {
        inproc::run(p, body);
        return;
    }
    if (p > world.size()) return;
    try {
        communicator part = world;
        if (p < world.size())
            part = tutti::wait(world, world.split(world.rank() < p ? 0 : undefined_color));
        if (part.valid()) tutti::wait(part, body(part));
        tutti::wait(world, barrier(world));
    } catch (const std::exception& e) {
        // The other ranks are in the middle of the same collective and would
        // wait for us forever: leave, so they see a lost peer and the
        // launcher ends the job with our status.
        std::fprintf(stderr, "rank %d: %s\n", world.rank(), e.what());
        std::_Exit(3);
    }
}

// Communicator sizes every algorithm is swept over: 1 to 17, 31 and 64 in
// one process; the job's size in a multi-process job.
inline std::vector<int> sweep_sizes() {
    if (job_world().valid()) return {job_world().size()};
    std::vector<int> sizes;
    for (int p = 1; p <= 17; ++p)
        sizes.push_back(p);
    sizes.push_back(31);
    sizes.push_back(64);
    return sizes;
}

// Element counts every algorithm is swept over.
inline std::vector<std::size_t> sweep_counts() {
    return {0, 1, 7, 3001};
}

// An injective value for (from, to, index), so a misplaced element shows.
inline std::int64_t encode(std::int64_t from, std::int64_t to, std::int64_t index = 0) {
    return (from * 100003 + to) * 1000003 + index;
}

// Every pure algorithm registered for a collective: what runs on a plain
// communicator. Compositions need more than a communicator (a hierarchy, for
// the hierarchical ones) and are swept where that exists: tests/hierarchy,
// topology/tests and the selection matrix in tests/select.
inline std::vector<std::string> algorithm_names(collective kind) {
    std::vector<std::string> names;
    for (const auto* info : algorithms().list(kind))
        if (info->form == algorithm_kind::pure) names.push_back(info->name);
    return names;
}

// Runs body(name, p, n) for every registered algorithm of Args's collective,
// every sweep size p and every sweep count n, skipping the combinations whose
// restrictions fail for signature(p, n) (those are tested to fail elsewhere).
// body typically calls inproc::run(p, ...) with use(name).
template <class Args, class Signature, class Body>
void sweep(Signature signature, Body body) {
    const auto names = algorithm_names(Args::kind);
    REQUIRE_FALSE(names.empty());
    for (const auto& name : names) {
        const auto* algorithm = algorithms().find<Args>(name);
        REQUIRE(algorithm != nullptr);
        for (int p : sweep_sizes()) {
            for (std::size_t n : sweep_counts()) {
                call_signature call = signature(p, n);
                call.kind = Args::kind;
                call.comm_size = p;
                if (algorithm->info.check(call)) continue;
                CAPTURE(name);
                CAPTURE(p);
                CAPTURE(n);
                body(name, p, n);
            }
        }
    }
}

// True in a build with AddressSanitizer (tools/test.sh's build-sanitize),
// where every case of a sweep runs some ten times slower. (tutti builds with
// clang only, which always has __has_feature.)
inline constexpr bool address_sanitized = __has_feature(address_sanitizer);

// sweep for a collective whose buffers hold n elements for every rank
// (all_gather, reduce_scatter), so that a case costs p * p * n. Under
// AddressSanitizer it leaves out n = 3001 at p = 31 and 64, which took 130 s
// of tutti-tests' 225 there: the sanitizer still sees every algorithm with
// 3001 elements per rank up to 17 ranks and with 0, 1, 7 at 31 and 64, and
// the normal build runs every case.
template <class Args, class Signature, class Body>
void sweep_per_rank(Signature signature, Body body) {
    sweep<Args>(signature, [&](const std::string& name, int p, std::size_t n) {
        if (address_sanitized && p > 17 && n > 1000) return;
        body(name, p, n);
    });
}

// A non-commutative operation whose result shows the order of its operands:
// 2x2 integer matrix product, (a * b) != (b * a) in general.
struct matrix2 {
    std::int64_t a, b, c, d;
    friend bool operator==(const matrix2&, const matrix2&) = default;
};
inline matrix2 multiply(const matrix2& x, const matrix2& y) {
    // Entries are kept small modulo a prime so long products do not overflow.
    constexpr std::int64_t m = 1000003;
    return {(x.a * y.a + x.b * y.c) % m, (x.a * y.b + x.b * y.d) % m, (x.c * y.a + x.d * y.c) % m,
            (x.c * y.b + x.d * y.d) % m};
}
// The contribution of rank r at index i: distinct, and non-commuting.
inline matrix2 matrix_of(int rank, std::size_t i) {
    auto k = static_cast<std::int64_t>(rank) * 7 + static_cast<std::int64_t>(i) * 3;
    return {1 + k % 5, 1 + k % 3, k % 2, 1};
}
inline auto matrix_product() {
    return make_op([](const matrix2& x, const matrix2& y) { return multiply(x, y); },
                   commutativity::non_commutative);
}

} // namespace tutti::testing
