#include "bootstrap/node_bootstrap.hpp"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"

namespace tutti {

namespace {
// The first byte of each parent blob: whether its rank still exchanges.
constexpr std::byte exchanging{1};
constexpr std::byte left{0};
} // namespace

node_bootstrap::node_bootstrap(bootstrap& parent, std::vector<int> members, std::string job_id)
    : parent_(parent), members_(std::move(members)), job_id_(std::move(job_id)) {
    const bool ascending = std::is_sorted(members_.begin(), members_.end()) &&
                           std::adjacent_find(members_.begin(), members_.end()) == members_.end();
    const auto self = std::find(members_.begin(), members_.end(), parent_.rank());
    if (members_.empty() || !ascending || members_.front() < 0 ||
        members_.back() >= parent_.size() || self == members_.end())
        throw error(errc::invalid_argument,
                    fmt::format("node bootstrap: members [{}] are not distinct ascending ranks "
                                "below {} that include this rank {}",
                                fmt::join(members_, ", "), parent_.size(), parent_.rank()));
    rank_ = static_cast<int>(self - members_.begin());
}

std::vector<std::vector<std::byte>> node_bootstrap::all_gather(std::span<const std::byte> mine) {
    if (left_)
        throw error(errc::invalid_argument,
                    fmt::format("node bootstrap: rank {} exchanges after it left", parent_.rank()));
    std::vector<std::byte> blob;
    blob.reserve(mine.size() + 1);
    blob.push_back(exchanging);
    blob.insert(blob.end(), mine.begin(), mine.end());
    auto all = parent_.all_gather(blob);
    std::vector<std::vector<std::byte>> ours;
    ours.reserve(members_.size());
    for (int member : members_) {
        const auto& got = all.at(static_cast<std::size_t>(member));
        if (got.empty() || got.front() != exchanging)
            throw error(errc::invalid_argument,
                        fmt::format("node bootstrap: rank {} on node '{}' ended its node's setup "
                                    "while rank {} still exchanges (a setup step failed on "
                                    "rank {}, see its error)",
                                    member, node(), parent_.rank(), member));
        ours.emplace_back(got.begin() + 1, got.end());
    }
    return ours;
}

void node_bootstrap::leave() {
    if (left_) return;
    left_ = true;
    const std::byte blob[1] = {left};
    for (;;) {
        auto all = parent_.all_gather(blob);
        const bool everyone_left = std::all_of(
            all.begin(), all.end(), [](const auto& b) { return !b.empty() && b.front() == left; });
        if (everyone_left) return;
    }
}

} // namespace tutti
