#include "transports/tcp/handshake.hpp"

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include "core/error.hpp"

namespace tutti::tcp {

namespace {

constexpr std::string_view proof_label = "tutti-v1";

error malformed(const std::string& what) {
    return error(errc::invalid_argument, "malformed tcp handshake: " + what);
}

void fill_random(std::span<std::byte> out) {
    if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(out.size())) != 1)
        throw error(errc::invalid_argument,
                    "OpenSSL could not produce random bytes for the tcp handshake");
}

int hex_value(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

void put_u32(unsigned char* out, std::uint32_t value) {
    for (int i = 0; i < 4; ++i)
        out[i] = static_cast<unsigned char>(value >> (8 * i));
}

std::int32_t get_i32(std::span<const std::byte> in) {
    std::uint32_t value = 0;
    for (std::size_t i = 0; i < 4; ++i)
        value |= std::uint32_t{std::to_integer<std::uint8_t>(in[i])} << (8 * i);
    return static_cast<std::int32_t>(value);
}

} // namespace

job_secret job_secret::generate() {
    job_secret secret;
    fill_random(secret.bytes_);
    return secret;
}

job_secret job_secret::from_hex(std::string_view hex) {
    if (hex.size() != 2 * size)
        throw error(errc::invalid_argument,
                    fmt::format("{} must be {} hex digits, but it has {} characters",
                                job_secret_variable, 2 * size, hex.size()));
    job_secret secret;
    for (std::size_t i = 0; i < size; ++i) {
        const int high = hex_value(hex[2 * i]);
        const int low = hex_value(hex[2 * i + 1]);
        if (high < 0 || low < 0)
            throw error(errc::invalid_argument,
                        fmt::format("{} must be {} hex digits, but character {} is not one",
                                    job_secret_variable, 2 * size, high < 0 ? 2 * i : 2 * i + 1));
        secret.bytes_[i] = static_cast<std::byte>(high * 16 + low);
    }
    return secret;
}

job_secret job_secret::from_environment() {
    const char* value = std::getenv(job_secret_variable);
    if (value == nullptr)
        throw error(errc::invalid_argument,
                    fmt::format("{} is not set: ranks of a tcp job need the secret their "
                                "launcher (tuttirun) created",
                                job_secret_variable));
    return from_hex(value);
}

std::string job_secret::to_hex() const {
    constexpr std::string_view digits = "0123456789abcdef";
    std::string out;
    out.reserve(2 * size);
    for (auto b : bytes_) {
        const auto v = std::to_integer<unsigned>(b);
        out += digits[v >> 4];
        out += digits[v & 15];
    }
    return out;
}

job_secret::~job_secret() {
    OPENSSL_cleanse(bytes_.data(), bytes_.size());
}

nonce make_challenge() {
    nonce n;
    fill_random(n);
    return n;
}

