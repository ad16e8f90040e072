// The fixed-size header in front of every frame on a TCP connection between
// two ranks. It carries a data message's message_header, or says which step
// of the handshake (see handshake.hpp) the frame is. Every field is checked
// before the transport looks at the payload: the length against
// frame_limits::max_payload (or the small bound of a handshake frame), the
// source against the job's size, the collective against the known ones. So a
// stranger, a peer of another version or a corrupt stream yields a
// tutti::error (errc::invalid_argument) naming the fault, never a crash or an
// allocation sized by an unchecked number. Integers are little-endian.
//
// Layout (48 bytes):
//   0  u32 magic "tcpt"      4  u16 version        6  u8 frame kind
//   7  u8 collective         8  u64 communicator  16  u64 generation
//  24  u64 step             32  i32 source        36  u32 algorithm id
//  40  u64 payload bytes
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "core/message.hpp"

namespace tutti::tcp {

enum class frame_kind : std::uint8_t {
    data = 1,      // a collective's message; the payload follows
    hello = 2,     // handshake, connector -> acceptor
    challenge = 3, // handshake, acceptor -> connector
    proof = 4,     // handshake, connector -> acceptor
    welcome = 5,   // handshake, acceptor -> connector; the connection is up
    goodbye = 6,   // an orderly close: no more frames follow
    lost = 7,      // the sender lost another rank; the payload is its rank (u32)
};

std::string_view to_string(frame_kind kind) noexcept;

inline constexpr std::uint32_t frame_magic = 0x74706374; // "tcpt" on the wire
inline constexpr std::uint16_t frame_version = 1;
inline constexpr std::size_t frame_header_size = 48;
// Handshake and goodbye frames carry a few fixed fields, never more.
inline constexpr std::uint64_t max_control_payload = 256;

struct frame_limits {
    std::uint64_t max_payload = std::uint64_t{1} << 30; // for data frames
    std::int32_t job_size = 0; // sources must lie in [0, job_size); must be set
};

struct frame_header {
    frame_kind kind = frame_kind::data;
    message_header message; // message.bytes is the payload length
};

using frame_header_bytes = std::array<std::byte, frame_header_size>;

frame_header_bytes encode_frame_header(const frame_header& header);

// Throws tutti::error (errc::invalid_argument) for input that is not exactly
// one header, a bad magic number, an unknown version, frame kind or
// collective, a payload length above the limit for that kind, or a source
// outside the job.
frame_header decode_frame_header(std::span<const std::byte> bytes, const frame_limits& limits);

} // namespace tutti::tcp
