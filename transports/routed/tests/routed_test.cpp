// The routing decisions (which peer goes through which transport, and the
// world's transport name) from node lists alone, and the node bootstrap with
// its ranks as threads of this process over a small in-memory bootstrap:
// nodes that make different numbers of exchanges, a node peer that leaves
// early, bad members.
#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bootstrap/node_bootstrap.hpp"
#include "core/error.hpp"
#include "transports/routed/routed.hpp"

namespace {

using namespace std::chrono_literals;
using tutti::errc;
using tutti::routed::choice;
using tutti::routed::plan_routes;
using tutti::routed::route;

// Threads of one process as the ranks of a job: all_gather meets at a
// generation counter, every wait bounded.
class thread_world {
public:
    explicit thread_world(int size) : size_(size), slots_(static_cast<std::size_t>(size)) {}

    std::vector<std::vector<std::byte>> all_gather(int rank, std::span<const std::byte> mine) {
        std::unique_lock lock(mutex_);
        const auto generation = generation_;
        slots_[static_cast<std::size_t>(rank)].assign(mine.begin(), mine.end());
        if (++arrived_ == size_) {
            result_ = slots_;
            arrived_ = 0;
            ++generation_;
            ++exchanges_;
            changed_.notify_all();
            return result_;
        }
        if (!changed_.wait_for(lock, 30s, [&] { return generation_ != generation; }))
            throw tutti::error(errc::timeout, fmt::format("rank {}: all_gather timed out", rank));
        return result_;
    }
    int size() const { return size_; }
    int exchanges() const {
        std::lock_guard lock(mutex_);
        return exchanges_;
    }

private:
    int size_;
    mutable std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<std::vector<std::byte>> slots_, result_;
    int arrived_ = 0;
    std::uint64_t generation_ = 0;
    int exchanges_ = 0;
};

class thread_bootstrap final : public tutti::bootstrap {
public:
    thread_bootstrap(thread_world& world, int rank, std::string node)
        : world_(world), rank_(rank), node_(std::move(node)) {}
    int rank() const noexcept override { return rank_; }
    int size() const noexcept override { return world_.size(); }
    const std::string& job_id() const noexcept override { return job_; }
    const std::string& node() const noexcept override { return node_; }
    std::string_view method() const noexcept override { return "threads"; }
    std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> mine) override {
        return world_.all_gather(rank_, mine);
    }

private:
    thread_world& world_;
    int rank_;
    std::string node_;
    std::string job_ = "routed-test";
};

std::vector<std::byte> bytes_of(const std::string& s) {
    std::vector<std::byte> b;
    for (char c : s)
        b.push_back(static_cast<std::byte>(c));
    return b;
}
std::string text_of(const std::vector<std::byte>& b) {
    return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// Runs body(rank) on a thread per rank; returns each rank's error text ("" if none).
std::vector<std::string> on_threads(int size, const std::function<void(int)>& body) {
    std::vector<std::future<std::string>> ranks;
    for (int r = 0; r < size; ++r)
        ranks.push_back(std::async(std::launch::async, [&body, r]() -> std::string {
            try {
                body(r);
                return "";
            } catch (const std::exception& e) {
                return e.what();
            }
        }));
    std::vector<std::string> outcomes;
    for (auto& f : ranks) {
        REQUIRE(f.wait_for(60s) == std::future_status::ready);
        outcomes.push_back(f.get());
    }
    return outcomes;
}

} // namespace

TEST_CASE("plan_routes: one node is shared memory, every rank alone on its node is TCP") {
    auto one = plan_routes(1, {"a", "a", "a"}, choice::automatic);
    CHECK(one.transport_name == "shm");
    CHECK(one.routes == std::vector<route>{route::shm, route::shm, route::shm});

    auto apart = plan_routes(0, {"a", "b", "c"}, choice::automatic);
    CHECK(apart.transport_name == "tcp");
    CHECK(apart.routes == std::vector<route>{route::tcp, route::tcp, route::tcp});

    auto forced = plan_routes(2, {"a", "a", "a"}, choice::tcp);
    CHECK(forced.transport_name == "tcp");
    CHECK(forced.routes == std::vector<route>{route::tcp, route::tcp, route::tcp});

    auto shm = plan_routes(0, {"x", "x"}, choice::shm);
    CHECK(shm.transport_name == "shm");
}

TEST_CASE("plan_routes: ranks on this node through shared memory, the rest through TCP") {
    const std::vector<std::string> nodes{"a", "b", "a", "b", "c"};
    auto r0 = plan_routes(0, nodes, choice::automatic);
    CHECK(r0.transport_name == "shm+tcp");
    CHECK(r0.routes ==
          std::vector<route>{route::shm, route::tcp, route::shm, route::tcp, route::tcp});
    auto r3 = plan_routes(3, nodes, choice::automatic);
    CHECK(r3.routes ==
          std::vector<route>{route::tcp, route::shm, route::tcp, route::shm, route::tcp});
    // Alone on its node: every route is TCP, but the job is still mixed.
    auto r4 = plan_routes(4, nodes, choice::automatic);
    CHECK(r4.transport_name == "shm+tcp");
    CHECK(r4.routes == std::vector<route>(5, route::tcp));
    const auto lines = r3.describe();
    REQUIRE(lines.size() == 5);
    CHECK(lines[1] == "rank 1 on node 'b': shm");
    CHECK(lines[3] == "rank 3 on node 'b': shm (this rank)");
    CHECK(lines[4] == "rank 4 on node 'c': tcp");
}

