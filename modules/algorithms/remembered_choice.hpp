// The choices of algorithm a thread remembers, so that a loop of identical
// calls is served without consulting selection. In a header, not in
// dispatch.cpp: the check runs inline where the call is made (dispatch.hpp's
// choose_phase), so that what the front end knows as constants (a barrier's
// size 0, no operation, the default flags) folds into the key instead of
// being packed from memory on every call.
#pragma once

#include <cstddef>
#include <cstdint>

#include "algorithms/catalog.hpp"
#include "algorithms/restriction.hpp"
#include "select/selection.hpp"

namespace tutti::detail {

// What a remembered choice was made for, in a few words: the signature as
// the front end built it, the transport's single-copy capability and the
// request. Equal keys mean an equal call; the transport's name is compared
// by address (a literal), so the same name at another address only misses.
// Compared on every call: a handful of word compares instead of one per
// field of the signature.
struct choice_key {
    std::uint64_t bytes = 0;
    std::uint64_t count = 0;
    std::uint64_t shape = 0;     // kind, size, flags, request
    std::uint64_t placement = 0; // ranks per node, nodes
    const char* transport = nullptr;
    std::size_t transport_length = 0;
    friend bool operator==(const choice_key&, const choice_key&) = default;
};

// A field added to call_signature must be added to the key too, unless, as
// line_ns, readv_percent, slow_single_copy and ranks_per_core, it is the communicator's for good
// (the remembered choice is the communicator's). This check catches an addition that changes the
// signature's size; a small field that fits in existing padding (a bool after node_consecutive) it
// does not.
static_assert(sizeof(call_signature) == 80, "call_signature changed: update choice_key_of");

inline choice_key choice_key_of(const call_signature& s, bool single_copy,
                                const selection_request& request, bool named) noexcept {
    const std::uint64_t flags =
        std::uint64_t{s.has_op} | std::uint64_t{s.commutative} << 1 |
        std::uint64_t{s.builtin_op} << 2 | std::uint64_t{s.in_place} << 3 |
        std::uint64_t{s.equal_counts} << 4 | std::uint64_t{s.has_hierarchy} << 5 |
        std::uint64_t{s.single_copy} << 6 | std::uint64_t{s.node_consecutive} << 7 |
        std::uint64_t{single_copy} << 8 | std::uint64_t{request.sub_call} << 9 |
        std::uint64_t{named} << 10 | std::uint64_t{request.on_fail.has_value()} << 11 |
        std::uint64_t(request.on_fail ? static_cast<unsigned>(*request.on_fail) : 0) << 12;
    return {.bytes = s.bytes,
            .count = s.count,
            .shape = static_cast<std::uint64_t>(s.kind) |
                     std::uint64_t{static_cast<std::uint32_t>(s.comm_size)} << 8 | flags << 40,
            .placement = std::uint64_t{static_cast<std::uint32_t>(s.ranks_per_node)} |
                         std::uint64_t{static_cast<std::uint32_t>(s.nodes)} << 32,
            .transport = s.transport.data(),
            .transport_length = s.transport.size()};
}

// A thread's last few choices for one argument type: a loop of identical
// calls (the usual shape of a program) is served without completing the
// signature or consulting selection. Each is keyed by the communicator's
// serial, which no other communicator of the process ever has, and by the
// token of the selection that chose, which a reload replaces. Constant-
// initialized and trivially destroyed: no thread_local guard.
template <class Args>
struct remembered_choice {
    std::uint64_t communicator = 0; // serial; 0: nothing remembered
    std::uintptr_t selection = 0;
    choice_key key;
    const algorithm<Args>* chosen = nullptr;

    [[gnu::always_inline]] bool holds_for(std::uint64_t serial, std::uintptr_t token,
                                          const choice_key& now, const selection_request& request,
                                          bool named_now) const {
        return communicator == serial && selection == token && key == now &&
               (!named_now || chosen->info.name == request.forced);
    }
};

// More than one, because loops alternate calls of one type: a composition's
// sub-calls run on other communicators than its own call (the hierarchical
// barrier's on the node's, inside a loop of world barriers), and a call that
// names its algorithm sits beside the program's other calls (a 2-rank barrier
// naming `dissemination` between tutti-bench's own barriers took 0.33-0.36 us
// against 0.26-0.28 unnamed: with one choice kept, both decided afresh every
// call). The slot found last is looked at first, so a loop of one call
// compares one key (callgrind, when the check was out of line: 144
// instructions a call in choose_phase, 137 with one slot); a new choice
// replaces the oldest.
template <class Args>
struct remembered_choices {
    static constexpr std::uint8_t slots = 4;
    remembered_choice<Args> slot[slots]{};
    std::uint8_t found_last = 0;
    std::uint8_t filled_next = 0;

    [[gnu::always_inline]] const algorithm<Args>* find(std::uint64_t serial, std::uintptr_t token,
                                                       const choice_key& now,
                                                       const selection_request& request,
                                                       bool named_now) {
        const auto& last = slot[found_last];
        if (last.holds_for(serial, token, now, request, named_now)) return last.chosen;
        return find_in_others(serial, token, now, request, named_now);
    }
    // Out of line: a loop of one call never gets here, and keeping the loop
    // out of find() keeps its check nearly as short as the one slot's was.
    [[gnu::noinline]] const algorithm<Args>*
    find_in_others(std::uint64_t serial, std::uintptr_t token, const choice_key& now,
                   const selection_request& request, bool named_now) {
        for (std::uint8_t at = 0; at < slots; ++at)
            if (at != found_last && slot[at].holds_for(serial, token, now, request, named_now)) {
                found_last = at;
                return slot[at].chosen;
            }
        return nullptr;
    }
    void remember(const remembered_choice<Args>& choice) {
        slot[filled_next] = choice;
        found_last = filled_next;
        filled_next = static_cast<std::uint8_t>((filled_next + 1) % slots);
    }
};

template <class Args>
inline constinit thread_local remembered_choices<Args> last_choices{};

} // namespace tutti::detail
