// TUTTI_DEBUG (set, and not "0"): the transports and the job say on stderr
// how they were set up, whom they connected and whom they lost, each line
// "tutti WHO: ...".
#pragma once

#include <cstdio>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace tutti::detail {

// Whether TUTTI_DEBUG asks for it, read once per process.
bool debug_enabled() noexcept;

template <class... Args>
void debug_log(std::string_view who, fmt::format_string<Args...> format, Args&&... args) {
    if (debug_enabled())
        fmt::print(stderr, "tutti {}: {}\n", who, fmt::format(format, std::forward<Args>(args)...));
}

} // namespace tutti::detail
