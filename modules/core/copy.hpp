// The one function tutti copies message bytes with (into and out of shared
// memory cells, out of a peer's mapped buffer, between a staged payload and
// its receive, local blocks of the algorithms).
//
// Why not memcpy alone: glibc's memcpy copies blocks from 2 KiB up with
// `rep movsb`, and on the machines tutti is tuned on (AMD Zen 4 under a
// hypervisor) that instruction is twenty times slower when source and
// destination are not equally aligned within a cache line: 64 KiB in 37 us
// instead of 1.6 us. That is the common case for a message (a heap buffer is
// 16 bytes past a line, a cell's payload on a line). So when the two
// addresses differ in their offset within a line, the bytes are copied with
// vector loads and aligned stores instead; otherwise memcpy is used as is.
// docs/performance.md has the measurements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace tutti {

// Whether two buffers share a byte (an in-place call, a send buffer inside
// the receive buffer). Compared as addresses: < between pointers into
// different buffers is unspecified.
inline bool overlapping(std::span<const std::byte> a, std::span<const std::byte> b) noexcept {
    const auto a_from = reinterpret_cast<std::uintptr_t>(a.data());
    const auto b_from = reinterpret_cast<std::uintptr_t>(b.data());
    return !a.empty() && !b.empty() && a_from < b_from + b.size() && b_from < a_from + a.size();
}

// Copies n bytes; the ranges must not overlap.
void copy_bytes(void* to, const void* from, std::size_t n) noexcept;

// The same with stores that bypass the caches (non-temporal), and a store
// fence at the end, so that a flag written after it is seen after the bytes.
// For memory that another core reads next and held last: ordinary stores
// would first take each line back from that core, one round trip per line,
// which where a line takes 250 ns between two cores (this machine's slow
// mode, or two sockets) made a 2-rank reduce of 128 KiB through the
// shared-memory cells 3.8 times as slow (docs/performance.md, nineteenth
// session). Where lines move quickly the cached copy is as quick or quicker.
void copy_bytes_streaming(void* to, const void* from, std::size_t n) noexcept;

// copy_bytes_streaming where `past_caches`, else copy_bytes: for a copy
// whose destination nobody reads before it would leave the cache anyway (an
// algorithm's own block where the call's buffers exceed the cache, a receive
// longer than the cache). The stores past the caches skip the read of every
// line that an ordinary store makes first. 2-rank all_gather and all_to_all
// of 16 and 64 MiB: 4-25 % quicker; where the buffers fit (1-4 MiB), 30-45 %
// slower (docs/performance.md, thirty-fourth session).
inline void copy_block(void* to, const void* from, std::size_t n, bool past_caches) noexcept {
    if (past_caches)
        copy_bytes_streaming(to, from, n);
    else
        copy_bytes(to, from, n);
}

} // namespace tutti
