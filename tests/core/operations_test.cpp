// Every built-in reduction operation gives the exact result, a user's
// operation declares its commutativity, which selection respects, and a
// received vector combined piece by piece as it arrives gives the same.
#include <algorithm>
#include <cstdint>
#include <random>
#include <span>

#include "algorithms/common.hpp"
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

namespace {

// Twelve bytes whose combination is not commutative: an element cut between
// two pieces is combined only once its last byte has come.
struct triple {
    std::int32_t a, b, c;
    bool operator==(const triple&) const = default;
};
triple compose(const triple& x, const triple& y) {
    return {x.a * 3 + y.a, x.b - 2 * y.b, x.c ^ (y.c * 5 + 1)};
}

// The received vector handed to `combining` in pieces of the given lengths,
// in order: those at even places taken (landing_observer::take), those at
// odd places written into `buffer` and reported landed, when `mixed`.
void hand_over(algorithms_detail::combining_as_it_lands& combining,
               std::span<const std::byte> message, std::span<std::byte> buffer,
               const std::vector<std::size_t>& lengths, bool mixed) {
    std::size_t at = 0;
    for (std::size_t k = 0; k < lengths.size(); ++k) {
        const auto piece = message.subspan(at, lengths[k]);
        if (mixed && k % 2 == 1) {
            std::copy(piece.begin(), piece.end(), buffer.begin() + static_cast<std::ptrdiff_t>(at));
            combining.landed(at + piece.size());
        } else {
            // A piece of its own, as a cell is: nothing around it to read.
            const std::vector<std::byte> alone(piece.begin(), piece.end());
            combining.take(at, alone);
        }
        at += piece.size();
    }
}

template <class T>
std::vector<T> values(std::size_t n, int seed, T (*make)(int, std::size_t)) {
    std::vector<T> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = make(seed, i);
    return v;
}

} // namespace

TEST_CASE("a received vector combined from the pieces a transport hands over equals the vector "
          "combined whole, however it is cut") {
    using algorithms_detail::combination;
    using algorithms_detail::combining_as_it_lands;
    std::mt19937 cuts(20261207);
    constexpr std::size_t n = 1000;
    auto check = [&]<class T>(const auto& op, T (*make)(int, std::size_t), const T& mark) {
        const auto erased = erase_operation<T>(op);
        const auto own = values<T>(n, 1, make);
        const auto arriving = values<T>(n, 2, make);
        const auto message = std::as_bytes(std::span(arriving));
        for (const bool received_left : {true, false})
            for (const int target : {0, 1, 2}) // out apart, into the buffer, into own
                for (const bool mixed : {false, true})
                    for (const bool element_cuts : {false, true})
                        for (int trial = 0; trial < 4; ++trial) {
                            CAPTURE(received_left);
                            CAPTURE(target);
                            CAPTURE(mixed);
                            CAPTURE(element_cuts);
                            std::vector<T> buffer(n, mark), mine = own, apart(n, mark);
                            std::vector<T> expected(n);
                            for (std::size_t i = 0; i < n; ++i)
                                expected[i] = received_left ? op(arriving[i], own[i])
                                                            : op(own[i], arriving[i]);
                            auto* received = reinterpret_cast<std::byte*>(buffer.data());
                            auto* kept = reinterpret_cast<std::byte*>(mine.data());
                            std::byte* out = target == 0
                                                 ? reinterpret_cast<std::byte*>(apart.data())
                                             : target == 1 ? received
                                                           : kept;
                            const combination c{erased, received_left ? received : kept,
                                                received_left ? kept : received, out, n};
                            combining_as_it_lands combining(
                                c, std::as_writable_bytes(std::span(buffer)));
                            CHECK(combining.takes_pieces());
                            // Lengths of 1 byte to a few elements, or whole elements only.
                            std::vector<std::size_t> lengths;
                            for (std::size_t left = message.size(); left > 0;) {
                                std::size_t l = std::uniform_int_distribution<std::size_t>(
                                    1, 5 * sizeof(T))(cuts);
                                if (element_cuts) l = (l + sizeof(T) - 1) / sizeof(T) * sizeof(T);
                                l = std::min(l, left);
                                lengths.push_back(l);
                                left -= l;
                            }
                            hand_over(combining, message, std::as_writable_bytes(std::span(buffer)),
                                      lengths, mixed);
                            combining.finish();
                            const auto& result = target == 0 ? apart : target == 1 ? buffer : mine;
                            CHECK(result == expected);
                            // Pieces of whole elements, all taken, leave the buffer as it was.
                            if (element_cuts && !mixed && target != 1)
                                CHECK(std::all_of(buffer.begin(), buffer.end(),
                                                  [&](const T& x) { return x == mark; }));
                        }
    };
    SUBCASE("8-byte sums") {
        check(
            sum_op{},
            +[](int seed, std::size_t i) {
                return static_cast<std::int64_t>(i) * 7919 - seed * 104729;
            },
            std::int64_t{-1});
    }
    SUBCASE("12-byte elements, order kept") {
        check(
            make_op(compose, commutativity::non_commutative),
            +[](int seed, std::size_t i) {
                const auto k = static_cast<std::int32_t>(i);
                return triple{k + seed, 3 * k - seed, k * k + seed};
            },
            triple{-1, -1, -1});
    }
}

TEST_CASE("a combination whose operands do not include the receive's buffer, or whose buffer is "
          "kept, takes no pieces") {
    using algorithms_detail::combination;
    std::vector<std::int64_t> a(4), b(4), into(4);
    const auto op = erase_operation<std::int64_t>(sum_op{});
    const combination c{op, reinterpret_cast<std::byte*>(a.data()),
                        reinterpret_cast<std::byte*>(b.data()),
                        reinterpret_cast<std::byte*>(a.data()), 4};
    algorithms_detail::combining_as_it_lands combining(c, std::as_writable_bytes(std::span(into)));
    CHECK_FALSE(combining.takes_pieces());
    // The received vector on the right, but wanted whole afterwards.
    const combination kept{op, reinterpret_cast<std::byte*>(a.data()),
                           reinterpret_cast<std::byte*>(into.data()),
                           reinterpret_cast<std::byte*>(a.data()), 4};
    algorithms_detail::combining_as_it_lands keeping(
        kept, std::as_writable_bytes(std::span(into)),
        algorithms_detail::combining_as_it_lands::pieces::left_in_buffer);
    CHECK_FALSE(keeping.takes_pieces());
}
