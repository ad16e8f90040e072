// Shared memory from tutti::allocate_shared: the region registry, its
// errors, and every algorithm of the large-message collectives on buffers
// that live there (as ranks of a shared-memory job, the receivers copy, or
// reduce, straight out of their mapping of the sender's buffer).
#include <cstdint>
#include <cstring>

#include "support/harness.hpp"

using namespace tutti;
using namespace tutti::testing;

namespace {

// Blocks of 2500 elements (20,000 bytes): above the mapped threshold of the
// shared-memory transport, so each block travels through a mapping.
constexpr std::size_t block = 2500;

std::vector<int> sizes_here() {
    if (job_world().valid()) return {job_world().size()};
    return {1, 2, 3, 4, 5, 8};
}

template <class Args>
std::vector<std::string> usable(int p, std::size_t bytes, bool commutative = true) {
    std::vector<std::string> names;
    for (const auto& name : algorithm_names(Args::kind)) {
        call_signature call{.kind = Args::kind,
                            .comm_size = p,
                            .bytes = bytes,
                            .count = bytes / 8,
                            .has_op = true,
                            .commutative = commutative,
                            .builtin_op = true};
        if (!algorithms().find<Args>(name)->info.check(call)) names.push_back(name);
    }
    return names;
}

} // namespace

TEST_CASE("shared memory: regions are found by any address inside them, and only there") {
    const auto before = shared_usage();
    {
        shared_vector<std::int64_t> a(1000), b(3);
        const auto* pa = reinterpret_cast<const std::byte*>(a.data());
        auto whole = find_shared_region(pa, a.size() * 8);
        REQUIRE(whole.has_value());
        CHECK(whole->offset == 0);
        CHECK(whole->region_bytes >= 8000);
        CHECK(whole->fd >= 0);
        auto inner = find_shared_region(pa + 100, 800);
        REQUIRE(inner.has_value());
        CHECK(inner->id == whole->id);
        CHECK(inner->offset == 100);
        // Past the region's end, or not shared at all.
        CHECK_FALSE(find_shared_region(pa + 100, whole->region_bytes).has_value());
        std::vector<std::int64_t> plain(1000);
        CHECK_FALSE(find_shared_region(plain.data(), 8).has_value());
        auto other = find_shared_region(b.data(), 24);
        REQUIRE(other.has_value());
        CHECK(other->id != whole->id);
        CHECK(shared_usage().regions == before.regions + 2);
    }
    CHECK(shared_usage().regions == before.regions);
    CHECK(shared_usage().bytes == before.bytes);
}

TEST_CASE("shared memory: zero bytes is a page of its own; ids are never reused") {
    void* p = allocate_shared(0);
    REQUIRE(p != nullptr);
    const auto first = find_shared_region(p, 0);
    REQUIRE(first.has_value());
    deallocate_shared(p);
    deallocate_shared(nullptr);
    void* q = allocate_shared(0);
    const auto second = find_shared_region(q, 0);
    REQUIRE(second.has_value());
    CHECK(second->id > first->id);
    deallocate_shared(q);
}

TEST_CASE("shared memory: freeing what it did not allocate is an error naming the pointer") {
    std::int64_t local = 0;
    try {
        deallocate_shared(&local);
        FAIL("no error");
    } catch (const error& e) {
        CHECK(e.code() == errc::invalid_argument);
        CHECK(std::string(e.what()).find("was not allocated by allocate_shared") !=
              std::string::npos);
    }
    void* p = allocate_shared(100);
    // Inside a region is not its start either.
    CHECK_THROWS_AS(deallocate_shared(static_cast<std::byte*>(p) + 8), error);
    deallocate_shared(p);
}

TEST_CASE("shared memory: an allocation the system refuses is a resource_unavailable error") {
    try {
        // More than any address space: mmap refuses it.
        void* p = allocate_shared(std::size_t{1} << 62);
        deallocate_shared(p);
        FAIL("no error");
    } catch (const error& e) {
        CHECK(e.code() == errc::resource_unavailable);
        CHECK(std::string(e.what()).find("cannot allocate") != std::string::npos);
    }
}

