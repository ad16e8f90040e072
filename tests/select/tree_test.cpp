// Decision trees: the shipped ones validate and never choose an algorithm
// whose restriction fails; each kind of bad tree is refused with an error
// that names its source and the JSON path of the offending node.
#include <fstream>

#include <nlohmann/json.hpp>

#include "select_support.hpp"

using namespace tutti;
using tutti::testing::contains;

namespace {

nlohmann::json builtin(tree_role role) {
    return nlohmann::json::parse(builtin_tree_text(role));
}

tutti::error load_error_text(const std::string& text, tree_role role = tree_role::pure) {
    try {
        decision_tree::load(text, "test.json", role);
    } catch (const tutti::error& e) {
        return e;
    }
    FAIL("the tree loaded");
    return tutti::error(errc::invalid_argument, "unreachable");
}

tutti::error load_error(const nlohmann::json& tree, tree_role role = tree_role::pure) {
    return load_error_text(tree.dump(), role);
}

// Every signature of a grid over the variables the trees test.
std::vector<call_signature> signature_grid(collective kind) {
    std::vector<call_signature> out;
    for (int p : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 64})
        for (std::size_t bytes : {std::size_t{0}, std::size_t{8}, std::size_t{256},
                                  std::size_t{16384}, std::size_t{16385}, std::size_t{1} << 20})
            for (int op = 0; op < 3; ++op)
                for (bool hierarchy : {false, true})
                    for (std::string_view transport : {"inproc", "shm", "tcp", "shm+tcp", "x"})
                        for (bool in_place : {false, true})
                            for (std::uint32_t line_ns : {0u, 110u, 450u})
                                for (std::uint32_t readv_percent : {0u, 114u, 300u})
                                    for (std::uint32_t ranks_per_core : {0u, 8u}) {
                                        call_signature s{
                                            .kind = kind, .comm_size = p, .bytes = bytes};
                                        s.line_ns = line_ns;
                                        s.readv_percent = readv_percent;
                                        // As the shm transport judges it.
                                        s.slow_single_copy = readv_percent == 300;
                                        s.ranks_per_core = ranks_per_core;
                                        s.has_op = kind == collective::all_reduce ||
                                                   kind == collective::reduce ||
                                                   kind == collective::reduce_scatter ||
                                                   kind == collective::scan ||
                                                   kind == collective::exscan;
                                        if (s.has_op) {
                                            s.count = bytes / 8;
                                            s.commutative = op != 2;
                                            s.builtin_op = op == 0;
                                            s.in_place = in_place;
                                        }
                                        s.equal_counts = kind != collective::all_to_allv;
                                        s.has_hierarchy = hierarchy;
                                        s.transport = transport;
                                        out.push_back(s);
                                    }
    return out;
}

// A call with an operation over 8-byte elements: the reductions and scans
// the preference tests walk.
call_signature with_op(collective kind, int p, std::size_t bytes, bool commutative = true,
                       std::string_view transport = {}) {
    return call_signature{.kind = kind,
                          .comm_size = p,
                          .bytes = bytes,
                          .count = bytes / 8,
                          .has_op = true,
                          .commutative = commutative,
                          .transport = transport};
}

// The same call where a line takes line_ns between the ranks' cores (0:
// they share cores).
call_signature line_at(call_signature s, std::uint32_t line_ns) {
    s.line_ns = line_ns;
    return s;
}

// A call without an operation.
call_signature plain(collective kind, int p, std::size_t bytes) {
    return call_signature{.kind = kind, .comm_size = p, .bytes = bytes};
}

// The same call over TCP; a reduction's with a commutative operation.
call_signature over_tcp(collective kind, int p, std::size_t bytes) {
    const bool reduces = kind == collective::all_reduce || kind == collective::reduce ||
                         kind == collective::reduce_scatter || kind == collective::scan ||
                         kind == collective::exscan;
    auto s = reduces ? with_op(kind, p, bytes) : plain(kind, p, bytes);
    s.transport = "tcp";
    return s;
}

// A call's choice where ranks crowd the cores (ranks_per_core among
// `crowded_figures`) and where they do not (among `general_figures`); over
// shared memory unless the call names its transport.
struct crowding_choice {
    call_signature call;
    std::string_view crowded, general;
};

crowding_choice over_tcp_choice(collective kind, int p, std::size_t bytes, std::string_view crowded,
                                std::string_view general) {
    return crowding_choice{over_tcp(kind, p, bytes), crowded, general};
}

void check_crowding(const decision_tree& tree, std::initializer_list<crowding_choice> choices,
                    std::initializer_list<std::uint32_t> crowded_figures,
                    std::initializer_list<std::uint32_t> general_figures) {
    for (const auto& [call, crowded, general] : choices) {
        CAPTURE(to_string(call.kind));
        CAPTURE(call.comm_size);
        CAPTURE(call.bytes);
        auto s = call;
        if (s.transport.empty()) s.transport = "shm";
        for (auto figure : crowded_figures) {
            s.ranks_per_core = figure;
            CHECK(tree.walk(s) == crowded);
        }
        for (auto figure : general_figures) {
            s.ranks_per_core = figure;
            CHECK(tree.walk(s) == general);
        }
    }
}

} // namespace

TEST_CASE("the shipped trees validate and cover every collective") {
    for (auto role : {tree_role::composition, tree_role::pure}) {
        const auto tree = decision_tree::load(builtin_tree_text(role), "built-in", role);
        for (auto c : all_collectives)
            CHECK(!tree.walk({.kind = c, .comm_size = 3}).empty());
    }
}

TEST_CASE("auto never chooses an algorithm whose restriction fails (exhaustive grid)") {
    tutti::testing::scoped_env clean{{"TUTTI_SELECTION_FILE", std::nullopt},
                                     {"TUTTI_COMPOSITION_FILE", std::nullopt}};
    std::size_t decisions = 0;
    for (auto c : all_collectives)
        for (const auto& s : signature_grid(c)) {
            const auto& chosen = select_algorithm(s, {.sub_call = true});
            const auto failure = chosen.check(s);
            if (failure) {
                CAPTURE(to_string(c));
                CAPTURE(s.comm_size);
                CAPTURE(s.bytes);
                FAIL_CHECK(chosen.name << ": " << *failure);
            }
            ++decisions;
        }
    CHECK(decisions > 10000);
}

