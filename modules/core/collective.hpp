// The collectives tutti knows, as a value: carried in every message header so
// that ranks calling different collectives for one generation are told so.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tutti {

enum class collective : std::uint8_t {
    barrier,
    broadcast,
    reduce,
    all_reduce,
    gather,
    scatter,
    all_gather,
    all_to_all,
    all_to_allv,
    reduce_scatter,
    scan,
    exscan,
    // Internal: the communicator's own bookkeeping exchanges (split).
    split,
};

inline constexpr std::array all_collectives = {
    collective::barrier,        collective::broadcast,  collective::reduce,
    collective::all_reduce,     collective::gather,     collective::scatter,
    collective::all_gather,     collective::all_to_all, collective::all_to_allv,
    collective::reduce_scatter, collective::scan,       collective::exscan,
};

constexpr std::string_view to_string(collective c) noexcept {
    switch (c) {
    case collective::barrier:
        return "barrier";
    case collective::broadcast:
        return "broadcast";
    case collective::reduce:
        return "reduce";
    case collective::all_reduce:
        return "all_reduce";
    case collective::gather:
        return "gather";
    case collective::scatter:
        return "scatter";
    case collective::all_gather:
        return "all_gather";
    case collective::all_to_all:
        return "all_to_all";
    case collective::all_to_allv:
        return "all_to_allv";
    case collective::reduce_scatter:
        return "reduce_scatter";
    case collective::scan:
        return "scan";
    case collective::exscan:
        return "exscan";
    case collective::split:
        return "split";
    }
    return "unknown";
}

constexpr std::optional<collective> collective_from_string(std::string_view name) noexcept {
    for (auto c : all_collectives)
        if (to_string(c) == name) return c;
    return std::nullopt;
}

} // namespace tutti
