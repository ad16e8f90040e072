#include "algorithms/restriction.hpp"

#include <fmt/format.h>

namespace tutti {

std::string_view to_string(restriction r) noexcept {
    switch (r) {
    case restriction::power_of_two:
        return "power_of_two";
    case restriction::commutative_op:
        return "commutative_op";
    case restriction::builtin_op:
        return "builtin_op";
    case restriction::in_place:
        return "in_place";
    case restriction::not_in_place:
        return "not_in_place";
    case restriction::equal_counts:
        return "equal_counts";
    case restriction::count_at_least_size:
        return "count_at_least_size";
    }
    return "unknown";
}

std::optional<std::string> check(restriction r, const call_signature& call) {
    switch (r) {
    case restriction::power_of_two:
        if ((call.comm_size & (call.comm_size - 1)) == 0) return std::nullopt;
        return fmt::format("communicator size {} is not a power of two", call.comm_size);
    case restriction::commutative_op:
        if (!call.has_op || call.commutative) return std::nullopt;
        return std::string("the reduction operation is not commutative");
    case restriction::builtin_op:
        if (!call.has_op || call.builtin_op) return std::nullopt;
        return std::string("the reduction operation is a user function, not a built-in one");
    case restriction::in_place:
        if (call.in_place) return std::nullopt;
        return std::string("the call is not in place");
    case restriction::not_in_place:
        if (!call.in_place) return std::nullopt;
        return std::string("the call is in place");
    case restriction::equal_counts:
        if (call.equal_counts) return std::nullopt;
        return std::string("ranks contribute different counts");
    case restriction::count_at_least_size:
        if (call.count >= static_cast<std::size_t>(call.comm_size)) return std::nullopt;
        return fmt::format("{} elements cannot be split among {} ranks", call.count,
                           call.comm_size);
    }
    return std::string("unknown restriction");
}

} // namespace tutti
