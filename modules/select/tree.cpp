#include "select/tree.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <map>
#include <optional>
#include <ranges>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "algorithms/catalog.hpp"
#include "core/error.hpp"

namespace tutti {

std::string_view to_string(tree_role role) noexcept {
    return role == tree_role::composition ? "composition" : "pure";
}

namespace {

constexpr std::uint64_t unbounded = std::numeric_limits<std::uint64_t>::max();

std::size_t index_of(collective c) noexcept {
    return static_cast<std::size_t>(c);
}

// RFC 6901: '~' and '/' inside a key are escaped.
std::string pointer_step(const std::string& pointer, std::string_view key) {
    std::string out = pointer + "/";
    for (char c : key) {
        if (c == '~')
            out += "~0";
        else if (c == '/')
            out += "~1";
        else
            out += c;
    }
    return out;
}

bool is_composition(algorithm_kind k) noexcept {
    return k != algorithm_kind::pure;
}

// "16384", "16K", "1M", "2G" (binary multiples); nullopt when malformed.
std::optional<std::uint64_t> parse_amount(std::string_view text) {
    std::uint64_t scale = 1;
    if (!text.empty()) {
        switch (text.back()) {
        case 'k':
        case 'K':
            scale = 1024;
            break;
        case 'M':
            scale = 1024 * 1024;
            break;
        case 'G':
            scale = 1024 * 1024 * 1024;
            break;
        default:
            break;
        }
        if (scale != 1) text.remove_suffix(1);
    }
    std::uint64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
    if (value > unbounded / scale) return std::nullopt;
    return value * scale;
}

} // namespace

struct decision_tree::facts {
    std::vector<std::pair<restriction_kind, bool>> flags;
    std::uint64_t size_low = 1; // communicator sizes the path allows: [low, high]
    std::uint64_t size_high = unbounded;
    bool under_threshold = false;

    std::optional<bool> flag(restriction_kind k) const {
        for (auto [kind, value] : flags)
            if (kind == k) return value;
        return std::nullopt;
    }

    bool guarantees(restriction r) const {
        switch (r.kind) {
        case restriction_kind::min_size:
            return size_low >= static_cast<std::uint64_t>(r.bound);
        case restriction_kind::max_size:
            return size_high <= static_cast<std::uint64_t>(r.bound);
        case restriction_kind::power_of_two:
            if (size_high <= 2) return true; // 1 and 2 are powers of two
            break;
        case restriction_kind::even_size:
            if (size_low == 2 && size_high == 2) return true;
            // A power of two above 1 is even.
            if (size_low >= 2 && flag(restriction_kind::power_of_two) == true) return true;
            break;
        case restriction_kind::in_place:
            if (flag(restriction_kind::not_in_place) == false) return true;
            break;
        case restriction_kind::not_in_place:
            if (flag(restriction_kind::in_place) == false) return true;
            break;
        default:
            break;
        }
        return flag(r.kind) == true;
    }
};

class decision_tree::parser {
public:
    parser(decision_tree& tree) : tree_(tree) {}

    [[noreturn]] void fail(const std::string& pointer, const std::string& what,
                           errc code = errc::invalid_argument) const {
        // Inside a subtree, the same node may be right on one path and wrong
        // on another: name the uses that led here, innermost first.
        std::string uses;
        for (const auto& [name, used_at] : std::views::reverse(expanding_))
            uses += fmt::format("{} '@{}' used at {}", uses.empty() ? " (subtree" : ", subtree",
                                name, used_at);
        if (!uses.empty()) uses += ")";
        throw error(code,
                    fmt::format("{} {} tree: at {}: {}{}", tree_.source_, to_string(tree_.role_),
                                pointer.empty() ? "/" : pointer, what, uses));
    }

    // The "subtrees" section, read before any collective's tree refers to it.
    void load_subtrees(const nlohmann::json& file) {
        if (!file.is_object()) return; // load_section names the problem
        const auto found = file.find(subtrees_key);
        if (found == file.end()) return;
        const std::string pointer = subtree_pointer("");
        if (!found->is_object())
            fail(pointer, "expected an object of name: node entries (used as \"@name\")");
        for (const auto& [name, node] : found->items()) {
            const bool well_formed = !name.empty() && std::ranges::all_of(name, [](char c) {
                return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' ||
                       c == '.';
            });
            if (!well_formed)
                fail(subtree_pointer(name),
                     "a subtree's name is letters, digits, '_', '-' and '.'");
            subtrees_.emplace(name, &node);
        }
    }

