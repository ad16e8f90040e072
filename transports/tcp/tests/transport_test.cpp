// The TCP transport against a hand-driven peer in the same process: the test
// plays rank 1 (and strangers) with its own sockets on the transport's
// io_context, so every frame on the wire is chosen here. Strangers without
// the secret, garbage and early data frames are closed and counted while the
// real peer still gets through; malformed frames after a valid handshake
// close that connection with an error naming the fault; a peer that vanishes
// fails the receives waiting for it; an unreachable peer is named with its
// address.
#include <doctest/doctest.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/redirect_error.hpp>
#include <asio/write.hpp>

#include "core/error.hpp"
#include "core/progress.hpp"
#include "transports/tcp/frame.hpp"
#include "transports/tcp/handshake.hpp"
#include "transports/tcp/tcp.hpp"

using namespace tutti;
namespace ip = asio::ip;

namespace {

const std::string secret_hex(64, 'a');
const std::string job = "tcp-transport-test";

// Rank 0 of a job whose other ranks' endpoints are given, with the machines
// they say they run on ("elsewhere" unless given; none at all, as an older
// tutti published, for nullopt).
class fake_bootstrap final : public bootstrap {
public:
    explicit fake_bootstrap(std::vector<std::string> others,
                            std::vector<std::optional<std::string>> machines = {},
                            std::string ranks_per_core = "7")
        : others_(std::move(others)), machines_(std::move(machines)),
          ranks_per_core_(std::move(ranks_per_core)) {
        machines_.resize(others_.size(), "elsewhere");
    }
    int rank() const noexcept override { return 0; }
    int size() const noexcept override { return static_cast<int>(others_.size()) + 1; }
    const std::string& job_id() const noexcept override { return job_; }
    const std::string& node() const noexcept override { return node_; }
    std::string_view method() const noexcept override { return "test"; }
    std::string reachable_address() const override { return "127.0.0.1"; }
    std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> mine) override {
        std::vector<std::vector<std::byte>> all{{mine.begin(), mine.end()}};
        for (std::size_t i = 0; i < others_.size(); ++i) {
            // Address, no secret, ranks_per_core (only rank 0's counts), machine.
            const auto text = others_[i] + "|" +
                              (machines_[i] ? "|" + ranks_per_core_ + "|" + *machines_[i] : "");
            const auto* p = reinterpret_cast<const std::byte*>(text.data());
            all.emplace_back(p, p + text.size());
        }
        return all;
    }

private:
    std::vector<std::string> others_;
    std::vector<std::optional<std::string>> machines_;
    std::string ranks_per_core_;
    std::string job_ = job;
    std::string node_ = "here";
};

// Starts a coroutine of either kind: the tests' raw-socket peers are Asio's,
// the transport's calls tutti's.
template <class T, class Handler>
void start(asio::io_context& io, asio::awaitable<T> work, Handler handler) {
    asio::co_spawn(io, std::move(work), std::move(handler));
}
template <class T, class Handler>
void start(asio::io_context& io, task<T> work, Handler handler) {
    spawn(io, std::move(work), std::move(handler));
}

// Runs the context until `holds` or 20 s have passed; whether it holds.
template <class Holds>
bool run_until(asio::io_context& io, Holds holds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!holds() && std::chrono::steady_clock::now() < deadline) {
        if (io.stopped()) io.restart();
        io.run_one_for(std::chrono::milliseconds(10));
    }
    return holds();
}

// Runs the context until the coroutine ends; fails the test after 20 s.
template <class Work, class T = typename Work::value_type>
T run(asio::io_context& io, Work work) {
    using stored = std::conditional_t<std::is_void_v<T>, bool, T>;
    std::optional<stored> result;
    std::exception_ptr failure;
    bool done = false;
    if constexpr (std::is_void_v<T>) {
        start(io, std::move(work), [&](std::exception_ptr e) {
            failure = e;
            done = true;
        });
    } else {
        start(io, std::move(work), [&](std::exception_ptr e, T value) {
            failure = e;
            if (!e) result.emplace(std::move(value));
            done = true;
        });
    }
    REQUIRE_MESSAGE(run_until(io, [&] { return done; }),
                    "the test's peer did not finish within 20 s");
    if (failure) std::rethrow_exception(failure);
    if constexpr (!std::is_void_v<T>) return std::move(*result);
}

// Runs the context until the request completes; its error text, "" on success.
std::string outcome(asio::io_context& io, const request& r, errc expected = errc::peer_lost) {
    REQUIRE_MESSAGE(run_until(io, [&] { return r->done(); }),
                    "the request did not complete within 20 s");
    bool finished = false;
    std::string text;
    spawn(
        io,
        [](request r, std::string& text, errc expected) -> task<void> {
            try {
                co_await r->wait();
            } catch (const error& e) {
                CHECK(e.code() == expected);
                text = e.what();
            }
        }(r, text, expected),
        [&](std::exception_ptr) { finished = true; });
    while (!finished) {
        if (io.stopped()) io.restart(); // nothing else left to run (no transport)
        io.run_one_for(std::chrono::milliseconds(10));
    }
    return text;
}

