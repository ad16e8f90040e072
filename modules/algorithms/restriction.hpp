// Restrictions are data: each algorithm lists the conditions it needs, and
// checking one against a call gives "holds" or the reason it fails, so a
// selection can walk on to the next candidate and say why. The decision
// trees test the same conditions (select/tree.hpp), which is how loading a
// tree can prove that `auto` never picks an algorithm whose restriction fails.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/collective.hpp"

namespace tutti {

enum class restriction_kind {
    power_of_two,        // communicator size is a power of two
    even_size,           // communicator size is even (ranks pair up)
    commutative_op,      // the reduction is commutative
    builtin_op,          // the reduction is one of tutti's own
    in_place,            // send and receive buffers are the same memory
    not_in_place,        // they are not
    equal_counts,        // every rank contributes the same number of elements
    count_at_least_size, // at least one element per rank (to split the data)
    hierarchy_available, // the communicator carries a hierarchy (tutti::hierarchy)
    node_consecutive,    // the ranks of each node are consecutive in the communicator
    single_copy,         // the transport lets a peer read or write our memory directly
    slow_single_copy,    // the transport measured that copy slow, and keeps messages off it
    min_size,            // at least `bound` ranks
    max_size,            // at most `bound` ranks
};

inline constexpr std::array all_restriction_kinds = {
    restriction_kind::power_of_two,
    restriction_kind::even_size,
    restriction_kind::commutative_op,
    restriction_kind::builtin_op,
    restriction_kind::in_place,
    restriction_kind::not_in_place,
    restriction_kind::equal_counts,
    restriction_kind::count_at_least_size,
    restriction_kind::hierarchy_available,
    restriction_kind::node_consecutive,
    restriction_kind::single_copy,
    restriction_kind::slow_single_copy,
    restriction_kind::min_size,
    restriction_kind::max_size,
};

// One restriction: a kind, and for the size bounds the bound. Written as
// `restriction::power_of_two` or `restriction::at_least_ranks(4)`.
struct restriction {
    using enum restriction_kind;

    restriction_kind kind = power_of_two;
    std::int64_t bound = 0; // min_size, max_size: the number of ranks

    constexpr restriction(restriction_kind k) noexcept : kind(k) {}
    static constexpr restriction at_least_ranks(std::int64_t n) noexcept {
        restriction r(min_size);
        r.bound = n;
        return r;
    }
    static constexpr restriction at_most_ranks(std::int64_t n) noexcept {
        restriction r(max_size);
        r.bound = n;
        return r;
    }
    friend constexpr bool operator==(const restriction&, const restriction&) = default;
};

std::string_view to_string(restriction_kind k) noexcept;
// "power_of_two", "min_size(4)".
std::string to_string(restriction r);
std::optional<restriction_kind> restriction_from_string(std::string_view name) noexcept;
// A yes/no condition of the call (all but the size bounds): what a decision
// tree may test as "name=yes" / "name=no".
constexpr bool is_flag(restriction_kind k) noexcept {
    return k != restriction_kind::min_size && k != restriction_kind::max_size;
}

// What selection and restriction checks know of a call; the same on every
// rank (nothing here may depend on which rank asks). The communicator's part
// (transport, hierarchy, nodes) is filled in by the dispatch from the
// communicator the call runs on.
struct call_signature {
    collective kind = collective::barrier;
    int comm_size = 1;
    std::size_t bytes = 0; // the largest buffer of the call on any rank, as declared
    std::size_t count = 0; // elements per rank for reductions
    bool has_op = false;
    bool commutative = true;
    bool builtin_op = true;
    bool in_place = false;
    bool equal_counts = true;
    bool has_hierarchy = false; // the communicator carries a hierarchy
    // The transport's name ("inproc", "shm", "tcp", "shm+tcp", ...); it must
    // outlive the signature (transports return literals).
    std::string_view transport;
    bool single_copy = false; // the transport's capability
    // The transport's transport_capabilities::slow_single_copy.
    bool slow_single_copy = false;
    // The ranks' placement on nodes. 0 means unknown and reads as one node
    // holding every rank (ranks_per_node = comm_size, nodes = 1), which is
    // what a communicator without node information is.
    int ranks_per_node = 0;
    int nodes = 0;
    bool node_consecutive = true;
    // The transport's transport_capabilities::line_ns: how long a cache line
    // takes there and back between the ranks' cores, in ns (0: unknown).
    std::uint32_t line_ns = 0;
    // The transport's transport_capabilities::readv_percent (0: unknown).
    std::uint32_t readv_percent = 0;
    // The transport's transport_capabilities::ranks_per_core (0: unknown).
    std::uint32_t ranks_per_core = 0;

    friend bool operator==(const call_signature& a, const call_signature& b) noexcept {
        // Every call compares its signature with the last decision's: the
        // transport's name is the same literal then, so its address is
        // compared before its text.
        const bool same_transport = (a.transport.data() == b.transport.data() &&
                                     a.transport.size() == b.transport.size()) ||
                                    a.transport == b.transport;
        // Combined with & rather than &&: one branch instead of one per field, on
        // a comparison that is nearly always true.
        return (a.kind == b.kind) & (a.comm_size == b.comm_size) & (a.bytes == b.bytes) &
               (a.count == b.count) & (a.has_op == b.has_op) & (a.commutative == b.commutative) &
               (a.builtin_op == b.builtin_op) & (a.in_place == b.in_place) &
               (a.equal_counts == b.equal_counts) & (a.has_hierarchy == b.has_hierarchy) &
               (a.single_copy == b.single_copy) & (a.slow_single_copy == b.slow_single_copy) &
               (a.ranks_per_node == b.ranks_per_node) & (a.nodes == b.nodes) &
               (a.node_consecutive == b.node_consecutive) & (a.line_ns == b.line_ns) &
               (a.readv_percent == b.readv_percent) & (a.ranks_per_core == b.ranks_per_core) &
               same_transport;
    }
};

// Whether every rank of a call of this collective knows its size. A barrier
// moves nothing, and an all_to_allv rank knows only its own counts, which
// differ between ranks that must all choose the same algorithm: their
// signatures carry bytes = 0, so a tree's size thresholds never apply to them.
constexpr bool call_has_size(collective kind) noexcept {
    return kind != collective::barrier && kind != collective::all_to_allv;
}
// Why a call of this collective carries no size, for error messages.
constexpr std::string_view why_call_has_no_size(collective kind) noexcept {
    return kind == collective::barrier ? "a barrier moves no data"
                                       : "each rank knows only its own counts, and every rank "
                                         "must choose the same algorithm";
}

// True when the restriction holds; cheap, for decision trees on every call.
bool holds(restriction r, const call_signature& call) noexcept;
// nullopt when the restriction holds, otherwise the reason it fails.
std::optional<std::string> check(restriction r, const call_signature& call);

} // namespace tutti