TEST_CASE("shared memory: all_reduce on shared buffers, every algorithm, exact sums") {
    for (int p : sizes_here()) {
        const std::size_t n = block * static_cast<std::size_t>(p) + 3;
        for (const auto& name : usable<all_reduce_args>(p, n * 8)) {
            for (bool in_place : {false, true}) {
                CAPTURE(p);
                CAPTURE(name);
                CAPTURE(in_place);
                run_ranks(p, [&](communicator comm) -> task<void> {
                    shared_vector<std::int64_t> send(n), recv(n, -1);
                    for (std::size_t i = 0; i < n; ++i)
                        send[i] = encode(comm.rank(), 1, static_cast<std::int64_t>(i));
                    if (in_place) {
                        co_await all_reduce(comm, send, sum, use(name));
                    } else {
                        co_await all_reduce(comm, send, recv, sum, use(name));
                    }
                    const auto& result = in_place ? send : recv;
                    std::size_t wrong = 0;
                    for (std::size_t i = 0; i < n; ++i) {
                        std::int64_t want = 0;
                        for (int r = 0; r < p; ++r)
                            want += encode(r, 1, static_cast<std::int64_t>(i));
                        wrong += result[i] != want;
                    }
                    CHECK(wrong == 0);
                });
            }
        }
    }
}

TEST_CASE("shared memory: all_to_all, all_gather, broadcast, reduce_scatter on shared buffers") {
    for (int p : sizes_here()) {
        CAPTURE(p);
        const auto up = static_cast<std::size_t>(p);
        for (const auto& name : usable<all_to_all_args>(p, block * up * 8)) {
            CAPTURE(name);
            run_ranks(p, [&](communicator comm) -> task<void> {
                shared_vector<std::int64_t> send(block * up), recv(block * up, -1);
                for (int to = 0; to < p; ++to)
                    for (std::size_t k = 0; k < block; ++k)
                        send[static_cast<std::size_t>(to) * block + k] =
                            encode(comm.rank(), to, static_cast<std::int64_t>(k));
                co_await all_to_all(comm, send, recv, use(name));
                std::size_t wrong = 0;
                for (int from = 0; from < p; ++from)
                    for (std::size_t k = 0; k < block; ++k)
                        wrong += recv[static_cast<std::size_t>(from) * block + k] !=
                                 encode(from, comm.rank(), static_cast<std::int64_t>(k));
                CHECK(wrong == 0);
            });
        }
        for (const auto& name : usable<all_gather_args>(p, block * up * 8)) {
            CAPTURE(name);
            run_ranks(p, [&](communicator comm) -> task<void> {
                shared_vector<std::int64_t> send(block), recv(block * up, -1);
                for (std::size_t k = 0; k < block; ++k)
                    send[k] = encode(comm.rank(), 0, static_cast<std::int64_t>(k));
                co_await all_gather(comm, send, recv, use(name));
                std::size_t wrong = 0;
                for (int from = 0; from < p; ++from)
                    for (std::size_t k = 0; k < block; ++k)
                        wrong += recv[static_cast<std::size_t>(from) * block + k] !=
                                 encode(from, 0, static_cast<std::int64_t>(k));
                CHECK(wrong == 0);
            });
        }
        for (const auto& name : usable<broadcast_args>(p, block * up * 8)) {
            CAPTURE(name);
            run_ranks(p, [&](communicator comm) -> task<void> {
                const int root_rank = p - 1;
                shared_vector<std::int64_t> data(block * up, -1);
                if (comm.rank() == root_rank)
                    for (std::size_t k = 0; k < data.size(); ++k)
                        data[k] = encode(root_rank, 2, static_cast<std::int64_t>(k));
                co_await broadcast(comm, data, root(root_rank), use(name));
                std::size_t wrong = 0;
                for (std::size_t k = 0; k < data.size(); ++k)
                    wrong += data[k] != encode(root_rank, 2, static_cast<std::int64_t>(k));
                CHECK(wrong == 0);
            });
        }
        for (const auto& name : usable<reduce_scatter_args>(p, block * up * 8)) {
            CAPTURE(name);
            run_ranks(p, [&](communicator comm) -> task<void> {
                shared_vector<std::int64_t> send(block * up), recv(block, -1);
                for (std::size_t i = 0; i < send.size(); ++i)
                    send[i] = encode(comm.rank(), 3, static_cast<std::int64_t>(i));
                co_await reduce_scatter(comm, send, recv, sum, use(name));
                std::size_t wrong = 0;
                const auto first = static_cast<std::size_t>(comm.rank()) * block;
                for (std::size_t k = 0; k < block; ++k) {
                    std::int64_t want = 0;
                    for (int r = 0; r < p; ++r)
                        want += encode(r, 3, static_cast<std::int64_t>(first + k));
                    wrong += recv[k] != want;
                }
                CHECK(wrong == 0);
            });
        }
    }
}
