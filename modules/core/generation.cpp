#include "core/generation.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace tutti {

void generation_registry::claim(std::uint64_t wanted) {
    if (wanted == 0)
        throw error(errc::invalid_generation,
                    "generation 0 is not a valid generation; generations start at 1");
    // The common case, the next generation in order, touches no set.
    if (wanted == all_used_up_to_ + 1 && used_above_.empty()) {
        all_used_up_to_ = wanted;
        if (wanted > largest_) largest_ = wanted;
        return;
    }
    if (wanted <= all_used_up_to_ || used_above_.count(wanted))
        throw error(errc::reused_generation,
                    fmt::format("generation {} was already used on this communicator (or is more "
                                "than {} behind the newest, {}); each call needs a generation of "
                                "its own, the next unused one is {}",
                                wanted, out_of_order_window, largest_, largest_ + 1));
    used_above_.insert(wanted);
    while (!used_above_.empty() && *used_above_.begin() == all_used_up_to_ + 1) {
        used_above_.erase(used_above_.begin());
        ++all_used_up_to_;
    }
    if (wanted > largest_) largest_ = wanted;
    if (largest_ - all_used_up_to_ > out_of_order_window) {
        all_used_up_to_ = largest_ - out_of_order_window;
        used_above_.erase(used_above_.begin(), used_above_.upper_bound(all_used_up_to_));
    }
}

std::uint64_t generation_registry::claim_out_of_order(std::uint64_t next) {
    claim(next);
    return next;
}

} // namespace tutti
