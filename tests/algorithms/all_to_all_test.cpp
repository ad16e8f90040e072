// all_to_all: every algorithm, sizes 1..17, 31, 64 and 0, 1, 7 elements per
// block, with 3001 elements per block only for p <= 17 (at p = 64 that would
// be 1.5 MB per buffer on each of 64 ranks). The transpose identity: rank i
// puts encode(i, j, k) at element k of block j for rank j, so rank j must
// find encode(i, j, k) at element k of block i. Also in place, and the
// one-value-per-rank form.
#include "support/harness.hpp"

using namespace tutti;
using namespace tutti::testing;

namespace {

bool too_large(int p, std::size_t n) {
    return n > 1000 && p > 17;
}

std::vector<std::int64_t> outgoing(int me, int p, std::size_t n) {
    std::vector<std::int64_t> data(n * static_cast<std::size_t>(p));
    for (int j = 0; j < p; ++j)
        for (std::size_t k = 0; k < n; ++k)
            data[static_cast<std::size_t>(j) * n + k] = encode(me, j, static_cast<std::int64_t>(k));
    return data;
}

std::size_t misplaced(const std::vector<std::int64_t>& got, int me, int p, std::size_t n) {
    std::size_t wrong = 0;
    for (int i = 0; i < p; ++i)
        for (std::size_t k = 0; k < n; ++k)
            if (got[static_cast<std::size_t>(i) * n + k] !=
                encode(i, me, static_cast<std::int64_t>(k)))
                ++wrong;
    return wrong;
}

call_signature signature(int p, std::size_t n) {
    return call_signature{.bytes = n * 8 * static_cast<std::size_t>(p)};
}

} // namespace

TEST_CASE("all_to_all: transpose for every algorithm, size and block") {
    sweep<all_to_all_args>(signature, [](const std::string& name, int p, std::size_t n) {
        if (too_large(p, n)) return;
        tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
            auto send = outgoing(comm.rank(), p, n);
            std::vector<std::int64_t> recv(send.size(), -1);
            co_await all_to_all(comm, send, recv, use(name));
            CHECK(misplaced(recv, comm.rank(), p, n) == 0);
            CHECK(send == outgoing(comm.rank(), p, n));
        });
    });
}

TEST_CASE("all_to_all: in place for every algorithm") {
    sweep<all_to_all_args>(signature, [](const std::string& name, int p, std::size_t n) {
        if (too_large(p, n)) return;
        tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
            auto data = outgoing(comm.rank(), p, n);
            co_await all_to_all(comm, data, data, use(name));
            CHECK(misplaced(data, comm.rank(), p, n) == 0);
        });
    });
}

TEST_CASE("all_to_all: one value per rank") {
    for (const auto& name : algorithm_names(collective::all_to_all)) {
        for (int p : {1, 2, 5, 17}) {
            CAPTURE(name);
            CAPTURE(p);
            tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                std::vector<std::int64_t> values(static_cast<std::size_t>(p));
                for (int j = 0; j < p; ++j)
                    values[static_cast<std::size_t>(j)] = encode(comm.rank(), j);
                auto got = co_await all_to_all(comm, values, use(name));
                REQUIRE(got.size() == values.size());
                std::size_t wrong = 0;
                for (int i = 0; i < p; ++i)
                    if (got[static_cast<std::size_t>(i)] != encode(i, comm.rank())) ++wrong;
                CHECK(wrong == 0);
            });
        }
    }
}