message_header data_header(int source, std::uint64_t bytes, std::uint64_t step = 0) {
    message_header m;
    m.key = {.communicator = 7, .generation = 1, .step = step, .source = source};
    m.kind = collective::broadcast;
    m.algorithm = algorithm_id("test");
    m.bytes = bytes;
    return m;
}

asio::awaitable<void> write_raw(ip::tcp::socket& s, std::vector<std::byte> bytes) {
    co_await asio::async_write(s, asio::buffer(bytes), asio::use_awaitable);
}

asio::awaitable<void> write_frame(ip::tcp::socket& s, tcp::frame_kind kind, message_header m,
                                  std::vector<std::byte> payload) {
    m.bytes = payload.size();
    const auto header = tcp::encode_frame_header({kind, m});
    std::vector<std::byte> bytes(header.begin(), header.end());
    bytes.insert(bytes.end(), payload.begin(), payload.end());
    co_await write_raw(s, std::move(bytes));
}

asio::awaitable<std::vector<std::byte>> read_payload(ip::tcp::socket& s, tcp::frame_kind want) {
    tcp::frame_header_bytes raw{};
    co_await asio::async_read(s, asio::buffer(raw), asio::use_awaitable);
    const auto header = tcp::decode_frame_header(raw, {.max_payload = 1 << 20, .job_size = 3});
    REQUIRE(header.kind == want);
    std::vector<std::byte> payload(header.message.bytes);
    co_await asio::async_read(s, asio::buffer(payload), asio::use_awaitable);
    co_return payload;
}

// Connects to the transport; with a secret, proves it as rank `me` and
// checks the transport's proof. Returns the socket either way.
asio::awaitable<std::shared_ptr<ip::tcp::socket>>
connect(std::string endpoint, const std::string& secret, int me = 1, bool handshake = true) {
    auto executor = co_await asio::this_coro::executor;
    auto s = std::make_shared<ip::tcp::socket>(executor);
    const auto colon = endpoint.rfind(':');
    const ip::tcp::endpoint where(
        ip::make_address(endpoint.substr(0, colon)),
        static_cast<std::uint16_t>(std::stoi(endpoint.substr(colon + 1))));
    co_await s->async_connect(where, asio::use_awaitable);
    if (!handshake) co_return s;
    const auto key = tcp::job_secret::from_hex(secret);
    tcp::hello_message hello{tcp::make_challenge(), me, 0};
    const auto hello_bytes = tcp::encode_hello(hello);
    co_await write_frame(*s, tcp::frame_kind::hello, data_header(me, 0),
                         {hello_bytes.begin(), hello_bytes.end()});
    const auto theirs =
        tcp::decode_challenge(co_await read_payload(*s, tcp::frame_kind::challenge));
    const tcp::handshake_binding binding{job, me, 0};
    const auto proof =
        tcp::make_proof(key, tcp::handshake_role::connector, hello.challenge, theirs, binding);
    co_await write_frame(*s, tcp::frame_kind::proof, data_header(me, 0),
                         {proof.begin(), proof.end()});
    const auto welcome = co_await read_payload(*s, tcp::frame_kind::welcome);
    tcp::verify_proof(key, tcp::handshake_role::acceptor, theirs, hello.challenge, binding,
                      welcome);
    co_return s;
}

// Reads until the transport closes the connection: true when it did.
asio::awaitable<bool> closed_by_peer(std::shared_ptr<ip::tcp::socket> s) {
    std::array<std::byte, 4096> sink{};
    for (;;) {
        asio::error_code ec;
        co_await s->async_read_some(asio::buffer(sink),
                                    asio::redirect_error(asio::use_awaitable, ec));
        if (ec) co_return ec == asio::error::eof || ec == asio::error::connection_reset;
    }
}

tcp::options test_options() {
    tcp::options o;
    o.listen_address = "127.0.0.1";
    o.secret = secret_hex;
    o.max_frame_payload = 1 << 20;
    o.connect_timeout = std::chrono::milliseconds(2000);
    return o;
}

std::vector<std::byte> pattern(std::size_t n, int seed) {
    std::vector<std::byte> bytes(n);
    for (std::size_t i = 0; i < n; ++i)
        bytes[i] = static_cast<std::byte>((i * 31 + static_cast<std::size_t>(seed)) & 0xff);
    return bytes;
}

} // namespace