    void load_section(const nlohmann::json& section, const std::string& pointer,
                      std::array<int, all_collectives.size()>& roots, bool complete) {
        if (!section.is_object()) fail(pointer, "expected an object of collective: tree entries");
        for (const auto& [key, value] : section.items()) {
            const auto here = pointer_step(pointer, key);
            if (key == subtrees_key) {
                if (!complete) fail(here, "subtrees are defined at the top level of the file only");
                continue;
            }
            if (key.starts_with("transport=")) {
                if (!complete) fail(here, "a transport section cannot hold another one");
                const auto name = key.substr(std::string_view("transport=").size());
                if (std::ranges::find(tree_transports, name) == tree_transports.end())
                    fail(here, fmt::format("unknown transport '{}'; known: {}", name,
                                           fmt::join(tree_transports, ", ")));
                auto& section = tree_.transport_roots_.emplace_back();
                section.first = name;
                section.second.fill(-1);
                load_section(value, here, section.second, false);
                continue;
            }
            const auto kind = collective_from_string(key);
            if (!kind)
                fail(here, fmt::format(
                               "unknown collective '{}'; known: {}", key,
                               fmt::join(all_collectives | std::views::transform([](collective c) {
                                             return to_string(c);
                                         }),
                                         ", ")));
            kind_ = *kind;
            roots[index_of(*kind)] = parse_node(value, here, facts{});
        }
        if (!complete) return;
        for (auto c : all_collectives)
            if (roots[index_of(c)] < 0)
                fail(pointer, fmt::format("missing region: no tree for collective '{}' (every "
                                          "collective needs one)",
                                          to_string(c)));
    }

private:
    int parse_node(const nlohmann::json& json, const std::string& pointer, facts known) {
        if (json.is_string() && json.get_ref<const std::string&>().starts_with('@'))
            return parse_subtree_use(json.get<std::string>().substr(1), pointer, known);
        if (json.is_string()) return parse_leaf(json.get<std::string>(), pointer, known);
        if (!json.is_object() || json.empty())
            fail(pointer, "expected an algorithm name or an object of conditions");

        node n;
        n.pointer = pointer;
        std::string name;
        for (const auto& [key, value] : json.items()) {
            const auto [var_name, b] = parse_key(key, pointer);
            if (name.empty()) {
                name = var_name;
                set_variable(n, name, pointer_step(pointer, key));
            } else if (var_name != name) {
                fail(pointer_step(pointer, key),
                     fmt::format("one node tests one variable, but this one tests '{}' and '{}'",
                                 name, var_name));
            }
            n.branches.push_back(b);
        }
        check_branches(n, name);

        const bool threshold = n.var != variable::flag && n.var != variable::transport;
        if (!threshold && known.under_threshold)
            fail(pointer, fmt::format("the discrete condition '{}' is under a threshold; test "
                                      "discrete conditions first, thresholds below them",
                                      name));
        const int self = static_cast<int>(tree_.nodes_.size());
        tree_.nodes_.push_back(n);

        std::uint64_t previous = 0;
        for (std::size_t i = 0; i < n.branches.size(); ++i) {
            const auto& b = n.branches[i];
            facts below = known;
            if (n.var == variable::flag && !b.any)
                below.flags.emplace_back(n.flag, b.value == "yes");
            if (threshold) {
                below.under_threshold = true;
                if (n.var == variable::comm_size) {
                    below.size_low = std::max(below.size_low, b.any || i > 0 ? previous + 1 : 1);
                    if (!b.any) below.size_high = std::min(below.size_high, b.upper);
                }
                previous = b.upper;
            }
            const int child = parse_node(json.at(b.key), pointer_step(pointer, b.key), below);
            auto& parsed = tree_.nodes_[static_cast<std::size_t>(self)];
            parsed.branches[i].child = child;
            if (b.value == "yes" || (b.any && parsed.if_yes < 0)) parsed.if_yes = child;
            if (b.value == "no" || (b.any && parsed.if_no < 0)) parsed.if_no = child;
        }
        return self;
    }

