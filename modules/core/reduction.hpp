// Reduction operations. Typed operations (sum, min, a user's lambda) are what
// callers pass; algorithms see them type-erased as a reduction_op that
// combines arrays of bytes. Convention everywhere: out = a (op) b, where a
// holds the contribution of lower ranks, so a non-commutative operation gives
// the rank-ordered result x0 (op) x1 (op) ... (op) x(n-1).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "core/copy.hpp"

namespace tutti {

enum class commutativity { commutative, non_commutative };

struct reduction_op {
    std::string_view name;
    std::size_t element_size = 0;
    bool commutative = true;
    bool builtin = true;
    void (*combine_fn)(const void* state, const std::byte* a, const std::byte* b, std::byte* out,
                       std::size_t count) = nullptr;
    const void* state = nullptr;

    // out[i] = a[i] op b[i] for count elements; out may alias a or b.
    void combine(const std::byte* a, const std::byte* b, std::byte* out, std::size_t count) const {
        combine_fn(state, a, b, out, count);
    }
};

// Built-in operations. Each is a function object with a name and a declared
// commutativity; `builtin` lets selection prefer algorithms that only work
// for the operations every rank provably shares.
struct sum_op {
    static constexpr std::string_view name = "sum";
    static constexpr bool commutative = true;
    template <class T>
    T operator()(const T& a, const T& b) const {
        return a + b;
    }
};
struct prod_op {
    static constexpr std::string_view name = "prod";
    static constexpr bool commutative = true;
    template <class T>
    T operator()(const T& a, const T& b) const {
        return a * b;
    }
};
struct min_op {
    static constexpr std::string_view name = "min";
    static constexpr bool commutative = true;
    template <class T>
    T operator()(const T& a, const T& b) const {
        return b < a ? b : a;
    }
};
struct max_op {
    static constexpr std::string_view name = "max";
    static constexpr bool commutative = true;
    template <class T>
    T operator()(const T& a, const T& b) const {
        return a < b ? b : a;
    }
};
struct bit_and_op {
    static constexpr std::string_view name = "bit_and";
    static constexpr bool commutative = true;
    template <class T>
    T operator()(const T& a, const T& b) const {
        return static_cast<T>(a & b);
    }
};
struct bit_or_op {
    static constexpr std::string_view name = "bit_or";
    static constexpr bool commutative = true;
    template <class T>
    T operator()(const T& a, const T& b) const {
        return static_cast<T>(a | b);
    }
};
struct bit_xor_op {
    static constexpr std::string_view name = "bit_xor";
    static constexpr bool commutative = true;
    template <class T>
    T operator()(const T& a, const T& b) const {
        return static_cast<T>(a ^ b);
    }
};
struct logical_and_op {
    static constexpr std::string_view name = "logical_and";
    static constexpr bool commutative = true;
    template <class T>
    T operator()(const T& a, const T& b) const {
        return static_cast<T>(a && b);
    }
};
struct logical_or_op {
    static constexpr std::string_view name = "logical_or";
    static constexpr bool commutative = true;
    template <class T>
    T operator()(const T& a, const T& b) const {
        return static_cast<T>(a || b);
    }
};
struct logical_xor_op {
    static constexpr std::string_view name = "logical_xor";
    static constexpr bool commutative = true;
    template <class T>
    T operator()(const T& a, const T& b) const {
        return static_cast<T>(!a != !b);
    }
};

inline constexpr sum_op sum{};
inline constexpr prod_op prod{};
inline constexpr min_op min{};
inline constexpr max_op max{};
inline constexpr bit_and_op bit_and{};
inline constexpr bit_or_op bit_or{};
inline constexpr bit_xor_op bit_xor{};
inline constexpr logical_and_op logical_and{};
inline constexpr logical_or_op logical_or{};
inline constexpr logical_xor_op logical_xor{};

// A user's operation: any callable T(T, T), with its commutativity declared
// by the caller, because only the caller knows it.
template <class F>
struct user_op {
    static constexpr std::string_view name = "user";
    F function;
    bool commutative;
    template <class T>
    T operator()(const T& a, const T& b) const {
        return function(a, b);
    }
};

template <class F>
user_op<F> make_op(F function, commutativity c) {
    return {std::move(function), c == commutativity::commutative};
}

template <class Op>
concept builtin_operation = requires {
    Op::commutative;
}
&&!requires {
    &Op::function;
};

template <class Op, class T>
concept operation_for = requires(const Op& op, const T& a) {
    { op(a, a) } -> std::convertible_to<T>;
};

namespace detail {
// out[i] = op(a[i], b[i]), or op(b[i], a[i]) when `swapped`; memcpy in and
// out: the byte buffers need not be aligned for T.
template <class T, class Op, bool swapped = false>
void combine_elements(const Op& op, const std::byte* a, const std::byte* b, std::byte* out,
                      std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
        T x, y;
        std::memcpy(&x, a + i * sizeof(T), sizeof(T));
        std::memcpy(&y, b + i * sizeof(T), sizeof(T));
        T r = swapped ? op(y, x) : op(x, y);
        std::memcpy(out + i * sizeof(T), &r, sizeof(T));
    }
}

// The same into `io` from `other`, which it does not overlap: restrict lets
// the loop run a vector at a time.
template <class T, class Op, bool swapped>
void combine_in_place(const Op& op, std::byte* __restrict io, const std::byte* __restrict other,
                      std::size_t count) {
    combine_elements<T, Op, swapped>(op, io, other, io, count);
}

template <class T, class Op>
void combine_typed(const void* state, const std::byte* a, const std::byte* b, std::byte* out,
                   std::size_t count) {
    const Op& op = *static_cast<const Op*>(state);
    // The vectorized loop's run-time check refuses any overlap of out with
    // an input and falls back to one element at a time, yet the commonest
    // call is in place (a partial result combined with what arrived), whose
    // exact overlap is harmless: 8192 longs in place took 4.0 us instead of
    // 2.3 (docs/performance.md, fifty-third session).
    const std::size_t bytes = count * sizeof(T);
    if (out == a && !overlapping({out, bytes}, {b, bytes}))
        combine_in_place<T, Op, false>(op, out, b, count);
    else if (out == b && !overlapping({out, bytes}, {a, bytes}))
        combine_in_place<T, Op, true>(op, out, a, count);
    else
        combine_elements<T, Op>(op, a, b, out, count);
}
} // namespace detail

// The type-erased view of `op` on elements of T. `op` must outlive it.
template <class T, class Op>
requires std::is_trivially_copyable_v<T> && operation_for<Op, T>
    reduction_op erase_operation(const Op& op) {
    reduction_op r;
    r.name = Op::name;
    r.element_size = sizeof(T);
    if constexpr (builtin_operation<Op>) {
        r.commutative = Op::commutative;
        r.builtin = true;
    } else {
        r.commutative = op.commutative;
        r.builtin = false;
    }
    r.combine_fn = &detail::combine_typed<T, Op>;
    r.state = &op;
    return r;
}

} // namespace tutti