TEST_CASE("the shipped pure tree keeps the former preferences") {
    const auto tree =
        decision_tree::load(builtin_tree_text(tree_role::pure), "built-in", tree_role::pure);
    auto reduce8 = [](int p, std::size_t bytes, bool commutative) {
        return with_op(collective::all_reduce, p, bytes, commutative);
    };
    // Small vectors on 3 to 8 ranks: every vector to every rank in one round
    // (oversubscribed shared memory, docs/performance.md, twenty-seventh
    // session); two ranks, more than eight and longer vectors: recursive
    // doubling. Where ranks share cores (line_ns 0), one round up to 4 KiB,
    // and from 5 to 8 ranks every vector to rank 0 and back (linear) up to
    // 16 KiB (forty-eighth session); where each has a core, one round up to
    // 1 KiB.
    const auto reduce_at = [&](int p, std::size_t bytes, std::uint32_t line_ns,
                               bool commutative = true) {
        return tree.walk(line_at(reduce8(p, bytes, commutative), line_ns));
    };
    CHECK(tree.walk(reduce8(8, 8, true)) == "direct");
    CHECK(tree.walk(reduce8(3, 1 << 10, false)) == "direct");
    CHECK(tree.walk(reduce8(2, 8, true)) == "recursive_doubling");
    CHECK(tree.walk(reduce8(9, 8, true)) == "recursive_doubling");
    CHECK(reduce_at(8, 2 << 10, 110) == "recursive_doubling");
    for (const bool commutative : {true, false}) {
        CAPTURE(commutative);
        CHECK(reduce_at(3, 4 << 10, 0, commutative) == "direct");
        CHECK(reduce_at(4, 8 << 10, 0, commutative) == "recursive_doubling");
        CHECK(reduce_at(5, 4 << 10, 0, commutative) == "direct");
        CHECK(reduce_at(5, 8 << 10, 0, commutative) == "linear");
        CHECK(reduce_at(8, 16 << 10, 0, commutative) == "linear");
        CHECK(reduce_at(8, 16 << 10, 110, commutative) == "recursive_doubling");
        CHECK(reduce_at(8, 2 << 10, 450, commutative) == "recursive_doubling");
        CHECK(reduce_at(9, 8 << 10, 0, commutative) == "recursive_doubling");
    }
    // Above 16 KiB Rabenseifner's rounds or the ring; where ranks share
    // cores up to 64 KiB scatter_gather instead, but on 4 ranks
    // (forty-ninth session: 0.54-0.93 of the time on 3, 5 and 8 ranks, level
    // on 4).
    CHECK(reduce_at(8, 32 << 10, 110) == "rabenseifner");
    CHECK(reduce_at(6, 32 << 10, 110) == "ring");
    CHECK(reduce_at(8, 32 << 10, 0) == "scatter_gather");
    CHECK(reduce_at(3, 64 << 10, 0) == "scatter_gather");
    CHECK(reduce_at(8, 128 << 10, 0) == "rabenseifner");
    CHECK(reduce_at(6, 128 << 10, 0) == "ring");
    CHECK(reduce_at(2, 32 << 10, 0) == "rabenseifner");
    CHECK(reduce_at(4, 32 << 10, 0) == "rabenseifner");
    CHECK(reduce_at(9, 32 << 10, 0) == "ring");
    // A non-commutative all_reduce above 16 KiB as a reduce_scatter and an
    // all_gather of one round each where ranks share cores, and above 2
    // KiB on 2 ranks (forty-ninth session, tutti-bench --op compose; up to
    // 16 ranks); recursive doubling where each of 3 or more ranks has a core.
    CHECK(reduce_at(6, 32 << 10, 0, false) == "scatter_gather");
    CHECK(reduce_at(4, 16 << 10, 0, false) == "recursive_doubling");
    CHECK(reduce_at(4, 32 << 10, 0, false) == "scatter_gather");
    CHECK(reduce_at(6, 1 << 20, 110, false) == "recursive_doubling");
    CHECK(reduce_at(9, 16 << 10, 0, false) == "recursive_doubling");
    CHECK(reduce_at(12, 32 << 10, 0, false) == "scatter_gather");
    CHECK(reduce_at(16, 1 << 20, 0, false) == "scatter_gather");
    CHECK(reduce_at(16, 1 << 20, 110, false) == "recursive_doubling");
    CHECK(reduce_at(17, 1 << 20, 0, false) == "recursive_doubling");
    CHECK(reduce_at(2, 2 << 10, 110, false) == "recursive_doubling");
    CHECK(reduce_at(2, 4 << 10, 110, false) == "scatter_gather");
    // Over TCP, every vector to rank 0 and the result back (two hops, one
    // message each way for all but rank 0) from 3 to 8 ranks up to 16 KiB
    // (twenty-eighth session; 1 KiB before), and up to 64 KiB at 3 and 4
    // ranks; from 5 to 8 ranks, not a power of two, Rabenseifner's rounds
    // beyond (the ring before), at 8 ranks recursive doubling up to 48 KiB
    // first (twenty-ninth session); between nodes with shared memory inside, at 3 ranks (the
    // representatives of 3 nodes) up to 16 KiB and from 5 to 8 up to 64 KiB
    // (twenty-seventh session).
    const auto reduce_over = [&](int p, std::size_t bytes, std::string_view transport) {
        return tree.walk(with_op(collective::all_reduce, p, bytes, true, transport));
    };
    CHECK(reduce_over(2, 8, "tcp") == "recursive_doubling");
    CHECK(reduce_over(4, 8, "tcp") == "linear");
    CHECK(reduce_over(4, 64 << 10, "tcp") == "linear");
    CHECK(reduce_over(4, 128 << 10, "tcp") == "rabenseifner");
    CHECK(reduce_over(8, 1 << 10, "tcp") == "linear");
    CHECK(reduce_over(6, 16 << 10, "tcp") == "linear");
    CHECK(reduce_over(6, 32 << 10, "tcp") == "rabenseifner");
    CHECK(reduce_over(6, 16 << 20, "tcp") == "rabenseifner");
    CHECK(reduce_over(12, 32 << 10, "tcp") == "ring");
    CHECK(reduce_over(8, 32 << 10, "tcp") == "recursive_doubling");
    CHECK(reduce_over(8, 48 << 10, "tcp") == "recursive_doubling");
    CHECK(reduce_over(8, 64 << 10, "tcp") == "rabenseifner");
    CHECK(reduce_over(9, 2 << 10, "tcp") == "recursive_doubling");
    CHECK(reduce_over(3, 16 << 10, "shm+tcp") == "linear");
    CHECK(reduce_over(3, 32 << 10, "shm+tcp") == "ring");
    CHECK(reduce_over(4, 8, "shm+tcp") == "recursive_doubling");
    CHECK(reduce_over(6, 64 << 10, "shm+tcp") == "linear");
    CHECK(reduce_over(16, 8, "shm+tcp") == "recursive_doubling");
    CHECK(tree.walk(reduce8(8, 1 << 20, true)) == "rabenseifner");
    CHECK(tree.walk(reduce8(6, 1 << 20, true)) == "ring");
    CHECK(tree.walk(reduce8(6, 1 << 20, false)) == "scatter_gather");
    // Over TCP, a non-commutative one from 3 to 8 ranks above 64 KiB.
    const auto ordered_over_tcp = [&](int p, std::size_t bytes) {
        return tree.walk(with_op(collective::all_reduce, p, bytes, false, "tcp"));
    };
    CHECK(ordered_over_tcp(2, 1 << 20) == "recursive_doubling");
    CHECK(ordered_over_tcp(4, 64 << 10) == "linear");
    CHECK(ordered_over_tcp(4, 128 << 10) == "scatter_gather");
    CHECK(ordered_over_tcp(6, 64 << 10) == "recursive_doubling");
    CHECK(ordered_over_tcp(6, 128 << 10) == "scatter_gather");
    CHECK(ordered_over_tcp(12, 1 << 20) == "recursive_doubling");
    // Reduce: the binomial tree; for a commutative operation of medium
    // length it in segments (segmented_binomial), and long vectors between
    // two ranks, which share the combining, rabenseifner.
    auto rooted = [](int p, std::size_t bytes, bool commutative) {
        return with_op(collective::reduce, p, bytes, commutative);
    };
    CHECK(tree.walk(rooted(2, 4 << 10, true)) == "binomial");
    CHECK(tree.walk(rooted(2, 8 << 10, true)) == "segmented_binomial");
    CHECK(tree.walk(rooted(2, 128 << 10, true)) == "segmented_binomial");
    CHECK(tree.walk(rooted(2, 512 << 10, true)) == "segmented_binomial");
    CHECK(tree.walk(rooted(2, 1 << 20, true)) == "rabenseifner");
    CHECK(tree.walk(rooted(2, 256 << 10, false)) == "binomial");
    CHECK(tree.walk(line_at(rooted(4, 32 << 10, true), 110)) == "binomial");
    CHECK(tree.walk(rooted(4, 1 << 20, true)) == "binomial");
    // From 3 to 8 ranks sharing cores (line_ns 0), every vector straight to
    // the root (linear) up to 48 KiB: 4 and 8 ranks on 2 cores, 24-48 KiB,
    // 0.75-0.92 of the binomial tree's time, level at 64 KiB and 1.07-1.14
    // at 96 KiB (seventy-ninth session, docs/performance.md).
    for (int p : {3, 4, 8}) {
        CAPTURE(p);
        CHECK(tree.walk(line_at(rooted(p, 32 << 10, true), 0)) == "linear");
        CHECK(tree.walk(line_at(rooted(p, 48 << 10, true), 0)) == "linear");
        CHECK(tree.walk(line_at(rooted(p, 48 << 10, true), 110)) == "segmented_binomial");
        CHECK(tree.walk(line_at(rooted(p, (48 << 10) + 8, true), 0)) == "binomial");
    }
    CHECK(tree.walk(line_at(rooted(16, 32 << 10, true), 0)) == "binomial");
    // From 3 to 8 ranks, 32-128 KiB: in segments only where each rank has a
    // core (the line was measured); where ranks share cores (line_ns 0) a
    // segment may cost a context switch, and the whole vector is quicker.
    for (int p : {3, 4, 8, 16}) {
        CAPTURE(p);
        CHECK(tree.walk(rooted(p, 64 << 10, true)) == "binomial");
        CHECK(tree.walk(line_at(rooted(p, 128 << 10, true), 0)) == "binomial");
        CHECK(tree.walk(line_at(rooted(p, 128 << 10, true), 110)) == "segmented_binomial");
        CHECK(tree.walk(line_at(rooted(p, 64 << 10, true), 450)) == "segmented_binomial");
        CHECK(tree.walk(line_at(rooted(p, 256 << 10, true), 110)) == "binomial");
    }
    // Where a line takes long between the cores (this machine's slow mode:
    // ~450 ns a round of the shm transport's bounce, ~110 in the quick one),
    // long vectors between two ranks go in segments: each byte crosses once
    // (twentieth and twenty-first sessions). From 256 KiB to 1 MiB there the
    // whole vector goes by single copy into the root's own cache
    // (receive_use::combined_at_once): 60 us against the segments' 69-118 at
    // 512 KiB, 117-119 against 122-123 at 1 MiB (twenty-second session).
    // Unknown (0) is taken as near. On the forty-fifth session's Intel VM,
    // whose line reads 262-419 ns but whose process_vm_readv reads another
    // core's fresh lines at 87-114 % of the cells' time, the near choices
    // won (Rabenseifner 0.58-0.88 of binomial's and the segments' time from
    // 1 MiB, unchanged and rewritten buffers alike). So a far line counts
    // only with a slow copy between the cores (readv_percent above 150).
    // Far lines with a quick copy (the fiftieth session's Intel VM, lines of
    // 412-460 ns, readv_percent 119-121) take the whole vector up to 256 KiB
    // (binomial 0.61-0.67 of the segments' time from 64 KiB) and
    // Rabenseifner from 512 KiB (0.61).
    struct by_distance {
        std::size_t bytes;
        std::string_view far, near, far_line_quick_copy;
    };
    for (const auto& [bytes, far, near, far_line_quick_copy] : {
             by_distance{64 << 10, "segmented_binomial", "segmented_binomial", "binomial"},
             by_distance{256 << 10, "segmented_binomial", "segmented_binomial", "binomial"},
             by_distance{384 << 10, "binomial", "segmented_binomial", "rabenseifner"},
             by_distance{512 << 10, "binomial", "segmented_binomial", "rabenseifner"},
             by_distance{1 << 20, "binomial", "rabenseifner", "rabenseifner"},
             by_distance{2 << 20, "segmented_binomial", "rabenseifner", "rabenseifner"},
             by_distance{16 << 20, "segmented_binomial", "rabenseifner", "rabenseifner"},
         }) {
        CAPTURE(bytes);
        auto s = rooted(2, bytes, true);
        s.line_ns = 450;
        // The branches follow the transport's judgement of its single copy,
        // not readv_percent: each choice was measured with its messages on
        // the path that judgement gives them (shm::options::cells_readv_percent).
        s.slow_single_copy = true;
        CHECK(tree.walk(s) == far);
        s.slow_single_copy = false;
        CHECK(tree.walk(s) == far_line_quick_copy);
        s.readv_percent = 300;
        CHECK(tree.walk(s) == far_line_quick_copy);
        s.slow_single_copy = true;
        s.line_ns = 110;
        CHECK(tree.walk(s) == near);
        s.line_ns = 0;
        CHECK(tree.walk(s) == near);
    }
    // Over TCP the binomial tree at every size: segments and the halving
    // rounds cost more than they overlap there (seventeenth session).
    for (auto bytes : {std::size_t{64} << 10, std::size_t{256} << 10, std::size_t{4} << 20}) {
        auto s = rooted(2, bytes, true);
        s.transport = "tcp";
        CHECK(tree.walk(s) == "binomial");
    }
    // Scan and exscan: the chain at 2 and 3 ranks (its two hops at 3 are as
    // many steps as recursive doubling's two rounds, with half the
    // messages), and from 4 to 8 ranks above 16 KiB where ranks share cores
    // (line_ns 0), above 32 KiB where each has one; over TCP, where every
    // message is a system call, the chain at 4 ranks at every size too
    // (forty-seventh session). Where ranks share cores, up to 16 KiB from 4
    // to 8 ranks every vector goes to every higher rank in one round
    // (direct; at 4 ranks up to 1 KiB since the fiftieth session, recursive
    // doubling before); over TCP the one round from 4 to 8 ranks up to 8 KiB
    // (forty-eighth session).
    for (const auto kind : {collective::scan, collective::exscan}) {
        const auto name = to_string(kind);
        CAPTURE(name);
        const auto scan_on = [&](int p, std::size_t bytes, std::uint32_t line_ns,
                                 std::string_view transport = "shm") {
            return tree.walk(line_at(with_op(kind, p, bytes, true, transport), line_ns));
        };
        CHECK(scan_on(2, 8, 110) == "linear");
        CHECK(scan_on(3, 8, 0) == "linear");
        CHECK(scan_on(3, 8, 110) == "linear");
        CHECK(scan_on(4, 8, 0) == "direct");
        CHECK(scan_on(4, 1 << 10, 0) == "direct");
        CHECK(scan_on(4, 2 << 10, 0) == "direct");
        CHECK(scan_on(4, 16 << 10, 0) == "direct");
        CHECK(scan_on(4, 32 << 10, 0) == "linear");
        for (int p : {5, 6, 7, 8}) {
            CAPTURE(p);
            CHECK(scan_on(p, 8, 0) == "direct");
            CHECK(scan_on(p, 16 << 10, 0) == "direct");
            CHECK(scan_on(p, 32 << 10, 0) == "linear");
            CHECK(scan_on(p, 8, 110) == "recursive_doubling");
        }
        CHECK(scan_on(4, 32 << 10, 110) == "recursive_doubling");
        CHECK(scan_on(4, 64 << 10, 110) == "linear");
        CHECK(scan_on(9, 1 << 20, 0) == "recursive_doubling");
        CHECK(scan_on(3, 8, 0, "tcp") == "linear");
        CHECK(scan_on(3, 8 << 10, 0, "tcp") == "linear");
        CHECK(scan_on(4, 1 << 10, 0, "tcp") == "direct");
        CHECK(scan_on(4, 16 << 10, 0, "tcp") == "linear");
        CHECK(scan_on(8, 8 << 10, 0, "tcp") == "direct");
        CHECK(scan_on(8, 16 << 10, 0, "tcp") == "linear");
        CHECK(scan_on(16, 8, 0, "tcp") == "recursive_doubling");
        // Several ranks to a host (shared memory within, TCP between): the
        // chain from 2 to 8 ranks at every size, which crosses the network
        // once per host boundary where the one round sends most of its
        // vectors across it (eightieth session); beyond 8 ranks the shared-
        // memory tree as before.
        for (int p : {2, 4, 6, 8})
            for (std::size_t bytes : {std::size_t{8}, std::size_t{8} << 10, std::size_t{1} << 20}) {
                CAPTURE(p);
                CAPTURE(bytes);
                CHECK(scan_on(p, bytes, 0, "shm+tcp") == "linear");
            }
        CHECK(scan_on(9, 8, 0, "shm+tcp") == "recursive_doubling");
        CHECK(scan_on(16, 1 << 20, 0, "shm+tcp") == "recursive_doubling");
    }
    // Barrier: one round of messages to every rank from 3 to 8 ranks over
    // shared memory; over TCP, where every message is a system call, fan-in
    // and fan-out through rank 0 (two hops); dissemination at 2 ranks and
    // beyond 8 (twenty-seventh session).
    const auto barrier_on = [&](int p, std::string_view transport) {
        return tree.walk({.kind = collective::barrier, .comm_size = p, .transport = transport});
    };
    CHECK(barrier_on(2, "shm") == "dissemination");
    CHECK(barrier_on(4, "shm") == "direct");
    CHECK(barrier_on(8, "inproc") == "direct");
    CHECK(barrier_on(9, "shm") == "dissemination");
    CHECK(barrier_on(2, "tcp") == "dissemination");
    CHECK(barrier_on(3, "tcp") == "linear");
    CHECK(barrier_on(6, "shm+tcp") == "linear");
    CHECK(barrier_on(16, "tcp") == "dissemination");
    // All_gather and reduce_scatter: one round of messages to every rank from
    // 3 to 8 ranks (up to 16 KiB in all, 1 KiB at 4 ranks for all_gather);
    // beyond, Bruck or recursive doubling (twenty-seventh session). The
    // all_gather goes in one round at every size at 3 ranks, and from 4 to 8
    // where ranks share cores (line_ns 0; forty-seventh session). Reduce:
    // every vector to the root from 3 to 8 ranks up to 16 KiB.
    const auto all_gather_on = [&](int p, std::size_t bytes, std::uint32_t line_ns) {
        return tree.walk(
            line_at({.kind = collective::all_gather, .comm_size = p, .bytes = bytes}, line_ns));
    };
    CHECK(all_gather_on(6, 64, 110) == "direct");
    CHECK(all_gather_on(4, 4096, 110) == "recursive_doubling");
    for (int p : {3, 4, 5, 6, 7, 8}) {
        CAPTURE(p);
        for (std::size_t bytes : {std::size_t{64}, std::size_t{64} << 10, std::size_t{16} << 20})
            CHECK(all_gather_on(p, bytes, 0) == "direct");
    }
    CHECK(all_gather_on(3, 16 << 20, 450) == "direct");
    CHECK(all_gather_on(5, 1 << 20, 110) == "ring");
    CHECK(all_gather_on(9, 1 << 20, 0) == "ring");
    CHECK(tree.walk({.kind = collective::all_gather, .comm_size = 10, .bytes = 64}) == "bruck");
    CHECK(tree.walk({.kind = collective::all_gather, .comm_size = 16, .bytes = 64}) ==
          "recursive_doubling");
    CHECK(tree.walk(with_op(collective::reduce_scatter, 8, 8 << 10)) == "direct");
    // A reduce_scatter goes in one round up to 64 KiB where ranks share
    // cores (commutative: forty-eighth session; not: forty-ninth, measured
    // with tutti-bench --op compose), up to 16 KiB where each has one.
    const auto scatter_reduced_at = [&](int p, std::size_t bytes, std::uint32_t line_ns,
                                        bool commutative = true) {
        return tree.walk(
            line_at(with_op(collective::reduce_scatter, p, bytes, commutative), line_ns));
    };
    for (int p : {3, 4, 5, 6, 7, 8}) {
        CAPTURE(p);
        CHECK(scatter_reduced_at(p, 64 << 10, 0) == "direct");
        CHECK(scatter_reduced_at(p, 32 << 10, 110) != "direct");
        CHECK(scatter_reduced_at(p, 128 << 10, 0) != "direct");
        CHECK(scatter_reduced_at(p, 64 << 10, 0, false) == "direct");
        CHECK(scatter_reduced_at(p, 32 << 10, 110, false) == "pairwise");
        CHECK(scatter_reduced_at(p, 128 << 10, 0, false) == "pairwise");
    }
    CHECK(scatter_reduced_at(8, 128 << 10, 0) == "recursive_halving");
    CHECK(scatter_reduced_at(6, 128 << 10, 0) == "ring");
    CHECK(scatter_reduced_at(9, 32 << 10, 0) == "ring");
    CHECK(tree.walk(rooted(8, 16 << 10, true)) == "linear");
    CHECK(tree.walk(rooted(8, 16 << 10, false)) == "linear");
    CHECK(tree.walk(rooted(16, 8, true)) == "binomial");
    // All_to_all(v): every message posted at once from 3 to 8 ranks (up to
    // 256 KiB blocks at 4 ranks where each rank has a core), pairwise
    // exchanges beyond and at 2 ranks, Bruck for tiny blocks on large
    // communicators.
    CHECK(tree.walk({.kind = collective::all_to_all, .comm_size = 8, .bytes = 8 * 64}) == "linear");
    CHECK(tree.walk({.kind = collective::all_to_all, .comm_size = 8, .bytes = 8 << 20}) ==
          "linear");
    CHECK(tree.walk({.kind = collective::all_to_all, .comm_size = 4, .bytes = 4 << 18}) ==
          "linear");
    CHECK(tree.walk({.kind = collective::all_to_all, .comm_size = 16, .bytes = 16 * 64}) ==
          "bruck");
    CHECK(tree.walk({.kind = collective::all_to_all, .comm_size = 4, .bytes = 4 << 16}) ==
          "linear");
    call_signature a2a{.kind = collective::all_to_all, .comm_size = 4, .bytes = 4 << 20};
    CHECK(tree.walk(a2a) == "linear");
    a2a.line_ns = 110;
    CHECK(tree.walk(a2a) == "pairwise");
    a2a.comm_size = 3;
    CHECK(tree.walk(a2a) == "linear");
    CHECK(tree.walk({.kind = collective::all_to_all, .comm_size = 2, .bytes = 2 * 64}) ==
          "pairwise");
    // All_to_allv calls carry no size (call_has_size): the choice is by
    // communicator size alone.
    CHECK(tree.walk({.kind = collective::all_to_allv, .comm_size = 2}) == "pairwise");
    CHECK(tree.walk({.kind = collective::all_to_allv, .comm_size = 4}) == "linear");
    CHECK(tree.walk({.kind = collective::all_to_allv, .comm_size = 8}) == "linear");
    CHECK(tree.walk({.kind = collective::all_to_allv, .comm_size = 16}) == "pairwise");
    // Broadcast: up to 2 MiB the root sends to every rank up to 8 ranks and
    // through a binomial tree beyond, then a pipelined chain from 4 ranks;
    // the TCP section keeps a binomial tree up to 8 ranks and scatters
    // long buffers beyond.
    call_signature bcast{.kind = collective::broadcast, .comm_size = 8, .bytes = 32768};
    CHECK(tree.walk(bcast) == "linear");
    bcast.comm_size = 16;
    CHECK(tree.walk(bcast) == "binomial");
    bcast.comm_size = 8;
    bcast.bytes = 4 << 20;
    CHECK(tree.walk(bcast) == "pipeline");
    bcast.comm_size = 3;
    CHECK(tree.walk(bcast) == "binomial");
    // Up to 16 KiB from 4 to 8 ranks over TCP the root sends to every rank
    // (0.47-0.74 of the binomial tree's time here; on a network of ~15 us
    // latency its p - 1 sends still beat log2(p) rounds there; forty-seventh
    // session).
    const auto bcast_over_tcp = [&](int p, std::size_t bytes) {
        return tree.walk(
            {.kind = collective::broadcast, .comm_size = p, .bytes = bytes, .transport = "tcp"});
    };
    for (int p : {3, 4, 8})
        CHECK(bcast_over_tcp(p, 4 << 20) == "binomial");
    CHECK(bcast_over_tcp(9, 4 << 20) == "scatter_allgather");
    CHECK(bcast_over_tcp(3, 16 << 10) == "binomial");
    CHECK(bcast_over_tcp(4, 16 << 10) == "linear");
    CHECK(bcast_over_tcp(8, 8) == "linear");
    CHECK(bcast_over_tcp(4, 32 << 10) == "binomial");
    CHECK(bcast_over_tcp(9, 8) == "binomial");
    // Gather and scatter: the root exchanges with every rank directly up to
    // 8 ranks, through a binomial tree beyond.
    for (auto kind : {collective::gather, collective::scatter}) {
        CHECK(tree.walk({.kind = kind, .comm_size = 8, .bytes = 8 << 20}) == "linear");
        CHECK(tree.walk({.kind = kind, .comm_size = 16, .bytes = 16 * 8}) == "binomial");
    }
    // All_gather over TCP: recursive doubling at every size on a power of
    // two (shared memory: up to 4 MiB, the ring beyond); from 3 to 8 ranks
    // every block through rank 0 (linear) up to 8 KiB, between nodes not at
    // 4 ranks, and at 8 up to 4 KiB (twenty-eighth session). Above, on an
    // even number of ranks that is not a power of two the neighbour
    // exchange (shared memory: up to 4 MiB, the ring beyond), on an odd one
    // Bruck up to 64 KiB and the ring beyond (twenty-ninth session).
    call_signature gather_all{.kind = collective::all_gather, .comm_size = 4, .bytes = 1 << 20};
    gather_all.line_ns = 110; // each rank on a core of its own
    CHECK(tree.walk(gather_all) == "recursive_doubling");
    gather_all.bytes = 16 << 20;
    CHECK(tree.walk(gather_all) == "ring");
    gather_all.comm_size = 6;
    CHECK(tree.walk(gather_all) == "ring");
    gather_all.bytes = 64 << 10;
    CHECK(tree.walk(gather_all) == "neighbor_exchange");
    gather_all.bytes = 1 << 20;
    gather_all.comm_size = 4;
    gather_all.transport = "tcp";
    CHECK(tree.walk(gather_all) == "recursive_doubling");
    gather_all.comm_size = 3;
    CHECK(tree.walk(gather_all) == "ring");
    for (std::string_view transport : {"tcp", "shm+tcp"}) {
        CAPTURE(transport);
        gather_all.transport = transport;
        gather_all.comm_size = 6;
        gather_all.bytes = 8 << 10;
        CHECK(tree.walk(gather_all) == "linear");
        gather_all.bytes = 16 << 10;
        CHECK(tree.walk(gather_all) == "neighbor_exchange");
        gather_all.bytes = 16 << 20;
        CHECK(tree.walk(gather_all) == "neighbor_exchange");
        gather_all.comm_size = 5;
        gather_all.bytes = 64 << 10;
        CHECK(tree.walk(gather_all) == "bruck");
        gather_all.bytes = 256 << 10;
        CHECK(tree.walk(gather_all) == "ring");
        gather_all.comm_size = 12;
        gather_all.bytes = 1 << 10;
        CHECK(tree.walk(gather_all) == "bruck");
        gather_all.bytes = 64 << 10;
        CHECK(tree.walk(gather_all) == "neighbor_exchange");
        gather_all.comm_size = 11;
        CHECK(tree.walk(gather_all) == "ring");
        gather_all.bytes = 1 << 10;
    }
    gather_all.comm_size = 4;
    gather_all.transport = "tcp";
    CHECK(tree.walk(gather_all) == "linear");
    gather_all.transport = "shm+tcp";
    CHECK(tree.walk(gather_all) == "recursive_doubling_farthest_first");
    gather_all.comm_size = 8;
    CHECK(tree.walk(gather_all) == "linear");
    gather_all.bytes = 8 << 10;
    CHECK(tree.walk(gather_all) == "recursive_doubling_farthest_first");
    gather_all.bytes = 1 << 10;
    gather_all.comm_size = 2;
    gather_all.transport = "tcp";
    CHECK(tree.walk(gather_all) == "recursive_doubling");
    // All_to_all over TCP from 3 to 8 ranks: every block posted at once
    // (linear) for blocks of 1-32 KiB (2-32 KiB from 5 ranks), pairwise
    // beyond; Bruck for shorter blocks from 5 ranks; beyond 8 ranks no
    // linear (twenty-eighth session).
    const auto exchange_over = [&](int p, std::size_t block) {
        return tree.walk({.kind = collective::all_to_all,
                          .comm_size = p,
                          .bytes = block * static_cast<std::size_t>(p),
                          .transport = "tcp"});
    };
    CHECK(exchange_over(2, 16 << 10) == "pairwise");
    CHECK(exchange_over(4, 512) == "pairwise");
    CHECK(exchange_over(6, 512) == "bruck");
    CHECK(exchange_over(4, 16 << 10) == "linear");
    CHECK(exchange_over(4, 2 << 10) == "linear");
    CHECK(exchange_over(8, 2 << 10) == "bruck");
    CHECK(exchange_over(8, 3 << 10) == "linear");
    CHECK(exchange_over(8, 32 << 10) == "linear");
    CHECK(exchange_over(6, 64 << 10) == "pairwise");
    CHECK(exchange_over(16, 16 << 10) == "pairwise");
    // Reduce_scatter over TCP from 3 to 8 ranks: every vector to rank 0 and
    // each block back (linear) up to 16 KiB, 4 KiB on a power of two; then
    // the ring, recursive halving on a power of two, and for a
    // non-commutative operation direct up to 64 KiB, then pairwise
    // (twenty-eighth session).
    const auto scatter_reduced_over = [&](int p, std::size_t bytes, bool commutative,
                                          std::string_view transport = "tcp") {
        return tree.walk(with_op(collective::reduce_scatter, p, bytes, commutative, transport));
    };
    CHECK(scatter_reduced_over(6, 16 << 10, true) == "linear");
    CHECK(scatter_reduced_over(6, 32 << 10, true) == "ring");
    CHECK(scatter_reduced_over(8, 4 << 10, true) == "linear");
    CHECK(scatter_reduced_over(8, 8 << 10, true) == "recursive_halving");
    CHECK(scatter_reduced_over(2, 64, true) == "recursive_halving");
    CHECK(scatter_reduced_over(12, 1 << 10, true) == "ring");
    CHECK(scatter_reduced_over(5, 16 << 10, false) == "linear");
    CHECK(scatter_reduced_over(5, 64 << 10, false) == "direct");
    CHECK(scatter_reduced_over(5, 128 << 10, false) == "pairwise");
    CHECK(scatter_reduced_over(2, 1 << 10, false) == "pairwise");
    CHECK(scatter_reduced_over(12, 1 << 10, false) == "pairwise");
    // Between nodes (shared memory inside), linear up to 4 KiB from 3 to 8
    // ranks, but for 4 ranks, which keep recursive halving.
    CHECK(scatter_reduced_over(6, 4 << 10, true, "shm+tcp") == "linear");
    CHECK(scatter_reduced_over(6, 8 << 10, true, "shm+tcp") == "ring");
    CHECK(scatter_reduced_over(8, 1 << 10, true, "shm+tcp") == "linear");
    CHECK(scatter_reduced_over(4, 1 << 10, true, "shm+tcp") == "recursive_halving");
    CHECK(scatter_reduced_over(3, 1 << 10, false, "shm+tcp") == "linear");
    CHECK(scatter_reduced_over(3, 8 << 10, false, "shm+tcp") == "pairwise");
    CHECK(scatter_reduced_over(16, 1 << 10, true, "shm+tcp") == "recursive_halving");
}

