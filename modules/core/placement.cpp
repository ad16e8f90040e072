#include "core/placement.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "core/error.hpp"

namespace tutti {

std::string this_machine_id() {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string id;
    if (in >> id && !id.empty()) return id;
    std::array<char, 256> host{};
    if (gethostname(host.data(), host.size() - 1) == 0) return host.data();
    return "unknown";
}

// A blob: the machine id, a zero byte, then the raw affinity mask (all zero
// where the kernel would not say).
std::vector<std::byte> placement_blob() {
    const std::string machine = this_machine_id();
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    if (sched_getaffinity(0, sizeof cpus, &cpus) != 0) CPU_ZERO(&cpus);
    std::vector<std::byte> blob(machine.size() + 1 + sizeof cpus);
    std::memcpy(blob.data(), machine.data(), machine.size());
    std::memcpy(blob.data() + machine.size() + 1, &cpus, sizeof cpus);
    return blob;
}

int cores_of_machine(std::span<const std::vector<std::byte>> blobs, std::string_view machine) {
    cpu_set_t all;
    CPU_ZERO(&all);
    for (std::size_t r = 0; r < blobs.size(); ++r) {
        const auto& blob = blobs[r];
        const auto end = std::find(blob.begin(), blob.end(), std::byte{0});
        const auto id_bytes = static_cast<std::size_t>(end - blob.begin());
        if (end == blob.end() || blob.size() - id_bytes - 1 != sizeof(cpu_set_t))
            throw error(errc::invalid_argument,
                        fmt::format("rank {}'s placement (its machine and CPUs) is malformed: {} "
                                    "bytes, not a machine id, a zero byte and {} bytes of CPUs",
                                    r, blob.size(), sizeof(cpu_set_t)));
        if (std::string_view(reinterpret_cast<const char*>(blob.data()), id_bytes) != machine)
            continue;
        cpu_set_t theirs;
        std::memcpy(&theirs, blob.data() + id_bytes + 1, sizeof theirs);
        CPU_OR(&all, &all, &theirs);
    }
    return CPU_COUNT(&all);
}

} // namespace tutti
