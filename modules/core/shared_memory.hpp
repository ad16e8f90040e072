// Memory that the other ranks of this node can map: buffers allocated here
// are each backed by a memfd, so a peer on the same node can map them (it
// takes the descriptor with pidfd_getfd) and copy or reduce straight out of
// them. A large message whose send buffer lives here costs one memcpy at the
// receiver, at memcpy speed, where a buffer from the ordinary heap needs
// process_vm_readv (which pins pages and reaches about half the speed above
// 1 MiB) or two copies through the shared rings. Transports look buffers up
// with find_shared_region(); nothing else changes for the caller.
//
//     tutti::shared_vector<double> data(1 << 21);   // instead of std::vector
//     co_await tutti::all_reduce(comm, data, tutti::sum);
//
// Each allocation is its own region (and holds one file descriptor while it
// lives), so it suits the few large buffers that collectives move, not many
// small objects. Freeing a region a peer still has mapped is safe: the peer's
// mapping keeps the pages until the peer drops it (see the shm transport's
// bound on cached mappings).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <optional>
#include <vector>

namespace tutti {

// Where a shared buffer lives, for a transport to tell a peer: the region's
// descriptor in this process, its size, and the byte offset of the buffer in it.
struct shared_region_ref {
    std::uint64_t id = 0; // unique in this process, never reused
    int fd = -1;
    std::size_t region_bytes = 0;
    std::size_t offset = 0;
};

// Allocates `bytes` (rounded up to whole pages) of memory peers can map.
// Throws tutti::error (errc::resource_unavailable) naming what the system
// refused.
void* allocate_shared(std::size_t bytes);
// Frees memory from allocate_shared; nullptr is ignored. Memory from anywhere
// else is an error (tutti::error, errc::invalid_argument).
void deallocate_shared(void* p);

// The region holding all of [p, p + bytes), or nullopt if that range is not
// inside one buffer from allocate_shared.
std::optional<shared_region_ref> find_shared_region(const void* p, std::size_t bytes);

// How many shared regions this process holds, and their bytes: for tests.
struct shared_memory_usage {
    std::size_t regions = 0;
    std::size_t bytes = 0;
};
shared_memory_usage shared_usage();

// A standard allocator over allocate_shared, for containers whose buffers
// collectives move.
template <class T>
struct shared_allocator {
    using value_type = T;
    shared_allocator() = default;
    template <class U>
    shared_allocator(const shared_allocator<U>&) noexcept {}

    T* allocate(std::size_t n) {
        static_assert(alignof(T) <= 4096, "shared memory is page-aligned");
        if (n > std::numeric_limits<std::size_t>::max() / sizeof(T))
            throw std::bad_array_new_length();
        return static_cast<T*>(allocate_shared(n * sizeof(T)));
    }
    void deallocate(T* p, std::size_t) { deallocate_shared(p); }

    template <class U>
    friend bool operator==(const shared_allocator&, const shared_allocator<U>&) noexcept {
        return true;
    }
};

template <class T>
using shared_vector = std::vector<T, shared_allocator<T>>;

} // namespace tutti
