// Generations and bad input on hierarchical communicators (seed 000 §9,
// §12.4, §12.5): user generation k takes slots 3k-2, 3k-1, 3k on the
// sub-communicators, so any mix of two- and three-phase collectives on one
// hierarchical communicator works; reusing a generation, generation 0 and
// rows of the wrong length are tutti errors on every rank, with no hang.
#include <random>

#include "compare.hpp"

using namespace tutti;
using namespace tutti::testing;

namespace {

// Runs `call` and gives the code of the tutti::error it throws, or nullopt.
template <class Call>
task<std::optional<errc>> error_of(Call call) {
    try {
        co_await call();
    } catch (const error& e) {
        co_return e.code();
    }
    co_return std::nullopt;
}

} // namespace

TEST_CASE("hierarchical generations: all_gather(1), all_to_all(2), all_reduce(3), all_to_all(4) "
          "(seed 12.5)") {
    for (int arity : {2, 4}) {
        CAPTURE(arity);
        inproc::run(11, [arity](communicator comm) -> task<void> {
            auto h =
                co_await make_arity_hierarchy(comm, {.arity = arity, .flat_fallback_threshold = 0});
            const int me = h.rank();
            const auto hierarchical = use("hierarchical");
            const auto mine = contribution(me, 2);
            std::vector<std::int64_t> all(22, -1);
            co_await all_gather(h, mine, all, generation(1), hierarchical);
            CHECK(all[2 * 10 + 1] == value_of(10, 1));

            const auto row = row_of(me, 11, 2);
            std::vector<std::int64_t> got(row.size(), -1);
            co_await all_to_all(h, row, got, generation(2), hierarchical);
            CHECK(transposed_wrong(got, me, 11, 2) == 0);

            std::vector<std::int64_t> sum(2, -1);
            co_await all_reduce(h, mine, sum, tutti::sum, generation(3), hierarchical);
            std::int64_t expected = 0;
            for (int r = 0; r < 11; ++r)
                expected += value_of(r, 0);
            CHECK(sum[0] == expected);

            std::fill(got.begin(), got.end(), -1);
            co_await all_to_all(h, row, got, generation(4), use("hierarchical_padded"));
            CHECK(transposed_wrong(got, me, 11, 2) == 0);

            // Generation 3 again: the hierarchical communicator's registry
            // refuses it on every rank, before any message.
            auto reused = co_await error_of([&]() -> task<void> {
                co_await all_reduce(h, mine, sum, tutti::sum, generation(3), hierarchical);
            });
            CHECK(reused == errc::reused_generation);
            // Later generations, with gaps, still work.
            co_await all_reduce(h, mine, sum, tutti::sum, generation(9), hierarchical);
            CHECK(sum[0] == expected);
        });
    }
}

