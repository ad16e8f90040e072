// The environment bootstrap with its ranks as threads of this process, on
// 127.0.0.1 and a port the system picks (so tests never collide), plus the
// parsing of its environment variables from a fake environment.
#include <doctest/doctest.h>

#include <future>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bootstrap/env_bootstrap.hpp"
#include "bootstrap/wire.hpp"
#include "core/asio.hpp"
#include "core/error.hpp"

#include <asio/connect.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>

namespace {

using namespace std::chrono_literals;
using tutti::env_bootstrap;
using tutti::env_config;
using tutti::errc;
using blobs = std::vector<std::vector<std::byte>>;

// Every wait on another thread in these tests is bounded by this.
constexpr auto test_patience = 60s;

struct rank_outcome {
    bool ok = false;
    std::optional<errc> code;
    std::string message;
    std::string job_id;
    std::vector<std::string> mismatches; // what the rank's body found wrong
};

using rank_body = std::function<void(env_bootstrap&, rank_outcome&)>;

env_config config_for(int rank, int size, std::uint16_t port, std::chrono::milliseconds timeout) {
    return {.rank = rank,
            .size = size,
            .rendezvous = fmt::format("127.0.0.1:{}", port),
            .job_id = {},
            .node = "test-node",
            .timeout = timeout};
}

rank_outcome run_rank(env_config config, const rank_body& body,
                      std::function<void(std::uint16_t)> on_listening = nullptr) {
    rank_outcome out;
    try {
        env_bootstrap boot(std::move(config), std::move(on_listening));
        out.job_id = boot.job_id();
        body(boot, out);
        out.ok = true;
    } catch (const tutti::error& e) {
        out.code = e.code();
        out.message = e.what();
    } catch (const std::exception& e) {
        out.message = std::string("unexpected exception: ") + e.what();
    }
    return out;
}

// Starts rank 0 on a port of the system's choosing; returns its future and the port.
std::pair<std::future<rank_outcome>, std::uint16_t>
start_root(int size, std::chrono::milliseconds timeout, rank_body body, env_config base = {}) {
    auto port = std::make_shared<std::promise<std::uint16_t>>();
    auto port_known = port->get_future();
    auto config = config_for(0, size, 0, timeout);
    config.job_id = base.job_id;
    auto root = std::async(std::launch::async, [config, body, port] {
        bool told = false;
        auto out = run_rank(config, body, [&](std::uint16_t p) {
            told = true;
            port->set_value(p);
        });
        if (!told) port->set_exception(std::make_exception_ptr(std::runtime_error(out.message)));
        return out;
    });
    REQUIRE(port_known.wait_for(test_patience) == std::future_status::ready);
    return {std::move(root), port_known.get()};
}

std::future<rank_outcome> start_rank(env_config config, rank_body body) {
    return std::async(std::launch::async, [config = std::move(config), body = std::move(body)] {
        return run_rank(config, body);
    });
}

rank_outcome finish(std::future<rank_outcome>& rank) {
    REQUIRE(rank.wait_for(test_patience) == std::future_status::ready);
    return rank.get();
}

// Runs ranks `started` (all when empty) of a job of `size`; returns every started rank's outcome.
std::vector<rank_outcome> run_job(int size, std::chrono::milliseconds timeout,
                                  const rank_body& body, std::vector<int> started = {}) {
    if (size == 1) return {run_rank(config_for(0, 1, 0, timeout), body)}; // nobody to wait for
    if (started.empty())
        for (int r = 0; r < size; ++r)
            started.push_back(r);
    auto [root, port] = start_root(size, timeout, body);
    std::vector<std::future<rank_outcome>> others;
    for (int r : started)
        if (r != 0) others.push_back(start_rank(config_for(r, size, port, timeout), body));
    std::vector<rank_outcome> outcomes{finish(root)};
    for (auto& other : others)
        outcomes.push_back(finish(other));
    return outcomes;
}

std::byte pattern(int rank, int round, std::size_t index) {
    return static_cast<std::byte>((rank * 131 + round * 17 + static_cast<int>(index * 7)) & 0xff);
}

std::vector<std::byte> blob_for(int rank, int round, std::size_t length) {
    std::vector<std::byte> blob(length);
    for (std::size_t i = 0; i < length; ++i)
        blob[i] = pattern(rank, round, i);
    return blob;
}

// Blob lengths per round: empty, tiny, different per rank (rank 0 empty), 1 MiB, odd.
std::size_t length_for(int rank, int round) {
    switch (round) {
    case 0:
        return 0;
    case 1:
        return 1;
    case 2:
        return static_cast<std::size_t>(rank) * 3;
    case 3:
        return std::size_t{1} << 20;
    default:
        return 1000 + static_cast<std::size_t>(rank);
    }
}

constexpr int rounds = 5;

void gather_rounds(env_bootstrap& boot, rank_outcome& out) {
    for (int round = 0; round < rounds; ++round) {
        const auto mine = blob_for(boot.rank(), round, length_for(boot.rank(), round));
        const auto all = boot.all_gather(mine);
        if (static_cast<int>(all.size()) != boot.size()) {
            out.mismatches.push_back(fmt::format("round {}: {} blobs", round, all.size()));
            continue;
        }
        for (int from = 0; from < boot.size(); ++from)
            if (all[static_cast<std::size_t>(from)] !=
                blob_for(from, round, length_for(from, round)))
                out.mismatches.push_back(fmt::format("rank {} round {}: blob of rank {} differs",
                                                     boot.rank(), round, from));
    }
    boot.barrier();
}

namespace wire = tutti::bootstrap_wire;

// A peer that speaks the protocol by hand, to send what a real rank never would.
// Every read is bounded by test_patience.
struct fake_peer {
    asio::io_context io;
    asio::ip::tcp::socket socket{io};

