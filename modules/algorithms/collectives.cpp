#include "algorithms/collectives.hpp"

namespace tutti::detail {

void count_error(collective kind, const std::string& what) {
    throw error(errc::invalid_count, fmt::format("{}: {}", to_string(kind), what));
}

std::size_t largest(const std::vector<std::vector<std::byte>>& values) {
    std::size_t most = 0;
    for (const auto& v : values)
        most = std::max(most, v.size());
    return most;
}

std::vector<std::byte> pack_padded(const std::vector<std::vector<std::byte>>& values,
                                   std::size_t block) {
    const std::size_t stride = block + sizeof(std::uint64_t);
    std::vector<std::byte> packed(values.size() * stride);
    for (std::size_t i = 0; i < values.size(); ++i) {
        std::uint64_t length = values[i].size();
        std::memcpy(packed.data() + i * stride, &length, sizeof length);
        if (length)
            std::memcpy(packed.data() + i * stride + sizeof length, values[i].data(), length);
    }
    return packed;
}

std::span<const std::byte> unpack_padded(std::span<const std::byte> block) {
    std::uint64_t length = 0;
    if (block.size() < sizeof length)
        throw error(errc::serialization_failure, "a serialized block is shorter than its header");
    std::memcpy(&length, block.data(), sizeof length);
    if (length > block.size() - sizeof length)
        throw error(errc::serialization_failure,
                    fmt::format("a serialized block claims {} bytes but holds {}", length,
                                block.size() - sizeof length));
    return block.subspan(sizeof length, length);
}

task<std::uint64_t> agree_on_block(const call_context& call, std::uint64_t mine) {
    std::uint64_t most = 0;
    auto op = erase_operation<std::uint64_t>(tutti::max);
    all_reduce_args args{std::as_bytes(std::span(&mine, 1)),
                         std::as_writable_bytes(std::span(&most, 1)), 1, &op};
    co_await run_phase(call, 0, args,
                       signature_for(collective::all_reduce, call.comm(), 8, 1, op, false), "");
    co_return most;
}

} // namespace tutti::detail