    std::pair<std::string, branch> parse_key(const std::string& key, const std::string& pointer) {
        branch b;
        b.key = key;
        if (const auto at = key.find("<="); at != std::string::npos) {
            const auto amount = parse_amount(std::string_view(key).substr(at + 2));
            if (!amount)
                fail(pointer_step(pointer, key),
                     "a threshold must be a whole number, optionally with K, M or G");
            b.upper = *amount;
            return {key.substr(0, at), b};
        }
        const auto at = key.find('=');
        if (at == std::string::npos || at == 0)
            fail(pointer_step(pointer, key),
                 "a condition is 'name=value' (discrete) or 'name<=number' (threshold)");
        b.value = key.substr(at + 1);
        b.any = b.value == "any";
        return {key.substr(0, at), b};
    }

    void set_variable(node& n, const std::string& name, const std::string& pointer) {
        static const std::map<std::string, variable, std::less<>> thresholds = {
            {"comm_size", variable::comm_size},
            {"bytes", variable::bytes},
            {"avg_bytes", variable::avg_bytes},
            {"ranks_per_node", variable::ranks_per_node},
            {"nodes", variable::nodes},
            {"line_ns", variable::line_ns},
            {"readv_percent", variable::readv_percent},
            {"ranks_per_core", variable::ranks_per_core},
        };
        if (name == "transport") {
            n.var = variable::transport;
        } else if (auto t = thresholds.find(name); t != thresholds.end()) {
            n.var = t->second;
            if ((n.var == variable::bytes || n.var == variable::avg_bytes) && !call_has_size(kind_))
                fail(pointer, fmt::format("'{}' never applies to {}: its calls carry no size ({})",
                                          name, to_string(kind_), why_call_has_no_size(kind_)));
        } else if (auto r = restriction_from_string(name); r && is_flag(*r)) {
            n.var = variable::flag;
            n.flag = *r;
        } else {
            fail(pointer,
                 fmt::format("unknown condition '{}'; discrete: transport or a "
                             "restriction ({}); thresholds: comm_size, bytes, avg_bytes, "
                             "ranks_per_node, nodes, line_ns, readv_percent, ranks_per_core",
                             name, flag_names()));
        }
    }

    static std::string flag_names() {
        std::string out;
        for (auto k : all_restriction_kinds)
            if (is_flag(k)) out += (out.empty() ? "" : ", ") + std::string(to_string(k));
        return out;
    }

    void check_branches(node& n, const std::string& name) {
        auto& bs = n.branches;
        const auto any = std::ranges::count_if(bs, [](const branch& b) { return b.any; });
        for (const auto& b : bs) {
            const auto here = pointer_step(n.pointer, b.key);
            const bool threshold_key = b.value.empty() && !b.any;
            if (n.var == variable::flag || n.var == variable::transport) {
                if (threshold_key)
                    fail(here, fmt::format("'{}' is discrete: write {}=value", name, name));
                if (n.var == variable::flag && !b.any && b.value != "yes" && b.value != "no")
                    fail(here, fmt::format("'{}' is yes, no or any", name));
                if (n.var == variable::transport && !b.any &&
                    std::ranges::find(tree_transports, b.value) == tree_transports.end())
                    fail(here, fmt::format("unknown transport '{}'; known: {}", b.value,
                                           fmt::join(tree_transports, ", ")));
            } else if (!threshold_key && !b.any) {
                fail(here, fmt::format("'{}' is a threshold: write {}<=number or {}=any", name,
                                       name, name));
            }
        }
        if (n.var == variable::flag) {
            const bool yes =
                std::ranges::any_of(bs, [](const branch& b) { return b.value == "yes"; });
            const bool no =
                std::ranges::any_of(bs, [](const branch& b) { return b.value == "no"; });
            if (!any && !(yes && no))
                fail(n.pointer, fmt::format("missing region: '{}' needs both {}=yes and {}=no, "
                                            "or {}=any",
                                            name, name, name, name));
        } else if (!any) {
            fail(n.pointer, fmt::format("missing region: '{}' needs a {}=any branch for the "
                                        "cases the others leave",
                                        name, name));
        }
        // Thresholds ascending whatever the file's order; "any" last.
        std::ranges::sort(bs, [](const branch& a, const branch& b) {
            if (a.any != b.any) return b.any;
            return a.upper < b.upper;
        });
        for (std::size_t i = 1; i < bs.size(); ++i)
            if (!bs[i].any && bs[i].value == bs[i - 1].value && bs[i].upper == bs[i - 1].upper)
                fail(n.pointer,
                     fmt::format("'{}' and '{}' are the same region", bs[i - 1].key, bs[i].key));
    }

