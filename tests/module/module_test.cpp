// The module build: the same checks a user would make, through `import tutti;`
// and no tutti header, so a name missing from modules/tutti.cppm or a module
// built with flags its users do not share fails here and not in a user's
// project.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <algorithm>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <doctest/doctest.h>

import tutti;

namespace {

// A user's algorithm, written against the module alone: rank 0 collects and
// combines every contribution in rank order, then sends the result back.
tutti::task<void> through_rank_zero(const tutti::call_context& ctx,
                                    const tutti::all_reduce_args& a) {
    const std::size_t bytes = a.count * a.op->element_size;
    const auto mine = a.send.first(bytes);
    std::vector<std::byte> result(mine.begin(), mine.end());
    if (ctx.rank() == 0) {
        std::vector<std::byte> incoming(bytes);
        for (int r = 1; r < ctx.size(); ++r) {
            co_await ctx.recv(r, 0, incoming);
            a.op->combine(result.data(), incoming.data(), result.data(), a.count);
        }
        // A fan-out: nothing but the end of the call waits for these.
        std::vector<tutti::request> sends;
        for (int r = 1; r < ctx.size(); ++r)
            sends.push_back(ctx.isend(r, 1, result, tutti::send_awaited::at_end));
        co_await tutti::wait_all(sends);
    } else {
        co_await ctx.send(0, 0, result);
        co_await ctx.recv(0, 1, result);
    }
    std::copy(result.begin(), result.end(), a.recv.begin());
}

} // namespace

TEST_CASE("module: all_reduce sum is exact") {
    for (int p : {1, 2, 3, 4, 7}) {
        CAPTURE(p);
        tutti::inproc::run(p, [p](tutti::communicator comm) -> tutti::task<void> {
            std::vector<std::int64_t> data{comm.rank() + 1, 10 * comm.rank()};
            co_await tutti::all_reduce(comm, data, tutti::sum);
            CHECK(data[0] == std::int64_t{p} * (p + 1) / 2);
            CHECK(data[1] == std::int64_t{10} * p * (p - 1) / 2);
        });
    }
}

TEST_CASE("module: broadcast of a std::string") {
    tutti::inproc::run(5, [](tutti::communicator comm) -> tutti::task<void> {
        std::string text = comm.rank() == 3 ? "hello from rank 3" : "";
        co_await tutti::broadcast(comm, text, tutti::root(3));
        CHECK(text == "hello from rank 3");
    });
}

TEST_CASE("module: all_to_all is a transpose") {
    for (int p : {1, 2, 5, 8}) {
        CAPTURE(p);
        tutti::inproc::run(p, [p](tutti::communicator comm) -> tutti::task<void> {
            // Element j of rank i is (i, j); after the exchange element i of
            // rank j must be (i, j).
            std::vector<std::int64_t> row(static_cast<std::size_t>(p));
            for (int j = 0; j < p; ++j)
                row[static_cast<std::size_t>(j)] = comm.rank() * 1000 + j;
            std::vector<std::int64_t> column(row.size());
            co_await tutti::all_to_all(comm, row, column);
            int wrong = 0;
            for (int i = 0; i < p; ++i)
                if (column[static_cast<std::size_t>(i)] != i * 1000 + comm.rank()) ++wrong;
            CHECK(wrong == 0);
        });
    }
}

TEST_CASE("module: the blocking form on one thread per rank") {
    tutti::inproc::run_threads(3, [](tutti::communicator comm) {
        std::vector<int> data{comm.rank()};
        tutti::wait(comm, tutti::all_reduce(comm, data, tutti::max));
        CHECK(data[0] == 2);
    });
}

TEST_CASE("module: a user's algorithm joins the catalog and runs by name") {
    static const bool registered = tutti::register_algorithm<tutti::all_reduce_args>({
        .info = {.name = "module_test_through_rank_zero", .summary = "for the module test"},
        .run = through_rank_zero,
    });
    CHECK(registered);
    CHECK(tutti::algorithms().find<tutti::all_reduce_args>("module_test_through_rank_zero"));
    tutti::inproc::run(6, [](tutti::communicator comm) -> tutti::task<void> {
        std::vector<std::int64_t> data{comm.rank() + 1, -comm.rank()};
        co_await tutti::all_reduce(comm, data, tutti::sum,
                                   tutti::use("module_test_through_rank_zero"));
        CHECK(data == std::vector<std::int64_t>{21, -15});
    });
}

TEST_CASE("module: generation 0 is refused with errc::invalid_generation") {
    tutti::errc code{};
    std::string message;
    try {
        tutti::inproc::run(2, [](tutti::communicator comm) -> tutti::task<void> {
            std::vector<int> data{1};
            co_await tutti::all_reduce(comm, data, tutti::sum, tutti::generation(0));
        });
    } catch (const tutti::error& e) {
        code = e.code();
        message = e.what();
    }
    CHECK(code == tutti::errc::invalid_generation);
    CHECK(message.find("generation 0") != std::string::npos);
    CHECK(tutti::to_string(tutti::errc::invalid_generation) == "invalid generation");
}

TEST_CASE("module: an unknown algorithm name is refused with errc::unknown_algorithm") {
    CHECK_THROWS_AS(tutti::inproc::run(2,
                                       [](tutti::communicator comm) -> tutti::task<void> {
                                           std::vector<int> data{1};
                                           co_await tutti::all_reduce(comm, data, tutti::sum,
                                                                      tutti::use("no-such"));
                                       }),
                    tutti::error);
    try {
        tutti::inproc::run(1, [](tutti::communicator comm) -> tutti::task<void> {
            std::vector<int> data{1};
            co_await tutti::all_reduce(comm, data, tutti::sum, tutti::use("no-such"));
        });
        FAIL("no error");
    } catch (const tutti::error& e) {
        CHECK(e.code() == tutti::errc::unknown_algorithm);
    }
}
