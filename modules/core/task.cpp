#include "core/task.hpp"

#include <array>
#include <new>

namespace tutti::detail {

namespace {

struct block_cache_owner {
    ~block_cache_owner() {
        for (auto& list : blocks_here.lists)
            for (std::size_t i = 0; i < list.count; ++i)
                ::operator delete(list.blocks[i]);
        blocks_here.owned = false;
        blocks_here.gone = true;
    }
    void adopt() noexcept { blocks_here.owned = true; }
};
thread_local block_cache_owner cache_owner;

} // namespace

void* allocate_block_from_heap(std::size_t size_class) {
    // The size rounded up to its class, so any block of that class fits.
    return ::operator new(size_class* block_cache::granule);
}

void free_block_elsewhere(void* block, std::size_t size_class) noexcept {
    // The thread's first kept block makes the owner; a full list, a large
    // block, or a thread past its owner's end give it to the heap.
    if (keep_blocks && size_class < block_cache::classes && !blocks_here.owned &&
        !blocks_here.gone) {
        cache_owner.adopt();
        auto& list = blocks_here.lists[size_class];
        list.blocks[list.count++] = block;
        return;
    }
    ::operator delete(block);
}

} // namespace tutti::detail
