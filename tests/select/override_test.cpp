// Overrides: TUTTI_<COLLECTIVE>_ALGORITHM / _COMPOSITION, the fallback modes
// (environment and per call), and that an override reaches the user's call
// but never the sub-collectives a composition issues.
#include <atomic>
#include <memory>

#include "select_support.hpp"

using namespace tutti;
using tutti::testing::captured_stderr;
using tutti::testing::contains;
using tutti::testing::scoped_env;

namespace {

// A pure all_reduce that counts its runs and does recursive doubling's work,
// so a test can see whether selection sent a call to it.
std::atomic<int> probe_runs{0};

task<void> probe(const call_context& ctx, const all_reduce_args& args) {
    ++probe_runs;
    co_await algorithms().find<all_reduce_args>("recursive_doubling")->run(ctx, args);
}

const bool probe_registered = register_algorithm<all_reduce_args>({
    .info = {.name = "probe",
             .form = algorithm_kind::pure,
             .summary = "test: counts its runs, then runs recursive_doubling"},
    .run = probe,
});

// all_gather of one int64 per rank on p ranks; checks every block.
task<void> gather_ranks(communicator comm) {
    std::vector<std::int64_t> mine{comm.rank() * 10 + 1},
        all(static_cast<std::size_t>(comm.size()));
    co_await all_gather(comm, mine, all);
    for (int r = 0; r < comm.size(); ++r)
        if (all[static_cast<std::size_t>(r)] != r * 10 + 1)
            throw tutti::error(errc::invalid_argument, "wrong all_gather result");
}

tutti::error failure_of(int p, const std::function<task<void>(communicator)>& body) {
    try {
        inproc::run(p, body);
    } catch (const tutti::error& e) {
        return e;
    }
    FAIL("expected a tutti::error");
    return tutti::error(errc::invalid_argument, "unreachable");
}

// Sums rank+1 over p ranks with all_reduce; every rank checks the total.
task<void> sum_ranks(communicator comm) {
    std::vector<std::int64_t> v(3, comm.rank() + 1);
    co_await all_reduce(comm, v, sum);
    const std::int64_t p = comm.size();
    for (auto x : v)
        if (x != p * (p + 1) / 2) throw tutti::error(errc::invalid_argument, "wrong sum");
}

} // namespace

TEST_CASE("TUTTI_<COLLECTIVE>_ALGORITHM forces the algorithm of a user's call") {
    REQUIRE(probe_registered);
    scoped_env env{{"TUTTI_ALL_REDUCE_ALGORITHM", "probe"}};
    probe_runs = 0;
    inproc::run(4, sum_ranks);
    CHECK(probe_runs == 4);
}

TEST_CASE("fallback modes: a forced power-of-two algorithm on 6 ranks") {
    SUBCASE("error (the default) names the variable and the restriction") {
        scoped_env env{{"TUTTI_ALL_GATHER_ALGORITHM", "recursive_doubling"},
                       {"TUTTI_COLL_FALLBACK", std::nullopt}};
        const auto e = failure_of(6, gather_ranks);
        CHECK(e.code() == errc::restriction_violated);
        CHECK(contains(e.what(), "TUTTI_ALL_GATHER_ALGORITHM=recursive_doubling cannot run"));
        CHECK(contains(e.what(), "communicator size 6 is not a power of two"));
    }
    SUBCASE("error, asked for explicitly") {
        scoped_env env{{"TUTTI_ALL_GATHER_ALGORITHM", "recursive_doubling"},
                       {"TUTTI_COLL_FALLBACK", "error"}};
        CHECK(failure_of(6, gather_ranks).code() == errc::restriction_violated);
    }
    SUBCASE("print warns on stderr and falls back to auto") {
        scoped_env env{{"TUTTI_ALL_GATHER_ALGORITHM", "recursive_doubling"},
                       {"TUTTI_COLL_FALLBACK", "print"}};
        captured_stderr err;
        inproc::run(6, gather_ranks);
        const auto text = err.text();
        CHECK(contains(text, "TUTTI_ALL_GATHER_ALGORITHM=recursive_doubling cannot run this call"));
        CHECK(contains(text, "falling back to the automatic choice"));
    }
    SUBCASE("silent falls back to auto without a word") {
        scoped_env env{{"TUTTI_ALL_GATHER_ALGORITHM", "recursive_doubling"},
                       {"TUTTI_COLL_FALLBACK", "silent"}};
        captured_stderr err;
        inproc::run(6, gather_ranks);
        CHECK(err.text().empty());
    }
    SUBCASE("on 8 ranks the forced algorithm runs") {
        scoped_env env{{"TUTTI_ALL_GATHER_ALGORITHM", "recursive_doubling"}};
        inproc::run(8, gather_ranks);
        const auto why = explain({.kind = collective::all_gather, .comm_size = 8, .bytes = 64});
        CHECK(why.chosen == "recursive_doubling");
        REQUIRE(why.notes.size() == 1);
        CHECK(why.notes[0] == "TUTTI_ALL_GATHER_ALGORITHM=recursive_doubling");
    }
}