TEST_CASE("up to 8 ranks that share cores, a broadcast past the ring goes down the pipeline") {
    // Where ranks share cores, a one-way message longer than its ring (16
    // cells of 32 KiB) goes by the kernel's single copy, slow where it costs
    // by the page; the pipeline's 128 KiB segments stay in the cells. From
    // 512 KiB it took 0.38-0.49 of linear's time at 3, 4 and 8 ranks on 2
    // cores and 0.59-0.65 at 2 ranks on one, and 0.41-0.65 of the binomial
    // tree's beyond 2 MiB at 2-3 ranks; at 256-448 KiB, 1.27-1.86 (sixty-
    // fourth session, docs/performance.md). Where each rank has a core, or
    // it is unknown: as before.
    const auto tree =
        decision_tree::load(builtin_tree_text(tree_role::pure), "built-in", tree_role::pure);
    check_crowding(
        tree,
        {
            crowding_choice{plain(collective::broadcast, 8, 448 << 10), "linear", "linear"},
            crowding_choice{plain(collective::broadcast, 8, 512 << 10), "pipeline", "linear"},
            crowding_choice{plain(collective::broadcast, 4, 1 << 20), "pipeline", "linear"},
            crowding_choice{plain(collective::broadcast, 2, 2 << 20), "pipeline", "linear"},
            crowding_choice{plain(collective::broadcast, 3, 4 << 20), "pipeline", "binomial"},
            crowding_choice{plain(collective::broadcast, 2, 64 << 20), "pipeline", "binomial"},
            crowding_choice{plain(collective::broadcast, 8, 4 << 20), "pipeline", "pipeline"},
        },
        {2, 4}, {0, 1});
}

