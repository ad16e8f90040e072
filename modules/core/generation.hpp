// Generations, after HPX: every collective call on a communicator carries a
// generation, given by the caller or the next unused one. Messages are matched
// on it, so independent calls can be in flight together. Generation 0 and a
// generation used before on the same communicator are errors.
#pragma once

#include <bitset>
#include <cstddef>
#include <cstdint>

namespace tutti {

// Typed arguments, so a call reads like a sentence and two integers cannot be
// swapped: all_reduce(comm, data, sum, generation(3), use("ring")).
struct generation {
    std::uint64_t value;
};

// Which of the last `window` generations up to the newest were marked, a bit
// each: marking costs no allocation, in order or not, where a set took a
// node per generation (docs/performance.md, eighty-second session). The
// registry below keeps one, and so does a hierarchy for its first uses.
class generation_window {
public:
    static constexpr std::uint64_t window = 1024;
    enum class mark { first, again, too_old };

    // Marks g (1 or more): whether it is its first mark, one before, or
    // more than `window` behind the newest, which the window forgot.
    mark set(std::uint64_t g) noexcept {
        if (g > newest_) {
            // The window slides: the bits it passes over held generations
            // a window older.
            if (g - newest_ >= window)
                marked_.reset();
            else
                for (auto k = newest_ + 1; k < g; ++k)
                    marked_.reset(bit(k));
            newest_ = g;
            marked_.set(bit(g));
            return mark::first;
        }
        if (newest_ - g >= window) return mark::too_old;
        if (marked_.test(bit(g))) return mark::again;
        marked_.set(bit(g));
        return mark::first;
    }
    std::uint64_t newest() const noexcept { return newest_; }

private:
    static std::size_t bit(std::uint64_t g) noexcept {
        return static_cast<std::size_t>(g % window);
    }

    std::uint64_t newest_ = 0;
    std::bitset<window> marked_;
};

class generation_registry {
public:
    // Claims `wanted`; throws tutti::error for 0, a generation used before,
    // or one more than generation_window::window behind the newest (holes
    // that far back count as used, which keeps memory bounded even when a
    // composition skips slots: the hierarchical 3k-2, 3k mapping).
    void claim(std::uint64_t wanted);
    // Claims and returns one more than the largest generation used so far.
    // Inline: every call in order takes this.
    std::uint64_t claim_next() {
        const auto next = used_.newest() + 1;
        used_.set(next);
        return next;
    }
    std::uint64_t largest_used() const noexcept { return used_.newest(); }

private:
    generation_window used_;
};

} // namespace tutti
