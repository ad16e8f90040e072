#include "core/communicator.hpp"

#include <mutex>

#include <algorithm>
#include <array>
#include <cstdint>

#include <fmt/format.h>

#include "algorithms/args.hpp"
#include "core/call_context.hpp"
#include "core/error.hpp"
#include "select/choose.hpp"

namespace tutti {

communicator::communicator(std::shared_ptr<tutti::transport> transport, std::uint64_t id) {
    if (!transport) throw error(errc::invalid_argument, "a communicator needs a transport");
    auto s = std::make_shared<state>();
    s->rank = transport->rank();
    s->size = transport->size();
    s->one_thread = transport->capabilities().one_thread;
    s->transport = std::move(transport);
    s->id = id;
    state_ = std::move(s);
}

std::uint64_t communicator::next_serial() noexcept {
    static std::atomic<std::uint64_t> made{0};
    return made.fetch_add(1, std::memory_order_relaxed) + 1;
}

namespace {
[[noreturn]] void empty_communicator() {
    throw error(errc::invalid_argument,
                "this communicator is empty (a split with undefined_color gives one); it has "
                "no ranks to talk to");
}
// Inline, the throw out of line: every call checks.
void require_valid(const void* state) {
    if (!state) [[unlikely]]
        empty_communicator();
}
} // namespace

std::uint64_t communicator::claim_generation_out_of_line(const std::uint64_t* wanted) const {
    require_valid(state_.get());
    auto claim = [&] {
        if (!wanted) return state_->generations.claim_next();
        state_->generations.claim(*wanted);
        return *wanted;
    };
    if (state_->one_thread) return claim();
    std::lock_guard lock(state_->mutex);
    return claim();
}

std::uint64_t communicator::next_split_sequence() const {
    std::lock_guard lock(state_->mutex);
    return ++state_->splits;
}

namespace {
// Every rank derives the same identity for the same new group without a
// message: parent identity, how many splits the parent has done, and colour.
std::uint64_t derive_id(std::uint64_t parent, std::uint64_t sequence, std::int64_t color) {
    std::uint64_t h = parent ^ 0x9E3779B97F4A7C15ull;
    for (std::uint64_t v : {sequence, static_cast<std::uint64_t>(color)}) {
        h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
        h *= 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
    }
    return h | 1; // never 0, the id of no communicator
}
} // namespace

std::shared_ptr<communicator::state> communicator::child_state(std::uint64_t id) const {
    auto s = std::make_shared<state>();
    s->transport = state_->transport;
    s->one_thread = state_->one_thread;
    s->id = id;
    return s;
}

std::shared_ptr<const tutti::hierarchy> communicator::hierarchy() const noexcept {
    return state_ ? state_->levels : nullptr;
}

communicator communicator::with_hierarchy(std::shared_ptr<const tutti::hierarchy> levels) const {
    require_valid(state_.get());
    // A colour no split can use (they are >= 0), so the new identity is
    // distinct from every split's.
    auto s = child_state(derive_id(state_->id, next_split_sequence(), -2));
    s->rank = state_->rank;
    s->size = state_->size;
    s->world_ranks = state_->world_ranks;
    s->levels = std::move(levels);
    return communicator(std::move(s));
}

task<communicator> communicator::split(int color, int key) const {
    require_valid(state_.get());
    if (color < 0 && color != undefined_color)
        throw error(errc::invalid_argument,
                    fmt::format("split colour {} is negative; use a colour >= 0, or "
                                "tutti::undefined_color to stay out",
                                color));
    const auto generation = claim_generation(nullptr);
    const auto sequence = next_split_sequence();
    call_context call(*this, generation, collective::split, "split");

    const int n = size();
    std::array<std::int64_t, 2> mine{color, key};
    std::vector<std::int64_t> all(2 * static_cast<std::size_t>(n));
    all_gather_args exchange{std::as_bytes(std::span(mine)),
                             std::as_writable_bytes(std::span(all))};
    call_signature signature{
        .kind = collective::all_gather, .comm_size = n, .bytes = all.size() * sizeof(std::int64_t)};
    const auto& gather_all = choose<all_gather_args>(signature, "");
    co_await gather_all.run(call.phase(0, gather_all.info.id), exchange);

    if (color == undefined_color) co_return communicator{};
    std::vector<int> members;
    for (int r = 0; r < n; ++r)
        if (all[2 * static_cast<std::size_t>(r)] == color) members.push_back(r);
    // Order by key, ties by rank here: the same order on every rank.
    std::sort(members.begin(), members.end(), [&](int a, int b) {
        const auto ka = all[2 * static_cast<std::size_t>(a) + 1];
        const auto kb = all[2 * static_cast<std::size_t>(b) + 1];
        return ka != kb ? ka < kb : a < b;
    });

    auto s = child_state(derive_id(state_->id, sequence, color));
    s->size = static_cast<int>(members.size());
    for (int i = 0; i < s->size; ++i) {
        if (members[static_cast<std::size_t>(i)] == rank()) s->rank = i;
        s->world_ranks.push_back(world_rank(members[static_cast<std::size_t>(i)]));
    }
    co_return communicator(std::move(s));
}

} // namespace tutti
