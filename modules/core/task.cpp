#include "core/task.hpp"

#include <array>
#include <new>

namespace tutti::detail {

namespace {

// One thread's free blocks, by size class of 64 bytes. A collective's chain
// holds a handful of frames of a few sizes and a few requests, alive one call
// at a time, so a few per class cover the steady state; larger blocks go to
// the heap. Constant-initialized and trivially destroyed, so that every
// allocation reaches it without a thread_local guard; the blocks it keeps
// are freed at thread exit by its owner, made when the first one is kept.
struct block_cache {
    static constexpr std::size_t granule = 64;
    static constexpr std::size_t classes = 48; // blocks up to 3 KiB
    static constexpr std::size_t per_class = 16;
    struct free_list {
        std::size_t count = 0;
        std::array<void*, per_class> blocks{};
    };
    std::array<free_list, classes> lists{};
    bool owned = false; // its owner exists
    bool gone = false;  // its owner freed the blocks: later ones go to the heap
};
constinit thread_local block_cache cache;

struct block_cache_owner {
    ~block_cache_owner() {
        for (auto& list : cache.lists)
            for (std::size_t i = 0; i < list.count; ++i)
                ::operator delete(list.blocks[i]);
        cache.gone = true;
    }
    void adopt() noexcept { cache.owned = true; }
};
thread_local block_cache_owner cache_owner;

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
    if (keep_blocks && c < block_cache::classes && !cache.gone) {
        auto& list = cache.lists[c];
        if (list.count) return list.blocks[--list.count];
    }
    // The size rounded up to its class, so any block of that class fits.
    return ::operator new(c* block_cache::granule);
}

void free_block(void* block, std::size_t bytes) noexcept {
    const auto c = size_class(bytes);
    if (keep_blocks && c < block_cache::classes && !cache.gone) {
        if (!cache.owned) cache_owner.adopt();
        auto& list = cache.lists[c];
        if (list.count < block_cache::per_class) {
            list.blocks[list.count++] = block;
            return;
        }
    }
    ::operator delete(block);
}

} // namespace tutti::detail
