#include "core/task.hpp"

#include <array>
#include <new>

namespace tutti::detail {

namespace {

// One thread's free blocks, by size class of 64 bytes. A collective's chain
// holds a handful of frames of a few sizes and a few requests, alive one call
// at a time, so a few per class cover the steady state; larger blocks go to
// the heap.
struct block_cache {
    static constexpr std::size_t granule = 64;
    static constexpr std::size_t classes = 48; // blocks up to 3 KiB
    static constexpr std::size_t per_class = 16;
    struct free_list {
        std::size_t count = 0;
        std::array<void*, per_class> blocks{};
    };
    std::array<free_list, classes> lists{};
    ~block_cache();
};
thread_local block_cache cache;
// Set once the cache is destroyed at thread exit: blocks freed later go
// straight back to the heap.
thread_local bool cache_gone = false;

block_cache::~block_cache() {
    for (auto& list : lists)
        for (std::size_t i = 0; i < list.count; ++i)
            ::operator delete(list.blocks[i]);
    cache_gone = true;
}

std::size_t size_class(std::size_t bytes) noexcept {
    return (bytes + block_cache::granule - 1) / block_cache::granule;
}

// Under AddressSanitizer every block comes from the heap, so that a frame or
// request used after its end is reported rather than reused.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TUTTI_FRAMES_FROM_HEAP 1
#endif
#endif
#ifdef TUTTI_FRAMES_FROM_HEAP
constexpr bool keep_blocks = false;
#else
constexpr bool keep_blocks = true;
#endif

} // namespace

void* allocate_block(std::size_t bytes) {
    const auto c = size_class(bytes);
    if (keep_blocks && c < block_cache::classes && !cache_gone) {
        auto& list = cache.lists[c];
        if (list.count) return list.blocks[--list.count];
    }
    // The size rounded up to its class, so any block of that class fits.
    return ::operator new(c* block_cache::granule);
}

void free_block(void* block, std::size_t bytes) noexcept {
    const auto c = size_class(bytes);
    if (keep_blocks && c < block_cache::classes && !cache_gone) {
        auto& list = cache.lists[c];
        if (list.count < block_cache::per_class) {
            list.blocks[list.count++] = block;
            return;
        }
    }
    ::operator delete(block);
}

} // namespace tutti::detail
