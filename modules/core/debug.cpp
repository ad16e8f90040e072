#include "core/debug.hpp"

#include <cstdlib>

namespace tutti::detail {

bool debug_enabled() noexcept {
    static const bool on = [] {
        const char* v = std::getenv("TUTTI_DEBUG");
        return v && *v && std::string_view(v) != "0";
    }();
    return on;
}

} // namespace tutti::detail