TEST_CASE("hierarchical generations: a random mix of every hierarchical collective") {
    struct shape {
        int arity, n;
    };
    for (const auto& s : {shape{2, 15}, shape{4, 13}, shape{3, 10}}) {
        CAPTURE(s.arity);
        CAPTURE(s.n);
        inproc::run(s.n, [s](communicator comm) -> task<void> {
            auto h = co_await make_arity_hierarchy(
                comm, {.arity = s.arity, .flat_fallback_threshold = 0});
            const int p = h.size();
            const int me = h.rank();
            // The same seed on every rank: the same sequence of calls.
            std::mt19937 random(12345u + static_cast<unsigned>(p));
            std::uint64_t g = 0;
            for (int call = 0; call < 60; ++call) {
                g += 1 + random() % 4;
                const auto kind = random() % 9;
                const int root = static_cast<int>(random() % static_cast<unsigned>(p));
                const auto gen = generation(g);
                const auto hierarchical = use("hierarchical");
                const auto mine = contribution(me + call, 2);
                std::vector<std::int64_t> all(2 * static_cast<std::size_t>(p), -1);
                std::vector<std::int64_t> expected_all;
                for (int r = 0; r < p; ++r) {
                    auto c = contribution(r + call, 2);
                    expected_all.insert(expected_all.end(), c.begin(), c.end());
                }
                std::vector<std::int64_t> sum(2, -1), expected_sum(2, 0);
                for (int r = 0; r < p; ++r)
                    for (std::size_t i = 0; i < 2; ++i)
                        expected_sum[i] += value_of(r + call, i);
                switch (kind) {
                case 0:
                    co_await barrier(h, gen, hierarchical);
                    break;
                case 1: {
                    auto data = me == root ? mine : std::vector<std::int64_t>(2, -1);
                    co_await broadcast(h, data, tutti::root(root), gen, hierarchical);
                    CHECK(data == contribution(root + call, 2));
                    break;
                }
                case 2:
                    co_await reduce(h, mine, sum, tutti::sum, tutti::root(root), gen, hierarchical);
                    if (me == root) CHECK(sum == expected_sum);
                    break;
                case 3:
                    co_await all_reduce(h, mine, sum, tutti::sum, gen, hierarchical);
                    CHECK(sum == expected_sum);
                    break;
                case 4:
                    co_await gather(h, mine, all, tutti::root(root), gen, hierarchical);
                    if (me == root) CHECK(all == expected_all);
                    break;
                case 5: {
                    auto source = expected_all;
                    std::vector<std::int64_t> piece(2, -1);
                    co_await scatter(h, source, piece, tutti::root(root), gen, hierarchical);
                    CHECK(piece == mine);
                    break;
                }
                case 6:
                    co_await all_gather(h, mine, all, gen, hierarchical);
                    CHECK(all == expected_all);
                    break;
                default: {
                    const auto row = row_of(me, p, 2);
                    std::vector<std::int64_t> got(row.size(), -1);
                    co_await all_to_all(h, row, got, gen,
                                        use(kind == 7 ? "hierarchical" : "hierarchical_padded"));
                    CHECK(transposed_wrong(got, me, p, 2) == 0);
                    break;
                }
                }
            }
        });
    }
}

TEST_CASE("hierarchical generations: a call with two hierarchical parts runs the second flat") {
    // A call has one generation for all its parts (a serialized payload's
    // size, then its data); the slots 3k-2..3k serve the first part only.
    inproc::run(9, [](communicator comm) -> task<void> {
        auto h = co_await make_arity_hierarchy(comm, {.arity = 3, .flat_fallback_threshold = 0});
        const auto* hierarchical = algorithms().find<all_reduce_args>("hierarchical");
        REQUIRE(hierarchical != nullptr);
        call_context call(h, h.claim_generation(nullptr), collective::all_reduce, "call");
        std::vector<std::int64_t> first{h.rank() + 1}, second{10 * (h.rank() + 1)};
        auto op = erase_operation<std::int64_t>(tutti::sum);
        co_await hierarchical->run(call.phase(0, "hierarchical"),
                                   all_reduce_args{std::as_bytes(std::span(first)),
                                                   std::as_writable_bytes(std::span(first)), 1,
                                                   &op});
        co_await hierarchical->run(call.phase(1, "hierarchical"),
                                   all_reduce_args{std::as_bytes(std::span(second)),
                                                   std::as_writable_bytes(std::span(second)), 1,
                                                   &op});
        CHECK(first[0] == 45);
        CHECK(second[0] == 450);
    });
    // The typed front end's serialized all_to_all: a size agreement, then
    // the data through the hierarchical composition.
    inproc::run(7, [](communicator comm) -> task<void> {
        auto h = co_await make_arity_hierarchy(comm, {.arity = 2, .flat_fallback_threshold = 0});
        std::vector<std::string> out;
        for (int j = 0; j < 7; ++j)
            out.push_back(std::string(static_cast<std::size_t>(h.rank() + j), 'a') +
                          std::to_string(h.rank()));
        const auto in = co_await all_to_all(h, out, use("hierarchical"));
        REQUIRE(in.size() == 7);
        for (int i = 0; i < 7; ++i)
            CHECK(in[static_cast<std::size_t>(i)] ==
                  std::string(static_cast<std::size_t>(i + h.rank()), 'a') + std::to_string(i));
    });
}