TEST_CASE("over TCP on one machine whose cores ranks share, all_to_all blocks go by Bruck, then "
          "linear") {
    // 4 ranks on 2 cores: Bruck's two packed messages took 0.80-0.91 of
    // linear's time for blocks to 16 KiB, over loopback and between
    // network namespaces (sixty-fifth session), but linear 0.81-0.88 of
    // Bruck's at 16 KiB blocks in the sixty-seventh: Bruck to 8 KiB
    // blocks; at 8 ranks 0.69-0.83 for blocks to 4 KiB; at 6
    // 0.82-0.95. Where its packed message reaches 64 KiB it fell behind
    // (messages of 64 KiB took a third longer than of 63 KiB over
    // loopback: past its 65,483-byte segment). At 10-16 ranks on 2 cores (5-8 to a
    // core) Bruck took 0.27-0.48 of pairwise's time up to 96 KiB, and
    // linear (one step) 0.52-0.86 beyond (sixty-fifth session,
    // docs/performance.md). From 4 to 8 ranks linear goes on to 128 KiB
    // blocks, where pairwise exchanges ran: 0.71-0.79 of their time at
    // 48-128 KiB blocks on 4 ranks over loopback in both of the machine's
    // modes, 0.71-0.92 between namespaces, 0.72-0.94 on 8, 0.76-0.83 on 6;
    // at 3 ranks pairwise stays (linear 1.19-1.37 from 128 KiB blocks;
    // sixty-eighth session). Ranks on several machines (0) or a core each:
    // as before.
    const auto tree =
        decision_tree::load(builtin_tree_text(tree_role::pure), "built-in", tree_role::pure);
    check_crowding(
        tree,
        {
            crowding_choice{over_tcp(collective::all_to_all, 4, 4 << 10), "bruck", "pairwise"},
            crowding_choice{over_tcp(collective::all_to_all, 4, 8 << 10), "bruck", "linear"},
            crowding_choice{over_tcp(collective::all_to_all, 4, 32 << 10), "bruck", "linear"},
            crowding_choice{over_tcp(collective::all_to_all, 4, 36 << 10), "linear", "linear"},
            crowding_choice{over_tcp(collective::all_to_all, 4, 64 << 10), "linear", "linear"},
            crowding_choice{over_tcp(collective::all_to_all, 4, 68 << 10), "linear", "linear"},
            crowding_choice{over_tcp(collective::all_to_all, 8, 32 << 10), "bruck", "linear"},
            crowding_choice{over_tcp(collective::all_to_all, 6, 24 << 10), "bruck", "linear"},
            crowding_choice{over_tcp(collective::all_to_all, 8, 64 << 10), "linear", "linear"},
            crowding_choice{over_tcp(collective::all_to_all, 3, 3 << 10), "pairwise", "pairwise"},
            crowding_choice{over_tcp(collective::all_to_all, 3, 24 << 10), "linear", "linear"},
            crowding_choice{over_tcp(collective::all_to_all, 2, 64 << 10), "pairwise", "pairwise"},
            crowding_choice{over_tcp(collective::all_to_all, 4, 512 << 10), "linear", "pairwise"},
            crowding_choice{over_tcp(collective::all_to_all, 4, 516 << 10), "pairwise", "pairwise"},
            crowding_choice{over_tcp(collective::all_to_all, 8, 1 << 20), "linear", "pairwise"},
            crowding_choice{over_tcp(collective::all_to_all, 6, 288 << 10), "linear", "pairwise"},
            crowding_choice{over_tcp(collective::all_to_all, 3, 192 << 10), "pairwise", "pairwise"},
            crowding_choice{over_tcp(collective::all_to_all, 4, 1 << 20), "pairwise", "pairwise"},
        },
        {2, 3}, {0, 1});
    check_crowding(
        tree,
        {
            crowding_choice{over_tcp(collective::all_to_all, 16, 64 << 10), "bruck", "pairwise"},
            crowding_choice{over_tcp(collective::all_to_all, 12, 96 << 10), "bruck", "pairwise"},
            crowding_choice{over_tcp(collective::all_to_all, 16, 128 << 10), "linear", "pairwise"},
            crowding_choice{over_tcp(collective::all_to_all, 16, 4 << 20), "linear", "pairwise"},
            crowding_choice{over_tcp(collective::all_to_all, 16, 8 << 10), "bruck", "bruck"},
        },
        {5, 8}, {0, 1, 4});
}