TEST_CASE("plan_routes and parse_choice refuse what cannot work, saying why") {
    try {
        (void)plan_routes(0, {"a", "b", "b"}, choice::shm);
        FAIL("shm across nodes was accepted");
    } catch (const tutti::error& e) {
        CHECK(e.code() == errc::invalid_argument);
        CHECK(std::string(e.what()).find("2 nodes: 'a' (1 ranks), 'b' (2 ranks)") !=
              std::string::npos);
    }
    CHECK_THROWS_WITH_AS((void)tutti::routed::parse_choice("ib", "TUTTI_TRANSPORT"),
                         doctest::Contains("TUTTI_TRANSPORT='ib' is not a transport"),
                         tutti::error);
    CHECK(tutti::routed::parse_choice("auto", "x") == choice::automatic);
    CHECK(tutti::routed::parse_choice("tcp", "x") == choice::tcp);
    CHECK_THROWS_AS((void)plan_routes(3, {"a", "b"}, choice::automatic), tutti::error);
}

TEST_CASE("node bootstrap: each node exchanges among itself, as often as it needs") {
    // Nodes a = {0, 2, 3} and b = {1, 4}: a makes three exchanges, b one, and
    // both then meet the whole job again in step.
    const std::vector<std::string> nodes{"a", "b", "a", "a", "b"};
    thread_world world(5);
    std::vector<std::vector<std::string>> seen(5);
    auto errors = on_threads(5, [&](int rank) {
        thread_bootstrap parent(world, rank, nodes[static_cast<std::size_t>(rank)]);
        std::vector<int> members;
        for (int r = 0; r < 5; ++r)
            if (nodes[static_cast<std::size_t>(r)] == parent.node()) members.push_back(r);
        tutti::node_bootstrap local(parent, members, "job-" + parent.node());
        CHECK(local.size() == static_cast<int>(members.size()));
        CHECK(local.members()[static_cast<std::size_t>(local.rank())] == rank);
        const int rounds = parent.node() == "a" ? 3 : 1;
        for (int round = 0; round < rounds; ++round) {
            auto got = local.all_gather(bytes_of(fmt::format("{}.{}", rank, round)));
            std::string line;
            for (const auto& b : got)
                line += text_of(b) + " ";
            seen[static_cast<std::size_t>(rank)].push_back(line);
        }
        local.leave();
        auto after = parent.all_gather(bytes_of(std::to_string(rank)));
        CHECK(text_of(after[4]) == "4");
    });
    for (const auto& e : errors)
        CHECK(e == "");
    CHECK(seen[0] == std::vector<std::string>{"0.0 2.0 3.0 ", "0.1 2.1 3.1 ", "0.2 2.2 3.2 "});
    CHECK(seen[3] == seen[0]);
    CHECK(seen[1] == std::vector<std::string>{"1.0 4.0 "});
    CHECK(seen[4] == seen[1]);
}

TEST_CASE("node bootstrap: a node peer that stopped exchanging is an error, not a hang") {
    thread_world world(3);
    auto errors = on_threads(3, [&](int rank) {
        thread_bootstrap parent(world, rank, rank == 2 ? "b" : "a");
        std::vector<int> members = rank == 2 ? std::vector<int>{2} : std::vector<int>{0, 1};
        tutti::node_bootstrap local(parent, members, "j");
        // Rank 1 gives up before the second exchange (its setup failed).
        const int rounds = rank == 1 ? 1 : 2;
        try {
            for (int round = 0; round < rounds; ++round)
                (void)local.all_gather({});
        } catch (...) {
            local.leave();
            throw;
        }
        local.leave();
    });
    CHECK(errors[0].find("rank 1 on node 'a' ended its node's setup while rank 0 still "
                         "exchanges") != std::string::npos);
    CHECK(errors[1] == "");
    CHECK(errors[2] == "");
}

TEST_CASE("node bootstrap: members must be ascending ranks of the parent, this one among them") {
    thread_world world(1);
    thread_bootstrap parent(world, 0, "a");
    for (const auto& members :
         {std::vector<int>{}, std::vector<int>{1}, std::vector<int>{0, 0}, std::vector<int>{-1, 0}})
        CHECK_THROWS_WITH_AS(tutti::node_bootstrap(parent, members, "j"),
                             doctest::Contains("are not distinct ascending ranks"), tutti::error);
}
