// The type-erased arguments of each collective, as every algorithm of that
// collective receives them. Counts are in bytes unless they say elements.
// Every algorithm must also work for a communicator of size 1 and for empty
// buffers.
#pragma once

#include <cstddef>
#include <span>

#include <algorithm>
#include <array>
#include <vector>

#include "core/collective.hpp"
#include "core/reduction.hpp"

namespace tutti {

namespace detail {
// Sizes per rank that a call derives (byte counts and offsets from a
// caller's element counts, where blocks start): inline up to 33 numbers, so
// that a call on up to 8 ranks (4 numbers per rank) allocates nothing for
// them. Kept in the call object where the arguments point to it, so it is
// moved only before it is sized. Not boost's small_vector: its generic resize
// and its element-wise move took about 250 instructions per 2-rank
// all_to_allv, two thirds of the call's front end (docs/performance.md,
// nineteenth session).
class per_rank_sizes {
public:
    per_rank_sizes() noexcept {} // the inline numbers unset: each is written before it is read
    per_rank_sizes(per_rank_sizes&& other) noexcept
        : size_(other.size_), heap_(std::move(other.heap_)) {
        if (size_ <= inline_count) std::copy_n(other.local_.data(), size_, local_.data());
    }
    per_rank_sizes& operator=(per_rank_sizes&&) = delete;

    // n numbers, not set: the caller writes each.
    std::span<std::size_t> resize(std::size_t n) {
        if (n > inline_count) heap_.resize(n);
        size_ = n;
        return {data(), n};
    }
    std::size_t* data() noexcept { return size_ > inline_count ? heap_.data() : local_.data(); }
    const std::size_t* data() const noexcept {
        return size_ > inline_count ? heap_.data() : local_.data();
    }
    std::size_t size() const noexcept { return size_; }
    std::size_t operator[](std::size_t i) const noexcept { return data()[i]; }

private:
    static constexpr std::size_t inline_count = 33;
    std::size_t size_ = 0;
    std::array<std::size_t, inline_count> local_;
    std::vector<std::size_t> heap_;
};
} // namespace detail

struct barrier_args {
    static constexpr collective kind = collective::barrier;
};

// buffer: the root's data in, every other rank's out; same length everywhere.
struct broadcast_args {
    static constexpr collective kind = collective::broadcast;
    std::span<std::byte> buffer;
    int root = 0;
};

// send: count elements on every rank; recv: count elements at the root
// (ignored elsewhere). send and recv may be the same memory (in place).
struct reduce_args {
    static constexpr collective kind = collective::reduce;
    std::span<const std::byte> send;
    std::span<std::byte> recv;
    std::size_t count = 0;
    const reduction_op* op = nullptr;
    int root = 0;
};

// send and recv: count elements each; may be the same memory (in place).
struct all_reduce_args {
    static constexpr collective kind = collective::all_reduce;
    std::span<const std::byte> send;
    std::span<std::byte> recv;
    std::size_t count = 0;
    const reduction_op* op = nullptr;
};

// send: one block (its length is the block size) on every rank; recv: size()
// blocks at the root, in rank order.
struct gather_args {
    static constexpr collective kind = collective::gather;
    std::span<const std::byte> send;
    std::span<std::byte> recv;
    int root = 0;
};

// send: size() blocks at the root; recv: one block (its length is the block
// size) on every rank.
struct scatter_args {
    static constexpr collective kind = collective::scatter;
    std::span<const std::byte> send;
    std::span<std::byte> recv;
    int root = 0;
};

// send: one block; recv: size() blocks in rank order.
struct all_gather_args {
    static constexpr collective kind = collective::all_gather;
    std::span<const std::byte> send;
    std::span<std::byte> recv;
};

// send: size() blocks, block j for rank j; recv: size() blocks, block i from
// rank i. Both of send.size() bytes.
struct all_to_all_args {
    static constexpr collective kind = collective::all_to_all;
    std::span<const std::byte> send;
    std::span<std::byte> recv;
};

// As all_to_all with a length and offset per peer, in bytes.
struct all_to_allv_args {
    static constexpr collective kind = collective::all_to_allv;
    std::span<const std::byte> send;
    std::span<const std::size_t> send_counts;
    std::span<const std::size_t> send_offsets;
    std::span<std::byte> recv;
    std::span<const std::size_t> recv_counts;
    std::span<const std::size_t> recv_offsets;
};

// send: sum(counts) elements on every rank; rank r receives in recv the
// reduction of the counts[r] elements starting at sum(counts[0..r)).
struct reduce_scatter_args {
    static constexpr collective kind = collective::reduce_scatter;
    std::span<const std::byte> send;
    std::span<std::byte> recv;
    std::span<const std::size_t> counts; // elements, one per rank
    const reduction_op* op = nullptr;
};

// Inclusive prefix reduction: rank r receives x0 op ... op xr.
struct scan_args {
    static constexpr collective kind = collective::scan;
    std::span<const std::byte> send;
    std::span<std::byte> recv;
    std::size_t count = 0;
    const reduction_op* op = nullptr;
};

// Exclusive prefix reduction: rank r receives x0 op ... op x(r-1); rank 0's
// recv is left as it was.
struct exscan_args {
    static constexpr collective kind = collective::exscan;
    std::span<const std::byte> send;
    std::span<std::byte> recv;
    std::size_t count = 0;
    const reduction_op* op = nullptr;
};

} // namespace tutti
