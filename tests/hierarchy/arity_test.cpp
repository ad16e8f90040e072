// The HPX arity tree (seed 000): the partition helpers against the seed's
// table (§12.6), the tree's shape, and every hierarchical collective equal to
// the flat one bit for bit over the seed's matrix (§12.2): arity 2 with
// N = 2..9, 11, 15 and arity 4 with N = 5, 6, 7, 9, 10, 11, 13, 15, flat
// fallback threshold 0 (the tree) and 1024 (flat), roots 0, a rank that is
// not a representative, and the last.
#include "compare.hpp"

using namespace tutti;
using namespace tutti::testing;

namespace {

std::vector<int> sizes_of(const detail::rank_groups& groups) {
    std::vector<int> sizes;
    for (const auto& g : groups)
        sizes.push_back(static_cast<int>(g.size()));
    return sizes;
}

struct tree_case {
    int arity;
    int n;
};

std::vector<tree_case> seed_matrix() {
    std::vector<tree_case> cases;
    for (int n : {2, 3, 4, 5, 6, 7, 8, 9, 11, 15})
        cases.push_back({2, n});
    for (int n : {5, 6, 7, 9, 10, 11, 13, 15})
        cases.push_back({4, n});
    return cases;
}

} // namespace

TEST_CASE("hierarchy: get_top_level_groups and classify_site (seed 12.6)") {
    using groups = detail::rank_groups;
    CHECK(detail::get_top_level_groups(8, 2) == groups{{0, 1, 2, 3}, {4, 5, 6, 7}});
    CHECK(detail::get_top_level_groups(16, 4) ==
          groups{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}});
    CHECK(detail::get_top_level_groups(11, 4) == groups{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9, 10}});
    CHECK(sizes_of(detail::get_top_level_groups(11, 4)) == std::vector<int>{3, 3, 3, 2});
    CHECK(detail::get_top_level_groups(5, 4) == groups{{0, 1}, {2}, {3}, {4}});
    CHECK(sizes_of(detail::get_top_level_groups(5, 4)) == std::vector<int>{2, 1, 1, 1});
    CHECK(detail::get_top_level_groups(3, 4) == groups{{0}, {1}, {2}});

    const auto five = detail::get_top_level_groups(5, 4);
    const auto at = [&](int site) { return detail::classify_site(five, site); };
    CHECK((at(0).group == 0 && at(0).index == 0 && at(0).is_representative));
    CHECK((at(1).group == 0 && at(1).index == 1 && !at(1).is_representative));
    CHECK((at(2).group == 1 && at(2).index == 0 && at(2).is_representative));
    CHECK((at(4).group == 3 && at(4).is_representative));
    const auto eleven = detail::get_top_level_groups(11, 4);
    CHECK(detail::classify_site(eleven, 9).group == 3);
    CHECK(detail::classify_site(eleven, 9).is_representative);
    CHECK_FALSE(detail::classify_site(eleven, 10).is_representative);

    CHECK_THROWS_AS(detail::get_top_level_groups(8, 1), error);
    CHECK_THROWS_AS(detail::get_top_level_groups(0, 2), error);
    CHECK_THROWS_AS(detail::classify_site(five, 5), error);
}

TEST_CASE("hierarchy: the arity tree's shape") {
    inproc::run(11, [](communicator comm) -> task<void> {
        auto h = co_await make_arity_hierarchy(comm, {.arity = 4, .flat_fallback_threshold = 0});
        REQUIRE(h.hierarchy());
        const auto& top = *h.hierarchy();
        CHECK_FALSE(top.flat());
        CHECK(top.groups() == detail::get_top_level_groups(11, 4));
        CHECK(top.is_representative() ==
              (h.rank() == 0 || h.rank() == 3 || h.rank() == 6 || h.rank() == 9));
        CHECK(top.group().size() == (h.rank() >= 9 ? 2 : 3));
        CHECK(top.leaders().valid() == top.is_representative());
        if (top.is_representative()) CHECK(top.leaders().size() == 4);
        CHECK(top.depth() == 1); // groups of 3 <= arity are flat leaves
        CHECK(top.order_preserving());
        CHECK(h.size() == 11);
        CHECK(h.id() != comm.id());

        // Below the threshold, or at most `arity` ranks: flat.
        auto flat = co_await make_arity_hierarchy(comm, {.arity = 4});
        CHECK(flat.hierarchy()->flat());
        auto wide =
            co_await make_arity_hierarchy(comm, {.arity = 16, .flat_fallback_threshold = 0});
        CHECK(wide.hierarchy()->flat());
    });
    inproc::run(15, [](communicator comm) -> task<void> {
        auto h = co_await make_arity_hierarchy(comm, {.arity = 2, .flat_fallback_threshold = 0});
        const auto& top = *h.hierarchy();
        CHECK(sizes_of(top.groups()) == std::vector<int>{8, 7});
        // 15 -> 8 | 7 -> 4 | 4 or 4 | 3 -> 2 | 2 or 2 | 1 -> leaves of <= 2.
        CHECK(top.depth() == 3);
        const auto below = top.group().hierarchy();
        REQUIRE(below);
        CHECK(below->size() == top.group().size());
    });
}

