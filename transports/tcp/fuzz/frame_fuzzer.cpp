// libFuzzer harness: arbitrary bytes from a stranger must only ever produce a
// tutti::error, never a crash, a sanitizer report or a leak, whether they go
// to the frame header decoder or to the handshake's payload decoders and
// proof check.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/error.hpp"
#include "transports/tcp/frame.hpp"
#include "transports/tcp/handshake.hpp"

namespace {

using namespace tutti::tcp;

const job_secret& secret() {
    static const job_secret s =
        job_secret::from_hex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
    return s;
}

template <typename F>
void refused_or_accepted(F&& f) {
    try {
        f();
    } catch (const tutti::error&) {
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span bytes(reinterpret_cast<const std::byte*>(data), size);

    // The header decoder, with the input as a whole and with a job size and
    // payload limit taken from its tail so that those vary too.
    frame_limits limits{.max_payload = std::uint64_t{1} << 30, .job_size = 16};
    refused_or_accepted([&] { (void)decode_frame_header(bytes, limits); });
    if (size >= frame_header_size) {
        const auto tail = bytes.subspan(frame_header_size);
        if (tail.size() >= 2) {
            limits.job_size = std::to_integer<std::int32_t>(tail[0]) - 1;
            limits.max_payload = std::uint64_t{1} << (std::to_integer<unsigned>(tail[1]) % 64);
        }
        refused_or_accepted([&] {
            const auto header = decode_frame_header(bytes.first(frame_header_size), limits);
            // What the transport relies on once a header is accepted.
            if (header.message.key.source < 0 || header.message.key.source >= limits.job_size)
                __builtin_trap();
            if (header.kind == frame_kind::data ? header.message.bytes > limits.max_payload
                                                : header.message.bytes > max_control_payload)
                __builtin_trap();
            if (encode_frame_header(header) != [&] {
                    frame_header_bytes copy{};
                    std::copy(bytes.begin(), bytes.begin() + frame_header_size, copy.begin());
                    return copy;
                }())
                __builtin_trap();
        });
    }

    // The handshake payloads and the proof check.
    refused_or_accepted([&] { (void)decode_hello(bytes, 16); });
    refused_or_accepted([&] { (void)decode_challenge(bytes); });
    refused_or_accepted([&] {
        (void)job_secret::from_hex({reinterpret_cast<const char*>(data), size});
    });
    if (size >= 2 * nonce_size) {
        nonce peer{};
        nonce own{};
        std::copy(bytes.begin(), bytes.begin() + nonce_size, peer.begin());
        std::copy(bytes.begin() + nonce_size, bytes.begin() + 2 * nonce_size, own.begin());
        const auto rest = bytes.subspan(2 * nonce_size);
        const handshake_binding binding{.job_id = "fuzz", .connector_rank = 0, .acceptor_rank = 1};
        refused_or_accepted(
            [&] { verify_proof(secret(), handshake_role::connector, peer, own, binding, rest); });
    }
    return 0;
}
