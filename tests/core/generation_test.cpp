// Generations: the registry's rules, and many collectives in flight on one
// communicator at once, started in a different order on every rank.
#include <algorithm>
#include <memory>
#include <numeric>
#include <random>
#include <thread>

#include "support/harness.hpp"

using namespace tutti;

TEST_CASE("generation registry: next, explicit, reuse, zero, out of order") {
    generation_registry g;
    CHECK(g.claim_next() == 1);
    CHECK(g.claim_next() == 2);
    g.claim(5);
    CHECK(g.claim_next() == 6);
    g.claim(3); // a hole below the newest may still be used, once
    CHECK_THROWS_AS(g.claim(3), tutti::error);
    CHECK_THROWS_AS(g.claim(6), tutti::error);
    try {
        g.claim(0);
        FAIL("generation 0 accepted");
    } catch (const tutti::error& e) {
        CHECK(e.code() == errc::invalid_generation);
    }
    try {
        g.claim(2);
        FAIL("generation 2 accepted twice");
    } catch (const tutti::error& e) {
        CHECK(e.code() == errc::reused_generation);
    }
    g.claim(4);
    CHECK(g.claim_next() == 7);
}

TEST_CASE("generation registry: memory stays bounded when slots are skipped") {
    generation_registry g;
    // The hierarchical mapping uses 3k-2 and 3k and skips 3k-1, forever.
    for (std::uint64_t k = 1; k <= 100000; ++k) {
        g.claim(3 * k - 2);
        g.claim(3 * k);
    }
    // A hole far behind the newest counts as used.
    CHECK_THROWS_AS(g.claim(2), tutti::error);
    // A recent hole is still free.
    g.claim(3 * 100000 - 1);
}

TEST_CASE("generation registry: a hole is free up to the window behind the newest, not beyond") {
    constexpr auto window = generation_window::window;
    generation_registry g;
    g.claim(10 + window); // generations 1 to 9 + window are holes
    g.claim(11);          // window - 1 behind the newest
    try {
        g.claim(10); // a window behind: counted as used
        FAIL("generation 10 accepted a window behind the newest");
    } catch (const tutti::error& e) {
        CHECK(e.code() == errc::reused_generation);
        CHECK(std::string(e.what()).find("more than 1024 behind the newest, 1034") !=
              std::string::npos);
    }
    CHECK_THROWS_AS(g.claim(11), tutti::error);
    // Moving on one slides the window past 11.
    CHECK(g.claim_next() == 11 + window);
    CHECK_THROWS_AS(g.claim(11), tutti::error);
    g.claim(12);
    // A jump of more than a window: every hole behind it counts as used.
    g.claim(12 + 3 * window);
    CHECK_THROWS_AS(g.claim(13 + window), tutti::error);
    g.claim(13 + 2 * window);
    CHECK(g.largest_used() == 12 + 3 * window);
}

TEST_CASE("many collectives in flight on one communicator, started in rank-dependent order") {
    for (int p : {2, 3, 5, 8}) {
        CAPTURE(p);
        constexpr int calls = 24;
        auto failures = std::make_shared<int>(0);
        auto checked = std::make_shared<int>(0);
        inproc::run(p, [&](communicator comm) -> task<void> {
            std::vector<int> order(calls);
            std::iota(order.begin(), order.end(), 1);
            std::shuffle(order.begin(), order.end(),
                         std::mt19937(static_cast<unsigned>(comm.rank())));
            auto executor = co_await asio::this_coro::executor;
            for (int g : order) {
                // Every generation runs a different collective with data that
                // depends on the generation, so a cross-matched message shows.
                spawn(
                    executor,
                    [comm, g, p, failures, checked]() -> task<void> {
                        const auto gen = generation(static_cast<std::uint64_t>(g));
                        switch (g % 3) {
                        case 0: {
                            std::vector<std::int64_t> v(5, comm.rank() + g);
                            co_await all_reduce(comm, v, sum, gen);
                            const std::int64_t expected = p * (p - 1) / 2 + p * g;
                            if (v[4] != expected) ++*failures;
                            break;
                        }
                        case 1: {
                            std::vector<std::int64_t> v(3, comm.rank() == g % p ? g : -1);
                            co_await broadcast(comm, v, root(g % p), gen);
                            if (v[2] != g) ++*failures;
                            break;
                        }
                        default: {
                            auto all =
                                co_await all_gather(comm, std::int64_t{comm.rank() * g}, gen);
                            for (int r = 0; r < p; ++r)
                                if (all[static_cast<std::size_t>(r)] != r * g) ++*failures;
                        }
                        }
                        ++*checked;
                    },
                    asio::detached);
            }
            co_return;
        });
        CHECK(*failures == 0);
        CHECK(*checked == calls * p);
    }
}

TEST_CASE("automatic generations continue after explicit ones") {
    inproc::run(3, [](communicator comm) -> task<void> {
        std::vector<int> v(2, 1);
        co_await all_reduce(comm, v, sum, generation(10));
        co_await all_reduce(comm, v, sum); // takes 11
        co_await all_reduce(comm, v, sum, generation(4));
        CHECK(v[0] == 27);
    });
}

TEST_CASE("generation claims from several threads on one in-process communicator stay distinct") {
    // The in-process transport is not driven by one thread (ranks may be
    // threads), so its communicators keep the lock their claims need here.
    inproc::run(1, [](communicator comm) -> task<void> {
        CHECK_FALSE(comm.transport().capabilities().one_thread);
        constexpr int per_thread = 100000;
        std::vector<std::uint64_t> first(per_thread), second(per_thread);
        auto claim_into = [&comm](std::vector<std::uint64_t>& out) {
            for (auto& g : out)
                g = comm.claim_generation(nullptr);
        };
        std::thread a(claim_into, std::ref(first)), b(claim_into, std::ref(second));
        a.join();
        b.join();
        std::vector<std::uint64_t> all(first);
        all.insert(all.end(), second.begin(), second.end());
        std::sort(all.begin(), all.end());
        std::vector<std::uint64_t> expected(all.size());
        std::iota(expected.begin(), expected.end(), std::uint64_t{1});
        CHECK(all == expected);
        co_return;
    });
}
