// The MPICH-style generated matrix: every collective x every registered
// algorithm, forced by its environment override (TUTTI_<COLLECTIVE>_ALGORITHM
// for a pure algorithm, _COMPOSITION for a composition, which runs on an
// arity-2 hierarchy), on 1, 2, 3, 4, 5 and 8 in-process ranks, with exact
// integer results. An algorithm whose restriction fails at a size must be
// refused there instead. Nothing lists the algorithms: the catalog does, so
// a newly registered one joins the matrix by itself.
#include "select_support.hpp"

using namespace tutti;
using namespace tutti::testing;

namespace {

using values = std::vector<std::int64_t>;
constexpr std::size_t n = 5; // elements per block

values block_of(int from, int to) {
    values v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = encode(from, to, static_cast<std::int64_t>(i));
    return v;
}

// Sum over ranks r in [first, last) of encode(r, to, i).
std::int64_t sum_of(int first, int last, int to, std::size_t i) {
    std::int64_t total = 0;
    for (int r = first; r < last; ++r)
        total += encode(r, to, static_cast<std::int64_t>(i));
    return total;
}

// One call of the collective on comm, checked on every rank.
task<void> run_and_check(collective kind, communicator comm) {
    const int p = comm.size(), r = comm.rank(), root = p - 1;
    const auto P = static_cast<std::size_t>(p);
    switch (kind) {
    case collective::barrier:
        co_await barrier(comm);
        break;
    case collective::broadcast: {
        values data = r == root ? block_of(root, 0) : values(n, -1);
        co_await broadcast(comm, data, tutti::root(root));
        expect(data == block_of(root, 0), "broadcast");
        break;
    }
    case collective::reduce:
    case collective::all_reduce: {
        values send = block_of(r, 0), recv(n, -1);
        if (kind == collective::reduce)
            co_await reduce(comm, send, recv, sum, tutti::root(root));
        else
            co_await all_reduce(comm, send, recv, sum);
        if (kind == collective::all_reduce || r == root)
            for (std::size_t i = 0; i < n; ++i)
                expect(recv[i] == sum_of(0, p, 0, i), "reduce");
        break;
    }
    case collective::gather:
    case collective::all_gather: {
        values send = block_of(r, 0), recv(n * P, -1);
        if (kind == collective::gather)
            co_await gather(comm, send, recv, tutti::root(root));
        else
            co_await all_gather(comm, send, recv);
        if (kind == collective::all_gather || r == root)
            for (int j = 0; j < p; ++j)
                for (std::size_t i = 0; i < n; ++i)
                    expect(recv[static_cast<std::size_t>(j) * n + i] ==
                               encode(j, 0, static_cast<std::int64_t>(i)),
                           "gather");
        break;
    }
    case collective::scatter: {
        values send, recv(n, -1);
        if (r == root)
            for (int j = 0; j < p; ++j)
                for (auto x : block_of(root, j))
                    send.push_back(x);
        co_await scatter(comm, send, recv, tutti::root(root));
        expect(recv == block_of(root, r), "scatter");
        break;
    }
    case collective::all_to_all: {
        values send, recv(n * P, -1);
        for (int j = 0; j < p; ++j)
            for (auto x : block_of(r, j))
                send.push_back(x);
        co_await all_to_all(comm, send, recv);
        for (int j = 0; j < p; ++j)
            for (std::size_t i = 0; i < n; ++i)
                expect(recv[static_cast<std::size_t>(j) * n + i] ==
                           encode(j, r, static_cast<std::int64_t>(i)),
                       "all_to_all: transpose identity");
        break;
    }
    case collective::all_to_allv: {
        // Rank i sends (i + j) % 3 elements to rank j (some none).
        auto count = [](int from, int to) { return static_cast<std::size_t>((from + to) % 3); };
        std::vector<std::size_t> send_counts(P), recv_counts(P);
        values send, recv;
        for (int j = 0; j < p; ++j) {
            send_counts[static_cast<std::size_t>(j)] = count(r, j);
            recv_counts[static_cast<std::size_t>(j)] = count(j, r);
            for (std::size_t i = 0; i < count(r, j); ++i)
                send.push_back(encode(r, j, static_cast<std::int64_t>(i)));
        }
        std::size_t total = 0;
        for (auto c : recv_counts)
            total += c;
        recv.assign(total, -1);
        co_await all_to_allv(comm, send, send_counts, recv, recv_counts);
        std::size_t at = 0;
        for (int j = 0; j < p; ++j)
            for (std::size_t i = 0; i < count(j, r); ++i)
                expect(recv[at++] == encode(j, r, static_cast<std::int64_t>(i)), "all_to_allv");
        break;
    }
    case collective::reduce_scatter: {
        // Rank j receives j % 2 + 1 elements.
        std::vector<std::size_t> counts(P);
        std::size_t total = 0, offset = 0;
        for (int j = 0; j < p; ++j) {
            counts[static_cast<std::size_t>(j)] = static_cast<std::size_t>(j % 2 + 1);
            if (j < r) offset += counts[static_cast<std::size_t>(j)];
            total += counts[static_cast<std::size_t>(j)];
        }
        values send(total), recv(counts[static_cast<std::size_t>(r)], -1);
        for (std::size_t i = 0; i < total; ++i)
            send[i] = encode(r, 0, static_cast<std::int64_t>(i));
        co_await reduce_scatter(comm, send, recv, counts, sum);
        for (std::size_t i = 0; i < recv.size(); ++i)
            expect(recv[i] == sum_of(0, p, 0, offset + i), "reduce_scatter");
        break;
    }
    case collective::scan:
    case collective::exscan: {
        values send = block_of(r, 0), recv(n, -1);
        if (kind == collective::scan) {
            co_await scan(comm, send, recv, sum);
            for (std::size_t i = 0; i < n; ++i)
                expect(recv[i] == sum_of(0, r + 1, 0, i), "scan");
        } else {
            co_await exscan(comm, send, recv, sum);
            for (std::size_t i = 0; i < n; ++i)
                expect(recv[i] == (r == 0 ? -1 : sum_of(0, r, 0, i)), "exscan");
        }
        break;
    }
    case collective::split:
        break;
    }
}

} // namespace

