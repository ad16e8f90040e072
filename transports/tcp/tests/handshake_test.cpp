// The handshake: peers with one secret accept each other; another secret,
// another job, a replayed, altered or reflected proof is refused; and the
// secret never shows in an error.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

#include "core/error.hpp"
#include "transports/tcp/handshake.hpp"

using namespace tutti;
using namespace tutti::tcp;

namespace {

const handshake_binding binding{.job_id = "job-42", .connector_rank = 1, .acceptor_rank = 3};

struct transcript {
    nonce connector_nonce = make_challenge();
    nonce acceptor_nonce = make_challenge();
    proof_bytes connector_proof{};
    proof_bytes acceptor_proof{};
};

// Runs the four messages between a connector and an acceptor holding the
// given secrets and bindings; throws where the handshake would stop.
transcript run(const job_secret& connector_secret, const job_secret& acceptor_secret,
               const handshake_binding& at_connector = binding,
               const handshake_binding& at_acceptor = binding) {
    transcript t;
    // hello: connector -> acceptor, through the wire format.
    const auto hello = decode_hello(
        encode_hello({t.connector_nonce, at_connector.connector_rank, at_connector.acceptor_rank}),
        8);
    CHECK(hello.challenge == t.connector_nonce);
    // challenge: acceptor -> connector.
    const auto challenge = decode_challenge(t.acceptor_nonce);
    // proof: connector -> acceptor.
    t.connector_proof = make_proof(connector_secret, handshake_role::connector, t.connector_nonce,
                                   challenge, at_connector);
    verify_proof(acceptor_secret, handshake_role::connector, hello.challenge, t.acceptor_nonce,
                 at_acceptor, t.connector_proof);
    // welcome: acceptor -> connector.
    t.acceptor_proof = make_proof(acceptor_secret, handshake_role::acceptor, t.acceptor_nonce,
                                  hello.challenge, at_acceptor);
    verify_proof(connector_secret, handshake_role::acceptor, challenge, t.connector_nonce,
                 at_connector, t.acceptor_proof);
    return t;
}

std::string message_of(auto&& f) {
    try {
        f();
    } catch (const error& e) {
        return e.what();
    }
    FAIL("no error");
    return {};
}

} // namespace

TEST_CASE("tcp handshake: peers sharing the secret accept each other") {
    const auto secret = job_secret::generate();
    const auto copy = job_secret::from_hex(secret.to_hex());
    CHECK_NOTHROW(run(secret, copy));
    // Fresh nonces: two handshakes never produce the same proofs.
    const auto a = run(secret, secret);
    const auto b = run(secret, secret);
    CHECK(a.connector_nonce != b.connector_nonce);
    CHECK(a.connector_proof != b.connector_proof);
    CHECK(a.connector_proof != a.acceptor_proof);
}

TEST_CASE("tcp handshake: another secret is refused at the first proof") {
    const auto ours = job_secret::generate();
    const auto theirs = job_secret::generate();
    CHECK_THROWS_WITH_AS(run(theirs, ours),
                         doctest::Contains("the connector (rank 1) did not prove it knows"), error);
    // An acceptor with the wrong secret is caught by the connector.
    transcript t;
    const auto forged =
        make_proof(theirs, handshake_role::acceptor, t.acceptor_nonce, t.connector_nonce, binding);
    CHECK_THROWS_WITH_AS(verify_proof(ours, handshake_role::acceptor, t.acceptor_nonce,
                                      t.connector_nonce, binding, forged),
                         doctest::Contains("the acceptor (rank 3) did not prove"), error);
}

