// TCP-specific cases on the world of a real job (main.cpp): messages of
// 0 B to 16 MiB, received into a posted receive or arriving early; many
// messages in flight between every pair; 16 MiB collectives with exact
// results; and strangers (garbage, another secret, data before the
// handshake) knocking on every rank while collectives run, which are
// closed, counted, and change no result.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>

#include "support/harness.hpp"
#include "transports/tcp/frame.hpp"
#include "transports/tcp/handshake.hpp"
#include "transports/tcp/tcp.hpp"

using namespace tutti;
using namespace tutti::testing;
namespace ip = asio::ip;

namespace {

tcp::transport& tcp_of(const communicator& world) {
    auto* t = dynamic_cast<tcp::transport*>(&world.transport());
    REQUIRE_MESSAGE(t != nullptr, "these cases run on a world over the TCP transport");
    return *t;
}

std::vector<std::byte> pattern(std::size_t n, std::uint64_t seed) {
    std::vector<std::byte> bytes(n);
    std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (std::size_t i = 0; i < n; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        bytes[i] = static_cast<std::byte>(x);
    }
    return bytes;
}

// Raw transport messages on a communicator id of their own, so they never
// meet a collective's.
constexpr std::uint64_t raw_communicator = 0x7c9'0000'0001;

message_header raw_header(int source, std::uint64_t generation, std::uint64_t step,
                          std::size_t bytes) {
    message_header m;
    m.key = {raw_communicator, generation, step, source};
    m.kind = collective::broadcast;
    m.algorithm = algorithm_id("tcp-job-test");
    m.bytes = bytes;
    return m;
}

std::uint64_t next_raw_generation() {
    static std::uint64_t g = 0;
    return ++g;
}

} // namespace

TEST_CASE("tcp job: 0 B to 16 MiB around the ring, into posted receives and arriving early") {
    communicator world = job_world();
    if (!world.valid() || world.size() < 2) return;
    auto& t = tcp_of(world);
    const int me = world.rank();
    const int n = world.size();
    const int next = (me + 1) % n;
    const int prev = (me + n - 1) % n;
    for (std::size_t bytes :
         {std::size_t{0}, std::size_t{8}, std::size_t{64} << 10, std::size_t{16} << 20}) {
        for (bool early : {false, true}) {
            CAPTURE(bytes);
            CAPTURE(early);
            const auto g = next_raw_generation();
            const auto data = pattern(bytes, g * 1000 + static_cast<std::uint64_t>(me));
            std::vector<std::byte> into(bytes, std::byte{0xEE});
            std::vector<request> requests;
            if (!early) requests.push_back(t.irecv(raw_header(prev, g, 0, bytes), into));
            requests.push_back(t.isend(next, raw_header(me, g, 0, bytes), data));
            // The barrier's own messages follow ours on each connection, so
            // ours has arrived, unclaimed, when the receive is posted.
            if (early) {
                tutti::wait(world, barrier(world));
                requests.push_back(t.irecv(raw_header(prev, g, 0, bytes), into));
            }
            tutti::wait(world, wait_all(requests));
            CHECK(into == pattern(bytes, g * 1000 + static_cast<std::uint64_t>(prev)));
        }
    }
}

