#include "core/scratch.hpp"

#include <algorithm>
#include <new>
#include <utility>
#include <vector>

#include "core/shared_memory.hpp"

namespace tutti {
namespace {

// Enough for the temporaries of a few large collectives in flight; beyond it
// blocks are freed as they come back, the largest kept first.
constexpr std::size_t cache_blocks = 16;
constexpr std::size_t cache_bytes = std::size_t{512} << 20;

struct block {
    std::byte* data;
    std::size_t capacity;
    bool shared;
};

void release(const block& b) {
    if (b.shared)
        deallocate_shared(b.data);
    else
        ::operator delete(b.data);
}

struct cache {
    std::vector<block> free;
    std::size_t bytes = 0;
};

// The cache is freed when its thread ends; a block returned after that (a
// coroutine frame destroyed late in the process's exit) is freed at once.
// Plain pointers stay readable after the thread's destructors ran.
thread_local cache* this_thread_cache = nullptr;
thread_local bool this_thread_ended = false;

struct cache_owner {
    ~cache_owner() {
        if (this_thread_cache)
            for (const auto& b : this_thread_cache->free)
                release(b);
        delete this_thread_cache;
        this_thread_cache = nullptr;
        this_thread_ended = true;
    }
};

cache* thread_cache() {
    if (this_thread_ended) return nullptr;
    if (!this_thread_cache) {
        thread_local cache_owner owner;
        this_thread_cache = new cache;
    }
    return this_thread_cache;
}

// Small blocks round to 256 bytes, large ones to whole pages, so a block
// serves calls of nearby sizes.
std::size_t rounded(std::size_t bytes) {
    const std::size_t unit = bytes >= shared_scratch_bytes ? 4096 : 256;
    return std::max<std::size_t>(unit, (bytes + unit - 1) / unit * unit);
}

bool in_shared_memory(std::size_t capacity, scratch_memory memory) {
    return memory == scratch_memory::shared_when_large && capacity >= shared_scratch_bytes;
}

// A cached block serves a request it holds, if it is not much larger and
// lives where the request wants it.
bool fits(const block& b, std::size_t bytes, scratch_memory memory) {
    return b.capacity >= bytes && b.capacity / 4 <= std::max<std::size_t>(bytes, 4096) &&
           b.shared == in_shared_memory(b.capacity, memory);
}

} // namespace

scratch_block::scratch_block(std::size_t bytes, scratch_memory memory) {
    if (auto* cached = thread_cache()) {
        auto& c = *cached;
        // A call repeated takes back the block its last run returned: the
        // most recent one, looked at first, saves the search below (a
        // quarter of a 256-byte reduce_scatter's instructions besides its
        // messages; docs/performance.md, nineteenth session).
        if (!c.free.empty() && fits(c.free.back(), bytes, memory)) {
            data_ = c.free.back().data;
            capacity_ = c.free.back().capacity;
            shared_ = c.free.back().shared;
            c.bytes -= capacity_;
            c.free.pop_back();
            return;
        }
        // Else the smallest cached block that fits.
        auto best = c.free.end();
        for (auto it = c.free.begin(); it != c.free.end(); ++it)
            if (fits(*it, bytes, memory) && (best == c.free.end() || it->capacity < best->capacity))
                best = it;
        if (best != c.free.end()) {
            data_ = best->data;
            capacity_ = best->capacity;
            shared_ = best->shared;
            c.bytes -= best->capacity;
            c.free.erase(best);
            return;
        }
    }
    capacity_ = rounded(bytes);
    shared_ = in_shared_memory(capacity_, memory);
    data_ =
        static_cast<std::byte*>(shared_ ? allocate_shared(capacity_) : ::operator new(capacity_));
}

scratch_block::~scratch_block() {
    if (!data_) return;
    auto* cached = thread_cache();
    if (!cached) {
        release({data_, capacity_, shared_});
        return;
    }
    auto& c = *cached;
    c.free.push_back({data_, capacity_, shared_});
    c.bytes += capacity_;
    // Over the bound: free the smallest blocks first (large ones are the
    // expensive ones to make again).
    while (c.free.size() > cache_blocks || c.bytes > cache_bytes) {
        auto smallest =
            std::min_element(c.free.begin(), c.free.end(), [](const block& a, const block& b) {
                return a.capacity < b.capacity;
            });
        c.bytes -= smallest->capacity;
        release(*smallest);
        c.free.erase(smallest);
    }
}

scratch_block::scratch_block(scratch_block&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), capacity_(std::exchange(other.capacity_, 0)),
      shared_(other.shared_) {}

scratch_block& scratch_block::operator=(scratch_block&& other) noexcept {
    if (this != &other) {
        scratch_block gone(std::move(*this));
        data_ = std::exchange(other.data_, nullptr);
        capacity_ = std::exchange(other.capacity_, 0);
        shared_ = other.shared_;
    }
    return *this;
}

scratch_cache_usage scratch_cache() {
    const auto* c = thread_cache();
    return c ? scratch_cache_usage{c->free.size(), c->bytes} : scratch_cache_usage{};
}

} // namespace tutti