proof_bytes make_proof(const job_secret& secret, handshake_role self, const nonce& own_nonce,
                       const nonce& peer_nonce, const handshake_binding& binding) {
    // The fields in order; all have fixed lengths but the job id, whose
    // length comes first so that no two bindings feed the same bytes.
    EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    if (mac == nullptr) throw error(errc::invalid_argument, "OpenSSL has no HMAC");
    EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(mac);
    EVP_MAC_free(mac);
    if (ctx == nullptr) throw error(errc::invalid_argument, "OpenSSL could not allocate an HMAC");

    char digest[] = "SHA256";
    const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0),
                                 OSSL_PARAM_construct_end()};
    unsigned char ranks[8];
    put_u32(ranks, static_cast<std::uint32_t>(binding.connector_rank));
    put_u32(ranks + 4, static_cast<std::uint32_t>(binding.acceptor_rank));
    unsigned char job_id_length[8];
    const auto length = static_cast<std::uint64_t>(binding.job_id.size());
    for (int i = 0; i < 8; ++i)
        job_id_length[i] = static_cast<unsigned char>(length >> (8 * i));
    const auto role = static_cast<unsigned char>(self);

    proof_bytes out{};
    std::size_t written = 0;
    const auto* key = reinterpret_cast<const unsigned char*>(secret.bytes().data());
    const bool ok =
        EVP_MAC_init(ctx, key, secret.bytes().size(), params) == 1 &&
        EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(proof_label.data()),
                       proof_label.size()) == 1 &&
        EVP_MAC_update(ctx, &role, 1) == 1 &&
        EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(own_nonce.data()),
                       own_nonce.size()) == 1 &&
        EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(peer_nonce.data()),
                       peer_nonce.size()) == 1 &&
        EVP_MAC_update(ctx, ranks, sizeof ranks) == 1 &&
        EVP_MAC_update(ctx, job_id_length, sizeof job_id_length) == 1 &&
        EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(binding.job_id.data()),
                       binding.job_id.size()) == 1 &&
        EVP_MAC_final(ctx, reinterpret_cast<unsigned char*>(out.data()), &written, out.size()) ==
            1 &&
        written == out.size();
    EVP_MAC_CTX_free(ctx);
    if (!ok) throw error(errc::invalid_argument, "OpenSSL could not compute an HMAC-SHA256");
    return out;
}

void verify_proof(const job_secret& secret, handshake_role peer_role, const nonce& peer_nonce,
                  const nonce& own_nonce, const handshake_binding& binding,
                  std::span<const std::byte> received) {
    if (received.size() != proof_size)
        throw malformed(
            fmt::format("a proof of {} bytes (a proof has {})", received.size(), proof_size));
    // The peer computed its proof with its own nonce first.
    const auto expected = make_proof(secret, peer_role, peer_nonce, own_nonce, binding);
    if (CRYPTO_memcmp(expected.data(), received.data(), proof_size) != 0)
        throw error(errc::invalid_argument,
                    fmt::format("tcp handshake: the {} (rank {}) did not prove it knows the job "
                                "secret (another secret, another job, or a replayed or altered "
                                "handshake)",
                                peer_role == handshake_role::connector ? "connector" : "acceptor",
                                peer_role == handshake_role::connector ? binding.connector_rank
                                                                       : binding.acceptor_rank));
}

std::array<std::byte, hello_size> encode_hello(const hello_message& hello) {
    std::array<std::byte, hello_size> out{};
    std::memcpy(out.data(), hello.challenge.data(), nonce_size);
    unsigned char ranks[8];
    put_u32(ranks, static_cast<std::uint32_t>(hello.connector_rank));
    put_u32(ranks + 4, static_cast<std::uint32_t>(hello.acceptor_rank));
    std::memcpy(out.data() + nonce_size, ranks, sizeof ranks);
    return out;
}

hello_message decode_hello(std::span<const std::byte> payload, std::int32_t job_size) {
    if (payload.size() != hello_size)
        throw malformed(
            fmt::format("a hello of {} bytes (a hello has {})", payload.size(), hello_size));
    hello_message hello;
    std::memcpy(hello.challenge.data(), payload.data(), nonce_size);
    hello.connector_rank = get_i32(payload.subspan(nonce_size, 4));
    hello.acceptor_rank = get_i32(payload.subspan(nonce_size + 4, 4));
    for (auto rank : {hello.connector_rank, hello.acceptor_rank})
        if (rank < 0 || rank >= job_size)
            throw malformed(
                fmt::format("a hello names rank {}, outside the job of {} ranks", rank, job_size));
    if (hello.connector_rank == hello.acceptor_rank)
        throw malformed(fmt::format("a hello from rank {} to itself", hello.connector_rank));
    return hello;
}

nonce decode_challenge(std::span<const std::byte> payload) {
    if (payload.size() != nonce_size)
        throw malformed(fmt::format("a challenge of {} bytes (a challenge has {})", payload.size(),
                                    nonce_size));
    nonce n;
    std::memcpy(n.data(), payload.data(), nonce_size);
    return n;
}

} // namespace tutti::tcp