TEST_CASE("hierarchy: bad options are errors") {
    inproc::run(4, [](communicator comm) -> task<void> {
        bool thrown = false;
        try {
            co_await make_arity_hierarchy(comm, {.arity = 1});
        } catch (const error& e) {
            thrown = e.code() == errc::invalid_argument;
        }
        CHECK(thrown);
    });
}

TEST_CASE("hierarchical collectives equal the flat ones over the seed's matrix (seed 12.2)") {
    for (const auto& c : seed_matrix())
        for (int threshold : {0, 1024}) {
            CAPTURE(c.arity);
            CAPTURE(c.n);
            CAPTURE(threshold);
            int arrived = 0;
            inproc::run(c.n, [&](communicator comm) -> task<void> {
                auto h = co_await make_arity_hierarchy(
                    comm, {.arity = c.arity, .flat_fallback_threshold = threshold});
                CHECK(h.hierarchy()->flat() == (threshold > c.n || c.n <= c.arity));
                co_await compare_everything(comm, h, arrived);
            });
        }
}

TEST_CASE("hierarchical collectives: larger blocks, and the default choice ('auto')") {
    for (const auto& c : {tree_case{4, 11}, tree_case{2, 9}, tree_case{3, 16}}) {
        CAPTURE(c.arity);
        CAPTURE(c.n);
        int arrived = 0;
        inproc::run(c.n, [&](communicator comm) -> task<void> {
            auto h = co_await make_arity_hierarchy(
                comm, {.arity = c.arity, .flat_fallback_threshold = 0});
            co_await compare_everything(comm, h, arrived, {.count = 1000});
        });
        arrived = 0;
        inproc::run(c.n, [&](communicator comm) -> task<void> {
            auto h = co_await make_arity_hierarchy(
                comm, {.arity = c.arity, .flat_fallback_threshold = 0});
            co_await compare_everything(comm, h, arrived, {.algorithm = "auto"});
        });
    }
}

TEST_CASE("hierarchical collectives: empty blocks and one rank") {
    int arrived = 0;
    inproc::run(7, [&](communicator comm) -> task<void> {
        auto h = co_await make_arity_hierarchy(comm, {.arity = 2, .flat_fallback_threshold = 0});
        co_await compare_everything(comm, h, arrived, {.count = 0});
    });
    arrived = 0;
    inproc::run(1, [&](communicator comm) -> task<void> {
        auto h = co_await make_arity_hierarchy(comm, {.arity = 2, .flat_fallback_threshold = 0});
        CHECK(h.hierarchy()->flat());
        co_await compare_everything(comm, h, arrived);
    });
}

TEST_CASE("hierarchical all_to_all: above the memory limit it runs flat, with the same result") {
    inproc::run(9, [](communicator comm) -> task<void> {
        // A limit below any peak: every all_to_all runs flat; a generous one:
        // none does. Results are the same either way.
        for (std::size_t limit : {std::size_t{1}, std::size_t{1} << 30}) {
            auto h = co_await make_arity_hierarchy(
                comm,
                {.arity = 3, .flat_fallback_threshold = 0, .max_representative_bytes = limit});
            const auto row = row_of(h.rank(), 9, 5);
            std::vector<std::int64_t> got(row.size(), -1);
            co_await all_to_all(h, row, got, use("hierarchical"));
            CHECK(transposed_wrong(got, h.rank(), 9, 5) == 0);
            co_await all_to_all(h, row, got, use("hierarchical_padded"));
            CHECK(transposed_wrong(got, h.rank(), 9, 5) == 0);
        }
    });
}

TEST_CASE("hierarchical algorithms are in the catalog and need a hierarchy") {
    for (auto kind : {collective::barrier, collective::broadcast, collective::reduce,
                      collective::all_reduce, collective::gather, collective::scatter,
                      collective::all_gather, collective::all_to_all}) {
        CAPTURE(to_string(kind));
        const auto* info = algorithms().find_info(kind, "hierarchical");
        REQUIRE(info != nullptr);
        CHECK(info->form == algorithm_kind::hierarchical);
        call_signature plain{.kind = kind, .comm_size = 8};
        CHECK(info->check(plain).has_value());
        plain.has_hierarchy = true;
        CHECK_FALSE(info->check(plain).has_value());
    }
    CHECK(algorithms().find_info(collective::all_to_all, "hierarchical_padded") != nullptr);
    inproc::run(4, [](communicator comm) -> task<void> {
        std::vector<std::int64_t> data(4, 1);
        bool refused = false;
        try {
            co_await all_reduce(comm, data, tutti::sum, use("hierarchical"));
        } catch (const error& e) {
            refused = e.code() == errc::restriction_violated;
        }
        CHECK(refused);
    });
}