TEST_CASE("fallback per call: tutti::fallback beats TUTTI_COLL_FALLBACK") {
    scoped_env env{{"TUTTI_COLL_FALLBACK", "error"}};
    inproc::run(6, [](communicator comm) -> task<void> {
        std::vector<std::int64_t> mine{comm.rank()}, all(6);
        co_await all_gather(comm, mine, all, use("recursive_doubling"),
                            fallback(fallback_mode::silent));
        for (int r = 0; r < 6; ++r)
            if (all[static_cast<std::size_t>(r)] != r)
                throw tutti::error(errc::invalid_argument, "wrong all_gather result");
    });
    const auto e = failure_of(6, [](communicator comm) -> task<void> {
        std::vector<std::int64_t> mine{1}, all(6);
        co_await all_gather(comm, mine, all, use("recursive_doubling"));
    });
    CHECK(e.code() == errc::restriction_violated);
}

TEST_CASE("bad override settings are errors that name the variable") {
    SUBCASE("an unknown algorithm") {
        scoped_env env{{"TUTTI_BROADCAST_ALGORITHM", "smoke_signals"}};
        const auto e = failure_of(2, sum_ranks);
        CHECK(e.code() == errc::unknown_algorithm);
        CHECK(contains(e.what(), "TUTTI_BROADCAST_ALGORITHM=smoke_signals"));
    }
    SUBCASE("a composition given as an algorithm") {
        scoped_env env{{"TUTTI_ALL_REDUCE_ALGORITHM", "hierarchical"}};
        const auto e = failure_of(2, sum_ranks);
        CHECK(e.code() == errc::invalid_argument);
        CHECK(contains(e.what(), "names a pure algorithm"));
    }
    SUBCASE("an unknown fallback mode") {
        scoped_env env{{"TUTTI_COLL_FALLBACK", "maybe"}};
        const auto e = failure_of(2, sum_ranks);
        CHECK(contains(e.what(), "TUTTI_COLL_FALLBACK=maybe: expected error, print or silent"));
    }
}

TEST_CASE("overrides do not recurse into a composition's sub-collectives") {
    // The hierarchical all_reduce runs an all_reduce among the groups'
    // representatives; forcing "probe" for all_reduce must not reach it.
    auto run = [](int p) {
        inproc::run(p, [](communicator comm) -> task<void> {
            auto tree =
                co_await make_arity_hierarchy(comm, {.arity = 2, .flat_fallback_threshold = 0});
            co_await sum_ranks(tree);
        });
    };
    SUBCASE("composition and algorithm forced: the sub-calls choose with the trees") {
        scoped_env env{{"TUTTI_ALL_REDUCE_COMPOSITION", "hierarchical"},
                       {"TUTTI_ALL_REDUCE_ALGORITHM", "probe"}};
        probe_runs = 0;
        run(6);
        CHECK(probe_runs == 0);
    }
    SUBCASE("the algorithm alone skips the composition tree and runs at the top") {
        scoped_env env{{"TUTTI_ALL_REDUCE_ALGORITHM", "probe"}};
        probe_runs = 0;
        run(6);
        CHECK(probe_runs == 6);
    }
    SUBCASE("the same signature as a sub-call ignores the environment") {
        scoped_env env{{"TUTTI_ALL_REDUCE_ALGORITHM", "probe"}};
        const call_signature s{
            .kind = collective::all_reduce, .comm_size = 3, .bytes = 8, .count = 1, .has_op = true};
        CHECK(select_algorithm(s, {}).name == "probe");
        CHECK(select_algorithm(s, {.sub_call = true}).name == "direct");
        // A composition may still name an algorithm for its sub-step in code.
        CHECK(select_algorithm(s, {.forced = "probe", .sub_call = true}).name == "probe");
    }
}

