#include "hierarchy/hierarchy.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <span>
#include <utility>

#include <fmt/format.h>

#include "algorithms/dispatch.hpp"
#include "core/error.hpp"

namespace tutti {

namespace detail {

rank_groups get_top_level_groups(int num_sites, int arity) {
    if (num_sites < 1)
        throw error(errc::invalid_argument,
                    fmt::format("a hierarchy needs at least one site, not {}", num_sites));
    if (arity < 2)
        throw error(errc::invalid_argument,
                    fmt::format("a hierarchy's arity must be at least 2, not {}", arity));
    const int count = std::min(arity, num_sites);
    const int division_steps = num_sites / count;
    const int remainder = num_sites % count;
    rank_groups groups(static_cast<std::size_t>(count));
    int next = 0;
    for (int g = 0; g < count; ++g) {
        const int size = division_steps + (g < remainder ? 1 : 0);
        for (int i = 0; i < size; ++i)
            groups[static_cast<std::size_t>(g)].push_back(next++);
    }
    return groups;
}

site_class classify_site(const rank_groups& groups, int site) {
    for (std::size_t g = 0; g < groups.size(); ++g) {
        const auto& members = groups[g];
        const auto at = std::find(members.begin(), members.end(), site);
        if (at == members.end()) continue;
        const auto index = static_cast<int>(at - members.begin());
        return {static_cast<int>(g), index, index == 0};
    }
    throw error(errc::invalid_argument,
                fmt::format("site {} is in no group of the partition", site));
}

} // namespace detail

hierarchy::hierarchy(int size, std::size_t max_representative_bytes)
    : size_(size), max_bytes_(max_representative_bytes) {
    groups_.emplace_back();
    for (int r = 0; r < size; ++r) {
        groups_.front().push_back(r);
        group_of_.push_back(0);
        index_of_.push_back(r);
    }
    largest_ = size;
}

hierarchy::hierarchy(detail::rank_groups groups, int my_rank, communicator group,
                     communicator leaders, std::size_t max_representative_bytes,
                     bool order_preserving)
    : groups_(std::move(groups)), group_(std::move(group)), leaders_(std::move(leaders)),
      order_preserving_(order_preserving), max_bytes_(max_representative_bytes) {
    for (const auto& members : groups_)
        size_ += static_cast<int>(members.size());
    group_of_.assign(static_cast<std::size_t>(size_), -1);
    index_of_.assign(static_cast<std::size_t>(size_), -1);
    largest_ = 0;
    for (std::size_t g = 0; g < groups_.size(); ++g) {
        const auto& members = groups_[g];
        if (members.empty())
            throw error(errc::invalid_argument, fmt::format("hierarchy group {} is empty", g));
        largest_ = std::max(largest_, static_cast<int>(members.size()));
        for (std::size_t i = 0; i < members.size(); ++i) {
            const int r = members[i];
            if (r < 0 || r >= size_ || group_of_[static_cast<std::size_t>(r)] != -1)
                throw error(errc::invalid_argument,
                            fmt::format("hierarchy groups do not partition ranks 0..{}: rank {} "
                                        "is out of range or in two groups",
                                        size_ - 1, r));
            if (i > 0 && r < members[i - 1])
                throw error(errc::invalid_argument,
                            fmt::format("hierarchy group {} lists its ranks out of order", g));
            if (i > 0 && r != members[i - 1] + 1) order_preserving_ = false;
            group_of_[static_cast<std::size_t>(r)] = static_cast<int>(g);
            index_of_[static_cast<std::size_t>(r)] = static_cast<int>(i);
        }
        if (g > 0 && members.front() < groups_[g - 1].front())
            throw error(errc::invalid_argument,
                        "hierarchy groups must be ordered by their first rank");
    }
    mine_ = detail::classify_site(groups_, my_rank);
    if (group_.size() != static_cast<int>(groups_[static_cast<std::size_t>(mine_.group)].size()))
        throw error(errc::invalid_argument, "a hierarchy's group communicator does not match "
                                            "its group");
    const auto below = group_.hierarchy();
    depth_ = 1 + (below ? below->depth() : 0);
}

bool hierarchy::first_use(std::uint64_t generation) const {
    // The communicator's registry refuses generations a window behind its
    // newest, so a window is all there is to remember; one older counts as
    // new, as once forgotten.
    std::lock_guard lock(mutex_);
    return used_.set(generation) != generation_window::mark::again;
}

namespace {

// The groups at `level` of a communicator whose ranks are, in order, the
// ranks `members` of the communicator the build started from; empty when
// there is no further level (a leaf).
using partition_rule =
    std::function<detail::rank_groups(const std::vector<int>& members, int level)>;

struct build_settings {
    partition_rule rule;
    std::size_t max_bytes;
    bool order_preserving;
};

// Attaches to comm the levels the rule gives, from `level` down; returns comm
// itself when there are none.
task<communicator> build(communicator comm, std::vector<int> members, int level,
                         const build_settings& settings) {
    detail::rank_groups groups;
    for (;; ++level) {
        groups = settings.rule(members, level);
        if (groups.empty()) co_return comm;
        // One group is its parent again, single ranks group nothing: a level
        // like that is skipped here (it may still cut other subtrees).
        if (groups.size() > 1 && groups.size() < members.size()) break;
    }
    const auto mine = detail::classify_site(groups, comm.rank());
    auto group = co_await comm.split(mine.group, mine.index);
    auto leaders = co_await comm.split(mine.is_representative ? 0 : undefined_color, mine.group);
    std::vector<int> below;
    for (int r : groups[static_cast<std::size_t>(mine.group)])
        below.push_back(members[static_cast<std::size_t>(r)]);
    group = co_await build(std::move(group), std::move(below), level + 1, settings);
    auto levels = std::make_shared<hierarchy>(std::move(groups), comm.rank(), std::move(group),
                                              std::move(leaders), settings.max_bytes,
                                              settings.order_preserving);
    co_return comm.with_hierarchy(std::move(levels));
}

task<communicator> build_top(const communicator& comm, build_settings settings) {
    auto work = co_await comm.split(0);
    std::vector<int> everyone(static_cast<std::size_t>(work.size()));
    for (int r = 0; r < work.size(); ++r)
        everyone[static_cast<std::size_t>(r)] = r;
    auto result = co_await build(work, std::move(everyone), 0, settings);
    if (!result.hierarchy())
        result = work.with_hierarchy(std::make_shared<hierarchy>(work.size(), settings.max_bytes));
    co_return result;
}

// Every rank's int64 values of one length, through an all_gather on comm.
task<std::vector<std::int64_t>> exchange(const communicator& comm, std::vector<std::int64_t> mine) {
    std::vector<std::int64_t> all(mine.size() * static_cast<std::size_t>(comm.size()));
    co_await run_collective(comm, all_gather_args{std::as_bytes(std::span(mine)),
                                                  std::as_writable_bytes(std::span(all))});
    co_return all;
}

} // namespace

task<communicator> make_arity_hierarchy(const communicator& comm, arity_options options) {
    if (!comm.valid())
        throw error(errc::invalid_argument, "make_arity_hierarchy on an empty communicator");
    if (options.arity < 2)
        throw error(errc::invalid_argument,
                    fmt::format("a hierarchy's arity must be at least 2, not {}", options.arity));
    if (options.flat_fallback_threshold < 0)
        throw error(errc::invalid_argument,
                    fmt::format("the flat fallback threshold must be >= 0, not {}",
                                options.flat_fallback_threshold));
    const int arity = options.arity;
    const int threshold = options.flat_fallback_threshold;
    build_settings settings{
        .rule =
            [arity, threshold](const std::vector<int>& members, int level) {
                const int n = static_cast<int>(members.size());
                // Below the threshold the tree costs more than it saves; a group
                // of at most `arity` ranks is the tree's flat leaf.
                if ((level == 0 && n < threshold) || n <= arity) return detail::rank_groups{};
                return detail::get_top_level_groups(n, arity);
            },
        .max_bytes = options.max_representative_bytes,
        .order_preserving = true,
    };
    co_return co_await build_top(comm, std::move(settings));
}

task<communicator> make_hierarchy(const communicator& comm, std::vector<int> levels,
                                  hierarchy_options options) {
    if (!comm.valid())
        throw error(errc::invalid_argument, "make_hierarchy on an empty communicator");
    const auto n = static_cast<std::size_t>(comm.size());
    // Ranks learn every rank's colours first, so that bad colours are found
    // by all of them alike and none is left waiting for the others.
    const auto depths = co_await exchange(comm, {static_cast<std::int64_t>(levels.size())});
    const auto depth = static_cast<std::size_t>(depths.front());
    for (std::size_t r = 0; r < n; ++r)
        if (static_cast<std::size_t>(depths[r]) != depth)
            throw error(errc::invalid_argument,
                        fmt::format("make_hierarchy: rank {} gives {} levels, rank 0 gives {}; "
                                    "every rank must give the same number",
                                    r, depths[r], depth));
    std::vector<std::int64_t> table;
    if (depth > 0)
        table = co_await exchange(comm, std::vector<std::int64_t>(levels.begin(), levels.end()));
    for (std::size_t r = 0; r < n; ++r)
        for (std::size_t l = 0; l < depth; ++l)
            if (table[r * depth + l] < 0)
                throw error(errc::invalid_argument,
                            fmt::format("make_hierarchy: rank {} gives colour {} at level {}; "
                                        "colours are >= 0",
                                        r, table[r * depth + l], l));

    // Groups are the ranks of equal colours down to a level; the hierarchy
    // keeps a non-commutative order only if each such set is consecutive.
    bool consecutive = true;
    for (std::size_t l = 0; l < depth && consecutive; ++l) {
        std::set<std::vector<std::int64_t>> finished;
        std::vector<std::int64_t> current;
        for (std::size_t r = 0; r < n && consecutive; ++r) {
            std::vector<std::int64_t> prefix(table.begin() + static_cast<std::ptrdiff_t>(r * depth),
                                             table.begin() +
                                                 static_cast<std::ptrdiff_t>(r * depth + l + 1));
            if (prefix == current) continue;
            if (!current.empty()) finished.insert(current);
            if (finished.count(prefix)) consecutive = false;
            current = std::move(prefix);
        }
    }

    build_settings settings{
        .rule =
            [table, depth](const std::vector<int>& members, int level) {
                detail::rank_groups groups;
                if (static_cast<std::size_t>(level) >= depth) return groups;
                std::map<std::int64_t, std::size_t> index_of_colour;
                for (std::size_t i = 0; i < members.size(); ++i) {
                    const auto colour = table[static_cast<std::size_t>(members[i]) * depth +
                                              static_cast<std::size_t>(level)];
                    auto [at, fresh] = index_of_colour.emplace(colour, groups.size());
                    if (fresh) groups.emplace_back();
                    groups[at->second].push_back(static_cast<int>(i));
                }
                return groups;
            },
        .max_bytes = options.max_representative_bytes,
        .order_preserving = consecutive,
    };
    co_return co_await build_top(comm, std::move(settings));
}

} // namespace tutti
