// The rendezvous protocol of the environment bootstrap: length-prefixed
// frames over TCP. Every length is checked against a bound before anything is
// allocated, so a stranger or a corrupt peer yields an error, never a crash or
// a huge allocation. Integers are little-endian whatever the host.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tutti::bootstrap_wire {

enum class frame_kind : std::uint32_t {
    hello = 1,        // rank -> 0: protocol, rank, size, job id (may be empty)
    welcome = 2,      // 0 -> rank: every rank has joined; the job id
    reject = 3,       // 0 -> rank: why this connection is turned away
    contribution = 4, // rank -> 0: round, rank, size, job id, blob
    result = 5,       // 0 -> rank: round, every blob in rank order
    abort = 6,        // 0 -> rank: error code and message; the job is over
};

inline constexpr std::uint32_t magic = 0x74747574; // "tutt" on the wire
inline constexpr std::uint32_t protocol_version = 1;
inline constexpr std::size_t header_size = 16;
inline constexpr std::uint64_t max_blob = std::uint64_t{64} << 20;
// Room for the fixed fields and a job id next to a blob.
inline constexpr std::uint64_t max_small_body = std::uint64_t{64} << 10;

struct frame_header {
    frame_kind kind;
    std::uint64_t length;
};

using header_bytes = std::array<std::byte, header_size>;

// The largest body a frame of this kind may carry in a job of job_size ranks.
std::uint64_t max_body(frame_kind kind, int job_size) noexcept;

header_bytes encode_header(frame_kind kind, std::uint64_t length);

// Throws tutti::error (errc::invalid_argument) for a wrong magic number, an
// unknown kind, or a length above max_body.
frame_header decode_header(std::span<const std::byte, header_size> bytes, int job_size);

// Builds one frame (header and body) in a single buffer, ready to write.
class encoder {
public:
    explicit encoder(frame_kind kind);

    void u32(std::uint32_t value);
    void u64(std::uint64_t value);
    void i32(std::int32_t value) { u32(static_cast<std::uint32_t>(value)); }
    void text(std::string_view value);
    void blob(std::span<const std::byte> value);

    // The finished frame, with the body length filled in.
    std::vector<std::byte> finish() &&;

private:
    frame_kind kind_;
    std::vector<std::byte> out_;
};

// Reads a frame body field by field; a field that runs past the end, a text or
// blob over its bound, or bytes left over are errors (errc::invalid_argument).
class decoder {
public:
    explicit decoder(std::span<const std::byte> body) : body_(body) {}

    std::uint32_t u32();
    std::uint64_t u64();
    std::int32_t i32() { return static_cast<std::int32_t>(u32()); }
    std::string text(std::size_t max_length);
    std::span<const std::byte> blob(std::uint64_t max_length);
    void finish() const;

private:
    std::span<const std::byte> take(std::uint64_t count, std::string_view what);

    std::span<const std::byte> body_;
    std::size_t position_ = 0;
};

} // namespace tutti::bootstrap_wire