    void connect(std::uint16_t port) {
        socket.connect({asio::ip::make_address("127.0.0.1"), port});
    }

    void accept(asio::ip::tcp::acceptor& acceptor) {
        std::optional<asio::error_code> result;
        acceptor.async_accept(socket, [&](asio::error_code ec) { result = ec; });
        io.restart();
        io.run_for(test_patience);
        REQUIRE(result.has_value());
        REQUIRE_FALSE(*result);
    }

    void send(const std::vector<std::byte>& bytes) { asio::write(socket, asio::buffer(bytes)); }

    void read_exactly(std::span<std::byte> into) {
        std::optional<asio::error_code> result;
        asio::async_read(socket, asio::buffer(into.data(), into.size()),
                         [&](asio::error_code ec, std::size_t) { result = ec; });
        io.restart();
        io.run_for(test_patience);
        REQUIRE(result.has_value());
        REQUIRE_FALSE(*result);
    }

    // Returns the frame's kind and body.
    std::pair<wire::frame_kind, std::vector<std::byte>> receive(int job_size) {
        wire::header_bytes header{};
        read_exactly(header);
        const auto decoded = wire::decode_header(header, job_size);
        std::vector<std::byte> body(decoded.length);
        read_exactly(body);
        return {decoded.kind, std::move(body)};
    }

