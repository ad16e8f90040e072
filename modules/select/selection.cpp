#include "select/selection.hpp"

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "core/error.hpp"

namespace tutti {

namespace select_detail {
// Generated from modules/select/trees/*.json by modules/select/embed_tree.py.
extern const std::string_view composition_tree_json;
extern const std::string_view pure_tree_json;
} // namespace select_detail

std::string_view to_string(fallback_mode m) noexcept {
    switch (m) {
    case fallback_mode::error:
        return "error";
    case fallback_mode::print:
        return "print";
    case fallback_mode::silent:
        return "silent";
    }
    return "unknown";
}

std::string_view builtin_tree_text(tree_role role) noexcept {
    return role == tree_role::composition ? select_detail::composition_tree_json
                                          : select_detail::pure_tree_json;
}

namespace {

constexpr auto collectives = all_collectives.size();

std::size_t index_of(collective c) noexcept {
    return static_cast<std::size_t>(c);
}

// TUTTI_ALL_REDUCE_ALGORITHM for all_reduce and "ALGORITHM".
std::string variable_name(collective c, std::string_view what) {
    std::string name = "TUTTI_";
    for (char ch : to_string(c))
        name += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    return name + "_" + std::string(what);
}

std::string environment(const std::string& name) {
    const char* value = std::getenv(name.c_str());
    return value ? std::string(value) : std::string();
}

bool is_composition(algorithm_kind k) noexcept {
    return k != algorithm_kind::pure;
}

// Everything selection reads once: the trees, the environment's overrides.
struct selection_state {
    decision_tree composition;
    decision_tree pure;
    std::array<std::string, collectives> forced_algorithm;   // empty: none
    std::array<std::string, collectives> forced_composition; // empty: none
    std::optional<fallback_mode> fallback;
    bool debug = false;
};

decision_tree load_tree(tree_role role, const char* variable) {
    const auto file = environment(variable);
    if (file.empty())
        return decision_tree::load(builtin_tree_text(role),
                                   fmt::format("built-in ({})", role == tree_role::composition
                                                                    ? "trees/composition.json"
                                                                    : "trees/selection.json"),
                                   role);
    std::ifstream in(file);
    if (!in)
        throw error(errc::invalid_argument,
                    fmt::format("{}={}: cannot open the file", variable, file));
    std::ostringstream text;
    text << in.rdbuf();
    return decision_tree::load(text.str(), fmt::format("{} ({})", file, variable), role);
}

std::string checked_override(collective c, std::string_view what, bool composition) {
    const auto variable = variable_name(c, what);
    auto value = environment(variable);
    if (value.empty() || value == "auto") return {};
    if (composition && value == flat_choice) return value;
    const auto* info = algorithms().find_info(c, value);
    if (!info)
        throw error(errc::unknown_algorithm,
                    fmt::format("{}={}: unknown {} algorithm '{}'; known: {}{}", variable, value,
                                to_string(c), value, algorithms().names(c),
                                composition ? ", flat" : ""));
    if (composition != is_composition(info->form))
        throw error(errc::invalid_argument,
                    fmt::format("{}={}: '{}' is a {}; {} names {}", variable, value, value,
                                to_string(info->form), variable,
                                composition ? "a composition (or flat)" : "a pure algorithm"));
    return value;
}

std::unique_ptr<selection_state> load_state() {
    auto s = std::make_unique<selection_state>();
    s->composition = load_tree(tree_role::composition, "TUTTI_COMPOSITION_FILE");
    s->pure = load_tree(tree_role::pure, "TUTTI_SELECTION_FILE");
    for (auto c : all_collectives) {
        s->forced_algorithm[index_of(c)] = checked_override(c, "ALGORITHM", false);
        s->forced_composition[index_of(c)] = checked_override(c, "COMPOSITION", true);
    }
    if (const auto mode = environment("TUTTI_COLL_FALLBACK"); !mode.empty()) {
        if (mode == "error")
            s->fallback = fallback_mode::error;
        else if (mode == "print")
            s->fallback = fallback_mode::print;
        else if (mode == "silent")
            s->fallback = fallback_mode::silent;
        else
            throw error(
                errc::invalid_argument,
                fmt::format("TUTTI_COLL_FALLBACK={}: expected error, print or silent", mode));
    }
    for (const char* name : {"TUTTI_SELECTION_DEBUG", "TUTTI_DEBUG"}) {
        const auto value = environment(name);
        if (!value.empty() && value != "0") s->debug = true;
    }
    return s;
}

// The current state is read on every call without a lock; replaced states
// stay alive until exit, as a call may still be reading one.
std::mutex state_mutex;
std::vector<std::unique_ptr<selection_state>> states;
std::atomic<const selection_state*> current{nullptr};
std::set<std::string> warned; // under state_mutex

const selection_state& state() {
    if (const auto* s = current.load(std::memory_order_acquire)) return *s;
    std::lock_guard lock(state_mutex);
    if (const auto* s = current.load(std::memory_order_relaxed)) return *s;
    states.push_back(load_state());
    current.store(states.back().get(), std::memory_order_release);
    return *states.back();
}

void warn_once(const std::string& message) {
    {
        std::lock_guard lock(state_mutex);
        if (!warned.insert(message).second) return;
    }
    std::fprintf(stderr, "tutti: %s\n", message.c_str());
}

const algorithm_info& known(collective c, std::string_view name) {
    const auto* info = algorithms().find_info(c, name);
    if (!info)
        throw error(errc::unknown_algorithm,
                    fmt::format("unknown {} algorithm '{}'; known: {}", to_string(c), name,
                                algorithms().names(c)));
    return *info;
}

// The last decision of this thread for each collective: a loop of identical
// calls (the usual shape of a program, often alternating collectives, as a
// barrier and the call it separates) is served by comparing signatures, not
// walking trees. Constant-initialized and trivially destroyed, so no
// thread_local guard.
struct cached_decision {
    const selection_state* state = nullptr;
    call_signature call;
    std::optional<fallback_mode> on_fail;
    bool sub_call = false;
    bool named = false; // request.forced was the chosen algorithm's name
    const algorithm_info* chosen = nullptr;
};
constexpr std::size_t cached_kinds = static_cast<std::size_t>(collective::split) + 1;
thread_local cached_decision last_decision[cached_kinds];

const algorithm_info& decide(const selection_state& s, const call_signature& call,
                             const selection_request& request, selection_explanation* why);

} // namespace

const algorithm_info& select_algorithm(const call_signature& call, const selection_request& request,
                                       selection_explanation* why) {
    const auto& s = state();
    if (why) return decide(s, call, request, why);
    const bool named = !request.forced.empty() && request.forced != "auto";
    const auto kind = static_cast<std::size_t>(call.kind);
    if (kind >= cached_kinds) return decide(s, call, request, nullptr);
    auto& last = last_decision[kind];
    if (last.state == &s && last.chosen && last.named == named &&
        last.sub_call == request.sub_call && last.on_fail == request.on_fail &&
        (!named || last.chosen->name == request.forced) && last.call == call)
        return *last.chosen;
    const auto& chosen = decide(s, call, request, nullptr);
    last = {&s,     call, request.on_fail, request.sub_call, named && chosen.name == request.forced,
            &chosen};
    if (named && !last.named) last.chosen = nullptr; // a fallback: decide again next time
    return chosen;
}

namespace {

const algorithm_info& decide(const selection_state& s, const call_signature& call,
                             const selection_request& request, selection_explanation* why) {
    const auto k = call.kind;
    if (why) {
        why->call = call;
        why->composition_tree = s.composition.source();
        why->pure_tree = s.pure.source();
        for (const auto* info : algorithms().list(k))
            why->candidates.push_back({info->name, info->form, info->check(call)});
    }
    const auto mode =
        request.on_fail ? *request.on_fail : s.fallback.value_or(fallback_mode::error);
    auto chosen = [&](const algorithm_info& info) -> const algorithm_info& {
        if (why) {
            why->chosen = info.name;
            why->chosen_form = info.form;
        }
        return info;
    };
    // A forced choice that cannot run: an error, or a note and on to `auto`.
    auto fall_back = [&](const std::string& what) {
        if (mode == fallback_mode::error)
            throw error(errc::restriction_violated,
                        fmt::format("{} (fallback mode error; with tutti::fallback or "
                                    "TUTTI_COLL_FALLBACK=print or silent it falls back to the "
                                    "automatic choice)",
                                    what));
        if (mode == fallback_mode::print)
            warn_once(fmt::format("{}; falling back to the automatic choice", what));
        if (why) why->notes.push_back(fmt::format("{}; fallback ({})", what, to_string(mode)));
    };

    bool environment_applies = !request.sub_call;
    if (!request.forced.empty() && request.forced != "auto") {
        const auto& info = known(k, request.forced);
        auto failure = info.check(call);
        if (!failure) {
            if (why) why->notes.push_back(fmt::format("'{}' named in code", info.name));
            return chosen(info);
        }
        fall_back(fmt::format("{} algorithm '{}' cannot run this call: {}", to_string(k),
                              request.forced, *failure));
        environment_applies = false; // the fallback is `auto`
    }

    bool composition_tree = true;
    if (environment_applies) {
        const auto& composition = s.forced_composition[index_of(k)];
        if (composition == flat_choice) {
            composition_tree = false;
            if (why) why->notes.push_back(fmt::format("{}=flat", variable_name(k, "COMPOSITION")));
        } else if (!composition.empty()) {
            const auto& info = known(k, composition);
            auto failure = info.check(call);
            if (!failure) {
                if (why)
                    why->notes.push_back(
                        fmt::format("{}={}", variable_name(k, "COMPOSITION"), composition));
                return chosen(info);
            }
            fall_back(fmt::format("{}={} cannot run this call: {}", variable_name(k, "COMPOSITION"),
                                  composition, *failure));
        }
        const auto& algorithm = s.forced_algorithm[index_of(k)];
        if (!algorithm.empty()) {
            const auto& info = known(k, algorithm);
            auto failure = info.check(call);
            if (!failure) {
                if (why)
                    why->notes.push_back(
                        fmt::format("{}={}", variable_name(k, "ALGORITHM"), algorithm));
                return chosen(info);
            }
            fall_back(fmt::format("{}={} cannot run this call: {}", variable_name(k, "ALGORITHM"),
                                  algorithm, *failure));
        }
    } else if (request.sub_call && why) {
        why->notes.push_back("a composition's sub-call: environment overrides do not apply");
    }

    // The trees hold their leaves' algorithms, resolved and validated at load.
    if (composition_tree) {
        const auto* info = s.composition.choose(call, why ? &why->composition_path : nullptr);
        if (why) why->composition = info ? info->name : std::string(flat_choice);
        if (info) return chosen(*info);
    }
    return chosen(*s.pure.choose(call, why ? &why->pure_path : nullptr));
}

} // namespace

selection_explanation explain(const call_signature& call, const selection_request& request) {
    selection_explanation why;
    select_algorithm(call, request, &why);
    return why;
}

const decision_tree& composition_tree() {
    return state().composition;
}

const decision_tree& pure_tree() {
    return state().pure;
}

void reload_selection() {
    std::unique_ptr<selection_state> fresh;
    try {
        fresh = load_state();
    } catch (...) {
        // The next selection loads again and reports the same error, rather
        // than going on with settings the environment no longer says.
        current.store(nullptr, std::memory_order_release);
        throw;
    }
    std::lock_guard lock(state_mutex);
    states.push_back(std::move(fresh));
    current.store(states.back().get(), std::memory_order_release);
    warned.clear();
}

bool selection_debug() {
    return state().debug;
}

std::uintptr_t selection_token() noexcept {
    // Replaced states stay alive until exit: an address is never reused.
    const auto* s = current.load(std::memory_order_acquire);
    return s && !s->debug ? reinterpret_cast<std::uintptr_t>(s) : 0;
}

void print_explanation_once(const selection_explanation& why) {
    const auto text = why.text();
    {
        std::lock_guard lock(state_mutex);
        if (!warned.insert(text).second) return;
    }
    std::fprintf(stderr, "tutti: selection: %s", text.c_str());
}

std::string selection_explanation::text() const {
    std::string out;
    auto line = [&out](const std::string& s) {
        out += s;
        out += '\n';
    };
    line(fmt::format(
        "{} on {} ranks, {} bytes{}{}{}, transport {}, {} node(s) of {} rank(s){}{}{}{}{}",
        to_string(call.kind), call.comm_size, call.bytes,
        call.has_op ? (call.commutative ? ", commutative op" : ", non-commutative op") : "",
        call.has_op && !call.builtin_op ? " (user function)" : "",
        call.in_place ? ", in place" : "", call.transport.empty() ? "unknown" : call.transport,
        call.nodes > 0 ? call.nodes : 1,
        call.ranks_per_node > 0 ? call.ranks_per_node : call.comm_size,
        call.has_hierarchy ? ", hierarchy" : ", no hierarchy",
        call.line_ns
            ? fmt::format(", a line takes {} ns there and back between cores", call.line_ns)
            : "",
        call.readv_percent
            ? fmt::format(", process_vm_readv takes {} % of the cells' time", call.readv_percent)
            : "",
        call.slow_single_copy ? ", single copy judged slow" : "",
        call.ranks_per_core > 1    ? fmt::format(", {} ranks to a core", call.ranks_per_core)
        : call.ranks_per_core == 1 ? ", a core for each rank"
                                   : ""));
    for (const auto& note : notes)
        line("  override: " + note);
    auto path = [&](const char* title, const std::string& source,
                    const std::vector<decision_tree::step>& steps) {
        if (steps.empty()) return;
        line(fmt::format("  {} tree, {}:", title, source));
        for (const auto& step : steps)
            if (step.reason == "leaf")
                line(fmt::format("    at {}: leaf {}", step.pointer, step.branch));
            else
                line(fmt::format("    at {}: {} -> {}", step.pointer, step.reason, step.branch));
    };
    path("composition", composition_tree, composition_path);
    path("pure", pure_tree, pure_path);
    line(fmt::format("  chosen: {} ({})", chosen, to_string(chosen_form)));
    for (const auto& c : candidates)
        if (c.failure)
            line(fmt::format("  rejected: {} ({}): {}", c.name, to_string(c.form), *c.failure));
        else if (c.name != chosen)
            line(fmt::format("  could run: {} ({})", c.name, to_string(c.form)));
    return out;
}

} // namespace tutti