TEST_CASE("tcp transport: strangers are closed and counted, the real peer gets through") {
    asio::io_context io;
    fake_bootstrap boot({"127.0.0.1:9", "127.0.0.1:9"});
    auto t = tcp::create_transport(boot, io, test_options());
    const auto where = t->endpoint();
    CHECK(where.starts_with("127.0.0.1:"));
    CHECK(t->endpoint_of(1) == "127.0.0.1:9");

    // Knows the protocol but not the secret.
    const std::string wrong(64, 'b');
    CHECK_THROWS_AS(run(io, connect(where, wrong)), std::exception);
    // Garbage.
    CHECK(run(io, [](std::string where) -> asio::awaitable<bool> {
        auto s = co_await connect(where, "", 1, false);
        co_await write_raw(*s, pattern(200, 3));
        co_return co_await closed_by_peer(s);
    }(where)));
    // A data frame instead of a hello.
    CHECK(run(io, [](std::string where) -> asio::awaitable<bool> {
        auto s = co_await connect(where, "", 1, false);
        co_await write_frame(*s, tcp::frame_kind::data, data_header(1, 0), pattern(16, 1));
        co_return co_await closed_by_peer(s);
    }(where)));
    CHECK(t->counters().rejected_connections == 3);
    CHECK(t->counters().connections == 0);

    // Rank 1 itself: its message arrives whole.
    std::vector<std::byte> got(4096);
    auto r = t->irecv(data_header(1, got.size()), got);
    auto s = run(io, connect(where, secret_hex));
    run(io, write_frame(*s, tcp::frame_kind::data, data_header(1, 0), pattern(4096, 5)));
    CHECK(outcome(io, r).empty());
    CHECK(got == pattern(4096, 5));
    // And ours to it: a message larger than the read buffer, sent in place.
    const auto big = pattern(700000, 9);
    auto sent = t->isend(1, data_header(0, big.size(), 1), big);
    const auto arrived = run(io, read_payload(*s, tcp::frame_kind::data));
    CHECK(outcome(io, sent).empty());
    CHECK(arrived == big);
    CHECK(t->counters().connections == 1);
    CHECK(t->counters().rejected_connections == 3);
    CHECK(t->counters().bad_frames == 0);
    run(io, write_frame(*s, tcp::frame_kind::goodbye, data_header(1, 0), {}));
}

TEST_CASE("tcp transport: a malformed frame after the handshake closes that connection") {
    struct variant {
        const char* name;
        std::vector<std::byte> bytes;
        const char* reason;
    };
    auto header = [](tcp::frame_kind kind, message_header m) {
        const auto h = tcp::encode_frame_header({kind, m});
        return std::vector<std::byte>(h.begin(), h.end());
    };
    std::vector<variant> variants;
    auto bad_magic = header(tcp::frame_kind::data, data_header(1, 0));
    bad_magic[0] = std::byte{'X'};
    variants.push_back({"bad magic", bad_magic, "bad magic number"});
    variants.push_back({"too long", header(tcp::frame_kind::data, data_header(1, 2 << 20)),
                        "more than the 1048576 allowed"});
    variants.push_back({"another source", header(tcp::frame_kind::data, data_header(2, 0)),
                        "claiming to come from rank 2"});
    auto unknown_kind = header(tcp::frame_kind::data, data_header(1, 0));
    unknown_kind[6] = std::byte{99};
    variants.push_back({"unknown kind", unknown_kind, "unknown frame kind 99"});
    variants.push_back({"hello again", header(tcp::frame_kind::hello, data_header(1, 0)),
                        "unexpected hello frame"});
    auto out_of_range = header(tcp::frame_kind::data, data_header(1, 0));
    out_of_range[32] = std::byte{7};
    variants.push_back({"source outside the job", out_of_range, "source rank 7 outside"});

    for (const auto& v : variants) {
        CAPTURE(v.name);
        asio::io_context io;
        fake_bootstrap boot({"127.0.0.1:9", "127.0.0.1:9"});
        auto t = tcp::create_transport(boot, io, test_options());
        std::vector<std::byte> into(8);
        auto waiting = t->irecv(data_header(1, into.size()), into);
        auto s = run(io, connect(t->endpoint(), secret_hex));
        run(io, write_raw(*s, v.bytes));
        const auto text = outcome(io, waiting);
        CHECK(text.find("rank 1 sent a malformed frame") != std::string::npos);
        CHECK(text.find(v.reason) != std::string::npos);
        CHECK(run(io, closed_by_peer(s)));
        CHECK(t->counters().bad_frames == 1);
        // Later receives fail at once too.
        auto later = t->irecv(data_header(2, into.size(), 3), into);
        CHECK(outcome(io, later).find("rank 1") != std::string::npos);
    }
}

