// Every built-in reduction operation gives the exact result, and a user's
// operation declares its commutativity, which selection respects.
#include <cstdint>

#include "support/harness.hpp"

using namespace tutti;

namespace {

// Rank r contributes f(r, i) at index i; the expected result folds in rank order.
template <class T, class Op, class Contribution>
void check_all_reduce(int p, Op op, Contribution f) {
    constexpr std::size_t n = 9;
    inproc::run(p, [&](communicator comm) -> task<void> {
        std::vector<T> data(n);
        for (std::size_t i = 0; i < n; ++i)
            data[i] = f(comm.rank(), i);
        co_await all_reduce(comm, data, op);
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < n; ++i) {
            T expected = f(0, i);
            for (int r = 1; r < p; ++r)
                expected = op(expected, f(r, i));
            if (data[i] != expected) ++wrong;
        }
        CHECK(wrong == 0);
    });
}

} // namespace

TEST_CASE("built-in operations give exact results") {
    for (int p : {1, 2, 3, 6, 11}) {
        CAPTURE(p);
        auto ints = [](int r, std::size_t i) {
            return static_cast<std::int64_t>((r * 37 + static_cast<int>(i) * 11) % 23) - 11;
        };
        auto bits = [](int r, std::size_t i) {
            return static_cast<std::uint32_t>(0x9E3779B9u * static_cast<unsigned>(r + 1) >>
                                              static_cast<unsigned>(i));
        };
        auto truth = [](int r, std::size_t i) {
            return static_cast<std::uint8_t>((r + static_cast<int>(i)) % 3 == 0);
        };
        auto small = [](int r, std::size_t i) {
            return static_cast<std::int64_t>(1 + (r + static_cast<int>(i)) % 3);
        };
        check_all_reduce<std::int64_t>(p, tutti::sum, ints);
        check_all_reduce<std::int64_t>(p, tutti::prod, small);
        check_all_reduce<std::int64_t>(p, tutti::min, ints);
        check_all_reduce<std::int64_t>(p, tutti::max, ints);
        check_all_reduce<std::uint32_t>(p, tutti::bit_and, bits);
        check_all_reduce<std::uint32_t>(p, tutti::bit_or, bits);
        check_all_reduce<std::uint32_t>(p, tutti::bit_xor, bits);
        check_all_reduce<std::uint8_t>(p, tutti::logical_and, truth);
        check_all_reduce<std::uint8_t>(p, tutti::logical_or, truth);
        check_all_reduce<std::uint8_t>(p, tutti::logical_xor, truth);
        check_all_reduce<double>(
            p, tutti::max, [](int r, std::size_t i) { return 0.5 * r - static_cast<double>(i); });
    }
}

TEST_CASE("a user operation's declared commutativity reaches selection") {
    // Appending decimal digits: associative, not commutative.
    struct digits {
        std::int64_t value, scale;
    };
    auto append = make_op(
        [](digits a, digits b) {
            return digits{a.value * b.scale + b.value, a.scale * b.scale};
        },
        commutativity::non_commutative);
    // The default choice for a large non-commutative all_reduce must keep rank order.
    inproc::run(5, [&](communicator comm) -> task<void> {
        std::vector<digits> data(20000, digits{comm.rank() + 1, 10});
        co_await all_reduce(comm, data, append);
        CHECK(data.front().value == 12345);
        CHECK(data.back().value == 12345);
    });
    auto plus =
        make_op([](std::int64_t a, std::int64_t b) { return a + b; }, commutativity::commutative);
    inproc::run(4, [&](communicator comm) -> task<void> {
        std::vector<std::int64_t> data(20000, comm.rank());
        co_await all_reduce(comm, data, plus, use("ring"));
        CHECK(data[7] == 6);
    });
}

TEST_CASE("a type-erased combine keeps the operands' order in place and out of place") {
    // x * 3 + y: not commutative, so an operand taken from the wrong side
    // shows. 37 elements: whole vectors and a remainder.
    auto weighted = make_op([](std::int64_t x, std::int64_t y) { return x * 3 + y; },
                            commutativity::non_commutative);
    const auto op = erase_operation<std::int64_t>(weighted);
    constexpr std::size_t n = 37;
    const auto left = [](std::size_t i) { return static_cast<std::int64_t>(i) - 5; };
    const auto right = [](std::size_t i) { return static_cast<std::int64_t>(i * i) + 2; };
    auto filled = [](auto f) {
        std::vector<std::int64_t> v(n);
        for (std::size_t i = 0; i < n; ++i)
            v[i] = f(i);
        return v;
    };
    auto bytes = [](std::vector<std::int64_t>& v) {
        return reinterpret_cast<std::byte*>(v.data());
    };
    // Elements of `got` other than expected(i).
    auto mismatches = [&](const std::vector<std::int64_t>& got, auto expected) {
        std::size_t count = 0;
        for (std::size_t i = 0; i < n; ++i)
            if (got[i] != expected(i)) ++count;
        return count;
    };
    auto wrong = [&](const std::vector<std::int64_t>& got) {
        return mismatches(got, [&](std::size_t i) { return left(i) * 3 + right(i); });
    };

    auto a = filled(left), b = filled(right);
    std::vector<std::int64_t> out(n);
    op.combine(bytes(a), bytes(b), bytes(out), n);
    CHECK(wrong(out) == 0);

    op.combine(bytes(a), bytes(b), bytes(a), n); // in place over the left operand
    CHECK(wrong(a) == 0);

    a = filled(left);
    op.combine(bytes(a), bytes(b), bytes(b), n); // in place over the right operand
    CHECK(wrong(b) == 0);

    auto same = filled(left); // both operands and the result one buffer
    op.combine(bytes(same), bytes(same), bytes(same), n);
    CHECK(mismatches(same, [&](std::size_t i) { return left(i) * 4; }) == 0);
}
