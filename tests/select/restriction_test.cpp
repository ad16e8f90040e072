// Each restriction holds where it should and fails, with its reason, where
// it should not; the catalog's check names the restriction.
#include "select_support.hpp"

using namespace tutti;
using tutti::testing::contains;

namespace {

call_signature reduction(int p, bool commutative, bool builtin, bool in_place,
                         std::size_t count = 8) {
    return {.kind = collective::all_reduce,
            .comm_size = p,
            .bytes = count * 8,
            .count = count,
            .has_op = true,
            .commutative = commutative,
            .builtin_op = builtin,
            .in_place = in_place};
}

void holds_and_fails(restriction r, const call_signature& good, const call_signature& bad,
                     const std::string& reason) {
    CAPTURE(to_string(r));
    CHECK(holds(r, good));
    CHECK(!check(r, good));
    CHECK(!holds(r, bad));
    const auto why = check(r, bad);
    REQUIRE(why);
    CHECK(contains(*why, reason));
}

} // namespace

TEST_CASE("power_of_two: 1, 2, 4, 8 and 64 ranks hold; 3, 6 and 12 fail") {
    for (int p : {1, 2, 4, 8, 64})
        CHECK(holds(restriction::power_of_two, {.comm_size = p}));
    for (int p : {3, 6, 12}) {
        CHECK(!holds(restriction::power_of_two, {.comm_size = p}));
        CHECK(*check(restriction::power_of_two, {.comm_size = p}) ==
              fmt::format("communicator size {} is not a power of two", p));
    }
}

TEST_CASE("even_size: 2, 4, 6 and 12 ranks hold; 1, 3 and 7 fail") {
    for (int p : {2, 4, 6, 12})
        CHECK(holds(restriction::even_size, {.comm_size = p}));
    for (int p : {1, 3, 7})
        CHECK(*check(restriction::even_size, {.comm_size = p}) ==
              fmt::format("communicator size {} is odd", p));
}

TEST_CASE("operation restrictions: commutative_op and builtin_op") {
    holds_and_fails(restriction::commutative_op, reduction(4, true, false, false),
                    reduction(4, false, false, false), "not commutative");
    holds_and_fails(restriction::builtin_op, reduction(4, false, true, false),
                    reduction(4, true, false, false), "user function");
    // A collective without an operation meets both.
    CHECK(holds(restriction::commutative_op, {.kind = collective::broadcast, .comm_size = 3}));
    CHECK(holds(restriction::builtin_op, {.kind = collective::broadcast, .comm_size = 3}));
}

TEST_CASE("in_place and not_in_place are each other's opposite") {
    holds_and_fails(restriction::in_place, reduction(2, true, true, true),
                    reduction(2, true, true, false), "not in place");
    holds_and_fails(restriction::not_in_place, reduction(2, true, true, false),
                    reduction(2, true, true, true), "is in place");
}

TEST_CASE("equal_counts, count_at_least_size, node_consecutive, hierarchy, single copy") {
    holds_and_fails(restriction::equal_counts, {.comm_size = 3},
                    {.comm_size = 3, .equal_counts = false}, "different counts");
    holds_and_fails(restriction::count_at_least_size, reduction(4, true, true, false, 4),
                    reduction(4, true, true, false, 3), "3 elements cannot be split among 4");
    holds_and_fails(restriction::node_consecutive, {.comm_size = 4},
                    {.comm_size = 4, .node_consecutive = false}, "not consecutive");
    holds_and_fails(restriction::hierarchy_available, {.comm_size = 4, .has_hierarchy = true},
                    {.comm_size = 4}, "no hierarchy");
    holds_and_fails(restriction::single_copy,
                    {.comm_size = 2, .transport = "shm", .single_copy = true},
                    {.comm_size = 2, .transport = "tcp"}, "transport 'tcp'");
}

TEST_CASE("size bounds are parameterized") {
    const auto at_least = restriction::at_least_ranks(4);
    const auto at_most = restriction::at_most_ranks(8);
    CHECK(to_string(at_least) == "min_size(4)");
    CHECK(to_string(at_most) == "max_size(8)");
    holds_and_fails(at_least, {.comm_size = 4}, {.comm_size = 3}, "size 3 is below 4");
    holds_and_fails(at_most, {.comm_size = 8}, {.comm_size = 9}, "size 9 is above 8");
    CHECK(at_least != restriction::at_least_ranks(5));
}

TEST_CASE("every restriction has a name that reads back") {
    for (auto k : all_restriction_kinds) {
        CAPTURE(to_string(k));
        CHECK(restriction_from_string(to_string(k)) == k);
    }
    CHECK(!restriction_from_string("fast"));
}

TEST_CASE("an algorithm's check names the first restriction that fails") {
    algorithm_info info{.name = "x",
                        .restrictions = {restriction::commutative_op, restriction::power_of_two}};
    CHECK(!info.check(reduction(4, true, true, false)));
    const auto why = info.check(reduction(6, true, true, false));
    REQUIRE(why);
    CHECK(*why == "restriction power_of_two fails: communicator size 6 is not a power of two");
}