TEST_CASE("tcp transport: a peer that vanishes fails the receives; a goodbye is not a loss") {
    asio::io_context io;
    fake_bootstrap boot({"127.0.0.1:9", "127.0.0.1:9"});
    auto t = tcp::create_transport(boot, io, test_options());
    SUBCASE("vanished") {
        std::vector<std::byte> into(8);
        auto waiting = t->irecv(data_header(2, into.size()), into);
        auto s = run(io, connect(t->endpoint(), secret_hex));
        s->close();
        const auto text = outcome(io, waiting);
        CHECK(text.find("rank 1 at 127.0.0.1:9 was lost: its TCP connection ended without a "
                        "goodbye") != std::string::npos);
    }
    SUBCASE("goodbye") {
        std::vector<std::byte> from1(8);
        std::vector<std::byte> from2(8);
        auto waiting1 = t->irecv(data_header(1, from1.size()), from1);
        auto waiting2 = t->irecv(data_header(2, from2.size()), from2);
        auto s = run(io, connect(t->endpoint(), secret_hex));
        run(io, write_frame(*s, tcp::frame_kind::goodbye, data_header(1, 0), {}));
        s->shutdown(ip::tcp::socket::shutdown_send);
        CHECK(outcome(io, waiting1)
                  .find("rank 1 closed its TCP transport while rank 0 still "
                        "waited") != std::string::npos);
        CHECK(run(io, closed_by_peer(s)));
        io.run_for(std::chrono::milliseconds(50));
        CHECK_FALSE(waiting2->done()); // rank 2 is not affected
        const auto refused = t->isend(1, data_header(0, 0), {});
        CHECK(outcome(io, refused).find("rank 1 has closed") != std::string::npos);
    }
}

namespace {

// Rank 1 as a peer that heard rank 0's goodbye first: it reads to the end of
// rank 0's stream and closes without a goodbye of its own.
asio::awaitable<void> close_after_the_goodbye(std::shared_ptr<ip::tcp::socket> s, bool& closed) {
    co_await read_payload(*s, tcp::frame_kind::goodbye);
    if (co_await closed_by_peer(s)) {
        s->close();
        closed = true;
    }
}

} // namespace

TEST_CASE("tcp transport: a peer that closes in answer to our goodbye is no loss") {
    asio::io_context io;
    fake_bootstrap boot({"127.0.0.1:9", "127.0.0.1:9", "127.0.0.1:9"});
    auto t = tcp::create_transport(boot, io, test_options());
    std::vector<std::byte> into(8);
    auto waiting = t->irecv(data_header(2, into.size()), into);
    auto s = run(io, connect(t->endpoint(), secret_hex));
    bool closed = false;
    asio::co_spawn(io, close_after_the_goodbye(s, closed), asio::detached);
    t.reset();
    CHECK(closed);
    REQUIRE(waiting->done());
    // Taken for a loss, rank 1 would be named here.
    const auto text = outcome(io, waiting);
    CAPTURE(text);
    CHECK(text.find("rank 0 shut its TCP transport down while a receive was pending") !=
          std::string::npos);
}

TEST_CASE("tcp transport: a receive still posted at shutdown ends failed, not dropped") {
    // Its waiter (a coroutine watching a peer that left without a goodbye
    // reaching us) must finish: dropped with the transport, it would never.
    asio::io_context io;
    fake_bootstrap boot({"127.0.0.1:9"});
    auto t = tcp::create_transport(boot, io, test_options());
    std::vector<std::byte> into(8);
    auto waiting = t->irecv(data_header(1, into.size()), into);
    t.reset();
    REQUIRE(waiting->done());
    CHECK(outcome(io, waiting)
              .find("rank 0 shut its TCP transport down while a receive was "
                    "pending") != std::string::npos);
}

TEST_CASE("tcp transport: early messages beyond max_unexpected_bytes wait for their receives") {
    asio::io_context io;
    fake_bootstrap boot({"127.0.0.1:9"});
    auto o = test_options();
    o.max_unexpected_bytes = 100000;
    auto t = tcp::create_transport(boot, io, o);
    auto s = run(io, connect(t->endpoint(), secret_hex));
    // Three early messages of 60000 bytes: the first is kept, the second
    // would exceed the bound, so the connection is read no further.
    for (int k = 0; k < 3; ++k)
        run(io, write_frame(*s, tcp::frame_kind::data, data_header(1, 0, k), pattern(60000, k)));
    std::vector<std::vector<std::byte>> got(3, std::vector<std::byte>(60000));
    auto third = t->irecv(data_header(1, 60000, 2), got[2]);
    io.run_for(std::chrono::milliseconds(200));
    CHECK_FALSE(third->done());
    // Taking the first makes room: the second is kept, the third lands in
    // its posted receive.
    auto first = t->irecv(data_header(1, 60000, 0), got[0]);
    CHECK(first->done());
    CHECK(outcome(io, third).empty());
    auto second = t->irecv(data_header(1, 60000, 1), got[1]);
    CHECK(outcome(io, second).empty());
    for (int k = 0; k < 3; ++k)
        CHECK(got[static_cast<std::size_t>(k)] == pattern(60000, k));
    run(io, write_frame(*s, tcp::frame_kind::goodbye, data_header(1, 0), {}));
}

