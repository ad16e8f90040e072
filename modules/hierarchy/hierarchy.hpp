// Hierarchies: what the hierarchical compositions follow. A hierarchy is data
// attached to a communicator (communicator::hierarchy()): this rank's view of
// one level, the partition of the communicator's ranks into groups, the
// communicator of its own group (which carries the levels below, if any) and
// the communicator of the groups' representatives. Two builders make one:
//
//   - make_arity_hierarchy: the HPX arity tree (Strack et al., IPTW 2025;
//     HPX PRs #7160, #7193): ranks cut into `arity` contiguous groups,
//     recursively, by the one partition rule get_top_level_groups, with the
//     flat fallback below a threshold;
//   - make_hierarchy: any tree from per-level colours (node, package, NUMA
//     domain, ...), which topology/ builds the machine tree with.
//
// Both give the same structure, so every composition serves both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/communicator.hpp"
#include "core/generation.hpp"
#include "core/task.hpp"

namespace tutti {

// A hierarchical all_to_all whose representatives would hold more than this
// many bytes at once runs the flat algorithm instead. 256 MiB keeps the
// seed's estimate (2/arity + 1/arity^2) * N^2 * m within a node's memory for,
// e.g., N = 64, arity 4 and blocks of up to 113 KiB (docs/hierarchy.md).
inline constexpr std::size_t default_max_representative_bytes = std::size_t{256} << 20;

// Options of make_arity_hierarchy.
struct arity_options {
    int arity = 4;
    // Below this many ranks the hierarchy is flat: the tree costs more than
    // it saves. 0 always builds a tree (unless size <= arity, flat anyway).
    int flat_fallback_threshold = 16;
    std::size_t max_representative_bytes = default_max_representative_bytes;
};

// Options of make_hierarchy.
struct hierarchy_options {
    std::size_t max_representative_bytes = default_max_representative_bytes;
};

namespace detail {

// Groups of ranks of one communicator: each group's ranks ascending, groups
// ordered by their first rank. Every rank is in exactly one group.
using rank_groups = std::vector<std::vector<int>>;

// The one partition rule of the arity tree, used by its construction and by
// the compositions alike: num_sites consecutive ranks cut into `arity`
// groups (fewer if num_sites < arity), the first num_sites mod arity of them
// one rank larger. (11, 4) gives sizes 3, 3, 3, 2; (5, 4) gives 2, 1, 1, 1.
rank_groups get_top_level_groups(int num_sites, int arity);

// Where `site` sits in a partition: its group, its index in the group, and
// whether it is the group's representative (its first rank).
struct site_class {
    int group = 0;
    int index = 0;
    bool is_representative = false;
};
site_class classify_site(const rank_groups& groups, int site);

} // namespace detail

class hierarchy {
public:
    // A flat hierarchy: no level; every hierarchical collective runs flat.
    explicit hierarchy(int size, std::size_t max_representative_bytes);
    // One level: `groups` partitions ranks 0..size-1 of the communicator this
    // is attached to; `group` is this rank's group's communicator (its ranks
    // in the order of groups[my group]) and `leaders` the representatives'
    // (rank g is group g's representative; empty on other ranks).
    // order_preserving: every group of the whole tree, on every rank, is
    // consecutive ranks (a fact about all subtrees, which only the builder
    // knows; this level's groups are checked here too).
    hierarchy(detail::rank_groups groups, int my_rank, communicator group, communicator leaders,
              std::size_t max_representative_bytes, bool order_preserving);

    bool flat() const noexcept { return groups_.size() <= 1; }
    int size() const noexcept { return size_; }

    const detail::rank_groups& groups() const noexcept { return groups_; }
    int group_count() const noexcept { return static_cast<int>(groups_.size()); }
    int group_size(int g) const {
        return static_cast<int>(groups_.at(static_cast<std::size_t>(g)).size());
    }
    int largest_group() const noexcept { return largest_; }
    // Which group rank r is in, at which index, and its group's representative.
    int group_of(int r) const { return group_of_.at(static_cast<std::size_t>(r)); }
    int index_of(int r) const { return index_of_.at(static_cast<std::size_t>(r)); }
    int representative_of_group(int g) const {
        return groups_.at(static_cast<std::size_t>(g)).front();
    }

    int my_group() const noexcept { return mine_.group; }
    int my_index() const noexcept { return mine_.index; }
    bool is_representative() const noexcept { return mine_.is_representative; }

    const communicator& group() const noexcept { return group_; }
    const communicator& leaders() const noexcept { return leaders_; }

    // Levels from here down (0 for a flat hierarchy).
    int depth() const noexcept { return depth_; }
    // Every group, at this level and below, is consecutive ranks in order, so
    // reducing group by group keeps a non-commutative operation's order.
    bool order_preserving() const noexcept { return order_preserving_; }
    std::size_t max_representative_bytes() const noexcept { return max_bytes_; }

    // True the first time a composition asks for this generation. A call
    // that runs several hierarchical parts (a serialized payload's size, then
    // its data) has one generation for all of them, but each generation's
    // sub-communicator slots 3k-2..3k can serve one part only; later parts
    // run flat.
    bool first_use(std::uint64_t generation) const;

private:
    int size_ = 0;
    detail::rank_groups groups_;
    std::vector<int> group_of_, index_of_;
    int largest_ = 1;
    detail::site_class mine_;
    communicator group_, leaders_;
    int depth_ = 0;
    bool order_preserving_ = true;
    std::size_t max_bytes_;

    mutable std::mutex mutex_;
    mutable generation_window used_;
};

// The HPX arity tree over comm's ranks, attached to a new communicator of the
// same ranks with its own generations. A collective call on comm.
task<communicator> make_arity_hierarchy(const communicator& comm, arity_options options = {});

// A hierarchy from colours: levels[l] is this rank's colour (>= 0) at level
// l, top down (e.g. node, package in the node, NUMA domain in the package).
// Ranks of one colour at level l form a group inside their level l-1 group;
// a level that leaves a group whole, or cuts it into single ranks, is
// skipped there. Every rank must give the same number of levels. A
// collective call on comm; the result is a new communicator of the same ranks.
task<communicator> make_hierarchy(const communicator& comm, std::vector<int> levels,
                                  hierarchy_options options = {});

} // namespace tutti
