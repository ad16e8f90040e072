#include "core/copy.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tutti {
namespace {

// Below this glibc does not use `rep movsb`, and memcpy is as good as it gets.
constexpr std::size_t small_copy = 2048;

#if defined(__x86_64__)

// Stores aligned to 32 bytes, loads wherever the source falls; with
// `streaming`, non-temporal stores (copy_bytes_streaming).
template <bool streaming>
__attribute__((target("avx2"))) void copy_avx2(unsigned char* to, const unsigned char* from,
                                               std::size_t n) noexcept {
    const auto store = [](unsigned char* at, __m256i v) __attribute__((target("avx2"))) {
        if constexpr (streaming)
            _mm256_stream_si256(reinterpret_cast<__m256i*>(at), v);
        else
            _mm256_store_si256(reinterpret_cast<__m256i*>(at), v);
    };
    const std::size_t head = std::min((32 - (reinterpret_cast<std::uintptr_t>(to) & 31)) & 31, n);
    std::memcpy(to, from, head);
    to += head;
    from += head;
    n -= head;
    for (; n >= 128; n -= 128, to += 128, from += 128) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from));
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + 32));
        const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + 64));
        const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + 96));
        store(to, a);
        store(to + 32, b);
        store(to + 64, c);
        store(to + 96, d);
    }
    std::memcpy(to, from, n);
}

// The same with SSE2, which every x86-64 has.
template <bool streaming>
void copy_sse2(unsigned char* to, const unsigned char* from, std::size_t n) noexcept {
    const auto store = [](unsigned char* at, __m128i v) {
        if constexpr (streaming)
            _mm_stream_si128(reinterpret_cast<__m128i*>(at), v);
        else
            _mm_store_si128(reinterpret_cast<__m128i*>(at), v);
    };
    const std::size_t head = std::min((16 - (reinterpret_cast<std::uintptr_t>(to) & 15)) & 15, n);
    std::memcpy(to, from, head);
    to += head;
    from += head;
    n -= head;
    for (; n >= 64; n -= 64, to += 64, from += 64) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + 16));
        const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + 32));
        const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + 48));
        store(to, a);
        store(to + 16, b);
        store(to + 32, c);
        store(to + 48, d);
    }
    std::memcpy(to, from, n);
}

bool has_avx2() noexcept {
    static const bool yes = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") != 0;
    }();
    return yes;
}

// The widest of the two loops this processor runs.
template <bool streaming>
void copy_widest(void* to, const void* from, std::size_t n) noexcept {
    auto* t = static_cast<unsigned char*>(to);
    const auto* f = static_cast<const unsigned char*>(from);
    if (has_avx2())
        copy_avx2<streaming>(t, f, n);
    else
        copy_sse2<streaming>(t, f, n);
}

#endif

} // namespace

void copy_bytes(void* to, const void* from, std::size_t n) noexcept {
#if defined(__x86_64__)
    const auto skew =
        (reinterpret_cast<std::uintptr_t>(to) - reinterpret_cast<std::uintptr_t>(from)) & 63;
    if (n >= small_copy && skew != 0) {
        copy_widest<false>(to, from, n);
        return;
    }
#endif
    if (n) std::memcpy(to, from, n);
}

void copy_bytes_streaming(void* to, const void* from, std::size_t n) noexcept {
#if defined(__x86_64__)
    copy_widest<true>(to, from, n);
    _mm_sfence();
#else
    if (n) std::memcpy(to, from, n);
#endif
}

} // namespace tutti
