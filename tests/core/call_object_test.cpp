// What a one-part collective's front end returns: an awaitable call object
// that runs its algorithm as the awaiting coroutine's child. It must behave
// as the task it replaced: lazy (the generation is taken when it is awaited,
// not when it is made), run once, convertible to a task<void> to be kept,
// spawned or waited on, and throwing bad input from the co_await.
#include <string>
#include <vector>

#include "support/harness.hpp"

using namespace tutti;

TEST_CASE("call object: generations are taken in await order, not in the order calls are made") {
    inproc::run(3, [](communicator comm) -> task<void> {
        std::vector<std::int64_t> summed(4, comm.rank() + 1);
        std::vector<std::int64_t> sent(2, comm.rank() == 1 ? 42 : 0);
        // Made in a rank-dependent order, awaited in the same order on every
        // rank: a call that took its generation when made would pair rank 0's
        // all_reduce with the other ranks' broadcast.
        if (comm.rank() == 0) {
            auto first = all_reduce(comm, summed, sum);
            auto second = broadcast(comm, sent, root(1));
            co_await first;
            co_await second;
        } else {
            auto second = broadcast(comm, sent, root(1));
            auto first = all_reduce(comm, summed, sum);
            co_await first;
            co_await second;
        }
        CHECK(summed == std::vector<std::int64_t>(4, 1 + 2 + 3));
        CHECK(sent == std::vector<std::int64_t>(2, 42));
    });
}

TEST_CASE("call object: a call made and dropped unawaited takes no generation") {
    inproc::run(2, [](communicator comm) -> task<void> {
        std::vector<int> v(3, comm.rank() + 1);
        if (comm.rank() == 0) {
            // Were its generation taken, rank 0's all_reduce below would run
            // as generation 2 against rank 1's generation 1.
            auto dropped = barrier(comm);
            auto also_dropped = all_reduce(comm, v, sum);
        }
        co_await all_reduce(comm, v, sum);
        CHECK(v == std::vector<int>(3, 3));
    });
}

TEST_CASE("call object: awaiting a call twice is an error that names the collective") {
    inproc::run(2, [](communicator comm) -> task<void> {
        std::vector<int> v(2, 1);
        auto call = all_reduce(comm, v, sum);
        co_await call;
        CHECK(v == std::vector<int>(2, 2));
        std::string message;
        errc code{};
        try {
            co_await call;
        } catch (const tutti::error& e) {
            message = e.what();
            code = e.code();
        }
        CHECK(code == errc::invalid_argument);
        CHECK(message.find("all_reduce") != std::string::npos);
        CHECK(message.find("awaited already") != std::string::npos);
        // The communicator is unharmed: the failed await took no generation.
        co_await all_reduce(comm, v, sum);
        CHECK(v == std::vector<int>(2, 4));
    });
}

TEST_CASE("call object: moving a call once awaited is an error that names the collective") {
    inproc::run(2, [](communicator comm) -> task<void> {
        std::vector<int> v(2, 1);
        auto call = broadcast(comm, v, root(1));
        co_await call;
        std::string message;
        errc code{};
        try {
            // Its algorithm's context and arguments live inside it: a moved
            // copy would run the collective again, as a call of its own.
            auto moved = std::move(call);
            co_await moved;
        } catch (const tutti::error& e) {
            message = e.what();
            code = e.code();
        }
        CHECK(code == errc::invalid_argument);
        CHECK(message.find("broadcast") != std::string::npos);
        CHECK(message.find("awaited already") != std::string::npos);
        // No generation was taken: the next call pairs up on every rank.
        co_await all_reduce(comm, v, sum);
        CHECK(v == std::vector<int>(2, 2));
    });
}