TEST_CASE("over TCP at 3 and 5-7 ranks that share cores, the reduce_scatter via rank 0") {
    // Forced linear against the TCP tree's choices, 2-4 ranks to a core:
    // the reduce_scatter 0.42-0.90 up to 240 KiB at 3, 5 and 6 ranks over
    // loopback, 0.68-0.89 between namespaces. The all_gather gained over
    // loopback but not between namespaces (1.12-1.41 at 3 and 6 ranks); at 4
    // and 8 ranks linear gained too, but between namespaces the recursive
    // doubling and halving of the next size took 1.25-1.57 times as long
    // after it: those left as they were (sixty-fifth session,
    // docs/performance.md).
    const auto tree =
        decision_tree::load(builtin_tree_text(tree_role::pure), "built-in", tree_role::pure);
    check_crowding(
        tree,
        {
            crowding_choice{over_tcp(collective::reduce_scatter, 6, 120 << 10), "linear", "ring"},
            crowding_choice{over_tcp(collective::reduce_scatter, 3, 60 << 10), "linear", "ring"},
            crowding_choice{over_tcp(collective::reduce_scatter, 5, 240 << 10), "ring", "ring"},
            crowding_choice{over_tcp(collective::reduce_scatter, 8, 64 << 10), "recursive_halving",
                            "recursive_halving"},
            crowding_choice{over_tcp(collective::reduce_scatter, 4, 32 << 10), "recursive_halving",
                            "recursive_halving"},
            crowding_choice{over_tcp(collective::all_gather, 8, 64 << 10), "recursive_doubling",
                            "recursive_doubling"},
            crowding_choice{over_tcp(collective::all_gather, 6, 120 << 10), "neighbor_exchange",
                            "neighbor_exchange"},
            crowding_choice{over_tcp(collective::all_gather, 3, 60 << 10), "bruck", "bruck"},
        },
        {2, 3, 4}, {0, 1});
}

TEST_CASE("over TCP at 4 ranks that share cores, the all_gather and reduce_scatter of 128-248 "
          "KiB go direct") {
    // A TCP message of 64 KiB or more leaves in two segments, and where
    // ranks share cores it took far longer than one of 62 KiB. Recursive
    // doubling and halving send half the vector at once, 64 KiB from 128
    // KiB on; direct sends quarters, below 64 KiB up to 248 KiB. Forced,
    // direct took 0.74-0.94 of their time at 128-248 KiB between
    // namespaces and 0.83-1.00 over loopback, and lost below and from 256
    // KiB in some runs (seventieth session, docs/performance.md). 8 ranks,
    // where forced runs disagreed (sixty-fifth), and ranks with a core each
    // (not measured) keep the old rules.
    const auto tree =
        decision_tree::load(builtin_tree_text(tree_role::pure), "built-in", tree_role::pure);
    check_crowding(
        tree,
        {
            over_tcp_choice(collective::all_gather, 4, 8 << 10, "linear", "linear"),
            over_tcp_choice(collective::all_gather, 4, 112 << 10, "recursive_doubling",
                            "recursive_doubling"),
            over_tcp_choice(collective::all_gather, 4, 128 << 10, "direct", "recursive_doubling"),
            over_tcp_choice(collective::all_gather, 4, 248 << 10, "direct", "recursive_doubling"),
            over_tcp_choice(collective::all_gather, 4, 256 << 10, "recursive_doubling",
                            "recursive_doubling"),
            over_tcp_choice(collective::reduce_scatter, 4, 4 << 10, "linear", "linear"),
            over_tcp_choice(collective::reduce_scatter, 4, 112 << 10, "recursive_halving",
                            "recursive_halving"),
            over_tcp_choice(collective::reduce_scatter, 4, 128 << 10, "direct",
                            "recursive_halving"),
            over_tcp_choice(collective::reduce_scatter, 4, 248 << 10, "direct",
                            "recursive_halving"),
            over_tcp_choice(collective::reduce_scatter, 4, 256 << 10, "recursive_halving",
                            "recursive_halving"),
        },
        {2, 3, 4}, {0, 1});
    CHECK(tree.walk([] {
        auto s = over_tcp(collective::all_gather, 8, 128 << 10);
        s.ranks_per_core = 4;
        return s;
    }()) == "recursive_doubling");
}

TEST_CASE("over TCP at 3 and 4 ranks that share cores, the reduce through the root: 96-768 KiB "
          "at 3, up to 4 MiB at 4") {
    // Forced linear against the binomial tree, 4 ranks on 2 cores: 0.74-0.96
    // of its time from 8 bytes to 4 MiB over loopback and between namespaces
    // (256 bytes 1.01, 128 KiB 0.99-1.07), 0.99-1.16 at 8-16 MiB (seventieth
    // session, docs/performance.md); with the root's receives posted at
    // once, 0.74-0.90 of the tree's time before but for 16 KiB over loopback
    // (1.03). At 3 ranks, with them posted at once: 0.76-0.91 at 96-512 KiB,
    // 0.90-0.95 at 768 KiB, 0.95-1.08 at 16-64 KiB and 1-2 MiB, 1.09-1.23 at 4
    // MiB (same session). At 5-8 linear gained over loopback only
    // (sixty-fifth).
    const auto tree =
        decision_tree::load(builtin_tree_text(tree_role::pure), "built-in", tree_role::pure);
    check_crowding(tree,
                   {
                       over_tcp_choice(collective::reduce, 4, 8, "linear", "binomial"),
                       over_tcp_choice(collective::reduce, 4, 128 << 10, "linear", "binomial"),
                       over_tcp_choice(collective::reduce, 4, 4 << 20, "linear", "binomial"),
                       over_tcp_choice(collective::reduce, 4, 8 << 20, "binomial", "binomial"),
                       over_tcp_choice(collective::reduce, 3, 64 << 10, "binomial", "binomial"),
                       over_tcp_choice(collective::reduce, 3, 96 << 10, "linear", "binomial"),
                       over_tcp_choice(collective::reduce, 3, 768 << 10, "linear", "binomial"),
                       over_tcp_choice(collective::reduce, 3, 1 << 20, "binomial", "binomial"),
                       over_tcp_choice(collective::reduce, 2, 256 << 10, "binomial", "binomial"),
                       over_tcp_choice(collective::reduce, 8, 64 << 10, "binomial", "binomial"),
                   },
                   {2, 3, 4}, {0, 1});
}

TEST_CASE("over TCP at 3 to 8 ranks that share cores: the all_reduce via rank 0, to 1 MiB at "
          "3 and 512 KiB at 4 to 8") {
    // Forced linear against the TCP tree's choices at 5, 6 and 8 ranks on 2
    // cores: the all_reduce 0.47-0.92 at 32 KiB-1 MiB over loopback and
    // between namespaces. The broadcast and reduce gained over loopback but
    // not between namespaces, where the binomial broadcast of 256-512 KiB
    // after a linear one took 1.09-2.01 times as long: left as they were
    // (sixty-fifth session). At 4 ranks linear lost then (1.00-1.39); once
    // mid-size messages whose receive is posted went straight into it (the
    // TCP reader), it took 0.67-0.72 of Rabenseifner's time at 128-512 KiB
    // over loopback and 0.69-0.83 at 96-512 KiB between namespaces (whole
    // iterations alike), Rabenseifner level or ahead again from 768 KiB
    // (sixty-ninth session, docs/performance.md). At 3 ranks it took
    // 0.61-0.81 of the ring's time at 96 KiB-1 MiB over loopback and between
    // namespaces, level at 2 MiB; at 6 and 8 ranks 0.68-0.89 of the time
    // before at 384-512 KiB, where it had stopped at 256 KiB (same session).
    // Ranks with a core each keep the old rules (not measured here).
    const auto tree =
        decision_tree::load(builtin_tree_text(tree_role::pure), "built-in", tree_role::pure);
    const auto choice = [](int p, std::size_t bytes, std::string_view crowded,
                           std::string_view general) {
        return over_tcp_choice(collective::all_reduce, p, bytes, crowded, general);
    };
    check_crowding(tree,
                   {
                       choice(8, 256 << 10, "linear", "rabenseifner"),
                       choice(6, 64 << 10, "linear", "rabenseifner"),
                       choice(5, 8 << 10, "linear", "linear"),
                       choice(8, 512 << 10, "linear", "rabenseifner"),
                       choice(6, 512 << 10, "linear", "rabenseifner"),
                       choice(6, 768 << 10, "rabenseifner", "rabenseifner"),
                       choice(8, 1 << 20, "rabenseifner", "rabenseifner"),
                       choice(4, 64 << 10, "linear", "linear"),
                       choice(4, 96 << 10, "linear", "rabenseifner"),
                       choice(4, 256 << 10, "linear", "rabenseifner"),
                       choice(4, 512 << 10, "linear", "rabenseifner"),
                       choice(4, 768 << 10, "rabenseifner", "rabenseifner"),
                       choice(4, 16 << 20, "rabenseifner", "rabenseifner"),
                       choice(3, 64 << 10, "linear", "linear"),
                       choice(3, 96 << 10, "linear", "ring"),
                       choice(3, 1 << 20, "linear", "ring"),
                       choice(3, 2 << 20, "ring", "ring"),
                   },
                   {2, 3, 4}, {0, 1});
}