namespace {

using frame_list = std::vector<std::pair<message_header, std::vector<std::byte>>>;

asio::awaitable<void> write_frames(std::shared_ptr<ip::tcp::socket> s, frame_list frames) {
    for (auto& frame : frames)
        co_await write_frame(*s, tcp::frame_kind::data, frame.first, std::move(frame.second));
}

// Frames written one after the other, not awaited: the transport may hold
// their bytes back (it reads no further while it waits for a receive).
void write_frames_soon(asio::io_context& io, std::shared_ptr<ip::tcp::socket> s,
                       frame_list frames) {
    start(io, write_frames(std::move(s), std::move(frames)), [](std::exception_ptr) {});
}

constexpr std::size_t large_message = 512 * 1024; // read past the reader's buffer

// The environment's setting overrides the options these tests set.
bool unposted_wait_set_outside() {
    if (!std::getenv("TUTTI_TCP_UNPOSTED_WAIT_NS_PER_BYTE")) return false;
    MESSAGE("TUTTI_TCP_UNPOSTED_WAIT_NS_PER_BYTE is set, which overrides the options tested here");
    return true;
}

// A transport whose readers wait `ns_per_byte` for the receives of large
// messages, and the test's connection to it as rank 1.
struct waiting_reader {
    explicit waiting_reader(double ns_per_byte) {
        auto o = test_options();
        o.unposted_wait_ns_per_byte = ns_per_byte;
        t = tcp::create_transport(boot, io, o);
        s = run(io, connect(t->endpoint(), secret_hex));
    }
    asio::io_context io;
    fake_bootstrap boot{{"127.0.0.1:9"}};
    std::shared_ptr<tcp::transport> t;
    std::shared_ptr<ip::tcp::socket> s;
};

} // namespace

TEST_CASE("tcp transport: a large message waits for its receive and lands straight in it") {
    if (unposted_wait_set_outside()) return;
    waiting_reader w(20000); // 10 s for the message: longer than the test waits
    auto& [io, boot, t, s] = w;
    write_frames_soon(io, s, {{data_header(1, 0, 0), pattern(large_message, 3)}});
    REQUIRE(run_until(io, [&] { return t->counters().unposted_waits == 1; }));
    std::vector<std::byte> into(large_message);
    auto r = t->irecv(data_header(1, into.size(), 0), into);
    CHECK(outcome(io, r).empty());
    CHECK(into == pattern(large_message, 3));
    CHECK(t->counters().staged_messages == 0);
    run(io, write_frame(*s, tcp::frame_kind::goodbye, data_header(1, 0), {}));
}

TEST_CASE("tcp transport: a large message not received in time is kept, and what follows it "
          "comes through") {
    if (unposted_wait_set_outside()) return;
    waiting_reader w(40); // ~21 ms for the message
    auto& [io, boot, t, s] = w;
    // The program awaits the second message first, as it may: the first
    // cannot wait for its receive forever.
    write_frames_soon(io, s,
                      {{data_header(1, 0, 0), pattern(large_message, 4)},
                       {data_header(1, 0, 1), pattern(100, 5)}});
    std::vector<std::byte> second(100);
    auto r2 = t->irecv(data_header(1, second.size(), 1), second);
    CHECK(outcome(io, r2).empty());
    CHECK(second == pattern(100, 5));
    CHECK(t->counters().unposted_waits == 1);
    CHECK(t->counters().staged_messages == 1);
    std::vector<std::byte> first(large_message);
    auto r1 = t->irecv(data_header(1, first.size(), 0), first);
    CHECK(r1->done());
    CHECK(outcome(io, r1).empty());
    CHECK(first == pattern(large_message, 4));
    run(io, write_frame(*s, tcp::frame_kind::goodbye, data_header(1, 0), {}));
}