TEST_CASE("hierarchical bad input: wrong row length, generation 0 (seed 12.4)") {
    for (int threshold : {0, 1024}) {
        CAPTURE(threshold);
        inproc::run(6, [threshold](communicator comm) -> task<void> {
            auto h = co_await make_arity_hierarchy(
                comm, {.arity = 2, .flat_fallback_threshold = threshold});
            for (const auto* layout : {"hierarchical", "hierarchical_padded"}) {
                // 7 elements are no row of 6 equal blocks.
                std::vector<std::int64_t> row(7, 1), got(7, 0);
                auto typed = co_await error_of(
                    [&]() -> task<void> { co_await all_to_all(h, row, got, use(layout)); });
                CHECK(typed == errc::invalid_count);
                // The same through the type-erased call a composition makes.
                auto erased = co_await error_of([&]() -> task<void> {
                    co_await run_collective(h,
                                            all_to_all_args{std::as_bytes(std::span(row)),
                                                            std::as_writable_bytes(std::span(got))},
                                            use(layout));
                });
                CHECK(erased == errc::invalid_count);
                std::vector<std::int64_t> good(6, 1), out(6, 0);
                auto zero = co_await error_of([&]() -> task<void> {
                    co_await all_to_all(h, good, out, generation(0), use(layout));
                });
                CHECK(zero == errc::invalid_generation);
            }
            // After the errors the communicator still works.
            const auto row = row_of(h.rank(), 6, 1);
            std::vector<std::int64_t> got(6, -1);
            co_await all_to_all(h, row, got, use("hierarchical"));
            CHECK(transposed_wrong(got, h.rank(), 6, 1) == 0);
        });
    }
}

TEST_CASE("hierarchical generations: each is a first use once, in any order within the window") {
    // hierarchy::first_use remembers a window of generations ending at the
    // newest, as many as the registry accepts behind it; one older than the
    // window counts as new, as once forgotten.
    inproc::run(4, [](communicator comm) -> task<void> {
        auto h = co_await make_arity_hierarchy(comm, {.arity = 2, .flat_fallback_threshold = 0});
        const auto levels = h.hierarchy();
        REQUIRE(levels);
        const auto& seen = *levels;
        constexpr std::uint64_t window = generation_window::window;
        // Far above any generation the hierarchy has seen.
        constexpr std::uint64_t base = 100000;
        CHECK(seen.first_use(base + 5));
        CHECK_FALSE(seen.first_use(base + 5));
        CHECK(seen.first_use(base + 3)); // behind the newest, not seen yet
        CHECK_FALSE(seen.first_use(base + 3));
        CHECK(seen.first_use(base + 4));
        CHECK_FALSE(seen.first_use(base + 5));
        // The window moves up until base + 3 is its oldest: what it still
        // covers is remembered. One more, and base + 3, left behind, counts
        // as new.
        CHECK(seen.first_use(base + 3 + window - 1));
        CHECK_FALSE(seen.first_use(base + 4));
        CHECK(seen.first_use(base + 3 + window));
        CHECK(seen.first_use(base + 3)); // a window behind
        CHECK_FALSE(seen.first_use(base + 5));
        // Sliding over base + 4 + window clears the bit base + 4 had set, so
        // that generation, behind the newest now, is new.
        CHECK(seen.first_use(base + 5 + window));
        CHECK(seen.first_use(base + 4 + window));
        CHECK_FALSE(seen.first_use(base + 4 + window));
        // A jump of more than a window forgets everything.
        CHECK(seen.first_use(base + 10 * window));
        CHECK(seen.first_use(base + 10 * window - 1));
        CHECK_FALSE(seen.first_use(base + 10 * window - 1));
        CHECK(seen.first_use(base + 5 + window));
    });
}
