#include "algorithms/catalog.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/names.hpp"

namespace tutti {

std::string_view to_string(algorithm_kind k) noexcept {
    switch (k) {
    case algorithm_kind::pure:
        return "pure";
    case algorithm_kind::algorithmic:
        return "algorithmic composition";
    case algorithm_kind::hierarchical:
        return "hierarchical composition";
    case algorithm_kind::pipelined:
        return "pipelined composition";
    case algorithm_kind::state:
        return "state composition";
    }
    return "unknown";
}

std::optional<std::string> algorithm_info::check(const call_signature& call) const {
    for (auto r : restrictions)
        if (auto why = tutti::check(r, call))
            return fmt::format("restriction {} fails: {}", to_string(r), *why);
    return std::nullopt;
}

const algorithm_info* catalog::find_info(collective kind, std::string_view name) const {
    std::lock_guard lock(mutex_);
    for (auto* info : infos_)
        if (info->kind == kind && info->name == name) return info;
    return nullptr;
}

std::vector<const algorithm_info*> catalog::list(collective kind) const {
    std::lock_guard lock(mutex_);
    std::vector<const algorithm_info*> out;
    for (auto* info : infos_)
        if (info->kind == kind) out.push_back(info);
    return out;
}

std::vector<const algorithm_info*> catalog::list() const {
    std::lock_guard lock(mutex_);
    return infos_;
}

std::string catalog::names(collective kind) const {
    std::string out;
    for (auto* info : list(kind)) {
        if (!out.empty()) out += ", ";
        out += info->name;
    }
    return out;
}

void catalog::check_new_name(const algorithm_info& info) const {
    if (info.name.empty() || info.name == "auto")
        throw error(errc::invalid_argument, fmt::format("'{}' cannot name a {} algorithm",
                                                        info.name, to_string(info.kind)));
    for (auto* other : infos_)
        if (other->kind == info.kind && other->name == info.name)
            throw error(errc::invalid_argument,
                        fmt::format("a {} algorithm named '{}' is already registered",
                                    to_string(info.kind), info.name));
    remember_algorithm_name(info.name);
}

void catalog::wrong_info(const algorithm_info& info, collective wanted) {
    throw error(errc::invalid_argument,
                fmt::format("'{}' is a {} algorithm not registered in the catalog, not a {} one",
                            info.name, to_string(info.kind), to_string(wanted)));
}

catalog& algorithms() {
    static catalog c;
    return c;
}

} // namespace tutti
