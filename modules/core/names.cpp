#include "core/names.hpp"

#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "core/message.hpp"

namespace tutti {

namespace {
struct name_table {
    std::mutex mutex;
    std::unordered_map<std::uint32_t, std::string> names;
};
name_table& table() {
    static name_table t;
    return t;
}
} // namespace

void remember_algorithm_name(std::string_view name) {
    auto& t = table();
    std::lock_guard lock(t.mutex);
    t.names.emplace(algorithm_id(name), std::string(name));
}

std::string algorithm_name(std::uint32_t id) {
    auto& t = table();
    std::lock_guard lock(t.mutex);
    if (auto it = t.names.find(id); it != t.names.end()) return it->second;
    return fmt::format("#{:08x}", id);
}

} // namespace tutti
