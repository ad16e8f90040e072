// What the hierarchical compositions (modules/algorithms/*/hierarchical*.cpp)
// share: the generation slots of their sub-steps, the sub-step itself, and
// the flat run they delegate to.
//
// Generations (the HPX stride-three mapping): the call's generation k gives
// its sub-steps the slots 3k-2, 3k-1 and 3k on the sub-communicators, so
// consecutive calls of any mix of collectives never meet there. A
// composition of two sub-steps leaves a slot unused; the sub-communicators'
// registries accept the gap, and no dummy message fills it.
#pragma once

#include <cstdint>
#include <span>

#include <fmt/format.h>

#include "algorithms/catalog.hpp"
#include "algorithms/dispatch.hpp"
#include "core/error.hpp"
#include "hierarchy/hierarchy.hpp"
#include "select/choose.hpp"

namespace tutti::hierarchy_detail {

struct slots {
    std::uint64_t first, middle, last;
};

inline slots slots_for(std::uint64_t k) {
    if (k > (std::uint64_t{1} << 62))
        throw error(errc::invalid_generation,
                    fmt::format("generation {} is too large for a hierarchical collective's "
                                "sub-steps (3k must fit in 64 bits)",
                                k));
    return {3 * k - 2, 3 * k - 1, 3 * k};
}

inline const hierarchy& hierarchy_of(const call_context& ctx) {
    const auto levels = ctx.comm().hierarchy();
    if (!levels)
        throw error(errc::restriction_violated,
                    fmt::format("a hierarchical {} on a communicator without a hierarchy",
                                to_string(ctx.kind())));
    // The communicator keeps its hierarchy alive as long as ctx lives.
    return *levels;
}

// The flat algorithm selection gives this call if the communicator had no
// hierarchy, run as part `part` of the call (on the same communicator).
template <class Args>
task<void> run_flat(const call_context& ctx, const Args& args, unsigned part = 0) {
    auto shape = signature_of(ctx.comm(), args);
    shape.has_hierarchy = false;
    const auto& flat = choose<Args>(shape, std::string_view{});
    co_await flat.run(ctx.phase(part, flat.info.id), args);
}

// Whether the composition runs flat: a flat hierarchy (the HPX fallback
// below the threshold, or size <= arity), or a later hierarchical part of a
// call whose slots an earlier part took. The same answer on every rank.
inline bool delegate_to_flat(const call_context& ctx, const hierarchy& h) {
    return h.flat() || !h.first_use(ctx.generation());
}

// One sub-step on a sub-communicator at generation `slot`. A group that
// carries further levels runs the hierarchical composition again (the
// hierarchy defines the composition, however deep); a flat group or the
// leaders go through the normal choice of algorithm there.
template <class Args>
task<void> sub_step(const communicator& comm, const Args& args, std::uint64_t slot) {
    const auto below = comm.hierarchy();
    if (below && !below->flat())
        co_await run_collective(comm, args, generation(slot), use("hierarchical"));
    else
        co_await run_collective(comm, args, generation(slot));
}

// Block `i` of `block` bytes in a buffer of such blocks.
template <class Byte>
std::span<Byte> block_at(std::span<Byte> buffer, std::size_t block, std::size_t i) {
    return buffer.subspan(i * block, block);
}

} // namespace tutti::hierarchy_detail
