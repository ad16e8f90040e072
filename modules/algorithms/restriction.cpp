#include "algorithms/restriction.hpp"

#include <fmt/format.h>

namespace tutti {

std::string_view to_string(restriction_kind k) noexcept {
    switch (k) {
    case restriction_kind::power_of_two:
        return "power_of_two";
    case restriction_kind::even_size:
        return "even_size";
    case restriction_kind::commutative_op:
        return "commutative_op";
    case restriction_kind::builtin_op:
        return "builtin_op";
    case restriction_kind::in_place:
        return "in_place";
    case restriction_kind::not_in_place:
        return "not_in_place";
    case restriction_kind::equal_counts:
        return "equal_counts";
    case restriction_kind::count_at_least_size:
        return "count_at_least_size";
    case restriction_kind::hierarchy_available:
        return "hierarchy_available";
    case restriction_kind::node_consecutive:
        return "node_consecutive";
    case restriction_kind::single_copy:
        return "single_copy";
    case restriction_kind::slow_single_copy:
        return "slow_single_copy";
    case restriction_kind::min_size:
        return "min_size";
    case restriction_kind::max_size:
        return "max_size";
    }
    return "unknown";
}

std::string to_string(restriction r) {
    if (is_flag(r.kind)) return std::string(to_string(r.kind));
    return fmt::format("{}({})", to_string(r.kind), r.bound);
}

std::optional<restriction_kind> restriction_from_string(std::string_view name) noexcept {
    for (auto k : all_restriction_kinds)
        if (to_string(k) == name) return k;
    return std::nullopt;
}

bool holds(restriction r, const call_signature& call) noexcept {
    switch (r.kind) {
    case restriction_kind::power_of_two:
        return (call.comm_size & (call.comm_size - 1)) == 0;
    case restriction_kind::even_size:
        return call.comm_size % 2 == 0;
    case restriction_kind::commutative_op:
        return !call.has_op || call.commutative;
    case restriction_kind::builtin_op:
        return !call.has_op || call.builtin_op;
    case restriction_kind::in_place:
        return call.in_place;
    case restriction_kind::not_in_place:
        return !call.in_place;
    case restriction_kind::equal_counts:
        return call.equal_counts;
    case restriction_kind::count_at_least_size:
        return call.count >= static_cast<std::size_t>(call.comm_size);
    case restriction_kind::hierarchy_available:
        return call.has_hierarchy;
    case restriction_kind::node_consecutive:
        return call.node_consecutive;
    case restriction_kind::single_copy:
        return call.single_copy;
    case restriction_kind::slow_single_copy:
        return call.slow_single_copy;
    case restriction_kind::min_size:
        return call.comm_size >= r.bound;
    case restriction_kind::max_size:
        return call.comm_size <= r.bound;
    }
    return false;
}

std::optional<std::string> check(restriction r, const call_signature& call) {
    if (holds(r, call)) return std::nullopt;
    switch (r.kind) {
    case restriction_kind::power_of_two:
        return fmt::format("communicator size {} is not a power of two", call.comm_size);
    case restriction_kind::even_size:
        return fmt::format("communicator size {} is odd", call.comm_size);
    case restriction_kind::commutative_op:
        return std::string("the reduction operation is not commutative");
    case restriction_kind::builtin_op:
        return std::string("the reduction operation is a user function, not a built-in one");
    case restriction_kind::in_place:
        return std::string("the call is not in place");
    case restriction_kind::not_in_place:
        return std::string("the call is in place");
    case restriction_kind::equal_counts:
        return std::string("ranks contribute different counts");
    case restriction_kind::count_at_least_size:
        return fmt::format("{} elements cannot be split among {} ranks", call.count,
                           call.comm_size);
    case restriction_kind::hierarchy_available:
        return std::string("the communicator carries no hierarchy (make one with "
                           "tutti::make_arity_hierarchy or tutti::make_hierarchy)");
    case restriction_kind::node_consecutive:
        return std::string("the ranks of a node are not consecutive in the communicator");
    case restriction_kind::single_copy:
        return fmt::format("the transport '{}' cannot copy straight between ranks' memory",
                           call.transport.empty() ? "unknown" : call.transport);
    case restriction_kind::slow_single_copy:
        return fmt::format("the transport '{}' measured no slow single copy",
                           call.transport.empty() ? "unknown" : call.transport);
    case restriction_kind::min_size:
        return fmt::format("communicator size {} is below {}", call.comm_size, r.bound);
    case restriction_kind::max_size:
        return fmt::format("communicator size {} is above {}", call.comm_size, r.bound);
    }
    return std::string("unknown restriction");
}

} // namespace tutti
