// Hierarchies from colours (make_hierarchy), the structure topology/ builds
// the machine tree with: several levels posed by colour (2 nodes x 2
// packages x 4 cores, with members that are not consecutive ranks, uneven
// nodes), and every hierarchical collective equal to the flat one.
#include "compare.hpp"

using namespace tutti;
using namespace tutti::testing;

TEST_CASE("make_hierarchy: 2 nodes x 2 packages x 4 cores, round-robin placement") {
    int arrived = 0;
    inproc::run(16, [&](communicator comm) -> task<void> {
        const int r = comm.rank();
        // Ranks dealt round-robin to nodes, then to packages: the groups
        // interleave ranks, as with `--map-by node`.
        auto h = co_await make_hierarchy(comm, {r % 2, (r / 2) % 2, r / 4});
        const auto& top = *h.hierarchy();
        CHECK(top.groups() ==
              detail::rank_groups{{0, 2, 4, 6, 8, 10, 12, 14}, {1, 3, 5, 7, 9, 11, 13, 15}});
        CHECK_FALSE(top.order_preserving());
        CHECK(top.depth() == 2); // nodes, packages; one core per colour is no level
        const auto& package = *top.group().hierarchy();
        CHECK(package.groups() == detail::rank_groups{{0, 2, 4, 6}, {1, 3, 5, 7}});
        CHECK(package.group().hierarchy() == nullptr);
        // The non-commutative product runs flat over interleaved groups, and
        // still equals the flat result.
        co_await compare_everything(comm, h, arrived);
    });
}

TEST_CASE("make_hierarchy: consecutive nodes keep a non-commutative order") {
    int arrived = 0;
    inproc::run(16, [&](communicator comm) -> task<void> {
        const int r = comm.rank();
        auto h = co_await make_hierarchy(comm, {r / 8, (r / 4) % 2, r});
        CHECK(h.hierarchy()->order_preserving());
        CHECK(h.hierarchy()->depth() == 2);
        co_await compare_everything(comm, h, arrived, {.count = 5});
    });
}

TEST_CASE("make_hierarchy: uneven nodes and packages, levels that collapse") {
    int arrived = 0;
    inproc::run(12, [&](communicator comm) -> task<void> {
        const int r = comm.rank();
        // Nodes of 5, 4 and 3 ranks (node 1 interleaved with node 2); node
        // 0 has packages of 3 and 2, the others one package (no level there).
        const int node = r < 5 ? 0 : (r % 2 == 1 ? 1 : 2);
        const int package = node == 0 ? (r < 3 ? 0 : 1) : 7;
        auto h = co_await make_hierarchy(comm, {node, package});
        const auto& top = *h.hierarchy();
        CHECK(top.group_count() == 3);
        CHECK(top.largest_group() == 5);
        CHECK((node == 0) == (top.group().hierarchy() != nullptr));
        co_await compare_everything(comm, h, arrived, {.count = 4});
    });
    arrived = 0;
    inproc::run(6, [&](communicator comm) -> task<void> {
        // One node: that level is its parent again and is skipped.
        auto h = co_await make_hierarchy(comm, {0, comm.rank() / 3});
        CHECK_FALSE(h.hierarchy()->flat()); // the package level remains
        auto flat = co_await make_hierarchy(comm, {0, comm.rank()});
        CHECK(flat.hierarchy()->flat());
        auto none = co_await make_hierarchy(comm, {});
        CHECK(none.hierarchy()->flat());
        co_await compare_everything(comm, flat, arrived);
    });
}

TEST_CASE("make_hierarchy: bad colours are errors on every rank") {
    inproc::run(4, [](communicator comm) -> task<void> {
        const int r = comm.rank();
        for (int bad = 0; bad < 2; ++bad) {
            std::vector<int> levels = bad == 0 ? std::vector<int>(r == 2 ? 1 : 2, 0)
                                               : std::vector<int>{r == 1 ? -3 : 0, r};
            bool thrown = false;
            try {
                co_await make_hierarchy(comm, levels);
            } catch (const error& e) {
                thrown = e.code() == errc::invalid_argument;
            }
            CHECK(thrown);
        }
    });
}

TEST_CASE("signature_of: where a call runs, as the call's own choice sees it") {
    // tutti-bench names the algorithm of `auto` by choose(signature_of(...)):
    // the signature must carry the transport and the nodes, or a tree
    // section keyed on them is missed.
    inproc::run(6, [](communicator comm) -> task<void> {
        auto h = co_await make_hierarchy(comm, {comm.rank() / 2});
        std::vector<std::int64_t> data(4, comm.rank());
        const auto op = erase_operation<std::int64_t>(sum);
        const reduce_args args{.send = std::as_bytes(std::span(data)),
                               .recv = std::as_writable_bytes(std::span(data)),
                               .count = data.size(),
                               .op = &op,
                               .root = 0};
        const auto s = signature_of(h, args);
        CHECK(s.transport == h.transport().name());
        CHECK(s.has_hierarchy);
        CHECK(s.nodes == 3);
        CHECK(s.ranks_per_node == 2);
        CHECK(s.count == 4);
        const auto flat = signature_of(comm, args);
        CHECK(flat.transport == comm.transport().name());
        CHECK_FALSE(flat.has_hierarchy);
        CHECK(flat.nodes == 0);
    });
}
