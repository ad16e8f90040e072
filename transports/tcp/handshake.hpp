// Mutual authentication of a TCP connection between two ranks of one job.
// The launcher creates a job_secret and hands it to every rank in
// TUTTI_JOB_SECRET; a connection is trusted only once each side has shown,
// with HMAC-SHA256 over fresh nonces, that it knows that secret. No data
// frame is accepted before. Everything here is pure (no sockets), so each
// step can be tested and fuzzed alone.
//
// Message order (each a frame of frame.hpp whose payload is given here):
//   1. hello      connector -> acceptor: connector's nonce Nc, connector rank,
//                 the rank it means to reach (encode_hello).
//   2. challenge  acceptor -> connector: acceptor's nonce Na (32 bytes).
//   3. proof      connector -> acceptor: make_proof(connector, Nc, Na).
//                 The acceptor checks it with verify_proof and closes the
//                 connection on failure.
//   4. welcome    acceptor -> connector: make_proof(acceptor, Na, Nc).
//                 The connector checks it; then data frames may flow.
// The connector proves first, so the acceptor, the side any stranger can
// reach, never computes an HMAC for someone who has not proven the secret.
//
// A proof is HMAC(secret, "tutti-v1" | role | own nonce | peer nonce |
// connector rank | acceptor rank | job id length | job id). The role keeps a
// proof from being reflected back as the other side's; the nonces make a
// recorded proof useless in a later handshake; the ranks and job id bind it
// to this one connection of this one job.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace tutti::tcp {

// The environment variable through which the launcher passes the secret.
inline constexpr const char* job_secret_variable = "TUTTI_JOB_SECRET";

// 32 random bytes shared by the ranks of one job. Deliberately not
// printable: there is no operator<< or formatter, and no error message ever
// contains it. to_hex() exists only to put it into the environment.
class job_secret {
public:
    static constexpr std::size_t size = 32;

    static job_secret generate();
    // Throws tutti::error (errc::invalid_argument) for a wrong length or a
    // character that is not a hex digit; the message never quotes the text.
    static job_secret from_hex(std::string_view hex);
    // Reads TUTTI_JOB_SECRET; an unset variable is an error too.
    static job_secret from_environment();

    std::string to_hex() const;
    std::span<const std::byte, size> bytes() const noexcept { return bytes_; }

    job_secret(const job_secret&) = default;
    job_secret& operator=(const job_secret&) = default;
    ~job_secret();

private:
    job_secret() = default;
    std::array<std::byte, size> bytes_{};
};

enum class handshake_role : std::uint8_t { connector = 1, acceptor = 2 };

inline constexpr std::size_t nonce_size = 32;
inline constexpr std::size_t proof_size = 32;
using nonce = std::array<std::byte, nonce_size>;
using proof_bytes = std::array<std::byte, proof_size>;

// What a proof is bound to, the same on both sides of one connection.
struct handshake_binding {
    std::string_view job_id;
    std::int32_t connector_rank = 0;
    std::int32_t acceptor_rank = 0;
};

// A fresh random nonce (RAND_bytes).
nonce make_challenge();

proof_bytes make_proof(const job_secret& secret, handshake_role self, const nonce& own_nonce,
                       const nonce& peer_nonce, const handshake_binding& binding);

// Checks, in constant time, a proof received from the peer playing peer_role.
// Throws tutti::error (errc::invalid_argument) if it has the wrong length or
// does not match: the peer has another secret, belongs to another job, or
// replays or altered a handshake.
void verify_proof(const job_secret& secret, handshake_role peer_role, const nonce& peer_nonce,
                  const nonce& own_nonce, const handshake_binding& binding,
                  std::span<const std::byte> received);

// The payload of a hello frame.
struct hello_message {
    nonce challenge{};
    std::int32_t connector_rank = 0;
    std::int32_t acceptor_rank = 0;
};

inline constexpr std::size_t hello_size = nonce_size + 8;

std::array<std::byte, hello_size> encode_hello(const hello_message& hello);
// Throws tutti::error (errc::invalid_argument) for a payload of the wrong
// size, ranks outside the job of job_size ranks, or a rank calling itself.
hello_message decode_hello(std::span<const std::byte> payload, std::int32_t job_size);

// The payload of a challenge frame: exactly one nonce.
nonce decode_challenge(std::span<const std::byte> payload);

} // namespace tutti::tcp
