#include "select/choose.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace tutti {

namespace {
constexpr std::size_t small_message = 16 * 1024;
bool power_of_two(int n) {
    return (n & (n - 1)) == 0;
}
} // namespace

std::vector<std::string_view> default_preference(const call_signature& call) {
    const bool small = call.bytes <= small_message;
    switch (call.kind) {
    case collective::barrier:
        return {"dissemination"};
    case collective::broadcast:
        if (small || call.comm_size < 4) return {"binomial"};
        return {"scatter_allgather", "binomial"};
    case collective::reduce:
        return {"binomial", "linear"};
    case collective::all_reduce:
        if (small || call.count < static_cast<std::size_t>(call.comm_size))
            return {"recursive_doubling"};
        if (power_of_two(call.comm_size)) return {"rabenseifner", "ring", "recursive_doubling"};
        return {"ring", "rabenseifner", "recursive_doubling"};
    case collective::gather:
        return {"binomial", "linear"};
    case collective::scatter:
        return {"binomial", "linear"};
    case collective::all_gather:
        if (small) return {"recursive_doubling", "bruck", "ring"};
        return {"ring", "bruck"};
    case collective::all_to_all:
        if (call.bytes / static_cast<std::size_t>(call.comm_size) <= 256 && call.comm_size >= 8)
            return {"bruck", "pairwise"};
        return {"pairwise", "linear"};
    case collective::all_to_allv:
        return {"pairwise", "linear"};
    case collective::reduce_scatter:
        return {"recursive_halving", "ring", "pairwise"};
    case collective::scan:
        return {"recursive_doubling", "linear"};
    case collective::exscan:
        return {"recursive_doubling", "linear"};
    case collective::split:
        return {};
    }
    return {};
}

template <class Args>
const algorithm<Args>& choose(const call_signature& call, std::string_view forced) {
    auto& cat = algorithms();
    if (!forced.empty() && forced != "auto") {
        const auto* a = cat.find<Args>(forced);
        if (!a)
            throw error(errc::unknown_algorithm,
                        fmt::format("unknown {} algorithm '{}'; known: {}", to_string(Args::kind),
                                    forced, cat.names(Args::kind)));
        if (auto why = a->info.check(call))
            throw error(errc::restriction_violated,
                        fmt::format("{} algorithm '{}' cannot run this call: {}",
                                    to_string(Args::kind), forced, *why));
        return *a;
    }
    for (auto name : default_preference(call))
        if (const auto* a = cat.find<Args>(name); a && !a->info.check(call)) return *a;
    for (const auto* info : cat.list(Args::kind))
        if (!info->check(call))
            if (const auto* a = cat.find<Args>(info->name)) return *a;
    throw error(errc::restriction_violated,
                fmt::format("no {} algorithm can run this call (known: {})", to_string(Args::kind),
                            cat.names(Args::kind)));
}

template const algorithm<barrier_args>& choose(const call_signature&, std::string_view);
template const algorithm<broadcast_args>& choose(const call_signature&, std::string_view);
template const algorithm<reduce_args>& choose(const call_signature&, std::string_view);
template const algorithm<all_reduce_args>& choose(const call_signature&, std::string_view);
template const algorithm<gather_args>& choose(const call_signature&, std::string_view);
template const algorithm<scatter_args>& choose(const call_signature&, std::string_view);
template const algorithm<all_gather_args>& choose(const call_signature&, std::string_view);
template const algorithm<all_to_all_args>& choose(const call_signature&, std::string_view);
template const algorithm<all_to_allv_args>& choose(const call_signature&, std::string_view);
template const algorithm<reduce_scatter_args>& choose(const call_signature&, std::string_view);
template const algorithm<scan_args>& choose(const call_signature&, std::string_view);
template const algorithm<exscan_args>& choose(const call_signature&, std::string_view);

} // namespace tutti