TEST_CASE("tcp transport: a mid-size message goes straight into a posted receive, and "
          "through the buffer, without waiting, when its receive comes later") {
    if (unposted_wait_set_outside()) return;
    waiting_reader w(20000); // waiting as a large one does, this one would wait 2 s
    auto& [io, boot, t, s] = w;
    constexpr std::size_t mid_size = 100 * 1024; // beyond one read ahead, within the buffer
    std::vector<std::byte> first(mid_size);
    auto r1 = t->irecv(data_header(1, first.size(), 0), first);
    write_frames_soon(io, s, {{data_header(1, 0, 0), pattern(mid_size, 7)}});
    CHECK(outcome(io, r1).empty());
    CHECK(first == pattern(mid_size, 7));
    CHECK(t->counters().straight_reads == 1);
    // Not posted: read whole into the buffer and kept, no wait for a
    // receive; the small message after it arrives, so it was read.
    std::vector<std::byte> third(10);
    auto r3 = t->irecv(data_header(1, third.size(), 2), third);
    write_frames_soon(io, s,
                      {{data_header(1, 0, 1), pattern(mid_size, 8)},
                       {data_header(1, 0, 2), pattern(third.size(), 9)}});
    CHECK(outcome(io, r3).empty());
    CHECK(third == pattern(third.size(), 9));
    std::vector<std::byte> second(mid_size);
    auto r2 = t->irecv(data_header(1, second.size(), 1), second);
    CHECK(r2->done());
    CHECK(outcome(io, r2).empty());
    CHECK(second == pattern(mid_size, 8));
    CHECK(t->counters().straight_reads == 1);
    CHECK(t->counters().unposted_waits == 0);
    CHECK(t->counters().staged_messages == 0);
    run(io, write_frame(*s, tcp::frame_kind::goodbye, data_header(1, 0), {}));
}

TEST_CASE("tcp transport: shutting down while a large message waits for its receive") {
    if (unposted_wait_set_outside()) return;
    waiting_reader w(1e6); // ~9 minutes for the message
    auto& [io, boot, t, s] = w;
    write_frames_soon(io, s, {{data_header(1, 0, 0), pattern(large_message, 6)}});
    REQUIRE(run_until(io, [&] { return t->counters().unposted_waits == 1; }));
    // Returns (the waiting reader ends with the transport) instead of
    // waiting out the bound; a hang here fails the suite's timeout.
    t.reset();
    io.poll();
}

namespace {

// Records what a receive's observer is told, and whether a report ever
// came before its bytes were in place.
struct recording_observer final : landing_observer {
    recording_observer(std::span<const std::byte> into, std::vector<std::byte> expected)
        : into(into), expected(std::move(expected)) {}
    void landed(std::size_t bytes) noexcept override {
        reports.push_back(bytes);
        if (bytes > into.size() ||
            !std::equal(into.begin(), into.begin() + static_cast<std::ptrdiff_t>(bytes),
                        expected.begin()))
            early = true;
    }
    std::span<const std::byte> into;
    std::vector<std::byte> expected;
    std::vector<std::size_t> reports;
    bool early = false;
};

// The frame of a large message, its header and the first `first` bytes of
// its payload.
std::vector<std::byte> frame_start(const message_header& m, std::span<const std::byte> payload,
                                   std::size_t first) {
    const auto header = tcp::encode_frame_header({tcp::frame_kind::data, m});
    std::vector<std::byte> bytes(header.begin(), header.end());
    bytes.insert(bytes.end(), payload.begin(),
                 payload.begin() + static_cast<std::ptrdiff_t>(first));
    return bytes;
}

} // namespace

TEST_CASE("tcp transport: a large message read into an observed receive is reported as it "
          "lands") {
    if (unposted_wait_set_outside()) return;
    waiting_reader w(20000);
    auto& [io, boot, t, s] = w;
    const auto payload = pattern(large_message, 7);
    const std::size_t first = 300 * 1024;
    std::vector<std::byte> into(large_message);
    recording_observer seen(into, payload);
    auto r = t->irecv_observed(data_header(1, into.size(), 0), into, seen, false);
    run(io, write_raw(*s, frame_start(data_header(1, large_message, 0), payload, first)));
    SUBCASE("the rest follows: reports in order, each part in place, the last one at completion") {
        // Reported before the rest is even sent.
        REQUIRE(
            run_until(io, [&] { return !seen.reports.empty() && seen.reports.back() >= first; }));
        CHECK_FALSE(r->done());
        run(io, write_raw(*s, std::vector<std::byte>(payload.begin() + first, payload.end())));
        CHECK(outcome(io, r).empty());
        CHECK(into == payload);
        CHECK_FALSE(seen.early);
        CHECK(std::adjacent_find(seen.reports.begin(), seen.reports.end(),
                                 std::greater_equal<>()) == seen.reports.end());
        CHECK(seen.reports.front() > 0);
        CHECK(seen.reports.back() < large_message);
        run(io, write_frame(*s, tcp::frame_kind::goodbye, data_header(1, 0), {}));
    }
    SUBCASE("the peer vanishes mid-message: the receive fails, nothing more is reported") {
        REQUIRE(
            run_until(io, [&] { return !seen.reports.empty() && seen.reports.back() >= first; }));
        const auto reported = seen.reports.size();
        s->close();
        // A tutti error naming the peer, not the socket's own.
        const auto why = outcome(io, r);
        CHECK_MESSAGE(why.find("rank 1's message of 524288 bytes to rank 0 was cut off") !=
                          std::string::npos,
                      why);
        io.poll();
        CHECK(seen.reports.size() == reported);
        CHECK_FALSE(seen.early);
    }
}

