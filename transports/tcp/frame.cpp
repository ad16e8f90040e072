#include "transports/tcp/frame.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace tutti::tcp {

namespace {

void put(frame_header_bytes& out, std::size_t offset, std::uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i)
        out[offset + static_cast<std::size_t>(i)] = static_cast<std::byte>(value >> (8 * i));
}

std::uint64_t get(std::span<const std::byte> in, std::size_t offset, int bytes) {
    std::uint64_t value = 0;
    for (int i = 0; i < bytes; ++i)
        value |=
            std::uint64_t{std::to_integer<std::uint8_t>(in[offset + static_cast<std::size_t>(i)])}
            << (8 * i);
    return value;
}

error malformed(const std::string& what) {
    return error(errc::invalid_argument, "malformed tcp frame header: " + what);
}

} // namespace

std::string_view to_string(frame_kind kind) noexcept {
    switch (kind) {
    case frame_kind::data:
        return "data";
    case frame_kind::hello:
        return "hello";
    case frame_kind::challenge:
        return "challenge";
    case frame_kind::proof:
        return "proof";
    case frame_kind::welcome:
        return "welcome";
    case frame_kind::goodbye:
        return "goodbye";
    case frame_kind::lost:
        return "lost";
    }
    return "unknown";
}

frame_header_bytes encode_frame_header(const frame_header& header) {
    const auto& m = header.message;
    frame_header_bytes out{};
    put(out, 0, frame_magic, 4);
    put(out, 4, frame_version, 2);
    put(out, 6, static_cast<std::uint8_t>(header.kind), 1);
    put(out, 7, static_cast<std::uint8_t>(m.kind), 1);
    put(out, 8, m.key.communicator, 8);
    put(out, 16, m.key.generation, 8);
    put(out, 24, m.key.step, 8);
    put(out, 32, static_cast<std::uint32_t>(m.key.source), 4);
    put(out, 36, m.algorithm, 4);
    put(out, 40, m.bytes, 8);
    return out;
}

frame_header decode_frame_header(std::span<const std::byte> bytes, const frame_limits& limits) {
    if (limits.job_size < 1)
        throw error(
            errc::invalid_argument,
            fmt::format("tcp frame limits: job size {} (must be at least 1)", limits.job_size));
    if (bytes.size() < frame_header_size)
        throw malformed(fmt::format("truncated: {} bytes of the {} a header needs", bytes.size(),
                                    frame_header_size));
    if (bytes.size() > frame_header_size)
        throw malformed(
            fmt::format("{} bytes where a header has exactly {}", bytes.size(), frame_header_size));

    const auto magic = get(bytes, 0, 4);
    if (magic != frame_magic)
        throw malformed(fmt::format("bad magic number {:#010x} (not a tutti tcp peer?)", magic));
    const auto version = get(bytes, 4, 2);
    if (version != frame_version)
        throw malformed(fmt::format("unknown version {} (this build speaks version {})", version,
                                    frame_version));
    const auto kind = get(bytes, 6, 1);
    if (kind < static_cast<std::uint8_t>(frame_kind::data) ||
        kind > static_cast<std::uint8_t>(frame_kind::lost))
        throw malformed(fmt::format("unknown frame kind {}", kind));
    const auto collective_kind = get(bytes, 7, 1);
    if (collective_kind > static_cast<std::uint8_t>(collective::split))
        throw malformed(fmt::format("collective kind {} out of range (at most {})", collective_kind,
                                    static_cast<int>(collective::split)));

    frame_header header;
    header.kind = static_cast<frame_kind>(kind);
    auto& m = header.message;
    m.kind = static_cast<collective>(collective_kind);
    m.key.communicator = get(bytes, 8, 8);
    m.key.generation = get(bytes, 16, 8);
    m.key.step = get(bytes, 24, 8);
    m.key.source = static_cast<std::int32_t>(static_cast<std::uint32_t>(get(bytes, 32, 4)));
    m.algorithm = static_cast<std::uint32_t>(get(bytes, 36, 4));
    m.bytes = get(bytes, 40, 8);

    if (m.key.source < 0 || m.key.source >= limits.job_size)
        throw malformed(fmt::format("source rank {} outside the job of {} ranks", m.key.source,
                                    limits.job_size));
    const auto limit = header.kind == frame_kind::data ? limits.max_payload : max_control_payload;
    if (m.bytes > limit)
        throw malformed(fmt::format("a {} frame claims a payload of {} bytes, more than the {} "
                                    "allowed",
                                    to_string(header.kind), m.bytes, limit));
    return header;
}

} // namespace tutti::tcp