TEST_CASE("over TCP beyond 8 ranks with more than 4 to a core: through rank 0") {
    // At 10 and 16 ranks on 2 cores over loopback, linear (every rank to
    // rank 0, or from it) took 0.35-0.96 of the TCP tree's time for the
    // all_reduce up to 256 KiB, 0.42-0.93 for the broadcast up to 16 KiB
    // and from 64 KiB to 1 MiB (not at 64 KiB, against the binomial tree;
    // kept to 256 KiB, as between namespaces the 1 MiB one read 1.12),
    // and 0.40-0.92 for the reduce, all_gather and reduce_scatter up to 16
    // KiB; beyond, it lost. From 4 MiB the all_gather's ring took 0.57-0.91
    // of recursive doubling's and the neighbour exchange's time at 16 and 12
    // ranks (sixty-fifth session, docs/performance.md). Several machines (0) or up
    // to 4 ranks to a core: as before.
    const auto tree =
        decision_tree::load(builtin_tree_text(tree_role::pure), "built-in", tree_role::pure);
    check_crowding(
        tree,
        {
            crowding_choice{over_tcp(collective::broadcast, 16, 8), "linear", "binomial"},
            crowding_choice{over_tcp(collective::broadcast, 10, 64 << 10), "binomial", "binomial"},
            crowding_choice{over_tcp(collective::broadcast, 10, 256 << 10), "linear",
                            "scatter_allgather"},
            crowding_choice{over_tcp(collective::broadcast, 10, 1 << 20), "scatter_allgather",
                            "scatter_allgather"},
            crowding_choice{over_tcp(collective::broadcast, 16, 2 << 20), "scatter_allgather",
                            "scatter_allgather"},
            crowding_choice{over_tcp(collective::all_reduce, 16, 8), "linear",
                            "recursive_doubling"},
            crowding_choice{over_tcp(collective::all_reduce, 16, 256 << 10), "linear",
                            "rabenseifner"},
            crowding_choice{over_tcp(collective::all_reduce, 10, 256 << 10), "linear", "ring"},
            crowding_choice{over_tcp(collective::all_reduce, 10, 1 << 20), "ring", "ring"},
            crowding_choice{over_tcp(collective::all_reduce, 16, 4 << 20), "rabenseifner",
                            "rabenseifner"},
            crowding_choice{over_tcp(collective::reduce, 16, 16 << 10), "linear", "binomial"},
            crowding_choice{over_tcp(collective::reduce, 16, 64 << 10), "binomial", "binomial"},
            crowding_choice{over_tcp(collective::all_gather, 16, 16 << 10), "linear",
                            "recursive_doubling"},
            crowding_choice{over_tcp(collective::all_gather, 16, 1 << 20), "recursive_doubling",
                            "recursive_doubling"},
            crowding_choice{over_tcp(collective::all_gather, 16, 4 << 20), "ring",
                            "recursive_doubling"},
            crowding_choice{over_tcp(collective::all_gather, 12, 4 << 20), "ring",
                            "neighbor_exchange"},
            crowding_choice{over_tcp(collective::all_gather, 12, 2 << 20), "neighbor_exchange",
                            "neighbor_exchange"},
            crowding_choice{over_tcp(collective::reduce_scatter, 16, 4 << 10), "linear",
                            "recursive_halving"},
            crowding_choice{over_tcp(collective::reduce_scatter, 16, 1 << 20), "recursive_halving",
                            "recursive_halving"},
        },
        {5, 8}, {0, 1, 4});
}

TEST_CASE("beyond 8 ranks with more than 4 to a core: the algorithms of fewest steps") {
    // Where ranks take turns on the cores, each step of an algorithm waits
    // for turns: at 12, 16 and 32 ranks on 2 cores (6, 8 and 16 ranks to a
    // core) the fan-in and fan-out through rank 0 (linear) took 0.37-0.95 of
    // the general choices' time per iteration at 8 B-64 KiB, and to 4 MiB
    // where measured (fifty-second session, docs/performance.md). Where each
    // rank has a core, 4 or fewer to a core (unmeasured) and unknown (0):
    // the general choices.
    const auto tree =
        decision_tree::load(builtin_tree_text(tree_role::pure), "built-in", tree_role::pure);
    check_crowding(
        tree,
        {
            crowding_choice{plain(collective::barrier, 16, 0), "linear", "dissemination"},
            crowding_choice{plain(collective::broadcast, 16, 8), "linear", "binomial"},
            crowding_choice{plain(collective::broadcast, 32, 4 << 20), "linear", "pipeline"},
            crowding_choice{plain(collective::gather, 12, 64 << 10), "linear", "binomial"},
            crowding_choice{plain(collective::scatter, 16, 4 << 20), "linear", "binomial"},
            crowding_choice{plain(collective::all_gather, 16, 1 << 20), "linear", "ring"},
            crowding_choice{plain(collective::all_gather, 12, 96), "linear", "bruck"},
            crowding_choice{plain(collective::all_gather, 16, 64 << 20), "ring", "ring"},
            crowding_choice{plain(collective::all_to_all, 16, 64 << 10), "linear", "pairwise"},
            // Blocks of 256 bytes or less: Bruck's log2(p) rounds (1.30
            // times as long by fan-out at 32 ranks).
            crowding_choice{plain(collective::all_to_all, 32, 256), "bruck", "bruck"},
            crowding_choice{plain(collective::all_to_allv, 16, 0), "linear", "pairwise"},
            crowding_choice{with_op(collective::all_reduce, 16, 8), "linear", "recursive_doubling"},
            crowding_choice{with_op(collective::all_reduce, 16, 16 << 10), "linear",
                            "recursive_doubling"},
            crowding_choice{with_op(collective::all_reduce, 16, 256 << 10), "linear",
                            "rabenseifner"},
            crowding_choice{with_op(collective::all_reduce, 12, 64 << 10), "linear", "ring"},
            // From 512 KiB the halving rounds (linear 1.31-1.50).
            crowding_choice{with_op(collective::all_reduce, 16, 512 << 10), "rabenseifner",
                            "rabenseifner"},
            crowding_choice{with_op(collective::reduce, 16, 16 << 10), "linear", "binomial"},
            crowding_choice{with_op(collective::reduce, 16, 32 << 10), "binomial", "binomial"},
            crowding_choice{with_op(collective::reduce_scatter, 16, 16 << 10), "linear",
                            "recursive_halving"},
            crowding_choice{with_op(collective::reduce_scatter, 16, 64 << 10), "recursive_halving",
                            "recursive_halving"},
            // Scans: one round of short vectors (only the shortest at 32
            // ranks, where it sends 496 messages), the chain of long ones.
            crowding_choice{with_op(collective::scan, 16, 1 << 10), "direct", "recursive_doubling"},
            crowding_choice{with_op(collective::scan, 16, 4 << 10), "linear", "recursive_doubling"},
            crowding_choice{with_op(collective::exscan, 32, 8), "direct", "recursive_doubling"},
            crowding_choice{with_op(collective::exscan, 32, 4 << 10), "recursive_doubling",
                            "recursive_doubling"},
            crowding_choice{with_op(collective::scan, 32, 16 << 10), "linear",
                            "recursive_doubling"},
        },
        {5, 8}, {0, 1, 4});
    // Up to 8 ranks 4 to a core already count as crowded: more change nothing.
    for (auto kind : all_collectives) {
        auto eight = plain(kind, 8, 8);
        eight.transport = "shm";
        eight.ranks_per_core = 8;
        const auto crowded = tree.walk(eight);
        eight.ranks_per_core = 4;
        CHECK(tree.walk(eight) == crowded);
    }
    // Non-commutative reductions (affine maps composed in rank order):
    // linear 0.46-0.93 to 64 KiB at 16 ranks, the reduce 0.62-0.70 to 1 KiB
    // and 1.02-1.05 at 16 KiB.
    check_crowding(
        tree,
        {
            crowding_choice{with_op(collective::all_reduce, 16, 8, false), "linear",
                            "recursive_doubling"},
            crowding_choice{with_op(collective::all_reduce, 16, 64 << 10, false), "linear",
                            "scatter_gather"},
            crowding_choice{with_op(collective::all_reduce, 32, 64 << 10, false), "linear",
                            "recursive_doubling"},
            crowding_choice{with_op(collective::all_reduce, 16, 256 << 10, false), "scatter_gather",
                            "scatter_gather"},
            crowding_choice{with_op(collective::reduce, 16, 1 << 10, false), "linear", "binomial"},
            crowding_choice{with_op(collective::reduce, 16, 16 << 10, false), "binomial",
                            "binomial"},
            crowding_choice{with_op(collective::reduce, 16, 64 << 10, false), "binomial",
                            "binomial"},
            crowding_choice{with_op(collective::reduce_scatter, 16, 64 << 10, false), "linear",
                            "pairwise"},
            crowding_choice{with_op(collective::reduce_scatter, 16, 256 << 10, false), "pairwise",
                            "pairwise"},
        },
        {5, 8}, {0, 1, 4});
    // Over TCP the transport's own trees (where ranks_per_core is 0 anyway).
    auto tcp = plain(collective::barrier, 16, 0);
    tcp.transport = "tcp";
    tcp.ranks_per_core = 8;
    CHECK(tree.walk(tcp) == "dissemination");
}

TEST_CASE("6 to 8 ranks with 3 or 4 to a core: short calls through rank 0") {
    // At 6 and 8 ranks on 2 cores the fan-in and fan-out through rank 0
    // took 0.50-0.95 of one round's time per iteration (the barrier, and the
    // all_gather, commutative all_reduce and reduce_scatter to 16 KiB; at 64
    // KiB the all_gather 1.15, the reduce_scatter 1.35); at 4 and 5 ranks, 2
    // and 3 to a core, one round stayed about as quick (fifty-second
    // session, docs/performance.md).
    const auto tree =
        decision_tree::load(builtin_tree_text(tree_role::pure), "built-in", tree_role::pure);
    check_crowding(
        tree,
        {
            crowding_choice{plain(collective::barrier, 8, 0), "linear", "direct"},
            crowding_choice{plain(collective::barrier, 6, 0), "linear", "direct"},
            // 5 ranks, 3 to a core on 2 cores: one round (linear 1.03-1.11).
            crowding_choice{plain(collective::barrier, 5, 0), "direct", "direct"},
            crowding_choice{plain(collective::all_gather, 5, 40), "direct", "direct"},
            crowding_choice{with_op(collective::all_reduce, 5, 1 << 10), "direct", "direct"},
            crowding_choice{with_op(collective::all_reduce, 5, 8), "direct", "direct"},
            crowding_choice{with_op(collective::reduce_scatter, 5, 1 << 10), "direct", "direct"},
            crowding_choice{plain(collective::all_gather, 8, 16 << 10), "linear", "direct"},
            crowding_choice{plain(collective::all_gather, 6, 1 << 10), "linear", "direct"},
            crowding_choice{plain(collective::all_gather, 7, 56), "linear", "direct"},
            crowding_choice{plain(collective::all_gather, 8, 64 << 10), "direct", "direct"},
            crowding_choice{with_op(collective::all_reduce, 8, 8), "linear", "direct"},
            crowding_choice{with_op(collective::all_reduce, 8, 4 << 10), "linear", "direct"},
            crowding_choice{with_op(collective::all_reduce, 6, 1 << 10), "linear", "direct"},
            crowding_choice{with_op(collective::all_reduce, 8, 16 << 10), "linear", "linear"},
            crowding_choice{with_op(collective::reduce_scatter, 8, 4 << 10), "linear", "direct"},
            crowding_choice{with_op(collective::reduce_scatter, 6, 1 << 10), "linear", "direct"},
            crowding_choice{with_op(collective::reduce_scatter, 8, 64 << 10), "direct", "direct"},
        },
        {3, 4}, {0, 1, 2});
    // 4 ranks: one round, whatever the count.
    auto four = with_op(collective::all_reduce, 4, 1 << 10);
    four.ranks_per_core = 4;
    CHECK(tree.walk(four) == "direct");
}

