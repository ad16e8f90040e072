// all_gather: every algorithm, sizes 1..17, 31, 64, blocks of 0, 1, 7, 3001
// elements: every block lands exactly in place, also when the send buffer is
// the rank's own block of recv or another rank's. Under AddressSanitizer
// 3001-element blocks run up to 17 ranks only (sweep_per_rank).
#include "support/harness.hpp"

using namespace tutti;
using namespace tutti::testing;

namespace {

call_signature signature(int p, std::size_t n) {
    return call_signature{.bytes = n * 8 * static_cast<std::size_t>(p)};
}

std::size_t misplaced(const std::vector<std::int64_t>& recv, int p, std::size_t n) {
    std::size_t wrong = 0;
    for (int from = 0; from < p; ++from)
        for (std::size_t i = 0; i < n; ++i)
            if (recv[static_cast<std::size_t>(from) * n + i] !=
                encode(from, 0, static_cast<std::int64_t>(i)))
                ++wrong;
    return wrong;
}

} // namespace

TEST_CASE("all_gather: every block in place for every algorithm, size and count") {
    sweep_per_rank<all_gather_args>(signature, [](const std::string& name, int p, std::size_t n) {
        tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
            std::vector<std::int64_t> send(n), recv(n * static_cast<std::size_t>(p), -1);
            for (std::size_t i = 0; i < n; ++i)
                send[i] = encode(comm.rank(), 0, static_cast<std::int64_t>(i));
            co_await all_gather(comm, send, recv, use(name));
            CHECK(misplaced(recv, p, n) == 0);
        });
    });
}

TEST_CASE("all_gather: send buffer is the rank's own block of recv") {
    sweep_per_rank<all_gather_args>(signature, [](const std::string& name, int p, std::size_t n) {
        tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
            std::vector<std::int64_t> recv(n * static_cast<std::size_t>(p), -1);
            const auto own = static_cast<std::size_t>(comm.rank()) * n;
            for (std::size_t i = 0; i < n; ++i)
                recv[own + i] = encode(comm.rank(), 0, static_cast<std::int64_t>(i));
            std::span<const std::int64_t> send(recv.data() + own, n);
            co_await all_gather(comm, send, recv, use(name));
            CHECK(misplaced(recv, p, n) == 0);
        });
    });
}

TEST_CASE("all_gather: send buffer is the next rank's block of recv") {
    // The send buffer is read before the result overwrites it: every
    // algorithm must take its block from there before receiving into it.
    sweep_per_rank<all_gather_args>(signature, [](const std::string& name, int p, std::size_t n) {
        tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
            std::vector<std::int64_t> recv(n * static_cast<std::size_t>(p), -1);
            const auto next = static_cast<std::size_t>((comm.rank() + 1) % p) * n;
            for (std::size_t i = 0; i < n; ++i)
                recv[next + i] = encode(comm.rank(), 0, static_cast<std::int64_t>(i));
            std::span<const std::int64_t> send(recv.data() + next, n);
            co_await all_gather(comm, send, recv, use(name));
            CHECK(misplaced(recv, p, n) == 0);
        });
    });
}

TEST_CASE("all_gather: values of different serialized sizes") {
    sweep_per_rank<all_gather_args>(signature, [](const std::string& name, int p, std::size_t n) {
        if (n > 7) return; // the value form carries one value per rank
        tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
            auto text_of = [&](int r) {
                return std::string(static_cast<std::size_t>(r) * n, 'a' + r % 26);
            };
            auto all = co_await all_gather(comm, text_of(comm.rank()), use(name));
            std::size_t wrong = 0;
            for (int r = 0; r < p; ++r)
                if (all[static_cast<std::size_t>(r)] != text_of(r)) ++wrong;
            CHECK(wrong == 0);
        });
    });
}