// A thread remembers its last choice for each kind of call on a
// communicator (dispatch.cpp); these change what the choice must be between
// two calls of the same shape on the same communicator.
TEST_CASE("a remembered choice does not outlive what it was chosen under") {
    SUBCASE("a reload of the environment reaches the next call") {
        probe_runs = 0;
        std::unique_ptr<scoped_env> env;
        inproc::run(4, [&env](communicator comm) -> task<void> {
            co_await sum_ranks(comm); // the trees' choice, remembered
            co_await barrier(comm);
            if (comm.rank() == 0)
                env.reset(new scoped_env{{"TUTTI_ALL_REDUCE_ALGORITHM", "probe"}});
            co_await barrier(comm);
            co_await sum_ranks(comm); // the override
            co_await barrier(comm);
            if (comm.rank() == 0) env.reset();
            co_await barrier(comm);
            co_await sum_ranks(comm); // the trees' choice again
        });
        CHECK(probe_runs == 4);
    }
    SUBCASE("named and automatic calls alternate") {
        probe_runs = 0;
        inproc::run(4, [](communicator comm) -> task<void> {
            for (int i = 0; i < 3; ++i) {
                std::vector<std::int64_t> v(3, comm.rank() + 1);
                co_await all_reduce(comm, v, sum, use("probe"));
                for (auto x : v)
                    if (x != 10) throw tutti::error(errc::invalid_argument, "wrong sum");
                co_await sum_ranks(comm);
            }
        });
        CHECK(probe_runs == 12);
    }
    SUBCASE("more kinds of call rotate than a thread remembers") {
        // Six distinct choices in turn (named and automatic, on two
        // communicators, at two sizes): each new one replaces an older, and
        // a found one must still be the one made for that very call.
        probe_runs = 0;
        inproc::run(4, [](communicator comm) -> task<void> {
            auto half = co_await comm.split(comm.rank() % 2, comm.rank());
            auto sum_of = [](communicator c, std::size_t n, const char* name) -> task<void> {
                std::vector<std::int64_t> v(n, c.rank() + 1);
                if (name)
                    co_await all_reduce(c, v, sum, use(name));
                else
                    co_await all_reduce(c, v, sum);
                const std::int64_t p = c.size();
                for (auto x : v)
                    if (x != p * (p + 1) / 2)
                        throw tutti::error(errc::invalid_argument, "wrong rotated sum");
            };
            for (int i = 0; i < 3; ++i) {
                co_await sum_of(comm, 3, "probe");
                co_await sum_of(comm, 3, nullptr);
                co_await sum_of(half, 3, "probe");
                co_await sum_of(half, 3, nullptr);
                co_await sum_of(comm, 5, "probe");
                co_await sum_of(comm, 3, "recursive_doubling");
            }
        });
        CHECK(probe_runs == 3 * 3 * 4);
    }
    SUBCASE("a user's call and the same call issued as a sub-call alternate") {
        scoped_env env{{"TUTTI_ALL_REDUCE_ALGORITHM", "probe"}};
        probe_runs = 0;
        inproc::run(4, [](communicator comm) -> task<void> {
            const auto op = erase_operation<std::int64_t>(sum);
            for (int i = 0; i < 3; ++i) {
                co_await sum_ranks(comm); // the override: probe
                std::vector<std::int64_t> in(3, comm.rank() + 1), out(3, 0);
                co_await run_collective(
                    comm, all_reduce_args{std::as_bytes(std::span(in)),
                                          std::as_writable_bytes(std::span(out)), 3, &op});
                for (auto x : out)
                    if (x != 10) throw tutti::error(errc::invalid_argument, "wrong sub-call sum");
            }
        });
        CHECK(probe_runs == 12);
    }
    SUBCASE("a communicator with a hierarchy and its flat parent alternate") {
        // The parent cannot run the composition and falls back to flat, where
        // the forced algorithm runs; the hierarchy runs the composition, whose
        // sub-calls choose with the trees.
        scoped_env env{{"TUTTI_ALL_REDUCE_COMPOSITION", "hierarchical"},
                       {"TUTTI_ALL_REDUCE_ALGORITHM", "probe"},
                       {"TUTTI_COLL_FALLBACK", "silent"}};
        probe_runs = 0;
        inproc::run(6, [](communicator comm) -> task<void> {
            auto tree =
                co_await make_arity_hierarchy(comm, {.arity = 2, .flat_fallback_threshold = 0});
            for (int i = 0; i < 3; ++i) {
                co_await sum_ranks(comm);
                co_await sum_ranks(tree);
            }
        });
        CHECK(probe_runs == 18);
    }
}

TEST_CASE("TUTTI_<COLLECTIVE>_COMPOSITION=flat and a composition that cannot run") {
    const call_signature s{.kind = collective::barrier, .comm_size = 4, .has_hierarchy = true};
    CHECK(select_algorithm(s, {}).name == "hierarchical");
    {
        scoped_env env{{"TUTTI_BARRIER_COMPOSITION", "flat"}};
        CHECK(select_algorithm(s, {}).name == "direct");
    }
    {
        scoped_env env{{"TUTTI_BARRIER_COMPOSITION", "hierarchical"},
                       {"TUTTI_COLL_FALLBACK", "silent"}};
        const call_signature no_tree{.kind = collective::barrier, .comm_size = 4};
        const auto why = explain(no_tree);
        CHECK(why.chosen == "direct");
        REQUIRE(why.notes.size() == 1);
        CHECK(contains(why.notes[0], "hierarchy_available fails"));
        CHECK(contains(why.notes[0], "fallback (silent)"));
    }
}

TEST_CASE("TUTTI_SELECTION_DEBUG prints each decision once on stderr") {
    scoped_env env{{"TUTTI_SELECTION_DEBUG", "1"}};
    captured_stderr err;
    inproc::run(3, [](communicator comm) -> task<void> {
        for (int i = 0; i < 3; ++i)
            co_await sum_ranks(comm);
    });
    const auto text = err.text();
    CHECK(contains(text, "tutti: selection: all_reduce on 3 ranks, 24 bytes"));
    CHECK(contains(text, "chosen: direct (pure)"));
    CHECK(text.find("all_reduce on 3 ranks") == text.rfind("all_reduce on 3 ranks"));
}
