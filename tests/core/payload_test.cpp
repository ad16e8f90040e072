// Non-trivial payloads travel serialized through Boost.Serialization:
// strings, nested vectors and a user struct, through broadcast, gather,
// scatter, all_gather, all_to_all and all_to_allv, with every algorithm.
#include <map>
#include <string>

#include "support/harness.hpp"

using namespace tutti;

namespace {

struct particle {
    std::string name;
    std::vector<double> position;
    std::map<std::string, int> tags;

    template <class Archive>
    void serialize(Archive& archive, unsigned /*version*/) {
        archive& name& position& tags;
    }
    friend bool operator==(const particle&, const particle&) = default;
};

// Values whose size depends on both ends, so padding and cropping show.
std::string text(int from, int to) {
    return std::string(static_cast<std::size_t>((from * 7 + to * 3) % 11),
                       'a' + static_cast<char>(from % 26)) +
           "/" + std::to_string(from) + "->" + std::to_string(to);
}
std::vector<std::vector<int>> nested(int from, int to) {
    std::vector<std::vector<int>> rows(static_cast<std::size_t>((from + to) % 4));
    for (std::size_t i = 0; i < rows.size(); ++i)
        rows[i].assign(i + static_cast<std::size_t>(from), from * 1000 + to);
    return rows;
}
particle particle_of(int from, int to) {
    return {"p" + std::to_string(from),
            std::vector<double>(static_cast<std::size_t>(to % 3), from + 0.5),
            {{"from", from}, {"to", to}}};
}

const std::vector<int> sizes{1, 2, 3, 5, 8, 13};

} // namespace

TEST_CASE("broadcast of a string, nested vectors and a struct, every algorithm") {
    for (const auto& name : tutti::testing::algorithm_names(collective::broadcast)) {
        for (int p : sizes) {
            CAPTURE(name);
            CAPTURE(p);
            tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                const int r = p - 1;
                std::string s = comm.rank() == r ? text(r, 99) : "";
                co_await broadcast(comm, s, root(r), use(name));
                CHECK(s == text(r, 99));
                auto rows = comm.rank() == r ? nested(r, 3) : std::vector<std::vector<int>>{};
                co_await broadcast(comm, rows, root(r), use(name));
                CHECK(rows == nested(r, 3));
                particle q = comm.rank() == r ? particle_of(r, 5) : particle{};
                co_await broadcast(comm, q, root(r), use(name));
                CHECK(q == particle_of(r, 5));
            });
        }
    }
}

TEST_CASE("gather and all_gather of values of different sizes, every algorithm") {
    for (const auto& name : tutti::testing::algorithm_names(collective::gather)) {
        for (int p : sizes) {
            CAPTURE(name);
            CAPTURE(p);
            tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                auto strings = co_await gather(comm, text(comm.rank(), 0), root(p / 2), use(name));
                auto structs = co_await gather(comm, particle_of(comm.rank(), 1), use(name));
                if (comm.rank() == p / 2) {
                    REQUIRE(strings.size() == static_cast<std::size_t>(p));
                    for (int i = 0; i < p; ++i)
                        CHECK(strings[static_cast<std::size_t>(i)] == text(i, 0));
                } else {
                    CHECK(strings.empty());
                }
                if (comm.rank() == 0)
                    for (int i = 0; i < p; ++i)
                        CHECK(structs[static_cast<std::size_t>(i)] == particle_of(i, 1));
            });
        }
    }
    for (const auto& name : tutti::testing::algorithm_names(collective::all_gather)) {
        for (int p : sizes) {
            CAPTURE(name);
            CAPTURE(p);
            call_signature call{.kind = collective::all_gather, .comm_size = p};
            if (algorithms().find<all_gather_args>(name)->info.check(call)) continue;
            tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                auto rows = co_await all_gather(comm, nested(comm.rank(), 2), use(name));
                for (int i = 0; i < p; ++i)
                    CHECK(rows[static_cast<std::size_t>(i)] == nested(i, 2));
            });
        }
    }
}

TEST_CASE("scatter of strings, every algorithm") {
    for (const auto& name : tutti::testing::algorithm_names(collective::scatter)) {
        for (int p : sizes) {
            CAPTURE(name);
            CAPTURE(p);
            tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                std::vector<std::string> values;
                if (comm.rank() == 1 % p)
                    for (int j = 0; j < p; ++j)
                        values.push_back(text(1 % p, j));
                auto mine = co_await scatter(comm, values, root(1 % p), use(name));
                CHECK(mine == text(1 % p, comm.rank()));
            });
        }
    }
}

TEST_CASE("all_to_all of strings, nested vectors and structs: transpose identity") {
    for (const auto& name : tutti::testing::algorithm_names(collective::all_to_all)) {
        for (int p : sizes) {
            CAPTURE(name);
            CAPTURE(p);
            tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                const int i = comm.rank();
                std::vector<std::string> s;
                std::vector<std::vector<std::vector<int>>> v;
                std::vector<particle> q;
                for (int j = 0; j < p; ++j) {
                    s.push_back(text(i, j));
                    v.push_back(nested(i, j));
                    q.push_back(particle_of(i, j));
                }
                auto s_out = co_await all_to_all(comm, s, use(name));
                auto v_out = co_await all_to_all(comm, v, use(name));
                auto q_out = co_await all_to_all(comm, q, use(name));
                for (int j = 0; j < p; ++j) {
                    const auto at = static_cast<std::size_t>(j);
                    CHECK(s_out[at] == text(j, i));
                    CHECK(v_out[at] == nested(j, i));
                    CHECK(q_out[at] == particle_of(j, i));
                }
            });
        }
    }
}

TEST_CASE("all_to_allv of vectors of strings of varied lengths") {
    for (const auto& name : tutti::testing::algorithm_names(collective::all_to_allv)) {
        for (int p : sizes) {
            CAPTURE(name);
            CAPTURE(p);
            tutti::testing::run_ranks(p, [&](communicator comm) -> task<void> {
                const int i = comm.rank();
                std::vector<std::vector<std::string>> out(static_cast<std::size_t>(p));
                for (int j = 0; j < p; ++j)
                    for (int k = 0; k < (i + j) % 3; ++k)
                        out[static_cast<std::size_t>(j)].push_back(text(i, j + k));
                auto in = co_await all_to_allv(comm, out, use(name));
                for (int j = 0; j < p; ++j) {
                    std::vector<std::string> expected;
                    for (int k = 0; k < (j + i) % 3; ++k)
                        expected.push_back(text(j, i + k));
                    CHECK(in[static_cast<std::size_t>(j)] == expected);
                }
            });
        }
    }
}