TEST_CASE("every collective x every algorithm, forced by its override, on 1..5 and 8 ranks") {
    int runs = 0, refused = 0;
    for (auto kind : all_collectives)
        for (const auto* info : algorithms().list(kind)) {
            const bool composition = info->form != algorithm_kind::pure;
            const auto variable = override_variable(kind, *info);
            scoped_env env{{variable, info->name}, {"TUTTI_COLL_FALLBACK", "error"}};
            for (int p : {1, 2, 3, 4, 5, 8}) {
                CAPTURE(variable);
                CAPTURE(info->name);
                CAPTURE(p);
                const auto signature = signature_for(kind, p, composition, n);
                auto body = [kind, composition](communicator comm) -> task<void> {
                    if (composition)
                        comm = co_await make_arity_hierarchy(
                            comm, {.arity = 2, .flat_fallback_threshold = 0});
                    co_await run_and_check(kind, comm);
                };
                if (info->check(signature)) {
                    // The forced algorithm cannot run here: refused, by name.
                    try {
                        inproc::run(p, body);
                        FAIL_CHECK("a forced algorithm ran although its restriction fails");
                    } catch (const tutti::error& e) {
                        CHECK(e.code() == errc::restriction_violated);
                        CHECK(tutti::testing::contains(e.what(), variable));
                    }
                    ++refused;
                    continue;
                }
                CHECK(select_algorithm(signature, {}).name == info->name);
                inproc::run(p, body);
                ++runs;
            }
        }
    MESSAGE(runs << " runs, " << refused << " refused");
    CHECK(runs > 150);
}