TEST_CASE("tcp job: many messages in flight between every pair") {
    communicator world = job_world();
    if (!world.valid() || world.size() < 2) return;
    auto& t = tcp_of(world);
    const int me = world.rank();
    const int n = world.size();
    constexpr int per_pair = 48;
    auto size_of = [](int k) -> std::size_t {
        return k % 16 == 15 ? std::size_t{1} << 20 : static_cast<std::size_t>(k * 977 % 70001);
    };
    const auto g = next_raw_generation();
    std::vector<std::vector<std::byte>> outgoing;
    std::vector<std::vector<std::byte>> incoming;
    std::vector<std::pair<int, int>> expected; // (source, step) of each incoming
    std::vector<request> requests;
    outgoing.reserve(static_cast<std::size_t>(n * per_pair));
    incoming.reserve(static_cast<std::size_t>(n * per_pair));
    // Half the receives posted before any send, in reverse order; the other
    // half after, so that some arrive early.
    auto post = [&](int peer, int k) {
        incoming.emplace_back(size_of(k));
        expected.emplace_back(peer, k);
        requests.push_back(t.irecv(raw_header(peer, g, static_cast<std::uint64_t>(k), size_of(k)),
                                   incoming.back()));
    };
    for (int peer = 0; peer < n; ++peer)
        if (peer != me)
            for (int k = per_pair - 1; k >= per_pair / 2; --k)
                post(peer, k);
    for (int peer = 0; peer < n; ++peer) {
        if (peer == me) continue;
        for (int k = 0; k < per_pair; ++k) {
            outgoing.push_back(pattern(
                size_of(k), g * 1000000 + static_cast<std::uint64_t>(me * 1000 + peer * 100 + k)));
            requests.push_back(t.isend(peer,
                                       raw_header(me, g, static_cast<std::uint64_t>(k), size_of(k)),
                                       outgoing.back()));
        }
    }
    for (int peer = 0; peer < n; ++peer)
        if (peer != me)
            for (int k = 0; k < per_pair / 2; ++k)
                post(peer, k);
    tutti::wait(world, wait_all(requests));
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < incoming.size(); ++i) {
        const auto [peer, k] = expected[i];
        if (incoming[i] != pattern(size_of(k), g * 1000000 + static_cast<std::uint64_t>(
                                                                 peer * 1000 + me * 100 + k)))
            ++wrong;
    }
    CHECK(wrong == 0);
    // One connection per pair, however many messages.
    CHECK(t.counters().connections <= static_cast<std::uint64_t>(n - 1));
}

namespace {

// The algorithms of collective `kind` whose restrictions hold for a call of
// `bytes` (of 8-byte elements for a reduction) on p ranks over TCP.
template <class Args>
std::vector<std::string> applicable_over_tcp(collective kind, int p, std::size_t bytes,
                                             bool reduction) {
    std::vector<std::string> out;
    for (const auto& name : algorithm_names(kind)) {
        const auto* algorithm = algorithms().find<Args>(name);
        REQUIRE(algorithm != nullptr);
        call_signature call{.kind = kind, .comm_size = p, .bytes = bytes};
        if (reduction) {
            call.count = bytes / 8;
            call.has_op = true;
        }
        call.transport = "tcp";
        if (!algorithm->info.check(call)) out.push_back(name);
    }
    return out;
}

} // namespace

TEST_CASE("tcp job: 16 MiB all_reduce, reduce and all_to_all, exact, for several algorithms") {
    communicator world = job_world();
    if (!world.valid()) return;
    const int p = world.size();
    const std::size_t count = std::size_t{2} << 20; // 16 MiB of int64
    for (const auto& name :
         applicable_over_tcp<all_reduce_args>(collective::all_reduce, p, count * 8, true)) {
        CAPTURE(name);
        std::vector<std::int64_t> data(count);
        for (std::size_t i = 0; i < count; ++i)
            data[i] =
                static_cast<std::int64_t>(world.rank()) * 1000003 + static_cast<std::int64_t>(i);
        tutti::wait(world, all_reduce(world, data, sum, use(name)));
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < count; ++i)
            if (data[i] != 1000003LL * p * (p - 1) / 2 + static_cast<std::int64_t>(i) * p) ++wrong;
        CHECK(wrong == 0);
    }
    // The root's vectors land in pieces over TCP and are combined as they
    // land (landing_observer): a root other than rank 0, and every sum exact.
    // Other values for each algorithm, so that a part combined before it
    // landed cannot find the last call's bytes in a reused scratch block.
    const int root = p - 1;
    std::int64_t shift = 0;
    for (const auto& name :
         applicable_over_tcp<reduce_args>(collective::reduce, p, count * 8, true)) {
        CAPTURE(name);
        ++shift;
        std::vector<std::int64_t> data(count), result(count, -1);
        for (std::size_t i = 0; i < count; ++i)
            data[i] = static_cast<std::int64_t>(world.rank()) * 1000003 -
                      static_cast<std::int64_t>(i) * (world.rank() + 1) + shift;
        tutti::wait(world, reduce(world, data, result, sum, tutti::root{root}, use(name)));
        if (world.rank() != root) continue;
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < count; ++i)
            if (result[i] != 1000003LL * p * (p - 1) / 2 -
                                 static_cast<std::int64_t>(i) * p * (p + 1) / 2 + shift * p)
                ++wrong;
        CHECK(wrong == 0);
    }
    const std::size_t block = count / static_cast<std::size_t>(p);
    for (const auto& name : applicable_over_tcp<all_to_all_args>(
             collective::all_to_all, p, block * 8 * static_cast<std::size_t>(p), false)) {
        CAPTURE(name);
        std::vector<std::int64_t> send(block * static_cast<std::size_t>(p));
        std::vector<std::int64_t> recv(send.size(), -1);
        for (int j = 0; j < p; ++j)
            for (std::size_t k = 0; k < block; ++k)
                send[static_cast<std::size_t>(j) * block + k] =
                    encode(world.rank(), j, static_cast<std::int64_t>(k));
        tutti::wait(world, all_to_all(world, send, recv, use(name)));
        std::size_t wrong = 0;
        for (int i = 0; i < p; ++i)
            for (std::size_t k = 0; k < block; ++k)
                if (recv[static_cast<std::size_t>(i) * block + k] !=
                    encode(i, world.rank(), static_cast<std::int64_t>(k)))
                    ++wrong;
        CHECK(wrong == 0);
    }
}