TEST_CASE("tcp transport: an unreachable peer is named with its address") {
    asio::io_context io;
    // A port nobody listens on any more, and one that listens but never answers.
    std::string refused;
    {
        ip::tcp::acceptor a(io, ip::tcp::endpoint(ip::make_address("127.0.0.1"), 0));
        refused = "127.0.0.1:" + std::to_string(a.local_endpoint().port());
    }
    ip::tcp::acceptor silent(io, ip::tcp::endpoint(ip::make_address("127.0.0.1"), 0));
    const auto silent_at = "127.0.0.1:" + std::to_string(silent.local_endpoint().port());
    fake_bootstrap boot({refused, silent_at});
    auto o = test_options();
    o.connect_timeout = std::chrono::milliseconds(300);
    auto t = tcp::create_transport(boot, io, o);
    const std::vector<std::byte> data(8);
    const auto to1 = outcome(io, t->isend(1, data_header(0, data.size()), data));
    CHECK(to1.find("rank 1 cannot be reached at " + refused + ": connection refused") !=
          std::string::npos);
    // The loss of rank 1 fails every receive; a send to rank 2 still tries.
    const auto to2 = outcome(io, t->isend(2, data_header(0, data.size()), data));
    CHECK(to2.find("rank 2 cannot be reached at " + silent_at + ": no connection within 300 ms") !=
          std::string::npos);
}

TEST_CASE("tcp transport: bad options are refused with the reason") {
    asio::io_context io;
    fake_bootstrap boot({"127.0.0.1:9"});
    auto o = test_options();
    o.listen_address = "not an address";
    CHECK_THROWS_WITH_AS(tcp::create_transport(boot, io, o),
                         doctest::Contains("cannot listen at 'not an address'"), error);
    o = test_options();
    o.secret = "xyz";
    CHECK_THROWS_AS(tcp::create_transport(boot, io, o), error);
    o = test_options();
    o.connect_timeout = std::chrono::milliseconds(0);
    CHECK_THROWS_WITH_AS(tcp::create_transport(boot, io, o), doctest::Contains("connect_timeout"),
                         error);
    o = test_options();
    o.unposted_wait_ns_per_byte = -1;
    CHECK_THROWS_WITH_AS(tcp::create_transport(boot, io, o),
                         doctest::Contains("unposted_wait_ns_per_byte of -1"), error);
    if (!unposted_wait_set_outside()) {
        o = test_options();
        ::setenv("TUTTI_TCP_UNPOSTED_WAIT_NS_PER_BYTE", "soon", 1);
        CHECK_THROWS_WITH_AS(tcp::create_transport(boot, io, o),
                             doctest::Contains("TUTTI_TCP_UNPOSTED_WAIT_NS_PER_BYTE='soon'"),
                             error);
        ::unsetenv("TUTTI_TCP_UNPOSTED_WAIT_NS_PER_BYTE");
    }
}

TEST_CASE("tcp transport: only the ranks that name this rank's machine share its cores") {
    asio::io_context io;
    const std::vector<std::string> others{"127.0.0.1:9", "127.0.0.1:10", "127.0.0.1:11"};
    auto o = test_options();
    // Left to itself, a rank names its kernel's boot id, which no peer here
    // does.
    fake_bootstrap elsewhere(others);
    CHECK(tcp::create_transport(elsewhere, io, o)->ranks_on_this_machine() == 1);
    o.machine = "node-a";
    fake_bootstrap split(others, {"node-b", "node-a", "node-b"});
    auto t = tcp::create_transport(split, io, o);
    CHECK(t->size() == 4);
    CHECK(t->ranks_on_this_machine() == 2);
    fake_bootstrap together(others, {"node-a", "node-a", "node-a"});
    CHECK(tcp::create_transport(together, io, o)->ranks_on_this_machine() == 4);
    // A machine named like another but longer is another machine.
    fake_bootstrap longer(others, {"node-a2", "node-", "node-a"});
    CHECK(tcp::create_transport(longer, io, o)->ranks_on_this_machine() == 2);
}

