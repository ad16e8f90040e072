// Locality exchange and the machine tree's colours; the tree itself is the
// generic hierarchy builder's, fed one colour per level.
#include "topology/machine_tree.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "algorithms/collectives.hpp"
#include "core/error.hpp"

namespace tutti::topology {

std::string_view to_string(level l) noexcept {
    switch (l) {
    case level::node:
        return "node";
    case level::package:
        return "package";
    case level::numa:
        return "numa";
    case level::core:
        break;
    }
    return "core";
}

task<std::vector<locality>> exchange(communicator comm, locality mine) {
    co_return co_await all_gather(comm, mine);
}

task<std::vector<locality>> exchange(communicator comm) {
    const machine m = discover();
    co_return co_await exchange(comm, here(m, comm.world_rank(comm.rank())));
}

tree_colours colours_of(const std::vector<locality>& all, int rank, const machine_levels& levels) {
    if (all.empty()) throw error(errc::invalid_argument, "machine tree: no localities");
    if (rank < 0 || static_cast<std::size_t>(rank) >= all.size())
        throw error(
            errc::invalid_argument,
            fmt::format("machine tree: rank {} outside the {} localities", rank, all.size()));
    for (std::size_t l = 0; l < levels.size(); ++l)
        for (std::size_t k = 0; k < l; ++k)
            if (levels[k] == levels[l] || levels[k] > levels[l])
                throw error(errc::invalid_argument,
                            fmt::format("machine tree: levels must go top down (node, package, "
                                        "numa, core) without repeats; {} comes after {}",
                                        to_string(levels[l]), to_string(levels[k])));

    // Nodes are numbered by first appearance so that every rank, reading the
    // same vector, gives a node the same number whatever its name.
    std::map<std::string, int> node_numbers;
    for (const auto& where : all)
        node_numbers.emplace(where.node, static_cast<int>(node_numbers.size()));
    auto colour = [&](const locality& where, level l) {
        switch (l) {
        case level::node:
            return node_numbers.at(where.node);
        case level::package:
            return where.package;
        case level::numa:
            return where.numa;
        case level::core:
            break;
        }
        return where.core;
    };

    tree_colours out;
    // path[r]: rank r's colours at the levels kept so far, naming its group.
    std::vector<std::vector<int>> path(all.size());
    for (level l : levels) {
        std::map<std::vector<int>, int> first_colour;
        bool splits = false;
        for (std::size_t r = 0; r < all.size(); ++r) {
            const int c = colour(all[r], l);
            auto [it, fresh] = first_colour.emplace(path[r], c);
            if (!fresh && it->second != c) splits = true;
        }
        if (!splits) continue;
        out.levels.push_back(l);
        for (std::size_t r = 0; r < all.size(); ++r)
            path[r].push_back(colour(all[r], l));
    }
    out.colour = path[static_cast<std::size_t>(rank)];
    return out;
}

task<communicator> make_machine_hierarchy(communicator comm, std::vector<locality> all,
                                          machine_levels levels, hierarchy_options options) {
    if (all.size() != static_cast<std::size_t>(comm.size()))
        throw error(errc::invalid_argument,
                    fmt::format("machine tree: {} localities given for a communicator of {} ranks",
                                all.size(), comm.size()));
    auto colours = colours_of(all, comm.rank(), levels);
    co_return co_await make_hierarchy(comm, std::move(colours.colour), options);
}

task<communicator> make_machine_hierarchy(communicator comm, machine_levels levels,
                                          hierarchy_options options) {
    auto all = co_await exchange(comm);
    co_return co_await make_machine_hierarchy(std::move(comm), std::move(all), std::move(levels),
                                              options);
}

} // namespace tutti::topology
