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

namespace tutti {

// Copies n bytes; the ranges must not overlap.
void copy_bytes(void* to, const void* from, std::size_t n) noexcept;

} // namespace tutti
