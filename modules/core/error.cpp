#include "core/error.hpp"

namespace tutti {

std::string_view to_string(errc code) noexcept {
    switch (code) {
    case errc::invalid_count:
        return "invalid count";
    case errc::invalid_root:
        return "invalid root";
    case errc::invalid_generation:
        return "invalid generation";
    case errc::reused_generation:
        return "reused generation";
    case errc::unknown_algorithm:
        return "unknown algorithm";
    case errc::restriction_violated:
        return "restriction violated";
    case errc::invalid_argument:
        return "invalid argument";
    case errc::mismatched_collective:
        return "mismatched collective";
    case errc::message_size_mismatch:
        return "message size mismatch";
    case errc::peer_lost:
        return "peer lost";
    case errc::deadlock:
        return "deadlock";
    case errc::serialization_failure:
        return "serialization failure";
    case errc::timeout:
        return "timeout";
    case errc::resource_unavailable:
        return "resource unavailable";
    }
    return "unknown error";
}

error::error(errc code, const std::string& message)
    : std::runtime_error("tutti: " + message), code_(code) {}

} // namespace tutti