TEST_CASE("the walk records the path with its reasons") {
    const auto tree =
        decision_tree::load(builtin_tree_text(tree_role::pure), "built-in", tree_role::pure);
    std::vector<decision_tree::step> path;
    const auto leaf =
        tree.walk({.kind = collective::all_gather, .comm_size = 10, .bytes = 64}, &path);
    CHECK(leaf == "bruck");
    REQUIRE(path.size() == 6);
    CHECK(path[0].pointer == "/all_gather");
    CHECK(path[0].branch == "power_of_two=no");
    CHECK(path[0].reason == "power_of_two fails");
    CHECK(path[1].pointer == "/all_gather/power_of_two=no");
    CHECK(path[1].branch == "even_size=yes");
    CHECK(path[1].reason == "even_size holds");
    CHECK(path[2].pointer == "/all_gather/power_of_two=no/even_size=yes");
    CHECK(path[2].branch == "comm_size=any");
    CHECK(path[3].pointer == "/all_gather/power_of_two=no/even_size=yes/comm_size=any");
    CHECK(path[3].reason == "ranks_per_core = 0 <= 4");
    CHECK(path[4].pointer ==
          "/all_gather/power_of_two=no/even_size=yes/comm_size=any/ranks_per_core<=4");
    CHECK(path[4].reason == "bytes = 64 <= 16384");
    CHECK(path[5].branch == "bruck");
}

TEST_CASE("line_ns, readv_percent, ranks_per_core: thresholds on the cores, 0 when unknown") {
    // How long a line takes there and back between the cores, and how
    // process_vm_readv compares with the shared-memory cells.
    struct figure {
        std::string name;
        std::uint32_t call_signature::*field;
        std::uint32_t bound, above;
    };
    for (const auto& [name, field, bound, above] :
         {figure{"line_ns", &call_signature::line_ns, 250, 450},
          figure{"readv_percent", &call_signature::readv_percent, 125, 300},
          figure{"ranks_per_core", &call_signature::ranks_per_core, 4, 8}}) {
        CAPTURE(name);
        auto text = builtin(tree_role::pure);
        text["broadcast"] = {{fmt::format("{}<={}", name, bound), "linear"},
                             {name + "=any", "binomial"}};
        const auto tree = decision_tree::load(text.dump(), "test.json", tree_role::pure);
        call_signature s{.kind = collective::broadcast, .comm_size = 2, .bytes = 1 << 20};
        for (std::uint32_t v : {0u, bound / 2, bound}) {
            s.*field = v;
            CHECK(tree.walk(s) == "linear");
        }
        s.*field = above;
        std::vector<decision_tree::step> path;
        CHECK(tree.walk(s, &path) == "binomial");
        REQUIRE(path.size() == 2);
        CHECK(path[0].reason == fmt::format("{} = {}", name, above));
        // A threshold, not a discrete condition.
        text["broadcast"] = {{name + "=yes", "linear"}, {name + "=any", "linear"}};
        CHECK(contains(load_error(text).what(), fmt::format("'{}' is a threshold", name)));
    }
}

TEST_CASE("malformed JSON is refused, naming the source") {
    const auto e = load_error_text("{ \"barrier\": ");
    CHECK(e.code() == errc::invalid_argument);
    CHECK(contains(e.what(), "test.json pure tree"));
    CHECK(contains(e.what(), "malformed JSON"));
}

TEST_CASE("an unknown collective is refused") {
    auto tree = builtin(tree_role::pure);
    tree["all_reduction"] = "ring";
    const auto e = load_error(tree);
    CHECK(contains(e.what(), "at /all_reduction: unknown collective 'all_reduction'"));
}

TEST_CASE("an unknown algorithm is refused with errc::unknown_algorithm") {
    auto tree = builtin(tree_role::pure);
    tree["all_reduce"]["commutative_op=no"] = "telepathy";
    const auto e = load_error(tree);
    CHECK(e.code() == errc::unknown_algorithm);
    CHECK(contains(e.what(), "at /all_reduce/commutative_op=no: unknown all_reduce algorithm "
                             "'telepathy'"));
}

TEST_CASE("a missing region is refused") {
    SUBCASE("a collective without a tree") {
        auto tree = builtin(tree_role::pure);
        tree.erase("scan");
        const auto e = load_error(tree);
        CHECK(contains(e.what(), "at /: missing region: no tree for collective 'scan'"));
    }
    SUBCASE("thresholds without =any") {
        auto tree = builtin(tree_role::pure);
        tree["broadcast"] = {{"bytes<=16K", "binomial"}, {"bytes<=1M", "scatter_allgather"}};
        const auto e = load_error(tree);
        CHECK(contains(e.what(), "at /broadcast: missing region: 'bytes' needs a bytes=any"));
    }
    SUBCASE("a discrete condition with one side only") {
        auto tree = builtin(tree_role::pure);
        tree["all_reduce"].erase("commutative_op=no");
        const auto e = load_error(tree);
        CHECK(contains(e.what(), "at /all_reduce: missing region: 'commutative_op' needs both"));
    }
    SUBCASE("a transport switch without transport=any") {
        auto tree = builtin(tree_role::pure);
        tree["barrier"] = {{"transport=shm", "dissemination"}};
        const auto e = load_error(tree);
        CHECK(contains(e.what(), "needs a transport=any branch"));
    }
}

TEST_CASE("a leaf whose restrictions its path does not guarantee is refused") {
    SUBCASE("power of two") {
        auto tree = builtin(tree_role::pure);
        tree["all_gather"]["power_of_two=no"]["even_size=no"]["comm_size=any"]["ranks_per_core<=4"]
            ["bytes<=16K"] = "recursive_doubling";
        const auto e = load_error(tree);
        CHECK(contains(e.what(), "at /all_gather/power_of_two=no/even_size=no/comm_size=any/"
                                 "ranks_per_core<=4/bytes<=16K: "
                                 "all_gather algorithm 'recursive_doubling' has restriction "
                                 "power_of_two"));
    }
    SUBCASE("commutative operation") {
        auto tree = builtin(tree_role::pure);
        tree["all_reduce"]["commutative_op=no"] = "ring";
        const auto e = load_error(tree);
        CHECK(contains(e.what(), "restriction commutative_op, which the conditions on its path "
                                 "do not guarantee (put it under \"commutative_op=yes\")"));
    }
    SUBCASE("a hierarchy, in the composition tree") {
        auto tree = builtin(tree_role::composition);
        tree["barrier"] = "hierarchical";
        const auto e = load_error(tree, tree_role::composition);
        CHECK(contains(e.what(), "at /barrier: barrier algorithm 'hierarchical' has restriction "
                                 "hierarchy_available"));
    }
    SUBCASE("even size") {
        auto tree = builtin(tree_role::pure);
        tree["all_gather"] = {{"comm_size<=3", "neighbor_exchange"}, {"comm_size=any", "ring"}};
        const auto e = load_error(tree);
        CHECK(contains(e.what(), "'neighbor_exchange' has restriction even_size"));
    }
    SUBCASE("even size guaranteed by a power of two above 1, or by two ranks") {
        auto tree = builtin(tree_role::pure);
        tree["all_gather"] = {{"power_of_two=yes",
                               {{"comm_size<=1", "ring"}, {"comm_size=any", "neighbor_exchange"}}},
                              {"power_of_two=no",
                               {{"even_size=yes", "neighbor_exchange"}, {"even_size=no", "ring"}}}};
        CHECK_NOTHROW(decision_tree::load(tree.dump(), "test.json", tree_role::pure));
        tree["all_gather"] = {{"comm_size<=1", "ring"},
                              {"comm_size<=2", "neighbor_exchange"},
                              {"comm_size=any", "ring"}};
        CHECK_NOTHROW(decision_tree::load(tree.dump(), "test.json", tree_role::pure));
    }
    SUBCASE("a size threshold that guarantees power of two") {
        auto tree = builtin(tree_role::pure);
        tree["all_gather"] = {{"comm_size<=2", "recursive_doubling"}, {"comm_size=any", "ring"}};
        CHECK_NOTHROW(decision_tree::load(tree.dump(), "test.json", tree_role::pure));
    }
}

TEST_CASE("other malformed trees are refused with what is wrong") {
    struct bad_case {
        const char* what;
        nlohmann::json broadcast;
        const char* message;
    };
    const std::vector<bad_case> cases = {
        {"an unknown condition",
         {{"speed=fast", "binomial"}, {"speed=any", "linear"}},
         "unknown condition 'speed'"},
        {"two variables in one node",
         {{"bytes<=8", "binomial"}, {"comm_size=any", "linear"}},
         "tests 'bytes' and 'comm_size'"},
        {"a bad number",
         {{"bytes<=lots", "binomial"}, {"bytes=any", "linear"}},
         "a threshold must be a whole number"},
        {"a discrete condition under a threshold",
         {{"bytes<=8", {{"transport=tcp", "linear"}, {"transport=any", "binomial"}}},
          {"bytes=any", "binomial"}},
         "the discrete condition 'transport' is under a threshold"},
        {"an unknown transport",
         {{"transport=carrier_pigeon", "linear"}, {"transport=any", "binomial"}},
         "unknown transport 'carrier_pigeon'"},
        {"a number as a leaf", 7, "expected an algorithm name or an object"},
        {"flat in the pure tree", "flat", "'flat' belongs in the composition tree"},
        {"a composition in the pure tree",
         {{"hierarchy_available=yes", "hierarchical"}, {"hierarchy_available=no", "binomial"}},
         "the pure tree names pure algorithms"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.what);
        auto tree = builtin(tree_role::pure);
        tree["broadcast"] = c.broadcast;
        const auto e = load_error(tree);
        CHECK(contains(e.what(), c.message));
        CHECK(contains(e.what(), "/broadcast"));
    }
    // A size threshold under a collective whose calls carry no size would
    // never be taken: refused, for either tree and in a transport section.
    for (auto role : {tree_role::pure, tree_role::composition}) {
        auto tree = builtin(role);
        const char* leaf = role == tree_role::pure ? "linear" : "flat";
        tree["all_to_allv"] = {{"avg_bytes<=256K", leaf}, {"avg_bytes=any", leaf}};
        auto e = load_error(tree, role);
        CHECK(contains(e.what(), "'avg_bytes' never applies to all_to_allv"));
        CHECK(contains(e.what(), "each rank knows only its own counts"));
        tree = builtin(role);
        const char* barrier = role == tree_role::pure ? "dissemination" : "flat";
        tree["transport=tcp"] = {{"barrier", {{"bytes<=8", barrier}, {"bytes=any", barrier}}}};
        e = load_error(tree, role);
        CHECK(contains(e.what(), "'bytes' never applies to barrier: its calls carry no size "
                                 "(a barrier moves no data)"));
        CHECK(contains(e.what(), "/transport=tcp/barrier"));
    }
    auto composition = builtin(tree_role::composition);
    composition["broadcast"] = "binomial";
    CHECK(contains(load_error(composition, tree_role::composition).what(),
                   "the composition tree names compositions or 'flat'"));
}