TEST_CASE("tcp transport: ranks per core are known where the whole job runs on one machine") {
    asio::io_context io;
    const std::vector<std::string> others{"127.0.0.1:9", "127.0.0.1:10", "127.0.0.1:11"};
    auto o = test_options();
    o.machine = "node-a";
    // Rank 0's figure (this rank's) is the one every rank takes; the peers'
    // 7 is not.
    fake_bootstrap together(others, {"node-a", "node-a", "node-a"});
    const auto c = tcp::create_transport(together, io, o)->capabilities();
    CHECK(c.ranks_per_core == static_cast<std::uint32_t>(ranks_per_core(4)));
    CHECK(c.ranks_per_core >= 1);
    // One rank elsewhere: the selection cannot weigh cores, unknown.
    fake_bootstrap split(others, {"node-a", "node-b", "node-a"});
    CHECK(tcp::create_transport(split, io, o)->capabilities().ranks_per_core == 0);
}

TEST_CASE("tcp transport: a peer's endpoint with a malformed figure is refused") {
    asio::io_context io;
    for (const std::string figure : {"", "x", "-1", "3x", "99999999999"}) {
        CAPTURE(figure);
        fake_bootstrap boot({"127.0.0.1:9"}, {"elsewhere"}, figure);
        CHECK_THROWS_WITH_AS(tcp::create_transport(boot, io, test_options()),
                             doctest::Contains("rank 1 published a malformed endpoint"), error);
    }
}

TEST_CASE("tcp transport: a peer's endpoint without its machine is refused as malformed") {
    asio::io_context io;
    // An older tutti's blob: address and secret only.
    fake_bootstrap boot({"127.0.0.1:9"}, {std::nullopt});
    CHECK_THROWS_WITH_AS(tcp::create_transport(boot, io, test_options()),
                         doctest::Contains("rank 1 published a malformed endpoint"), error);
}

namespace {

// The congestion control a connection from a hand-driven peer got, once a
// message over it has arrived (the transport sets it as the connection
// comes up).
// listen_address 127.0.0.2 stands for another host: the peer connects from
// 127.0.0.1, so the connection's two ends have different addresses.
std::string congestion_control_after_a_message(const tcp::options& o) {
    asio::io_context io;
    fake_bootstrap boot({"127.0.0.1:9"});
    auto t = tcp::create_transport(boot, io, o);
    std::vector<std::byte> into(8);
    auto waiting = t->irecv(data_header(1, into.size()), into);
    auto s = run(io, connect(t->endpoint(), secret_hex));
    run(io, write_frame(*s, tcp::frame_kind::data, data_header(1, 0), pattern(8, 1)));
    CHECK(outcome(io, waiting).empty());
    return t->counters().congestion_control.data();
}

std::string system_congestion_control() {
    std::ifstream file("/proc/sys/net/ipv4/tcp_congestion_control");
    std::string name;
    std::getline(file, name);
    return name;
}

// Whether the options can be tested here: the environment overrides them,
// and a system that does not report its algorithm cannot be compared with.
bool congestion_control_testable() {
    if (std::getenv("TUTTI_TCP_CONGESTION")) {
        MESSAGE("TUTTI_TCP_CONGESTION is set, which overrides the options tested here");
        return false;
    }
    if (system_congestion_control().empty()) {
        MESSAGE("this system does not report its TCP congestion control");
        return false;
    }
    return true;
}

} // namespace

TEST_CASE("tcp transport: a connection within the host runs reno unless told otherwise") {
    if (!congestion_control_testable()) return;
    auto o = test_options();
    // Both ends at 127.0.0.1: within this host.
    CHECK(congestion_control_after_a_message(o) == "reno");
    o.congestion_control = "system";
    CHECK(congestion_control_after_a_message(o) == system_congestion_control());
    o.congestion_control = "reno";
    CHECK(congestion_control_after_a_message(o) == "reno");
}

TEST_CASE("tcp transport: a connection between hosts keeps the system's default unless it paces") {
    if (!congestion_control_testable()) return;
    auto o = test_options();
    o.listen_address = "127.0.0.2";
    const auto system = system_congestion_control();
    const bool paces = system.starts_with("bbr");
    INFO("the system's default: " << system);
    CHECK(congestion_control_after_a_message(o) == (paces ? "reno" : system));
    o.congestion_control = "system";
    CHECK(congestion_control_after_a_message(o) == system);
}

TEST_CASE("tcp transport: an unknown congestion control is refused, naming the ones there are") {
    if (!congestion_control_testable()) return;
    asio::io_context io;
    fake_bootstrap boot({"127.0.0.1:9"});
    auto o = test_options();
    o.congestion_control = "no-such-algorithm";
    CHECK_THROWS_WITH_AS(
        tcp::create_transport(boot, io, o),
        doctest::Contains("congestion control 'no-such-algorithm' is not available here"), error);
    CHECK_THROWS_WITH_AS(tcp::create_transport(boot, io, o), doctest::Contains("reno"), error);
}
