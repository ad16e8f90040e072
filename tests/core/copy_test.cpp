// copy_bytes and copy_bytes_streaming (core/copy.hpp): every byte arrives,
// nothing around the destination is touched, for every alignment of the two
// ends within a cache line and lengths around the vector widths.
#include <cstdint>
#include <string>
#include <vector>

#include "core/copy.hpp"
#include "topology/topology.hpp"

#include "support/harness.hpp"

using namespace tutti;

namespace {

template <class Copy>
void check_copies(Copy copy) {
    constexpr std::size_t guard = 64;
    const std::vector<std::size_t> lengths{0,   1,   15,  16,  31,   32,   33,   63,   64,
                                           127, 128, 129, 255, 2047, 2048, 4103, 70001};
    std::size_t wrong = 0;
    for (std::size_t length : lengths)
        for (std::size_t to_offset : {0, 1, 8, 16, 31, 32, 63})
            for (std::size_t from_offset : {0, 3, 16, 32, 47}) {
                std::vector<unsigned char> from(length + from_offset + guard);
                for (std::size_t i = 0; i < from.size(); ++i)
                    from[i] = static_cast<unsigned char>(i * 7 + length);
                std::vector<unsigned char> to(length + to_offset + 2 * guard, 0xee);
                // Line-aligned base, so that the offsets are offsets within a line.
                auto* base = to.data() + (64 - reinterpret_cast<std::uintptr_t>(to.data()) % 64);
                copy(base + to_offset, from.data() + from_offset, length);
                for (std::size_t i = 0; i < length; ++i)
                    if (base[to_offset + i] != from[from_offset + i]) ++wrong;
                for (auto* p = to.data(); p < base + to_offset; ++p)
                    if (*p != 0xee) ++wrong;
                for (auto* p = base + to_offset + length; p < to.data() + to.size(); ++p)
                    if (*p != 0xee) ++wrong;
            }
    CHECK(wrong == 0);
}

} // namespace

TEST_CASE("copy_bytes: every byte, nothing around, at every alignment") {
    check_copies([](void* to, const void* from, std::size_t n) { copy_bytes(to, from, n); });
}

TEST_CASE("copy_bytes_streaming: every byte, nothing around, at every alignment") {
    check_copies(
        [](void* to, const void* from, std::size_t n) { copy_bytes_streaming(to, from, n); });
}

// Calls whose buffers take three quarters of the last-level cache or more
// copy their own blocks with streaming stores (algorithms/common.hpp,
// buffers_exceed_cache; core/copy.hpp, copy_block): the 2-rank ring and
// direct all_gather, pairwise and linear all_to_all and all_to_allv, and the
// linear gather and scatter, with blocks a third of that cache (their buffers then take up to
// 2.7 times the cache) and an eighth of it (about the margin), still put
// every element in place.
TEST_CASE("all_gather, all_to_all(v), gather and scatter with buffers beyond the last-level "
          "cache") {
    const auto cache = topology::last_level_cache_bytes();
    if (cache == 0 || cache > (std::uint64_t{256} << 20)) {
        MESSAGE("hwloc gives no last-level cache of a size to test here (" << cache << " bytes)");
        return;
    }
    constexpr int p = 2;
    auto value = [](int rank, int block, std::size_t i) {
        return (static_cast<std::int64_t>(rank) << 48) ^ (static_cast<std::int64_t>(block) << 40) ^
               static_cast<std::int64_t>(i);
    };
    for (const std::size_t parts : {3, 8}) {
        CAPTURE(parts);
        const std::size_t n = cache / parts / sizeof(std::int64_t); // elements per block
        testing::run_ranks(p, [&](communicator comm) -> task<void> {
            const int r = comm.rank();
            // Elements of the p blocks of `got` that are not want(from, i).
            auto wrong_in = [&](const std::vector<std::int64_t>& got, auto want) {
                std::size_t wrong = 0;
                for (int from = 0; from < p; ++from)
                    for (std::size_t i = 0; i < n; ++i)
                        wrong += got[static_cast<std::size_t>(from) * n + i] != want(from, i);
                return wrong;
            };
            std::vector<std::int64_t> own(n);
            for (std::size_t i = 0; i < n; ++i)
                own[i] = value(r, 0, i);
            for (const std::string name : {"ring", "direct"}) {
                CAPTURE(name);
                std::vector<std::int64_t> recv(n * p, -1);
                co_await all_gather(comm, own, recv, use(name));
                CHECK(wrong_in(recv, [&](int from, std::size_t i) { return value(from, 0, i); }) ==
                      0);
            }
            // all_to_all: block b of rank r's send goes to rank b, into its
            // block r.
            std::vector<std::int64_t> out(n * p);
            for (int b = 0; b < p; ++b)
                for (std::size_t i = 0; i < n; ++i)
                    out[static_cast<std::size_t>(b) * n + i] = value(r, b, i);
            for (const std::string name : {"pairwise", "linear"}) {
                CAPTURE(name);
                std::vector<std::int64_t> in(n * p, -1);
                co_await all_to_all(comm, out, in, use(name));
                CHECK(wrong_in(in, [&](int from, std::size_t i) { return value(from, r, i); }) ==
                      0);
            }
            // all_to_allv, the pieces a few elements apart in length: rank
            // `from` sends n - from - to elements to rank `to`.
            auto count = [&](int from, int to) { return n - static_cast<std::size_t>(from + to); };
            std::vector<std::size_t> send_counts, recv_counts;
            std::vector<std::int64_t> pieces_out, pieces_expected;
            for (int b = 0; b < p; ++b) {
                send_counts.push_back(count(r, b));
                recv_counts.push_back(count(b, r));
                for (std::size_t i = 0; i < count(r, b); ++i)
                    pieces_out.push_back(value(r, b, i));
                for (std::size_t i = 0; i < count(b, r); ++i)
                    pieces_expected.push_back(value(b, r, i));
            }
            for (const std::string name : {"pairwise", "linear"}) {
                CAPTURE(name);
                std::vector<std::int64_t> pieces_in(pieces_expected.size(), -1);
                co_await all_to_allv(comm, pieces_out, send_counts, pieces_in, recv_counts,
                                     use(name));
                std::size_t wrong = 0;
                for (std::size_t i = 0; i < pieces_in.size(); ++i)
                    wrong += pieces_in[i] != pieces_expected[i];
                CHECK(wrong == 0);
            }
            // gather to rank 1, then scatter from it what rank 1 made for
            // each rank.
            std::vector<std::int64_t> gathered(r == 1 ? n * p : 0, -1);
            co_await gather(comm, own, gathered, root(1), use("linear"));
            if (r == 1)
                CHECK(wrong_in(gathered,
                               [&](int from, std::size_t i) { return value(from, 0, i); }) == 0);
            std::vector<std::int64_t> piece(n, -1);
            co_await scatter(comm, r == 1 ? out : std::vector<std::int64_t>{}, piece, root(1),
                             use("linear"));
            std::size_t wrong = 0;
            for (std::size_t i = 0; i < n; ++i)
                wrong += piece[i] != value(1, r, i);
            CHECK(wrong == 0);
        });
    }
}