TEST_CASE("a transport section overrides the general tree for that transport only") {
    auto tree = builtin(tree_role::pure);
    tree["transport=shm"] = {{"barrier", "dissemination"}, {"reduce", "linear"}};
    const auto loaded = decision_tree::load(tree.dump(), "test.json", tree_role::pure);
    CHECK(loaded.walk({.kind = collective::reduce, .comm_size = 4, .transport = "shm"}) ==
          "linear");
    CHECK(loaded.walk({.kind = collective::reduce, .comm_size = 4, .transport = "tcp"}) ==
          "binomial");
    tree["transport=shm"]["transport=tcp"] = nlohmann::json::object();
    CHECK(contains(load_error(tree).what(), "cannot hold another one"));
}

TEST_CASE("TUTTI_SELECTION_FILE: a bad file fails the first call, naming the file and path") {
    const std::string path = "/tmp/tutti_select_test_bad_tree.json";
    auto tree = builtin(tree_role::pure);
    tree["reduce_scatter"]["commutative_op=no"] = "ring";
    std::ofstream(path) << tree.dump(2);
    tutti::testing::scoped_env env{{"TUTTI_SELECTION_FILE", path}};
    try {
        inproc::run(2, [](communicator comm) -> task<void> { co_await barrier(comm); });
        FAIL("the bad tree was accepted");
    } catch (const tutti::error& e) {
        CHECK(contains(e.what(), path));
        CHECK(contains(e.what(), "TUTTI_SELECTION_FILE"));
        CHECK(contains(e.what(), "/reduce_scatter/commutative_op=no"));
    }
    std::remove(path.c_str());
}

TEST_CASE("a user-edited tree changes the choice") {
    const std::string path = "/tmp/tutti_select_test_user_tree.json";
    auto tree = builtin(tree_role::pure);
    tree["all_reduce"]["commutative_op=yes"] = "ring";
    std::ofstream(path) << tree.dump(2);
    const call_signature small{
        .kind = collective::all_reduce, .comm_size = 4, .bytes = 64, .count = 8, .has_op = true};
    CHECK(select_algorithm(small, {}).name == "direct");
    {
        tutti::testing::scoped_env env{{"TUTTI_SELECTION_FILE", path}};
        CHECK(select_algorithm(small, {}).name == "ring");
        const auto why = explain(small);
        CHECK(contains(why.pure_tree, path));
    }
    CHECK(select_algorithm(small, {}).name == "direct");
    std::remove(path.c_str());
}

TEST_CASE("a subtree is written once, used by name, and walked as if written where it is used") {
    auto tree = builtin(tree_role::pure);
    tree["subtrees"]["pieces"] = {{"bytes<=16K", "recursive_doubling"}, {"bytes=any", "ring"}};
    tree["subtrees"]["prefix_chain"] = {{"comm_size<=4", "linear"},
                                        {"comm_size=any", "recursive_doubling"}};
    tree["all_reduce"] = {{"commutative_op=yes", "@pieces"},
                          {"commutative_op=no", "recursive_doubling"}};
    // One subtree serves two collectives: each use resolves its leaves in
    // its own collective's catalog.
    tree["scan"] = "@prefix_chain";
    tree["exscan"] = "@prefix_chain";
    const auto loaded = decision_tree::load(tree.dump(), "test.json", tree_role::pure);

    std::vector<decision_tree::step> path;
    CHECK(loaded.walk(with_op(collective::all_reduce, 4, 1 << 20), &path) == "ring");
    REQUIRE(path.size() == 4);
    CHECK(path[0].pointer == "/all_reduce");
    CHECK(path[0].branch == "commutative_op=yes");
    CHECK(path[1].pointer == "/all_reduce/commutative_op=yes");
    CHECK(path[1].branch == "@pieces");
    CHECK(path[1].reason == "shared subtree /subtrees/pieces");
    CHECK(path[2].pointer == "/subtrees/pieces");
    CHECK(path[2].branch == "bytes=any");
    CHECK(path[3].branch == "ring");
    CHECK(loaded.walk(with_op(collective::all_reduce, 4, 8)) == "recursive_doubling");
    CHECK(loaded.walk(with_op(collective::all_reduce, 4, 1 << 20, false)) == "recursive_doubling");
    for (auto kind : {collective::scan, collective::exscan}) {
        CHECK(loaded.walk(with_op(kind, 3, 8)) == "linear");
        CHECK(loaded.walk(with_op(kind, 8, 8)) == "recursive_doubling");
    }
}

TEST_CASE("a subtree is checked at every use, and its errors name the use") {
    auto with_pieces = [] {
        auto tree = builtin(tree_role::pure);
        tree["subtrees"]["pieces"] = {{"bytes<=16K", "recursive_doubling"}, {"bytes=any", "ring"}};
        tree["all_reduce"]["commutative_op=yes"] = "@pieces";
        return tree;
    };
    CHECK_NOTHROW(decision_tree::load(with_pieces().dump(), "test.json", tree_role::pure));

    SUBCASE("a leaf whose restriction one path guarantees and another does not") {
        auto tree = with_pieces();
        tree["all_reduce"]["commutative_op=no"] = "@pieces";
        const auto e = load_error(tree);
        CHECK(contains(e.what(), "at /subtrees/pieces/bytes=any: all_reduce algorithm 'ring' "
                                 "has restriction commutative_op"));
        CHECK(contains(e.what(), "(subtree '@pieces' used at /all_reduce/commutative_op=no)"));
    }
    SUBCASE("a name the collective's catalog lacks") {
        auto tree = with_pieces();
        tree["broadcast"] = "@pieces";
        const auto e = load_error(tree);
        CHECK(e.code() == errc::unknown_algorithm);
        CHECK(contains(e.what(), "unknown broadcast algorithm 'recursive_doubling'"));
        CHECK(contains(e.what(), "used at /broadcast)"));
    }
    SUBCASE("a discrete condition in a subtree used under a threshold") {
        auto tree = with_pieces();
        tree["subtrees"]["by_order"] = {{"commutative_op=yes", "ring"},
                                        {"commutative_op=no", "recursive_doubling"}};
        tree["all_reduce"]["commutative_op=yes"] = {{"bytes<=16K", "recursive_doubling"},
                                                    {"bytes=any", "@by_order"}};
        tree["subtrees"].erase("pieces");
        const auto e = load_error(tree);
        CHECK(contains(e.what(), "at /subtrees/by_order: the discrete condition 'commutative_op' "
                                 "is under a threshold"));
        CHECK(contains(e.what(), "used at /all_reduce/commutative_op=yes/bytes=any)"));
    }
    SUBCASE("a subtree used inside another names both uses") {
        auto tree = with_pieces();
        tree["subtrees"]["outer"] = {{"comm_size<=2", "recursive_doubling"},
                                     {"comm_size=any", "@pieces"}};
        tree["all_reduce"]["commutative_op=no"] = "@outer";
        const auto e = load_error(tree);
        CHECK(contains(e.what(), "(subtree '@pieces' used at /subtrees/outer/comm_size=any, "
                                 "subtree '@outer' used at /all_reduce/commutative_op=no)"));
    }
}

TEST_CASE("a subtree no collective uses is left alone") {
    // An edited tree may stop using one; its leaves name algorithms of no
    // collective in particular until something uses it.
    auto tree = builtin(tree_role::pure);
    tree["subtrees"]["spare"] = "telepathy";
    CHECK_NOTHROW(decision_tree::load(tree.dump(), "test.json", tree_role::pure));
    tree["all_reduce"]["commutative_op=no"] = "@spare";
    CHECK(load_error(tree).code() == errc::unknown_algorithm);
}

TEST_CASE("bad subtrees are refused") {
    auto tree = builtin(tree_role::pure);
    tree["subtrees"]["pieces"] = {{"bytes<=16K", "recursive_doubling"}, {"bytes=any", "ring"}};
    tree["all_reduce"]["commutative_op=yes"] = "@pieces";

    SUBCASE("an unknown name") {
        tree["all_reduce"]["commutative_op=yes"] = "@peices";
        tree["subtrees"]["peeces"] = "ring";
        const auto e = load_error(tree);
        CHECK(contains(e.what(), "at /all_reduce/commutative_op=yes: unknown subtree '@peices'"));
        CHECK(contains(e.what(), "defined: "));
        CHECK(contains(e.what(), "@pieces"));
    }
    SUBCASE("a file without subtrees") {
        auto plain = builtin(tree_role::pure);
        plain.erase("subtrees");
        plain["barrier"] = "@fast";
        // The first reference loaded names the problem, whichever it is.
        const auto e = load_error(plain);
        CHECK(contains(e.what(), "unknown subtree '@"));
        CHECK(contains(e.what(), "the file defines none (under \"subtrees\")"));
    }
    SUBCASE("a subtree that refers to itself") {
        tree["subtrees"]["a"] = {{"comm_size<=2", "recursive_doubling"}, {"comm_size=any", "@b"}};
        tree["subtrees"]["b"] = {{"bytes<=8", "@a"}, {"bytes=any", "recursive_doubling"}};
        tree["all_reduce"]["commutative_op=no"] = "@a";
        const auto e = load_error(tree);
        CHECK(contains(e.what(), "at /subtrees/b/bytes<=8: subtree '@a' refers to itself"));
    }
    SUBCASE("a malformed name") {
        tree["subtrees"]["two words"] = "ring";
        CHECK(contains(load_error(tree).what(), "a subtree's name is letters, digits"));
    }
    SUBCASE("subtrees in a transport section") {
        tree["transport=tcp"]["subtrees"] = {{"x", "ring"}};
        CHECK(contains(load_error(tree).what(),
                       "at /transport=tcp/subtrees: subtrees are defined at the top level"));
    }
    SUBCASE("subtrees that are not an object") {
        tree["subtrees"] = "pieces";
        CHECK(contains(load_error(tree).what(), "at /subtrees: expected an object"));
    }
}
