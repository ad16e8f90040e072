#include "bootstrap/wire.hpp"

#include <cstring>

#include <fmt/format.h>

#include "core/error.hpp"

namespace tutti::bootstrap_wire {

namespace {

void put(std::vector<std::byte>& out, std::uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i)
        out.push_back(static_cast<std::byte>(value >> (8 * i)));
}

std::uint64_t get(std::span<const std::byte> in) {
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < in.size(); ++i)
        value |= std::uint64_t{std::to_integer<std::uint8_t>(in[i])} << (8 * i);
    return value;
}

error malformed(const std::string& what) {
    return error(errc::invalid_argument, "malformed bootstrap frame: " + what);
}

} // namespace

std::uint64_t max_body(frame_kind kind, int job_size) noexcept {
    const auto ranks = static_cast<std::uint64_t>(job_size < 1 ? 1 : job_size);
    switch (kind) {
    case frame_kind::hello:
    case frame_kind::welcome:
    case frame_kind::reject:
    case frame_kind::abort:
        return max_small_body;
    case frame_kind::contribution:
        return max_small_body + max_blob;
    case frame_kind::result:
        return max_small_body + ranks * (max_blob + 8);
    }
    return 0;
}

header_bytes encode_header(frame_kind kind, std::uint64_t length) {
    std::vector<std::byte> out;
    put(out, magic, 4);
    put(out, static_cast<std::uint32_t>(kind), 4);
    put(out, length, 8);
    header_bytes bytes{};
    std::memcpy(bytes.data(), out.data(), header_size);
    return bytes;
}

frame_header decode_header(std::span<const std::byte, header_size> bytes, int job_size) {
    const auto found_magic = get(bytes.subspan(0, 4));
    if (found_magic != magic)
        throw malformed(
            fmt::format("bad magic number {:#010x} (not a tutti bootstrap peer?)", found_magic));
    const auto kind = get(bytes.subspan(4, 4));
    if (kind < 1 || kind > static_cast<std::uint64_t>(frame_kind::abort))
        throw malformed(fmt::format("unknown frame kind {}", kind));
    const frame_header header{static_cast<frame_kind>(kind), get(bytes.subspan(8, 8))};
    const auto limit = max_body(header.kind, job_size);
    if (header.length > limit)
        throw malformed(fmt::format("a frame of kind {} claims {} bytes, more than the {} allowed",
                                    kind, header.length, limit));
    return header;
}

encoder::encoder(frame_kind kind) : kind_(kind) {
    out_.resize(header_size);
}

void encoder::u32(std::uint32_t value) {
    put(out_, value, 4);
}

void encoder::u64(std::uint64_t value) {
    put(out_, value, 8);
}

void encoder::text(std::string_view value) {
    u64(value.size());
    const auto* first = reinterpret_cast<const std::byte*>(value.data());
    out_.insert(out_.end(), first, first + value.size());
}

void encoder::blob(std::span<const std::byte> value) {
    u64(value.size());
    out_.insert(out_.end(), value.begin(), value.end());
}

std::vector<std::byte> encoder::finish() && {
    const auto header = encode_header(kind_, out_.size() - header_size);
    std::memcpy(out_.data(), header.data(), header_size);
    return std::move(out_);
}

std::span<const std::byte> decoder::take(std::uint64_t count, std::string_view what) {
    if (count > body_.size() - position_)
        throw malformed(fmt::format("{} needs {} bytes but only {} remain", what, count,
                                    body_.size() - position_));
    auto piece = body_.subspan(position_, static_cast<std::size_t>(count));
    position_ += static_cast<std::size_t>(count);
    return piece;
}

std::uint32_t decoder::u32() {
    return static_cast<std::uint32_t>(get(take(4, "an integer")));
}

std::uint64_t decoder::u64() {
    return get(take(8, "an integer"));
}

std::string decoder::text(std::size_t max_length) {
    const auto length = u64();
    if (length > max_length)
        throw malformed(
            fmt::format("a text of {} bytes, more than the {} allowed", length, max_length));
    auto bytes = take(length, "a text");
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

std::span<const std::byte> decoder::blob(std::uint64_t max_length) {
    const auto length = u64();
    if (length > max_length)
        throw malformed(
            fmt::format("a blob of {} bytes, more than the {} allowed", length, max_length));
    return take(length, "a blob");
}

void decoder::finish() const {
    if (position_ != body_.size())
        throw malformed(
            fmt::format("{} unexpected bytes after the last field", body_.size() - position_));
}

} // namespace tutti::bootstrap_wire
