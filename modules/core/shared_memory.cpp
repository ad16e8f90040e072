#include "core/shared_memory.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>

#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/error.hpp"

namespace tutti {
namespace {

struct region {
    std::uint64_t id;
    int fd;
    std::size_t bytes;
};

// Regions by base address. Looked up once per large send, so a mutex is
// cheap next to the copy it saves.
struct registry {
    std::mutex lock;
    std::map<std::uintptr_t, region> regions;
    std::uint64_t next_id = 1;
    std::size_t bytes = 0;
};

registry& the_registry() {
    static registry r;
    return r;
}

std::size_t page_size() {
    static const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    return page;
}

[[noreturn]] void refuse(std::size_t bytes, const char* what, int e) {
    throw error(errc::resource_unavailable,
                fmt::format("cannot allocate {} bytes of shared memory: {} failed: {}", bytes, what,
                            std::strerror(e)));
}

} // namespace

void* allocate_shared(std::size_t bytes) {
    const std::size_t page = page_size();
    if (bytes > std::numeric_limits<std::size_t>::max() - page) refuse(bytes, "sizing", ENOMEM);
    const std::size_t rounded = bytes == 0 ? page : (bytes + page - 1) / page * page;
    const int fd = memfd_create("tutti-shared", MFD_CLOEXEC);
    if (fd < 0) refuse(bytes, "memfd_create", errno);
    if (ftruncate(fd, static_cast<off_t>(rounded)) != 0) {
        const int e = errno;
        close(fd);
        refuse(bytes, "ftruncate", e);
    }
    void* base = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        const int e = errno;
        close(fd);
        refuse(bytes, "mmap", e);
    }
    auto& r = the_registry();
    std::lock_guard guard(r.lock);
    r.regions.emplace(reinterpret_cast<std::uintptr_t>(base), region{r.next_id++, fd, rounded});
    r.bytes += rounded;
    return base;
}

void deallocate_shared(void* p) {
    if (!p) return;
    auto& r = the_registry();
    region gone{};
    {
        std::lock_guard guard(r.lock);
        auto found = r.regions.find(reinterpret_cast<std::uintptr_t>(p));
        if (found == r.regions.end())
            throw error(
                errc::invalid_argument,
                fmt::format("deallocate_shared: {} was not allocated by allocate_shared", p));
        gone = found->second;
        r.regions.erase(found);
        r.bytes -= gone.bytes;
    }
    munmap(p, gone.bytes);
    close(gone.fd);
}

std::optional<shared_region_ref> find_shared_region(const void* p, std::size_t bytes) {
    const auto at = reinterpret_cast<std::uintptr_t>(p);
    auto& r = the_registry();
    std::lock_guard guard(r.lock);
    if (r.regions.empty()) return std::nullopt;
    auto after = r.regions.upper_bound(at);
    if (after == r.regions.begin()) return std::nullopt;
    const auto& [base, found] = *std::prev(after);
    const std::size_t offset = at - base;
    if (offset > found.bytes || bytes > found.bytes - offset) return std::nullopt;
    return shared_region_ref{found.id, found.fd, found.bytes, offset};
}

shared_memory_usage shared_usage() {
    auto& r = the_registry();
    std::lock_guard guard(r.lock);
    return {r.regions.size(), r.bytes};
}

} // namespace tutti