    void hello(int rank, int size) {
        wire::encoder out(wire::frame_kind::hello);
        out.u32(wire::protocol_version);
        out.i32(rank);
        out.i32(size);
        out.text("");
        send(std::move(out).finish());
    }
};

std::vector<std::byte> garbage_frame() {
    const std::string text = "this is not a tutti bootstrap frame";
    const auto* first = reinterpret_cast<const std::byte*>(text.data());
    return {first, first + text.size()};
}

std::map<std::string, std::string> good_env() {
    return {{"TUTTI_RANK", "1"}, {"TUTTI_SIZE", "4"}, {"TUTTI_RENDEZVOUS", "127.0.0.1:4242"}};
}

tutti::env_lookup lookup_in(const std::map<std::string, std::string>& env) {
    return [env](std::string_view name) -> std::optional<std::string> {
        auto found = env.find(std::string(name));
        if (found == env.end()) return std::nullopt;
        return found->second;
    };
}

std::string parse_error(const std::map<std::string, std::string>& env) {
    try {
        (void)tutti::env_config_from(lookup_in(env));
    } catch (const tutti::error& e) {
        CHECK(e.code() == errc::invalid_argument);
        return e.what();
    }
    return "no error";
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("env bootstrap: all_gather rounds give every rank every blob, for 1, 2, 5 and 8 ranks") {
    for (int size : {1, 2, 5, 8}) {
        CAPTURE(size);
        const auto outcomes = run_job(size, 30s, gather_rounds);
        REQUIRE(outcomes.size() == static_cast<std::size_t>(size));
        for (const auto& out : outcomes) {
            CAPTURE(out.message);
            CHECK(out.ok);
            CHECK(out.mismatches.empty());
            CHECK(out.job_id.size() == 16);
            CHECK(out.job_id == outcomes[0].job_id);
        }
    }
}

TEST_CASE("env bootstrap: rank, size, node and method are what the config says") {
    auto check_identity = [](env_bootstrap& boot, rank_outcome& out) {
        if (boot.size() != 3 || boot.node() != "test-node" || boot.method() != "env")
            out.mismatches.push_back(fmt::format("rank {}: size {} node {} method {}", boot.rank(),
                                                 boot.size(), boot.node(), boot.method()));
        const std::vector<std::byte> mine{static_cast<std::byte>(boot.rank())};
        const auto all = boot.all_gather(mine);
        for (int r = 0; r < 3; ++r)
            if (all[static_cast<std::size_t>(r)] != std::vector{static_cast<std::byte>(r)})
                out.mismatches.push_back(
                    fmt::format("rank {} got a wrong blob of rank {}", boot.rank(), r));
    };
    const auto outcomes = run_job(3, 30s, check_identity);
    for (const auto& out : outcomes) {
        CAPTURE(out.message);
        CHECK(out.ok);
        CHECK(out.mismatches.empty());
    }
}

TEST_CASE(
    "env bootstrap: a job id given to every rank is kept; another job's rank is turned away") {
    const rank_body gather_once = [](env_bootstrap& boot, rank_outcome&) { boot.barrier(); };
    env_config base;
    base.job_id = "job-42";
    auto [root, port] = start_root(2, 30s, gather_once, base);

    auto stranger_config = config_for(1, 2, port, 30s);
    stranger_config.job_id = "other-job";
    auto stranger = start_rank(stranger_config, gather_once);
    const auto turned_away = finish(stranger);
    CHECK_FALSE(turned_away.ok);
    CHECK(turned_away.code == errc::invalid_argument);
    CHECK(contains(turned_away.message, "belongs to job 'other-job', rank 0 to job 'job-42'"));

    auto member_config = config_for(1, 2, port, 30s);
    member_config.job_id = "job-42";
    auto member = start_rank(member_config, gather_once);
    const auto root_out = finish(root);
    const auto member_out = finish(member);
    CHECK(root_out.ok);
    CHECK(member_out.ok);
    CHECK(root_out.job_id == "job-42");
    CHECK(member_out.job_id == "job-42");
}

TEST_CASE("env bootstrap: rank 0 names the ranks that never arrived") {
    // Ranks 0, 1, 2 of 4: rank 3 never starts.
    const rank_body gather_once = [](env_bootstrap& boot, rank_outcome&) { boot.barrier(); };
    const auto outcomes = run_job(4, 500ms, gather_once, {0, 1, 2});
    REQUIRE(outcomes.size() == 3);
    const auto& root = outcomes[0];
    CHECK_FALSE(root.ok);
    CHECK(root.code == errc::timeout);
    CAPTURE(root.message);
    CHECK(contains(root.message, "rank 3 of 4 never reached the rendezvous at 127.0.0.1:"));
    CHECK(contains(root.message, "within 500 ms"));
    // The ranks that did arrive learn the same reason from rank 0.
    for (std::size_t i = 1; i < outcomes.size(); ++i) {
        CAPTURE(outcomes[i].message);
        CHECK_FALSE(outcomes[i].ok);
        CHECK(outcomes[i].code == errc::timeout);
        CHECK(contains(outcomes[i].message, "rank 3 of 4 never reached the rendezvous"));
        CHECK(contains(outcomes[i].message, "reported by rank 0"));
    }
}

TEST_CASE("env bootstrap: a rank names the address when rank 0 is not there") {
    // A port that is bound but not listening refuses connections, and nobody else can take it.
    asio::io_context io;
    asio::ip::tcp::acceptor holder(io);
    holder.open(asio::ip::tcp::v4());
    holder.bind({asio::ip::make_address("127.0.0.1"), 0});
    const auto port = holder.local_endpoint().port();

    const rank_body nothing = [](env_bootstrap&, rank_outcome&) {};
    const auto out = run_rank(config_for(1, 2, port, 300ms), nothing);
    CHECK_FALSE(out.ok);
    CHECK(out.code == errc::timeout);
    CAPTURE(out.message);
    CHECK(contains(out.message, fmt::format("could not reach rank 0 at 127.0.0.1:{}", port)));
    CHECK(contains(out.message, "within 300 ms"));
}

TEST_CASE("env bootstrap: strangers sending garbage are dropped and the job still assembles") {
    const rank_body gather_once = [](env_bootstrap& boot, rank_outcome& out) {
        const std::vector<std::byte> mine{static_cast<std::byte>(10 + boot.rank())};
        const auto all = boot.all_gather(mine);
        if (all != blobs{{std::byte{10}}, {std::byte{11}}})
            out.mismatches.push_back("wrong blobs after strangers");
    };
    auto [root, port] = start_root(2, 30s, gather_once);

    asio::io_context io;
    const asio::ip::tcp::endpoint rendezvous(asio::ip::make_address("127.0.0.1"), port);
    // Plain garbage, a well-formed header claiming a terabyte, and a header cut short.
    std::vector<std::string> garbage{std::string("GET / HTTP/1.0\r\n\r\n")};
    const auto huge = tutti::bootstrap_wire::encode_header(tutti::bootstrap_wire::frame_kind::hello,
                                                           std::uint64_t{1} << 40);
    garbage.emplace_back(reinterpret_cast<const char*>(huge.data()), huge.size());
    garbage.emplace_back("tut");
    std::vector<std::unique_ptr<asio::ip::tcp::socket>> strangers;
    for (const auto& bytes : garbage) {
        auto socket = std::make_unique<asio::ip::tcp::socket>(io);
        socket->connect(rendezvous);
        asio::write(*socket, asio::buffer(bytes));
        strangers.push_back(std::move(socket));
    }

    auto member = start_rank(config_for(1, 2, port, 30s), gather_once);
    const auto root_out = finish(root);
    const auto member_out = finish(member);
    CAPTURE(root_out.message);
    CAPTURE(member_out.message);
    CHECK(root_out.ok);
    CHECK(member_out.ok);
    CHECK(root_out.mismatches.empty());
    CHECK(member_out.mismatches.empty());

    // Every stranger's connection was closed by rank 0: reading ends in an error, not data.
    for (auto& socket : strangers) {
        std::array<char, 64> buffer{};
        std::optional<asio::error_code> result;
        socket->async_read_some(asio::buffer(buffer),
                                [&](asio::error_code ec, std::size_t) { result = ec; });
        io.restart();
        io.run_for(test_patience);
        REQUIRE(result.has_value());
        CHECK((*result == asio::error::eof || *result == asio::error::connection_reset));
    }
}

TEST_CASE("env bootstrap: a rank with the wrong size is turned away with the reason") {
    const rank_body gather_once = [](env_bootstrap& boot, rank_outcome&) { boot.barrier(); };
    auto [root, port] = start_root(3, 30s, gather_once);
    auto wrong = start_rank(config_for(1, 4, port, 30s), gather_once);
    const auto wrong_out = finish(wrong);
    CHECK_FALSE(wrong_out.ok);
    CHECK(wrong_out.code == errc::invalid_argument);
    CAPTURE(wrong_out.message);
    CHECK(contains(wrong_out.message, "turned rank 1 away"));
    CHECK(contains(wrong_out.message, "rank 1 says the job has 4 ranks, rank 0 says 3"));

    auto one = start_rank(config_for(1, 3, port, 30s), gather_once);
    auto two = start_rank(config_for(2, 3, port, 30s), gather_once);
    CHECK(finish(root).ok);
    CHECK(finish(one).ok);
    CHECK(finish(two).ok);
}

TEST_CASE("env bootstrap: of two processes claiming one rank, the second is turned away") {
    const rank_body gather_once = [](env_bootstrap& boot, rank_outcome&) { boot.barrier(); };
    auto [root, port] = start_root(3, 30s, gather_once);
    std::vector<std::future<rank_outcome>> claimants;
    claimants.push_back(start_rank(config_for(1, 3, port, 30s), gather_once));
    claimants.push_back(start_rank(config_for(1, 3, port, 30s), gather_once));
    // The job cannot assemble before rank 2 starts, so whichever claimant finishes first was
    // turned away.
    const auto deadline = std::chrono::steady_clock::now() + test_patience;
    std::optional<std::size_t> first;
    while (!first && std::chrono::steady_clock::now() < deadline)
        for (std::size_t i = 0; i < claimants.size() && !first; ++i)
            if (claimants[i].wait_for(10ms) == std::future_status::ready) first = i;
    REQUIRE(first.has_value());
    const auto rejected = claimants[*first].get();
    CHECK_FALSE(rejected.ok);
    CHECK(rejected.code == errc::invalid_argument);
    CAPTURE(rejected.message);
    CHECK(contains(rejected.message, "rank 1 has already joined"));

    auto two = start_rank(config_for(2, 3, port, 30s), gather_once);
    CHECK(finish(root).ok);
    CHECK(finish(claimants[1 - *first]).ok);
    CHECK(finish(two).ok);
}

TEST_CASE("env bootstrap: a rank that leaves mid-job is named as lost, and the failure sticks") {
    std::promise<void> left;
    auto has_left = left.get_future().share();
    const rank_body body = [has_left](env_bootstrap& boot, rank_outcome& out) {
        if (boot.rank() == 2) return; // leaves: its connection closes with the bootstrap
        if (boot.rank() == 0) {
            REQUIRE(has_left.wait_for(test_patience) == std::future_status::ready);
            try {
                boot.barrier();
                out.mismatches.push_back("the first all_gather succeeded without rank 2");
            } catch (const tutti::error& e) {
                if (e.code() != errc::peer_lost || !contains(e.what(), "rank 2 closed"))
                    out.mismatches.push_back(e.what());
            }
        }
        boot.barrier(); // rank 0: the stored failure again; rank 1: rank 0's report
    };
    auto [root, port] = start_root(3, 30s, body);
    auto one = start_rank(config_for(1, 3, port, 30s), body);
    auto two = start_rank(config_for(2, 3, port, 30s), body);
    CHECK(finish(two).ok);
    left.set_value();
    const auto root_out = finish(root);
    const auto one_out = finish(one);
    CAPTURE(root_out.message);
    CAPTURE(one_out.message);
    CHECK(root_out.mismatches.empty());
    CHECK(root_out.code == errc::peer_lost);
    CHECK(contains(root_out.message, "unusable after an earlier failure"));
    CHECK(contains(root_out.message, "rank 2 closed its connection during all_gather round 1"));
    CHECK(one_out.code == errc::peer_lost);
    CHECK(contains(one_out.message, "rank 2 closed its connection"));
    CHECK(contains(one_out.message, "reported by rank 0"));
}

TEST_CASE("env bootstrap: rank 0 leaving is reported by the others as a lost rank 0") {
    std::promise<void> root_gone;
    auto gone = root_gone.get_future().share();
    const rank_body body = [gone](env_bootstrap& boot, rank_outcome&) {
        if (boot.rank() == 0) return;
        REQUIRE(gone.wait_for(test_patience) == std::future_status::ready);
        boot.barrier();
    };
    auto [root, port] = start_root(2, 30s, body);
    auto one = start_rank(config_for(1, 2, port, 30s), body);
    CHECK(finish(root).ok);
    root_gone.set_value();
    const auto out = finish(one);
    CAPTURE(out.message);
    CHECK(out.code == errc::peer_lost);
    CHECK(contains(out.message, fmt::format("rank 0 (the rendezvous at 127.0.0.1:{}) closed its "
                                            "connection during all_gather round 1",
                                            port)));
}

TEST_CASE("env bootstrap: one rank needs no rendezvous; oversized blobs and bad configs are "
          "refused") {
    env_bootstrap alone(env_config{
        .rank = 0, .size = 1, .rendezvous = {}, .job_id = {}, .node = {}, .timeout = 1s});
    CHECK(alone.size() == 1);
    CHECK_FALSE(alone.node().empty());
    CHECK(alone.all_gather({}) == blobs{{}});
    const auto one = blob_for(0, 0, 5);
    CHECK(alone.all_gather(one) == blobs{one});
    const std::vector<std::byte> too_big(tutti::bootstrap_wire::max_blob + 1);
    CHECK_THROWS_WITH_AS(alone.all_gather(too_big), doctest::Contains("a blob may have at most"),
                         tutti::error);

    CHECK_THROWS_WITH_AS(env_bootstrap(config_for(1, 2, 0, 1s)),
                         doctest::Contains("only rank 0 may listen on a port the system picks"),
                         tutti::error);
    CHECK_THROWS_WITH_AS(env_bootstrap(config_for(2, 2, 4242, 1s)),
                         doctest::Contains("rank 2 is outside the job of 2 ranks"), tutti::error);
    auto bad_id = config_for(0, 1, 0, 1s);
    bad_id.job_id = "../etc";
    CHECK_THROWS_WITH_AS(env_bootstrap{bad_id}, doctest::Contains("job id '../etc'"), tutti::error);
    auto no_rendezvous = config_for(0, 2, 0, 1s);
    no_rendezvous.rendezvous.clear();
    CHECK_THROWS_WITH_AS(env_bootstrap{no_rendezvous},
                         doctest::Contains("needs a rendezvous address"), tutti::error);
}

TEST_CASE("env config: a complete environment is read") {
    auto env = good_env();
    env["TUTTI_JOB_ID"] = "abc-1.2_3";
    env["TUTTI_NODE"] = "node7";
    env["TUTTI_BOOTSTRAP_TIMEOUT_MS"] = "1500";
    const auto config = tutti::env_config_from(lookup_in(env));
    CHECK(config.rank == 1);
    CHECK(config.size == 4);
    CHECK(config.rendezvous == "127.0.0.1:4242");
    CHECK(config.job_id == "abc-1.2_3");
    CHECK(config.node == "node7");
    CHECK(config.timeout == 1500ms);

    const auto defaults = tutti::env_config_from(lookup_in(good_env()));
    CHECK(defaults.job_id.empty());
    CHECK_FALSE(defaults.node.empty());
    CHECK(defaults.timeout == 30000ms);

    // A single rank needs no rendezvous; empty values count as unset.
    const auto alone = tutti::env_config_from(
        lookup_in({{"TUTTI_RANK", "0"}, {"TUTTI_SIZE", "1"}, {"TUTTI_JOB_ID", ""}}));
    CHECK(alone.size == 1);
    CHECK(alone.rendezvous.empty());
    CHECK(alone.job_id.empty());
}

TEST_CASE("env config: missing and malformed variables are named, with how to launch") {
    const auto unset = parse_error({});
    CHECK(contains(unset, "TUTTI_RANK is not set: start the program with `tuttirun -n N "
                          "program`, under `mpirun`, or set TUTTI_RANK, TUTTI_SIZE and "
                          "TUTTI_RENDEZVOUS (host:port where rank 0 listens)"));

    auto with = [](std::string name, std::string value) {
        auto env = good_env();
        env[name] = value;
        return parse_error(env);
    };
    auto without = [](std::string name) {
        auto env = good_env();
        env.erase(name);
        return parse_error(env);
    };
    CHECK(contains(without("TUTTI_SIZE"), "TUTTI_SIZE is not set"));
    CHECK(contains(without("TUTTI_RENDEZVOUS"), "TUTTI_RENDEZVOUS is not set"));
    CHECK(contains(with("TUTTI_RANK", ""), "TUTTI_RANK is not set"));
    CHECK(contains(with("TUTTI_RANK", "one"), "TUTTI_RANK='one' is not a rank"));
    CHECK(contains(with("TUTTI_RANK", "4"), "expected an integer from 0 to 3"));
    CHECK(contains(with("TUTTI_RANK", "-1"), "TUTTI_RANK='-1'"));
    CHECK(contains(with("TUTTI_RANK", "1x"), "TUTTI_RANK='1x'"));
    CHECK(contains(with("TUTTI_SIZE", "0"), "TUTTI_SIZE='0' is not a job size"));
    CHECK(contains(with("TUTTI_SIZE", "99999999999999999999"), "TUTTI_SIZE="));
    CHECK(
        contains(with("TUTTI_RENDEZVOUS", "localhost"), "'localhost' is not host:port (no port)"));
    CHECK(contains(with("TUTTI_RENDEZVOUS", ":4242"), "(no host)"));
    CHECK(contains(with("TUTTI_RENDEZVOUS", "h:99999"), "port '99999' is not a number"));
    CHECK(contains(with("TUTTI_RENDEZVOUS", "h:x"), "port 'x' is not a number"));
    CHECK(contains(with("TUTTI_RENDEZVOUS", "::1:4242"), "write an IPv6 address in brackets"));
    CHECK(contains(with("TUTTI_RENDEZVOUS", "[::1:4242"), "no ']'"));
    CHECK(contains(with("TUTTI_RENDEZVOUS", "h:0"), "has port 0"));
    CHECK(contains(with("TUTTI_JOB_ID", "a/b"), "TUTTI_JOB_ID='a/b' must be"));
    CHECK(contains(with("TUTTI_JOB_ID", std::string(65, 'x')), "must be 1 to 64"));
    CHECK(contains(with("TUTTI_BOOTSTRAP_TIMEOUT_MS", "0"), "TUTTI_BOOTSTRAP_TIMEOUT_MS='0'"));
    CHECK(contains(with("TUTTI_BOOTSTRAP_TIMEOUT_MS", "soon"), "is not a timeout"));
}

TEST_CASE("env config: host:port splits, IPv6 in brackets") {
    CHECK(tutti::split_host_port("127.0.0.1:4242") ==
          std::pair<std::string, std::uint16_t>{"127.0.0.1", 4242});
    CHECK(tutti::split_host_port("node01:1") == std::pair<std::string, std::uint16_t>{"node01", 1});
    CHECK(tutti::split_host_port("[::1]:65535") ==
          std::pair<std::string, std::uint16_t>{"::1", 65535});
    CHECK_THROWS_AS(tutti::split_host_port("[::1]"), tutti::error);
    CHECK_THROWS_AS(tutti::split_host_port(""), tutti::error);
}

TEST_CASE("env bootstrap: a joined rank that sends a malformed frame is an error naming it") {
    const rank_body gather_once = [](env_bootstrap& boot, rank_outcome&) { boot.barrier(); };
    auto [root, port] = start_root(2, 30s, gather_once);
    fake_peer rank_one;
    rank_one.connect(port);
    rank_one.hello(1, 2);
    CHECK(rank_one.receive(2).first == wire::frame_kind::welcome);
    rank_one.send(garbage_frame());

    const auto out = finish(root);
    CAPTURE(out.message);
    CHECK(out.code == errc::invalid_argument);
    CHECK(contains(out.message, "rank 1 sent a malformed frame during all_gather round 1"));
    CHECK(contains(out.message, "bad magic number"));
    // Rank 0 tells it why the job ends before closing.
    const auto [kind, body] = rank_one.receive(2);
    CHECK(kind == wire::frame_kind::abort);
}

TEST_CASE("env bootstrap: a rank in another all_gather round is an error naming both rounds") {
    const rank_body gather_once = [](env_bootstrap& boot, rank_outcome&) { boot.barrier(); };
    auto [root, port] = start_root(2, 30s, gather_once);
    fake_peer rank_one;
    rank_one.connect(port);
    rank_one.hello(1, 2);
    const auto [kind, welcome] = rank_one.receive(2);
    REQUIRE(kind == wire::frame_kind::welcome);
    wire::decoder fields(welcome);
    const auto job_id = fields.text(64);
    wire::encoder contribution(wire::frame_kind::contribution);
    contribution.u64(7);
    contribution.i32(1);
    contribution.i32(2);
    contribution.text(job_id);
    contribution.blob({});
    rank_one.send(std::move(contribution).finish());

    const auto out = finish(root);
    CAPTURE(out.message);
    CHECK(out.code == errc::invalid_argument);
    CHECK(contains(out.message, "it is in all_gather round 7 while rank 0 is in round 1"));
}

TEST_CASE("env bootstrap: a rank 0 that answers with nonsense is an error, not a crash") {
    fake_peer rank_zero;
    asio::ip::tcp::acceptor listener(rank_zero.io, {asio::ip::make_address("127.0.0.1"), 0});
    const auto port = listener.local_endpoint().port();
    const rank_body gather_twice = [](env_bootstrap& boot, rank_outcome&) {
        const std::vector<std::byte> mine{std::byte{1}};
        (void)boot.all_gather(mine);
        (void)boot.all_gather(mine);
    };
    auto member = start_rank(config_for(1, 2, port, 30s), gather_twice);

    rank_zero.accept(listener);
    CHECK(rank_zero.receive(2).first == wire::frame_kind::hello);
    wire::encoder welcome(wire::frame_kind::welcome);
    welcome.text("fake-job");
    rank_zero.send(std::move(welcome).finish());
    CHECK(rank_zero.receive(2).first == wire::frame_kind::contribution);
    // A result with the wrong number of blobs: well framed, wrong content.
    wire::encoder result(wire::frame_kind::result);
    result.u64(1);
    result.u32(5);
    rank_zero.send(std::move(result).finish());

    const auto out = finish(member);
    CAPTURE(out.message);
    CHECK(out.code == errc::invalid_argument);
    CHECK(out.job_id == "fake-job");
    CHECK(contains(out.message, "sent rank 1 a bad all_gather round 1"));
    CHECK(contains(out.message, "with 5 blobs; expected round 1 with 2"));
}

TEST_CASE("env bootstrap: a rank 0 that sends garbage mid-job is named with its address") {
    fake_peer rank_zero;
    asio::ip::tcp::acceptor listener(rank_zero.io, {asio::ip::make_address("127.0.0.1"), 0});
    const auto port = listener.local_endpoint().port();
    const rank_body gather_once = [](env_bootstrap& boot, rank_outcome&) { boot.barrier(); };
    auto member = start_rank(config_for(1, 2, port, 30s), gather_once);

    rank_zero.accept(listener);
    CHECK(rank_zero.receive(2).first == wire::frame_kind::hello);
    wire::encoder welcome(wire::frame_kind::welcome);
    welcome.text("fake-job");
    rank_zero.send(std::move(welcome).finish());
    CHECK(rank_zero.receive(2).first == wire::frame_kind::contribution);
    rank_zero.send(garbage_frame());

    const auto out = finish(member);
    CAPTURE(out.message);
    CHECK(out.code == errc::invalid_argument);
    CHECK(contains(out.message, fmt::format("rank 0 (the rendezvous at 127.0.0.1:{}) sent a "
                                            "malformed frame during all_gather round 1",
                                            port)));
}

TEST_CASE("env bootstrap: rank 0 says so when the rendezvous port is taken") {
    asio::io_context io;
    asio::ip::tcp::acceptor taken(io, {asio::ip::make_address("127.0.0.1"), 0});
    const auto port = taken.local_endpoint().port();
    const rank_body nothing = [](env_bootstrap&, rank_outcome&) {};
    const auto out = run_rank(config_for(0, 2, port, 1s), nothing);
    CAPTURE(out.message);
    CHECK(out.code == errc::invalid_argument);
    CHECK(contains(out.message, fmt::format("rank 0 cannot listen at 127.0.0.1:{}", port)));
}

TEST_CASE("env bootstrap: several missing ranks are all named") {
    const rank_body gather_once = [](env_bootstrap& boot, rank_outcome&) { boot.barrier(); };
    const auto outcomes = run_job(8, 500ms, gather_once, {0, 1, 2, 4, 6, 7});
    REQUIRE(outcomes.size() == 6);
    for (const auto& out : outcomes) {
        CAPTURE(out.message);
        CHECK(out.code == errc::timeout);
        CHECK(contains(out.message, "ranks 3, 5 of 8 never reached the rendezvous at 127.0.0.1:"));
    }
}

TEST_CASE("env bootstrap: a rank that never calls all_gather is named by rank 0 and the others") {
    std::promise<void> root_done;
    auto release = root_done.get_future().share();
    const rank_body body = [release](env_bootstrap& boot, rank_outcome&) {
        if (boot.rank() == 2) {
            // Busy elsewhere until the others have given up on it.
            REQUIRE(release.wait_for(test_patience) == std::future_status::ready);
            return;
        }
        boot.barrier();
    };
    auto [root, port] = start_root(3, 500ms, body);
    auto one = start_rank(config_for(1, 3, port, 500ms), body);
    auto two = start_rank(config_for(2, 3, port, 500ms), body);
    const auto root_out = finish(root);
    root_done.set_value();
    const auto one_out = finish(one);
    CHECK(finish(two).ok);
    CAPTURE(root_out.message);
    CAPTURE(one_out.message);
    CHECK(root_out.code == errc::timeout);
    CHECK(contains(root_out.message, "rank 2 of 3 did not reach all_gather round 1 within 500 ms"));
    CHECK(one_out.code == errc::timeout);
    CHECK(contains(one_out.message, "rank 2 of 3 did not reach all_gather round 1"));
    CHECK(contains(one_out.message, "reported by rank 0"));
}

TEST_CASE("env bootstrap: the timeout message tells which connections were turned away") {
    const rank_body nothing = [](env_bootstrap&, rank_outcome&) {};
    // Long enough that the stranger's bytes are surely read before rank 0 gives up.
    auto [root, port] = start_root(2, 2s, nothing);
    fake_peer stranger;
    stranger.connect(port);
    stranger.send(garbage_frame());
    const auto out = finish(root);
    CAPTURE(out.message);
    CHECK(out.code == errc::timeout);
    CHECK(contains(out.message, "rank 1 of 2 never reached the rendezvous"));
    CHECK(contains(out.message, "turned away: a connection from 127.0.0.1:"));
    CHECK(contains(out.message, "bad magic number"));
}
