// all_to_allv: every algorithm, sizes 1..17, 31, 64, with a count per pair
// that varies with the pair and is zero for about a quarter of them (the
// rank's own piece too, on every fourth rank). The sweep count n sets the
// largest piece, n + 1 elements; n = 3001 runs only for p <= 17 (at p = 64 it
// would be about 40 MB per direction across the ranks). The transpose identity: rank i
// sends encode(i, j, k) as element k of its piece for rank j, and rank j must
// find exactly that in its piece from rank i. Also in place (symmetric
// counts) and the vector-of-vectors form.
#include "support/harness.hpp"

using namespace tutti;
using namespace tutti::testing;

namespace {

bool too_large(int p, std::size_t n) {
    return n > 1000 && p > 17;
}

// Elements rank `from` sends to rank `to`.
std::size_t pair_count(int from, int to, std::size_t n) {
    if ((from * 2 + to * 3) % 4 == 0) return 0;
    return 1 + static_cast<std::size_t>(from * 7 + to * 11) % (n + 1);
}

// Symmetric: what i sends j equals what j sends i, so the totals match.
std::size_t symmetric_count(int from, int to, std::size_t n) {
    if ((from + to) % 3 == 0) return 0;
    return 1 + static_cast<std::size_t>(from + to) % (n + 1);
}

template <class Count>
task<void> exchange(communicator comm, const std::string& name, std::size_t n, Count count,
                    bool in_place) {
    const int p = comm.size();
    const int me = comm.rank();
    std::vector<std::size_t> send_counts, recv_counts;
    for (int j = 0; j < p; ++j) {
        send_counts.push_back(count(me, j, n));
        recv_counts.push_back(count(j, me, n));
    }
    std::vector<std::int64_t> send;
    for (int j = 0; j < p; ++j)
        for (std::size_t k = 0; k < send_counts[static_cast<std::size_t>(j)]; ++k)
            send.push_back(encode(me, j, static_cast<std::int64_t>(k)));
    std::vector<std::int64_t> expected;
    for (int i = 0; i < p; ++i)
        for (std::size_t k = 0; k < recv_counts[static_cast<std::size_t>(i)]; ++k)
            expected.push_back(encode(i, me, static_cast<std::int64_t>(k)));

    if (in_place) {
        co_await all_to_allv(comm, send, send_counts, send, recv_counts, use(name));
        CHECK(send == expected);
    } else {
        std::vector<std::int64_t> recv(expected.size(), -1);
        co_await all_to_allv(comm, send, send_counts, recv, recv_counts, use(name));
        CHECK(recv == expected);
    }
}

call_signature signature(int, std::size_t) {
    return call_signature{.equal_counts = false};
}

} // namespace

TEST_CASE("all_to_allv: transpose with varied counts for every algorithm and size") {
    sweep<all_to_allv_args>(signature, [](const std::string& name, int p, std::size_t n) {
        if (too_large(p, n)) return;
        tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
            co_await exchange(comm, name, n, pair_count, false);
        });
    });
}

TEST_CASE("all_to_allv: in place for every algorithm") {
    sweep<all_to_allv_args>(signature, [](const std::string& name, int p, std::size_t n) {
        if (too_large(p, n)) return;
        tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
            co_await exchange(comm, name, n, symmetric_count, true);
        });
    });
}

TEST_CASE("all_to_allv: vectors of varied lengths") {
    for (const auto& name : algorithm_names(collective::all_to_allv)) {
        for (int p : {1, 2, 5, 17}) {
            CAPTURE(name);
            CAPTURE(p);
            tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                const int me = comm.rank();
                std::vector<std::vector<std::int64_t>> per_peer(static_cast<std::size_t>(p));
                for (int j = 0; j < p; ++j)
                    for (std::size_t k = 0; k < pair_count(me, j, 9); ++k)
                        per_peer[static_cast<std::size_t>(j)].push_back(
                            encode(me, j, static_cast<std::int64_t>(k)));
                auto got = co_await all_to_allv(comm, per_peer, use(name));
                REQUIRE(got.size() == per_peer.size());
                std::size_t wrong = 0;
                for (int i = 0; i < p; ++i) {
                    const auto& piece = got[static_cast<std::size_t>(i)];
                    if (piece.size() != pair_count(i, me, 9)) ++wrong;
                    for (std::size_t k = 0; k < piece.size(); ++k)
                        if (piece[k] != encode(i, me, static_cast<std::int64_t>(k))) ++wrong;
                }
                CHECK(wrong == 0);
            });
        }
    }
}
