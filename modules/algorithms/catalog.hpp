// The catalog: every algorithm, built-in or a user's, registered once by name
// with its collective, its kind, its restrictions and its parameters. Nothing
// else lists algorithms; selection, tutti-info and the tests all read this.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/args.hpp"
#include "algorithms/restriction.hpp"
#include "core/call_context.hpp"
#include "core/message.hpp"
#include "core/task.hpp"

namespace tutti {

// After the MPICH plan: a pure algorithm calls no other collective; a
// composition does, on the same communicator (algorithmic, pipelined), on
// sub-communicators (hierarchical), or with a changed call (state).
enum class algorithm_kind { pure, algorithmic, hierarchical, pipelined, state };

std::string_view to_string(algorithm_kind k) noexcept;

struct parameter {
    std::string name;
    std::int64_t default_value = 0;
    std::string meaning;
};

struct algorithm_info {
    std::string name;
    collective kind = collective::barrier;
    algorithm_kind form = algorithm_kind::pure;
    std::vector<restriction> restrictions;
    std::vector<parameter> parameters;
    std::string summary;
    // Set by the catalog: algorithm_id(name), which messages carry.
    std::uint32_t id = 0;
    // Set by the catalog: the algorithm<Args> this describes, so that a
    // selection made on infos reaches the typed algorithm without a search.
    const void* entry = nullptr;

    // nullopt when every restriction holds, else "restriction X fails: why".
    std::optional<std::string> check(const call_signature& call) const;
};

template <class Args>
using algorithm_function = std::function<task<void>(const call_context&, const Args&)>;

template <class Args>
struct algorithm {
    algorithm_info info;
    algorithm_function<Args> run;
};

class catalog {
public:
    // Adds an algorithm; a second algorithm of the same collective and name
    // is an error (names are how users and trees refer to algorithms).
    template <class Args>
    const algorithm<Args>& add(algorithm<Args> a) {
        std::lock_guard lock(mutex_);
        a.info.kind = Args::kind;
        a.info.id = algorithm_id(a.info.name);
        check_new_name(a.info);
        auto& stored = table<Args>().emplace_back(std::move(a));
        stored.info.entry = &stored;
        infos_.push_back(&stored.info);
        return stored;
    }

    // The algorithm an info of this catalog describes; throws tutti::error
    // (invalid_argument) for an info of another collective or catalog.
    template <class Args>
    static const algorithm<Args>& typed(const algorithm_info& info) {
        if (info.kind != Args::kind || !info.entry) wrong_info(info, Args::kind);
        return *static_cast<const algorithm<Args>*>(info.entry);
    }

    template <class Args>
    const algorithm<Args>* find(std::string_view name) const {
        std::lock_guard lock(mutex_);
        for (const auto& a : table<Args>())
            if (a.info.name == name) return &a;
        return nullptr;
    }

    // The algorithm of that collective and name, whatever its arguments' type.
    const algorithm_info* find_info(collective kind, std::string_view name) const;

    // Every algorithm of one collective, in registration order.
    std::vector<const algorithm_info*> list(collective kind) const;
    std::vector<const algorithm_info*> list() const;
    // "ring, recursive_doubling, ..." for error messages.
    std::string names(collective kind) const;

private:
    template <class Args>
    static std::deque<algorithm<Args>>& table() {
        static std::deque<algorithm<Args>> entries; // deque: stable addresses
        return entries;
    }
    void check_new_name(const algorithm_info& info) const;
    [[noreturn]] static void wrong_info(const algorithm_info& info, collective wanted);

    mutable std::mutex mutex_;
    std::vector<const algorithm_info*> infos_;
};

// The process-wide catalog.
catalog& algorithms();

// For an algorithm's own file: registers it when the library loads.
template <class Args>
bool register_algorithm(algorithm<Args> a) {
    algorithms().add(std::move(a));
    return true;
}

} // namespace tutti