TEST_CASE("call object: kept as task<void>, spawned and waited on") {
    inproc::run(3, [](communicator comm) -> task<void> {
        std::vector<std::int64_t> a(5, comm.rank());
        std::vector<std::int64_t> b(5, comm.rank() == 2 ? 7 : 0);
        std::vector<std::int64_t> gathered(3 * 2, -1);
        const std::vector<std::int64_t> mine(2, comm.rank() * 10);
        std::vector<task<void>> calls;
        calls.push_back(all_reduce(comm, a, sum));
        calls.push_back(broadcast(comm, b, root(2)));
        calls.push_back(gather(comm, mine, gathered, root(1)));
        for (auto& call : calls)
            co_await call;
        CHECK(a == std::vector<std::int64_t>(5, 0 + 1 + 2));
        CHECK(b == std::vector<std::int64_t>(5, 7));
        if (comm.rank() == 1) CHECK(gathered == std::vector<std::int64_t>{0, 0, 10, 10, 20, 20});

        // Spawned on its own chain; this coroutine learns of its end through
        // a request the handler completes.
        std::vector<int> spawned(2, comm.rank() + 1);
        auto finished = make_request();
        spawn(co_await asio::this_coro::executor, all_reduce(comm, spawned, sum),
              [finished](std::exception_ptr e) { finished->complete(e); });
        co_await finished->wait();
        CHECK(spawned == std::vector<int>(2, 6));
    });
    inproc::run_threads(2, [](communicator comm) {
        std::vector<int> v(4, comm.rank() + 5);
        tutti::wait(comm, all_reduce(comm, v, max));
        CHECK(v == std::vector<int>(4, 6));
        tutti::wait(comm, barrier(comm));
    });
}

TEST_CASE("call object: a bad input throws from the co_await and takes no generation") {
    inproc::run(2, [](communicator comm) -> task<void> {
        std::vector<int> send(4, 1), short_recv(3);
        errc code{};
        auto call = all_reduce(comm, send, short_recv, sum); // made without complaint
        try {
            co_await call;
        } catch (const tutti::error& e) {
            code = e.code();
        }
        CHECK(code == errc::invalid_count);
        std::vector<int> recv(4);
        co_await all_reduce(comm, send, recv, sum);
        CHECK(recv == std::vector<int>(4, 2));
    });
}

TEST_CASE("call object: one made from a temporary communicator keeps it alive until awaited") {
    inproc::run(3, [](communicator comm) -> task<void> {
        std::vector<std::int64_t> v(5, comm.rank() + 1);
        // The split's result is a temporary: the call must hold its own
        // copy, for nothing else does by the time it is awaited.
        auto call = all_reduce(co_await comm.split(0, comm.rank()), v, sum);
        co_await call;
        CHECK(v == std::vector<std::int64_t>(5, 1 + 2 + 3));
    });
}

TEST_CASE("call object: converted to a task it keeps a copy of the named communicator") {
    inproc::run(2, [](communicator comm) -> task<void> {
        std::vector<int> v(4, comm.rank() + 10);
        std::vector<task<void>> kept;
        {
            // Named, so the call refers to it; the conversion to a task must
            // copy it, since it ends before the task runs.
            communicator named = co_await comm.split(0, comm.rank());
            kept.push_back(all_reduce(named, v, sum));
            named = communicator{};
        }
        co_await std::move(kept.front());
        CHECK(v == std::vector<int>(4, 10 + 11));
    });
}

TEST_CASE("call object: an algorithm's name survives every move of the call's options") {
    // Options are moved into the call, and a call converted to a task is
    // moved again; an empty name is moved without copying its characters
    // (algorithm_choice's own move), a set one must arrive whole.
    algorithm_choice named("no_such_barrier");
    algorithm_choice moved(std::move(named));
    CHECK(moved.name == "no_such_barrier");
    algorithm_choice unnamed;
    unnamed.on_fail = fallback_mode::silent;
    unnamed.sub_call = true;
    algorithm_choice assigned("ring");
    assigned = std::move(unnamed);
    CHECK(assigned.name.empty());
    CHECK(assigned.on_fail == fallback_mode::silent);
    CHECK(assigned.sub_call);
    assigned = std::move(moved);
    CHECK(assigned.name == "no_such_barrier");
    CHECK_FALSE(assigned.sub_call);

    inproc::run(2, [](communicator comm) -> task<void> {
        // Each way in must reach selection with the name, which refuses it.
        auto refused = [](task<void> call) -> task<std::string> {
            try {
                co_await std::move(call);
            } catch (const tutti::error& e) {
                CHECK(e.code() == errc::unknown_algorithm);
                co_return std::string(e.what());
            }
            co_return std::string("ran");
        };
        call_options given;
        given.algorithm = algorithm_choice("no_such_barrier");
        std::vector<task<void>> calls;
        calls.push_back(barrier(comm, use("no_such_barrier")));
        calls.push_back(barrier(comm, given));
        calls.push_back(barrier(comm, call_options(given)));
        for (auto& call : calls) {
            const auto message = co_await refused(std::move(call));
            CHECK(message.find("no_such_barrier") != std::string::npos);
        }
        CHECK(given.algorithm.name == "no_such_barrier"); // passed by reference: copied, kept
        co_await barrier(comm);
    });
}
