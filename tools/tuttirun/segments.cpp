#include "segments.hpp"

#include <cctype>
#include <system_error>

namespace tuttirun {

std::vector<std::string> remove_job_segments(std::string_view job_id,
                                             const std::filesystem::path& dir) {
    std::vector<std::string> removed;
    if (job_id.empty()) return removed;
    const std::string prefix = "tutti-" + std::string(job_id);
    std::error_code ec;
    std::filesystem::directory_iterator it(dir, ec);
    if (ec) return removed;
    for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
        if (ec) break;
        std::string name = it->path().filename().string();
        // "tutti-<id>" and "tutti-<id>-..." but not "tutti-<id>0...", another job's.
        if (!name.starts_with(prefix)) continue;
        if (name.size() > prefix.size() &&
            std::isalnum(static_cast<unsigned char>(name[prefix.size()])))
            continue;
        std::error_code remove_ec;
        if (std::filesystem::remove(it->path(), remove_ec)) removed.push_back(std::move(name));
    }
    return removed;
}

} // namespace tuttirun
