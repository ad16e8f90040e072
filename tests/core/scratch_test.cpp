// The scratch cache (core/scratch.hpp): a block given back serves the next
// request it fits, a much larger one is not spent on a small request, and
// the cache keeps a bounded number of blocks. Each case runs on a thread of
// its own: the cache is per thread.
#include <thread>

#include "core/scratch.hpp"
#include "core/shared_memory.hpp"

#include "support/harness.hpp"

using namespace tutti;

namespace {

template <class Body>
void on_fresh_thread(Body body) {
    std::thread t(body);
    t.join();
}

} // namespace

TEST_CASE("scratch: a call repeated takes back the block its last run gave back") {
    on_fresh_thread([] {
        const std::byte* first = nullptr;
        {
            scratch_block a(1000);
            first = a.data();
            CHECK(a.capacity() >= 1000);
        }
        CHECK(scratch_cache().blocks == 1);
        scratch_block again(1000);
        CHECK(again.data() == first);
        CHECK(scratch_cache().blocks == 0);
    });
}

TEST_CASE("scratch: a small request does not take a block many times its size") {
    on_fresh_thread([] {
        const std::byte* large = nullptr;
        const std::byte* middle = nullptr;
        {
            scratch_block m(8192);
            scratch_block l(60000);
            middle = m.data();
            large = l.data();
        } // l goes back last: the most recent block
        CHECK(scratch_cache().blocks == 2);
        // The most recent block is far too large: the search finds the middle one.
        scratch_block fits(8000);
        CHECK(fits.data() == middle);
        // Nothing cached fits 100 bytes without wasting 4x: a new block.
        scratch_block small(100);
        CHECK(small.data() != large);
        CHECK(small.capacity() < 8000);
        CHECK(scratch_cache().blocks == 1);
    });
}

TEST_CASE("scratch: the cache keeps at most 16 blocks, the largest first") {
    on_fresh_thread([] {
        {
            std::vector<scratch_block> blocks;
            for (std::size_t i = 1; i <= 20; ++i)
                blocks.emplace_back(i * 1024);
        }
        const auto kept = scratch_cache();
        CHECK(kept.blocks == 16);
        // The four smallest (1-4 KiB) went: 5 + ... + 20 KiB stay.
        CHECK(kept.bytes == (5 + 20) * 16 / 2 * 1024);
    });
}

TEST_CASE(
    "scratch: private blocks stay out of shared memory, and the cache keeps the kinds apart") {
    on_fresh_thread([] {
        constexpr std::size_t n = 1 << 20;
        const std::byte* shared = nullptr;
        const std::byte* own = nullptr;
        {
            scratch_block s(n);
            scratch_block p(n, scratch_memory::private_only);
            shared = s.data();
            own = p.data();
            CHECK(find_shared_region(s.data(), n).has_value());
            CHECK_FALSE(find_shared_region(p.data(), 1).has_value());
        } // p goes back last: the most recent block
        CHECK(scratch_cache().blocks == 2);
        scratch_block s(n);
        CHECK(s.data() == shared);
        scratch_block p(n, scratch_memory::private_only);
        CHECK(p.data() == own);
        // Small blocks are private either way, and serve both.
        const std::byte* small = nullptr;
        { small = scratch_block(1000).data(); }
        CHECK(scratch_block(1000, scratch_memory::private_only).data() == small);
    });
}
