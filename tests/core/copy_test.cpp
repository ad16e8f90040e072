// copy_bytes and copy_bytes_streaming (core/copy.hpp): every byte arrives,
// nothing around the destination is touched, for every alignment of the two
// ends within a cache line and lengths around the vector widths.
#include <cstdint>
#include <vector>

#include "core/copy.hpp"

#include "support/harness.hpp"

using namespace tutti;

namespace {

template <class Copy>
void check_copies(Copy copy) {
    constexpr std::size_t guard = 64;
    const std::vector<std::size_t> lengths{0,   1,   15,  16,  31,   32,   33,   63,   64,
                                           127, 128, 129, 255, 2047, 2048, 4103, 70001};
    std::size_t wrong = 0;
    for (std::size_t length : lengths)
        for (std::size_t to_offset : {0, 1, 8, 16, 31, 32, 63})
            for (std::size_t from_offset : {0, 3, 16, 32, 47}) {
                std::vector<unsigned char> from(length + from_offset + guard);
                for (std::size_t i = 0; i < from.size(); ++i)
                    from[i] = static_cast<unsigned char>(i * 7 + length);
                std::vector<unsigned char> to(length + to_offset + 2 * guard, 0xee);
                // Line-aligned base, so that the offsets are offsets within a line.
                auto* base = to.data() + (64 - reinterpret_cast<std::uintptr_t>(to.data()) % 64);
                copy(base + to_offset, from.data() + from_offset, length);
                for (std::size_t i = 0; i < length; ++i)
                    if (base[to_offset + i] != from[from_offset + i]) ++wrong;
                for (auto* p = to.data(); p < base + to_offset; ++p)
                    if (*p != 0xee) ++wrong;
                for (auto* p = base + to_offset + length; p < to.data() + to.size(); ++p)
                    if (*p != 0xee) ++wrong;
            }
    CHECK(wrong == 0);
}

} // namespace

TEST_CASE("copy_bytes: every byte, nothing around, at every alignment") {
    check_copies([](void* to, const void* from, std::size_t n) { copy_bytes(to, from, n); });
}

TEST_CASE("copy_bytes_streaming: every byte, nothing around, at every alignment") {
    check_copies(
        [](void* to, const void* from, std::size_t n) { copy_bytes_streaming(to, from, n); });
}
