// Temporary buffers for algorithms (what arrives before it is reduced, a
// partial result), reused across calls. A fresh std::vector of a few MiB per
// call costs more than the call's copies: the allocator maps new pages and
// the kernel clears and faults in every one of them (a 16 MiB reduce_scatter
// spent most of its time in page faults), and the vector zeroes them again.
// Blocks of at least shared_scratch_bytes come from tutti::allocate_shared,
// so that sending out of them takes the same single-copy path as a user's
// shared buffer.
#pragma once

#include <cstddef>
#include <optional>
#include <span>

namespace tutti {

// Scratch blocks this large and above live in shared memory, unless asked
// for as private.
inline constexpr std::size_t shared_scratch_bytes = 64 * 1024;

// Where a block lives. A transport staging a message that arrived early
// asks for private memory: its blocks are only copied out of, and a cached
// block in shared memory would keep a shared region (and on a TCP-only rank
// a shared-memory file) alive for nothing.
enum class scratch_memory { shared_when_large, private_only };

// One block of at least `bytes`, not zeroed, from this thread's cache; it
// returns there when the object dies. Blocks are kept up to a bound per
// thread (docs/performance.md).
class scratch_block {
public:
    explicit scratch_block(std::size_t bytes,
                           scratch_memory memory = scratch_memory::shared_when_large);
    ~scratch_block();
    scratch_block(scratch_block&& other) noexcept;
    scratch_block& operator=(scratch_block&& other) noexcept;
    scratch_block(const scratch_block&) = delete;
    scratch_block& operator=(const scratch_block&) = delete;

    std::byte* data() const noexcept { return data_; }
    std::size_t capacity() const noexcept { return capacity_; }

private:
    std::byte* data_ = nullptr;
    std::size_t capacity_ = 0;
    bool shared_ = false;
};

// Scratch space for one call, what algorithms and compositions use: inside
// the object (a coroutine frame) up to Inline bytes, so small messages
// allocate nothing; above, a scratch_block, reused across calls and never
// zeroed. tests/select/allocation_test.cpp holds every algorithm to it.
template <std::size_t Inline = 64>
class scratch {
public:
    explicit scratch(std::size_t bytes) : bytes_(bytes) {
        if (bytes > Inline) block_.emplace(bytes);
    }
    scratch(const scratch&) = delete; // span() points into the object
    scratch& operator=(const scratch&) = delete;
    std::span<std::byte> span() noexcept { return {data(), bytes_}; }
    std::byte* data() noexcept { return block_ ? block_->data() : local_; }
    std::size_t size() const noexcept { return bytes_; }

private:
    std::size_t bytes_;
    alignas(std::max_align_t) std::byte local_[Inline];
    std::optional<scratch_block> block_;
};

// How many blocks this thread keeps for reuse, and their bytes: for tests.
struct scratch_cache_usage {
    std::size_t blocks = 0;
    std::size_t bytes = 0;
};
scratch_cache_usage scratch_cache();

} // namespace tutti