TEST_CASE("tcp job: 4 MiB scan and exscan, exact, for every algorithm") {
    // The chains' prefixes land in pieces over TCP and are combined as they
    // land; other values for each call, as in the reduce above.
    communicator world = job_world();
    if (!world.valid()) return;
    const int p = world.size();
    const auto r = static_cast<std::int64_t>(world.rank());
    const std::size_t count = std::size_t{1} << 19; // 4 MiB of int64
    std::int64_t shift = 0;
    const auto value = [&](std::int64_t rank, std::size_t i) {
        return rank * 1000003 - static_cast<std::int64_t>(i) * (rank + 1) + shift;
    };
    // x0 + ... + x(n-1) at element i.
    const auto prefix = [&](std::int64_t n, std::size_t i) {
        return 1000003 * n * (n - 1) / 2 - static_cast<std::int64_t>(i) * n * (n + 1) / 2 +
               shift * n;
    };
    for (bool exclusive : {false, true}) {
        const auto kind = exclusive ? collective::exscan : collective::scan;
        const auto names = exclusive ? applicable_over_tcp<exscan_args>(kind, p, count * 8, true)
                                     : applicable_over_tcp<scan_args>(kind, p, count * 8, true);
        for (const auto& name : names) {
            CAPTURE(name);
            CAPTURE(exclusive);
            ++shift;
            std::vector<std::int64_t> data(count), result(count, -1);
            for (std::size_t i = 0; i < count; ++i)
                data[i] = value(r, i);
            if (exclusive)
                tutti::wait(world, exscan(world, data, result, sum, use(name)));
            else
                tutti::wait(world, scan(world, data, result, sum, use(name)));
            if (exclusive && r == 0) continue; // exscan leaves rank 0's result undefined
            std::size_t wrong = 0;
            for (std::size_t i = 0; i < count; ++i)
                if (result[i] != prefix(exclusive ? r : r + 1, i)) ++wrong;
            CHECK(wrong == 0);
        }
    }
}

