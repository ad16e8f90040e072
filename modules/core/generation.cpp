#include "core/generation.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace tutti {

void generation_registry::claim(std::uint64_t wanted) {
    if (wanted == 0)
        throw error(errc::invalid_generation,
                    "generation 0 is not a valid generation; generations start at 1");
    if (used_.set(wanted) != generation_window::mark::first)
        throw error(errc::reused_generation,
                    fmt::format("generation {} was already used on this communicator (or is more "
                                "than {} behind the newest, {}); each call needs a generation of "
                                "its own, the next unused one is {}",
                                wanted, generation_window::window, used_.newest(),
                                used_.newest() + 1));
}

} // namespace tutti
