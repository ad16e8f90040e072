// Generations, after HPX: every collective call on a communicator carries a
// generation, given by the caller or the next unused one. Messages are matched
// on it, so independent calls can be in flight together. Generation 0 and a
// generation used before on the same communicator are errors.
#pragma once

#include <cstdint>
#include <set>

namespace tutti {

// Typed arguments, so a call reads like a sentence and two integers cannot be
// swapped: all_reduce(comm, data, sum, generation(3), use("ring")).
struct generation {
    std::uint64_t value;
};

class generation_registry {
public:
    // Claims `wanted`; throws tutti::error for 0 or a generation used before.
    void claim(std::uint64_t wanted);
    // Claims and returns one more than the largest generation used so far.
    // Inline for the usual case, every call in order: no set is touched.
    std::uint64_t claim_next() {
        if (all_used_up_to_ == largest_ && used_above_.empty()) {
            all_used_up_to_ = largest_ = largest_ + 1;
            return largest_;
        }
        return claim_out_of_order(largest_ + 1);
    }
    std::uint64_t largest_used() const noexcept { return largest_; }

private:
    std::uint64_t claim_out_of_order(std::uint64_t next);

    // Generations may be claimed out of order within this window behind the
    // largest one; older holes count as used. That keeps memory bounded even
    // when a composition skips slots (the hierarchical 3k-2, 3k mapping).
    static constexpr std::uint64_t out_of_order_window = 1024;

    // Every generation in [1, all_used_up_to_] counts as used; used ones above
    // it are in used_above_.
    std::uint64_t all_used_up_to_ = 0;
    std::set<std::uint64_t> used_above_;
    std::uint64_t largest_ = 0;
};

} // namespace tutti