    // A use of a shared subtree: its nodes are parsed again for this use,
    // under this path's facts and collective, so each use is checked (and
    // walked) as if the subtree were written here; only their pointers name
    // the definition.
    int parse_subtree_use(const std::string& name, const std::string& pointer, const facts& known) {
        const auto found = subtrees_.find(name);
        if (found == subtrees_.end()) {
            std::string defined;
            for (const auto& entry : subtrees_)
                defined += fmt::format("{}@{}", defined.empty() ? "" : ", ", entry.first);
            fail(pointer, fmt::format("unknown subtree '@{}'; {}", name,
                                      defined.empty() ? "the file defines none (under \"subtrees\")"
                                                      : "defined: " + defined));
        }
        if (std::ranges::any_of(expanding_, [&](const auto& use) { return use.first == name; }))
            fail(pointer, fmt::format("subtree '@{}' refers to itself", name));

        node n;
        n.pointer = pointer;
        n.var = variable::subtree;
        branch b;
        b.key = "@" + name;
        n.branches.push_back(b);
        const int self = static_cast<int>(tree_.nodes_.size());
        tree_.nodes_.push_back(n);

        expanding_.emplace_back(name, pointer);
        const int child = parse_node(*found->second, subtree_pointer(name), known);
        expanding_.pop_back();
        tree_.nodes_[static_cast<std::size_t>(self)].branches.front().child = child;
        return self;
    }

    int parse_leaf(const std::string& name, const std::string& pointer, const facts& known) {
        node n;
        n.pointer = pointer;
        n.leaf = name;
        const algorithm_info* found = nullptr;
        if (name == flat_choice) {
            if (tree_.role_ != tree_role::composition)
                fail(pointer, "'flat' belongs in the composition tree; name a pure algorithm");
        } else {
            found = algorithms().find_info(kind_, name);
            if (!found)
                fail(pointer,
                     fmt::format("unknown {} algorithm '{}'; known: {}", to_string(kind_), name,
                                 algorithms().names(kind_)),
                     errc::unknown_algorithm);
            if (tree_.role_ == tree_role::pure && is_composition(found->form))
                fail(pointer, fmt::format("'{}' is a {}; the pure tree names pure algorithms "
                                          "(put it in the composition tree)",
                                          name, to_string(found->form)));
            if (tree_.role_ == tree_role::composition && !is_composition(found->form))
                fail(pointer, fmt::format("'{}' is a pure algorithm; the composition tree names "
                                          "compositions or 'flat'",
                                          name));
            for (auto r : found->restrictions)
                if (!known.guarantees(r))
                    fail(pointer,
                         fmt::format("{} algorithm '{}' has restriction {}, which the conditions "
                                     "on its path do not guarantee{}",
                                     to_string(kind_), name, to_string(r), hint(r)));
        }
        n.info = found;
        tree_.nodes_.push_back(n);
        return static_cast<int>(tree_.nodes_.size()) - 1;
    }

    static std::string hint(restriction r) {
        switch (r.kind) {
        case restriction_kind::min_size:
            return fmt::format(" (put it where comm_size is at least {})", r.bound);
        case restriction_kind::max_size:
            return fmt::format(" (put it under comm_size<={})", r.bound);
        default:
            return fmt::format(" (put it under \"{}=yes\")", to_string(r.kind));
        }
    }

    static constexpr std::string_view subtrees_key = "subtrees";
    // "/subtrees/name", or "/subtrees" for the section itself.
    static std::string subtree_pointer(std::string_view name) {
        const auto section = pointer_step("", subtrees_key);
        return name.empty() ? section : pointer_step(section, name);
    }

