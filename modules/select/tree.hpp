// A decision tree for `auto`, loaded from JSON and validated against the
// catalog, after the MPICH plan: one tree chooses among compositions (or
// "flat"), the other among pure algorithms. Each node tests one variable:
// first discrete conditions (a restriction holds or not, the transport's
// kind), then thresholds (communicator size, bytes, average bytes per rank,
// ranks per node, node count, line_ns: how long a cache line takes there
// and back between the ranks' cores, readv_percent: process_vm_readv's time
// against the shared-memory cells', ranks_per_core: how many ranks each core
// runs, all three 0 when unknown), down to a leaf that names an algorithm.
//
//   "all_reduce": {
//     "commutative_op=yes": { "bytes<=16K": "recursive_doubling", "bytes=any": "ring" },
//     "commutative_op=no": "recursive_doubling"
//   }
//
// Loading checks everything a walk relies on, so a walk cannot fail: every
// collective has a tree, every node covers all cases (an "=any" branch, or
// both yes and no), names are known, and each leaf's restrictions are
// guaranteed by the conditions on its path. A file may add per-transport
// trees in "transport=tcp": { collective: tree, ... } sections, which take
// precedence over the general tree for calls on that transport. A node used
// in several places is written once under "subtrees" and named by "@name"
// wherever a node may stand; each use is validated against the conditions
// on its own path, so one subtree can serve paths (and collectives) whose
// guarantees differ, as long as each guarantees what its leaves need.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "algorithms/restriction.hpp"
#include "core/collective.hpp"

namespace tutti {

struct algorithm_info;

enum class tree_role { composition, pure };

std::string_view to_string(tree_role role) noexcept;

// What a composition-tree leaf says when no composition fits: go on to the
// pure-algorithm tree.
inline constexpr std::string_view flat_choice = "flat";

// The transport names a tree may test; a transport of another name takes
// the "transport=any" branch.
inline constexpr std::array<std::string_view, 5> tree_transports = {"inproc", "shm", "tcp",
                                                                    "fabric", "shm+tcp"};

class decision_tree {
public:
    // One node passed on the way to a leaf: its JSON pointer, the branch
    // taken and why ("bytes = 8 <= 16384").
    struct step {
        std::string pointer;
        std::string branch;
        std::string reason;
    };

    // Parses and validates `text`; `source` names it in errors (a file name
    // or "built-in composition tree"). Throws tutti::error (invalid_argument,
    // or unknown_algorithm for an unknown name) naming `source` and the JSON
    // pointer of the offending node.
    static decision_tree load(std::string_view text, std::string source, tree_role role);

    // The leaf for this call; appends the nodes passed to `path` when given.
    std::string_view walk(const call_signature& call, std::vector<step>* path = nullptr) const;
    // The same walk, as the algorithm it names: nullptr for "flat".
    const algorithm_info* choose(const call_signature& call,
                                 std::vector<step>* path = nullptr) const;

    const std::string& source() const noexcept { return source_; }
    tree_role role() const noexcept { return role_; }
    const std::string& text() const noexcept { return text_; }

private:
    enum class variable : std::uint8_t {
        flag,
        transport,
        comm_size,
        bytes,
        avg_bytes,
        ranks_per_node,
        nodes,
        line_ns,
        readv_percent,
        ranks_per_core,
        subtree // "@name": one branch, to the named subtree's nodes for this use
    };

    struct branch {
        std::string key;         // as written, e.g. "bytes<=16384"
        std::string value;       // a discrete branch's value: "yes", "no", "shm"
        bool any = false;        // "=any": everything the others leave
        std::uint64_t upper = 0; // a threshold branch covers (previous upper, upper]
        int child = -1;
    };

    struct node {
        std::string pointer;
        std::string leaf;                     // non-empty for a leaf
        const algorithm_info* info = nullptr; // the leaf's algorithm (nullptr: flat)
        int if_yes = -1, if_no = -1;          // a flag node's children, resolved
        variable var = variable::flag;
        restriction_kind flag = restriction_kind::power_of_two;
        std::vector<branch> branches; // thresholds ascending, "any" last
    };

    struct facts; // what the conditions on a path guarantee, for validation
    class parser;

    static std::uint64_t value_of(variable v, const call_signature& call) noexcept;
    const node& leaf_of(const call_signature& call, std::vector<step>* path) const;

    std::string source_;
    std::string text_;
    tree_role role_ = tree_role::pure;
    std::vector<node> nodes_;
    std::array<int, all_collectives.size()> roots_{};
    // Per-transport sections; a few at most, so a vector searched by == (which
    // compares lengths first) is faster than a map on every call.
    std::vector<std::pair<std::string, std::array<int, all_collectives.size()>>> transport_roots_;
};

} // namespace tutti
