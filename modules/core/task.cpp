#include "core/task.hpp"

#include <array>
#include <new>

namespace tutti::detail {

namespace {

// One thread's free frames, by size class of 64 bytes. A collective's chain
// holds a handful of frames of a few sizes, alive one call at a time, so a
// few per class cover the steady state; larger frames go to the heap.
struct frame_cache {
    static constexpr std::size_t granule = 64;
    static constexpr std::size_t classes = 48; // frames up to 3 KiB
    static constexpr std::size_t per_class = 16;
    struct free_list {
        std::size_t count = 0;
        std::array<void*, per_class> frames{};
    };
    std::array<free_list, classes> lists{};
    ~frame_cache();
};
thread_local frame_cache cache;
// Set once the cache is destroyed at thread exit: frames freed later go
// straight back to the heap.
thread_local bool cache_gone = false;

frame_cache::~frame_cache() {
    for (auto& list : lists)
        for (std::size_t i = 0; i < list.count; ++i)
            ::operator delete(list.frames[i]);
    cache_gone = true;
}

std::size_t size_class(std::size_t bytes) noexcept {
    return (bytes + frame_cache::granule - 1) / frame_cache::granule;
}

// Under AddressSanitizer every frame comes from the heap, so that a frame
// used after its coroutine ended is reported rather than reused.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TUTTI_FRAMES_FROM_HEAP 1
#endif
#endif
#ifdef TUTTI_FRAMES_FROM_HEAP
constexpr bool keep_frames = false;
#else
constexpr bool keep_frames = true;
#endif

} // namespace

void* allocate_frame(std::size_t bytes) {
    const auto c = size_class(bytes);
    if (keep_frames && c < frame_cache::classes && !cache_gone) {
        auto& list = cache.lists[c];
        if (list.count) return list.frames[--list.count];
    }
    // The size rounded up to its class, so any frame of that class fits.
    return ::operator new(c* frame_cache::granule);
}

void free_frame(void* frame, std::size_t bytes) noexcept {
    const auto c = size_class(bytes);
    if (keep_frames && c < frame_cache::classes && !cache_gone) {
        auto& list = cache.lists[c];
        if (list.count < frame_cache::per_class) {
            list.frames[list.count++] = frame;
            return;
        }
    }
    ::operator delete(frame);
}

} // namespace tutti::detail