    decision_tree& tree_;
    collective kind_ = collective::barrier;
    // A subtree no collective uses is never checked: an edited tree may
    // leave one behind, and its leaves mean nothing without a collective.
    std::map<std::string, const nlohmann::json*, std::less<>> subtrees_;
    std::vector<std::pair<std::string, std::string>> expanding_; // (name, used at), outermost first
};

decision_tree decision_tree::load(std::string_view text, std::string source, tree_role role) {
    decision_tree tree;
    tree.source_ = std::move(source);
    tree.text_ = std::string(text);
    tree.role_ = role;
    tree.roots_.fill(-1);
    parser p(tree);
    nlohmann::json json;
    try {
        json = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        p.fail("", fmt::format("malformed JSON: {}", e.what()));
    }
    p.load_subtrees(json);
    p.load_section(json, "", tree.roots_, true);
    return tree;
}

std::uint64_t decision_tree::value_of(variable v, const call_signature& call) noexcept {
    const auto size = static_cast<std::uint64_t>(std::max(call.comm_size, 1));
    switch (v) {
    case variable::comm_size:
        return size;
    case variable::bytes:
        return call.bytes;
    case variable::avg_bytes:
        return call.bytes / size;
    case variable::ranks_per_node:
        return call.ranks_per_node > 0 ? static_cast<std::uint64_t>(call.ranks_per_node) : size;
    case variable::nodes:
        return call.nodes > 0 ? static_cast<std::uint64_t>(call.nodes) : 1;
    case variable::line_ns:
        return call.line_ns;
    case variable::readv_percent:
        return call.readv_percent;
    case variable::ranks_per_core:
        return call.ranks_per_core;
    case variable::flag:
    case variable::transport:
    case variable::subtree:
        break;
    }
    return 0;
}

std::string_view decision_tree::walk(const call_signature& call, std::vector<step>* path) const {
    return leaf_of(call, path).leaf;
}

const algorithm_info* decision_tree::choose(const call_signature& call,
                                            std::vector<step>* path) const {
    return leaf_of(call, path).info;
}

// Called on every collective call: no allocation and no lock unless a path
// is asked for.
const decision_tree::node& decision_tree::leaf_of(const call_signature& call,
                                                  std::vector<step>* path) const {
    int at = roots_[index_of(call.kind)];
    for (const auto& [name, roots] : transport_roots_)
        if (name == call.transport && roots[index_of(call.kind)] >= 0)
            at = roots[index_of(call.kind)];
    for (;;) {
        const auto& n = nodes_[static_cast<std::size_t>(at)];
        if (!n.leaf.empty()) {
            if (path) path->push_back({n.pointer, n.leaf, "leaf"});
            return n;
        }
        if (n.var == variable::flag) {
            const bool yes = holds(n.flag, call);
            at = yes ? n.if_yes : n.if_no;
            if (path)
                for (const auto& b : n.branches)
                    if (b.child == at) {
                        path->push_back(
                            {n.pointer, b.key,
                             fmt::format("{} {}", to_string(n.flag), yes ? "holds" : "fails")});
                        break;
                    }
            continue;
        }
        if (n.var == variable::subtree) {
            const auto& use = n.branches.front();
            if (path)
                path->push_back({n.pointer, use.key,
                                 fmt::format("shared subtree {}",
                                             nodes_[static_cast<std::size_t>(use.child)].pointer)});
            at = use.child;
            continue;
        }
        const branch* taken = nullptr;
        if (n.var == variable::transport) {
            for (const auto& b : n.branches)
                if (b.value == call.transport || (b.any && !taken)) taken = &b;
            if (path)
                path->push_back({n.pointer, taken->key,
                                 fmt::format("transport is {}",
                                             call.transport.empty() ? "unknown" : call.transport)});
        } else {
            const auto value = value_of(n.var, call);
            for (const auto& b : n.branches)
                if (b.any || value <= b.upper) {
                    taken = &b;
                    break;
                }
            if (path) {
                const auto var = taken->key.substr(0, taken->key.find_first_of("<="));
                path->push_back({n.pointer, taken->key,
                                 taken->any
                                     ? fmt::format("{} = {}", var, value)
                                     : fmt::format("{} = {} <= {}", var, value, taken->upper)});
            }
        }
        at = taken->child;
    }
}

} // namespace tutti