TEST_CASE("tcp handshake: another job or other ranks are refused") {
    const auto secret = job_secret::generate();
    auto other_job = binding;
    other_job.job_id = "job-43";
    CHECK_THROWS_AS(run(secret, secret, other_job, binding), error);
    auto other_connector = binding;
    other_connector.connector_rank = 2;
    CHECK_THROWS_AS(run(secret, secret, other_connector, binding), error);
    auto other_acceptor = binding;
    other_acceptor.acceptor_rank = 0;
    CHECK_THROWS_AS(run(secret, secret, other_acceptor, binding), error);
    // An empty job id is a different job too.
    auto empty_job = binding;
    empty_job.job_id = "";
    CHECK_THROWS_AS(run(secret, secret, empty_job, binding), error);
}

TEST_CASE("tcp handshake: a replayed, altered or reflected proof is refused") {
    const auto secret = job_secret::generate();
    const auto recorded = run(secret, secret);

    // Replay: an eavesdropper resends the recorded connector proof to a new
    // acceptor nonce.
    const auto fresh = make_challenge();
    CHECK_THROWS_AS(verify_proof(secret, handshake_role::connector, recorded.connector_nonce, fresh,
                                 binding, recorded.connector_proof),
                    error);

    // Tampering: any bit flipped anywhere in the proof.
    for (std::size_t i = 0; i < proof_size; ++i)
        for (int bit = 0; bit < 8; bit += 7) {
            auto altered = recorded.connector_proof;
            altered[i] ^= std::byte{static_cast<std::uint8_t>(1u << bit)};
            CHECK_THROWS_AS(verify_proof(secret, handshake_role::connector,
                                         recorded.connector_nonce, recorded.acceptor_nonce, binding,
                                         altered),
                            error);
        }
    // A nonce altered on the way changes what the other side expects.
    auto nonce_altered = recorded.connector_nonce;
    nonce_altered[0] ^= std::byte{1};
    CHECK_THROWS_AS(verify_proof(secret, handshake_role::connector, nonce_altered,
                                 recorded.acceptor_nonce, binding, recorded.connector_proof),
                    error);

    // Reflection: the acceptor's own proof sent back as the connector's, or
    // a proof checked under the other role.
    CHECK_THROWS_AS(verify_proof(secret, handshake_role::connector, recorded.connector_nonce,
                                 recorded.acceptor_nonce, binding, recorded.acceptor_proof),
                    error);
    CHECK_THROWS_AS(verify_proof(secret, handshake_role::acceptor, recorded.connector_nonce,
                                 recorded.acceptor_nonce, binding, recorded.connector_proof),
                    error);
    // Swapped nonces (a proof computed as if the peer's nonce were its own).
    const auto swapped = make_proof(secret, handshake_role::connector, recorded.acceptor_nonce,
                                    recorded.connector_nonce, binding);
    CHECK_THROWS_AS(verify_proof(secret, handshake_role::connector, recorded.connector_nonce,
                                 recorded.acceptor_nonce, binding, swapped),
                    error);

    // Wrong length.
    CHECK_THROWS_WITH_AS(verify_proof(secret, handshake_role::connector, recorded.connector_nonce,
                                      recorded.acceptor_nonce, binding,
                                      std::span(recorded.connector_proof).first(31)),
                         doctest::Contains("a proof of 31 bytes"), error);
    CHECK_THROWS_AS(verify_proof(secret, handshake_role::connector, recorded.connector_nonce,
                                 recorded.acceptor_nonce, binding, {}),
                    error);
}

TEST_CASE("tcp handshake: hello and challenge payloads are checked") {
    const hello_message hello{make_challenge(), 2, 0};
    const auto bytes = encode_hello(hello);
    const auto back = decode_hello(bytes, 3);
    CHECK(back.challenge == hello.challenge);
    CHECK(back.connector_rank == 2);
    CHECK(back.acceptor_rank == 0);
    CHECK_THROWS_WITH_AS(decode_hello(bytes, 2),
                         doctest::Contains("names rank 2, outside the job of 2 ranks"), error);
    CHECK_THROWS_WITH_AS(decode_hello(std::span(bytes).first(39), 3),
                         doctest::Contains("a hello of 39 bytes"), error);
    CHECK_THROWS_WITH_AS(decode_hello(encode_hello({hello.challenge, 1, 1}), 3),
                         doctest::Contains("to itself"), error);
    CHECK_THROWS_WITH_AS(decode_hello(encode_hello({hello.challenge, -1, 1}), 3),
                         doctest::Contains("rank -1"), error);
    CHECK_THROWS_WITH_AS(decode_challenge(std::span(bytes).first(33)),
                         doctest::Contains("a challenge of 33 bytes"), error);
}

