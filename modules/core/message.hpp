// What travels with every message: where it belongs (communicator,
// generation, step, source) and what the sender believed it was doing
// (collective, algorithm), so that a receiver can tell a mismatch from a
// message that is merely early.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "core/collective.hpp"

namespace tutti {

// Messages are matched on (communicator, generation, step, source).
struct message_key {
    std::uint64_t communicator = 0;
    std::uint64_t generation = 0;
    std::uint64_t step = 0;  // a composition's part in the high bits, see call_context
    std::int32_t source = 0; // rank in the transport's world

    friend bool operator==(const message_key&, const message_key&) = default;
};

// Matching uses (communicator, generation, source) as the bucket and the step
// inside it, so that a receive can see every message of its own call and
// report a different collective instead of waiting forever.
struct call_key {
    std::uint64_t communicator = 0;
    std::uint64_t generation = 0;
    std::int32_t source = 0;

    friend bool operator==(const call_key&, const call_key&) = default;
};

struct call_key_hash {
    std::size_t operator()(const call_key& k) const noexcept {
        std::uint64_t h = k.communicator * 0x9E3779B97F4A7C15ull;
        h ^= k.generation + 0x7F4A7C159E3779B9ull + (h << 6) + (h >> 2);
        h ^= static_cast<std::uint64_t>(static_cast<std::uint32_t>(k.source)) + (h << 6) + (h >> 2);
        return static_cast<std::size_t>(h);
    }
};

struct message_header {
    message_key key;
    collective kind = collective::barrier;
    std::uint32_t algorithm = 0; // id of the algorithm's name, see algorithm_id()
    std::uint64_t bytes = 0;     // payload length
};

inline call_key call_of(const message_key& k) noexcept {
    return {k.communicator, k.generation, k.source};
}

// A stable id for an algorithm name: the same on every rank and every build.
constexpr std::uint32_t algorithm_id(std::string_view name) noexcept {
    std::uint32_t h = 2166136261u;
    for (char c : name) {
        h ^= static_cast<unsigned char>(c);
        h *= 16777619u;
    }
    return h;
}

std::string describe(const message_key& key);

} // namespace tutti
