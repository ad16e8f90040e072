// Selection: which algorithm runs a call. After the MPICH plan:
//
//   1. an algorithm named in code (tutti::use("ring")) runs if its
//      restrictions hold;
//   2. for a user's call (not a composition's sub-call), the environment:
//      TUTTI_<COLLECTIVE>_COMPOSITION names a composition (or "flat"), and
//      TUTTI_<COLLECTIVE>_ALGORITHM a pure algorithm; naming only the
//      algorithm skips the composition tree so that it runs at the top;
//   3. otherwise `auto`: the composition tree chooses a composition or
//      "flat", and for "flat" the pure tree chooses a pure algorithm.
//
// A forced choice whose restriction fails is an error, or with the fallback
// mode print / silent (tutti::fallback per call, else TUTTI_COLL_FALLBACK)
// falls back to `auto` with or without a warning. A composition's
// sub-collectives are sub-calls: they never see the environment's
// overrides, so forcing "ring" for all_reduce does not reach the all_reduce
// a hierarchical composition runs among node leaders.
//
// The trees are the built-in ones (modules/select/trees/*.json, compiled in)
// unless TUTTI_SELECTION_FILE (pure) or TUTTI_COMPOSITION_FILE names a file.
// The environment is read once, at the first selection; reload_selection()
// reads it again. TUTTI_SELECTION_DEBUG=1 (or TUTTI_DEBUG=1) prints each
// distinct decision's explanation on stderr.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/catalog.hpp"
#include "select/tree.hpp"

namespace tutti {

// What happens when a forced algorithm's restriction fails.
enum class fallback_mode {
    error,  // throw errc::restriction_violated
    print,  // warn on stderr, then choose as `auto` would
    silent, // choose as `auto` would
};

std::string_view to_string(fallback_mode m) noexcept;

// A call option: co_await all_reduce(comm, v, sum, use("rabenseifner"),
// fallback(fallback_mode::silent)).
struct fallback {
    fallback_mode mode;
    explicit fallback(fallback_mode m) : mode(m) {}
};

// How a call asks to be served.
struct selection_request {
    std::string_view forced;              // named in code; empty or "auto": none
    std::optional<fallback_mode> on_fail; // empty: TUTTI_COLL_FALLBACK, else error
    bool sub_call = false;                // issued by a composition: no environment overrides
};

// A decision and how it came about, for tutti-info --explain and debugging.
struct selection_explanation {
    struct candidate {
        std::string name;
        algorithm_kind form = algorithm_kind::pure;
        std::optional<std::string> failure; // the restriction that fails, if one does
    };

    call_signature call;
    std::vector<std::string> notes; // overrides applied, fallbacks taken
    std::string composition_tree;   // the trees' sources
    std::string pure_tree;
    std::vector<decision_tree::step> composition_path; // empty when the tree was not asked
    std::vector<decision_tree::step> pure_path;
    std::string composition; // the composition tree's leaf, or empty
    std::string chosen;      // the algorithm that runs
    algorithm_kind chosen_form = algorithm_kind::pure;
    std::vector<candidate> candidates; // every algorithm of the collective

    // Several lines of plain text.
    std::string text() const;
};

// Chooses the algorithm for a call; fills `why` when given. Throws
// tutti::error: unknown_algorithm for a name no algorithm of the collective
// has, restriction_violated for a forced algorithm that cannot run here in
// fallback mode error, and any error of loading the trees or reading the
// environment (invalid_argument, naming the file or variable).
const algorithm_info& select_algorithm(const call_signature& call, const selection_request& request,
                                       selection_explanation* why = nullptr);

// As select_algorithm, with the explanation.
selection_explanation explain(const call_signature& call, const selection_request& request = {});

// The trees in use (loading them on first use).
const decision_tree& composition_tree();
const decision_tree& pure_tree();

// The built-in trees' JSON text.
std::string_view builtin_tree_text(tree_role role) noexcept;

// Reads the environment and the tree files again (for tests and tools that
// change them); the decisions of calls already running are not affected. On
// an error it throws, and so does every selection until one loads.
void reload_selection();

// Whether TUTTI_SELECTION_DEBUG or TUTTI_DEBUG asks for explanations.
bool selection_debug();
// The selection in use, as a token that changes whenever it is replaced
// (reload_selection): a decision remembered under one token holds while it
// lasts. 0 while none is loaded, or while decisions are explained (each
// must be made, to be printed): then nothing may be remembered.
std::uintptr_t selection_token() noexcept;
// Prints the explanation on stderr unless the same text was printed before.
void print_explanation_once(const selection_explanation& why);

} // namespace tutti