TEST_CASE("tcp handshake: secrets parse from hex with clear errors") {
    const auto secret = job_secret::generate();
    const auto hex = secret.to_hex();
    CHECK(hex.size() == 64);
    CHECK(hex.find_first_not_of("0123456789abcdef") == std::string::npos);
    const auto back = job_secret::from_hex(hex);
    CHECK(std::equal(back.bytes().begin(), back.bytes().end(), secret.bytes().begin()));
    std::string upper = hex;
    for (auto& c : upper)
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    CHECK(job_secret::from_hex(upper).to_hex() == hex);
    CHECK(job_secret::generate().to_hex() != hex);

    CHECK_THROWS_WITH_AS(job_secret::from_hex(""),
                         doctest::Contains("must be 64 hex digits, but it has 0 characters"),
                         error);
    CHECK_THROWS_WITH_AS(job_secret::from_hex(hex.substr(1)),
                         doctest::Contains("but it has 63 characters"), error);
    CHECK_THROWS_WITH_AS(job_secret::from_hex(hex + "0"),
                         doctest::Contains("but it has 65 characters"), error);
    auto bad = hex;
    bad[10] = 'g';
    CHECK_THROWS_WITH_AS(job_secret::from_hex(bad), doctest::Contains("character 10 is not one"),
                         error);
    bad = hex;
    bad[63] = ' ';
    CHECK_THROWS_WITH_AS(job_secret::from_hex(bad), doctest::Contains("character 63 is not one"),
                         error);

    ::unsetenv(job_secret_variable);
    CHECK_THROWS_WITH_AS(job_secret::from_environment(),
                         doctest::Contains("TUTTI_JOB_SECRET is not set"), error);
    ::setenv(job_secret_variable, hex.c_str(), 1);
    CHECK(job_secret::from_environment().to_hex() == hex);
    ::setenv(job_secret_variable, "xyz", 1);
    CHECK_THROWS_AS(job_secret::from_environment(), error);
    ::unsetenv(job_secret_variable);
}

TEST_CASE("tcp handshake: the secret never appears in an error message") {
    const auto secret = job_secret::generate();
    const auto hex = secret.to_hex();
    auto never_quotes = [&](const std::string& text, const std::string& secret_text) {
        CHECK_FALSE(text.empty());
        CHECK(text.find(secret_text) == std::string::npos);
        // Not even a recognizable piece of it.
        for (std::size_t i = 0; i + 8 <= secret_text.size(); i += 8)
            CHECK(text.find(secret_text.substr(i, 8)) == std::string::npos);
    };
    never_quotes(message_of([&] { (void)job_secret::from_hex(hex.substr(0, 63)); }), hex);
    never_quotes(message_of([&] { (void)job_secret::from_hex(hex + "ff"); }), hex);
    auto bad = hex;
    bad[40] = 'z';
    never_quotes(message_of([&] { (void)job_secret::from_hex(bad); }), bad);
    ::setenv(job_secret_variable, bad.c_str(), 1);
    never_quotes(message_of([&] { (void)job_secret::from_environment(); }), bad);
    ::unsetenv(job_secret_variable);
    never_quotes(message_of([&] { (void)run(job_secret::generate(), secret); }), hex);
    transcript t;
    never_quotes(message_of([&] {
                     verify_proof(secret, handshake_role::acceptor, t.acceptor_nonce,
                                  t.connector_nonce, binding, t.acceptor_proof);
                 }),
                 hex);
}