namespace {

// One stranger's visit: connects, does harm, and reads until the rank
// closes the connection. Blocking I/O on a thread of its own.
bool visit(const std::string& endpoint, int target, int size, int kind) {
    asio::io_context io;
    ip::tcp::socket s(io);
    const auto colon = endpoint.rfind(':');
    s.connect({ip::make_address(endpoint.substr(0, colon)),
               static_cast<std::uint16_t>(std::stoi(endpoint.substr(colon + 1)))});
    auto frame = [&](tcp::frame_kind k, std::span<const std::byte> payload) {
        message_header m;
        m.key.source = (target + 1) % size;
        m.bytes = payload.size();
        const auto h = tcp::encode_frame_header({k, m});
        asio::write(s, std::array{asio::buffer(h), asio::buffer(payload.data(), payload.size())});
    };
    if (kind == 0) {
        const auto junk = pattern(300, static_cast<std::uint64_t>(target) + 77);
        asio::write(s, asio::buffer(junk));
    } else if (kind == 1) {
        // Knows the protocol, not the secret.
        const auto wrong = tcp::job_secret::generate();
        const int claimed = (target + 1) % size;
        tcp::hello_message hello{tcp::make_challenge(), claimed, target};
        frame(tcp::frame_kind::hello, tcp::encode_hello(hello));
        tcp::frame_header_bytes raw{};
        asio::read(s, asio::buffer(raw));
        const auto header = tcp::decode_frame_header(raw, {.job_size = size});
        std::vector<std::byte> theirs(header.message.bytes);
        asio::read(s, asio::buffer(theirs));
        const auto proof =
            tcp::make_proof(wrong, tcp::handshake_role::connector, hello.challenge,
                            tcp::decode_challenge(theirs), {"some other job", claimed, target});
        frame(tcp::frame_kind::proof, proof);
    } else {
        const auto payload = pattern(64, 5);
        frame(tcp::frame_kind::data, payload);
    }
    std::array<std::byte, 512> sink{};
    asio::error_code ec;
    while (!ec)
        s.read_some(asio::buffer(sink), ec);
    return ec == asio::error::eof || ec == asio::error::connection_reset;
}

} // namespace

TEST_CASE("tcp job: strangers knock on every rank during all_reduces, which stay exact") {
    communicator world = job_world();
    if (!world.valid() || world.size() < 2) return;
    auto& t = tcp_of(world);
    const int me = world.rank();
    const int p = world.size();
    const auto rejected_before = t.counters().rejected_connections;
    // Every rank has read its count before the stranger knocks (a rank still
    // in the previous test case would count the knock in rejected_before).
    tutti::wait(world, barrier(world));
    std::atomic<bool> finished{false};
    std::atomic<int> closed{0};
    std::thread stranger;
    if (me == 0) {
        std::vector<std::string> endpoints;
        for (int r = 0; r < p; ++r)
            endpoints.push_back(t.endpoint_of(r));
        stranger = std::thread([endpoints, p, &finished, &closed] {
            for (int kind = 0; kind < 3; ++kind)
                for (int r = 0; r < p; ++r)
                    if (visit(endpoints[static_cast<std::size_t>(r)], r, p, kind)) ++closed;
            finished = true;
        });
    }
    // Rank 0 says, inside the reduced data, whether to go on: the ranks run
    // all_reduces for as long as the stranger is at work.
    const std::size_t count = 1000;
    int rounds = 0;
    std::size_t wrong = 0;
    for (bool more = true; more && rounds < 100000; ++rounds) {
        std::vector<std::int64_t> data(count);
        data[0] = me == 0 && !finished.load() ? 1 : 0;
        for (std::size_t i = 1; i < count; ++i)
            data[i] = me * 7 + static_cast<std::int64_t>(i + static_cast<std::size_t>(rounds));
        tutti::wait(world, all_reduce(world, data, sum));
        more = data[0] != 0;
        for (std::size_t i = 1; i < count; ++i)
            if (data[i] != 7LL * p * (p - 1) / 2 +
                               static_cast<std::int64_t>(i + static_cast<std::size_t>(rounds)) * p)
                ++wrong;
    }
    CHECK(wrong == 0);
    if (me == 0) {
        // Runs this rank's handlers (the stranger's handshakes) meanwhile.
        tutti::drive(world.context(), world.transport(), [&] { return finished.load(); });
        stranger.join();
        CHECK(closed.load() == 3 * p);
        MESSAGE("the ranks ran " << rounds << " all_reduces while the stranger knocked");
    }
    tutti::wait(world, barrier(world));
    // The stranger may see its connection end before this rank's handshake
    // coroutine has run to the rejection (the rank runs handlers only while it
    // waits), so run them until the count is reached or 10 s have passed.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (t.counters().rejected_connections - rejected_before < 3 &&
           std::chrono::steady_clock::now() < deadline)
        world.context().run_one_for(std::chrono::milliseconds(10));
    CHECK(t.counters().rejected_connections - rejected_before == 3);
    CHECK(t.counters().bad_frames == 0);
}
