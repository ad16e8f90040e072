// tutti-bench: OSU-style timing of every tutti collective, run as the ranks
// of a tutti::job (under tuttirun, mpirun through PMIx, or by hand), over
// whatever transport the job routes through. benchmarks/mpi_collectives.cpp
// measures MPI with the same method (method.hpp) and writes the same files.
//
//   tuttirun -n 2 tutti-bench all_reduce -m 8:16M --validate --csv out.csv
//   tuttirun -n 4 tutti-bench -a ring all_reduce,all_gather --json out.json
//   tuttirun -n 1 tutti-bench --memcpy -m 8:64M        (this machine's copy bandwidth)
//   tuttirun -n 2 tutti-bench --form blocking barrier   (each call through tutti::wait)
//
// Exit status: 0 when every check passed, 1 when a check or a collective
// failed, 2 for a usage error or a process not started as part of a job.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "method.hpp"
#include "report.hpp"
#include "tutti.hpp"

namespace {

using namespace tutti_bench;

// The algorithm a call runs, or why it cannot run here.
struct choice {
    bool runs = false;
    std::string text;
    // The collective has no algorithm of that name at any size.
    bool unknown_name = false;
};

template <class Args>
choice resolve(const tutti::communicator& world, const Args& args, const std::string& algorithm) {
    try {
        const auto& chosen = tutti::choose<Args>(tutti::signature_of(world, args),
                                                 algorithm == "auto" ? "" : algorithm);
        return {true, chosen.info.name};
    } catch (const tutti::error& e) {
        return {false, e.what(), e.code() == tutti::errc::unknown_algorithm};
    }
}

// How many of the job's ranks share this rank's machine (its node).
int ranks_on_this_node(const tutti::job& job) {
    const auto& nodes = job.routes().nodes;
    if (nodes.empty()) return 1;
    const auto& here = nodes[static_cast<std::size_t>(job.rank())];
    return static_cast<int>(std::ranges::count(nodes, here));
}

// Buffers from tutti's shared memory (--memory shared): what a user who
// allocates through tutti gets, large messages copied once by the receiver
// out of its mapping of the sender's buffer.
class shared_memory_resource final : public std::pmr::memory_resource {
    void* do_allocate(std::size_t bytes, std::size_t) override {
        return tutti::allocate_shared(bytes);
    }
    void do_deallocate(void* p, std::size_t, std::size_t) override { tutti::deallocate_shared(p); }
    bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
        return this == &other;
    }
};

// --op compose as a callable, so the operation's type is nameable.
struct compose_affine_op {
    element operator()(element lower, element higher) const {
        return compose_affine(lower, higher);
    }
};

// One collective at one size on this rank: its layout, the options every
// call passes, and the call itself on a buffer set.
class bench_call {
public:
    bench_call(tutti::communicator world, const layout& l, const std::string& algorithm,
               bool memcpy_only)
        : world_(std::move(world)), layout_(l), memcpy_(memcpy_only),
          counts_(static_cast<std::size_t>(l.ranks), l.block),
          options_{.algorithm = algorithm == "auto" ? "" : algorithm, .root = l.root} {}

    // Calls body with a function that makes this collective's call on a
    // buffer set; body's coroutine awaits those calls itself. A call returned
    // as a task<void> (from one function for every collective) would add a
    // frame of its own to every timed call.
    template <class Body>
    auto with_call(Body body) const {
        using tutti::collective;
        const auto& o = options_;
        if (memcpy_) return body([](buffer_set& b) { return copy(b); });
        switch (layout_.kind) {
        case collective::barrier:
        case collective::split:
            return body([&](buffer_set&) { return tutti::barrier(world_, o); });
        case collective::broadcast:
            return body([&](buffer_set& b) { return tutti::broadcast(world_, b.send, o); });
        case collective::reduce:
            return reducing(body, [&](buffer_set& b, const auto& op) {
                return tutti::reduce(world_, b.send, b.recv, op, o);
            });
        case collective::all_reduce:
            return reducing(body, [&](buffer_set& b, const auto& op) {
                return tutti::all_reduce(world_, b.send, b.recv, op, o);
            });
        case collective::gather:
            return body([&](buffer_set& b) { return tutti::gather(world_, b.send, b.recv, o); });
        case collective::scatter:
            return body([&](buffer_set& b) { return tutti::scatter(world_, b.send, b.recv, o); });
        case collective::all_gather:
            return body(
                [&](buffer_set& b) { return tutti::all_gather(world_, b.send, b.recv, o); });
        case collective::all_to_all:
            return body(
                [&](buffer_set& b) { return tutti::all_to_all(world_, b.send, b.recv, o); });
        case collective::all_to_allv:
            return body([&](buffer_set& b) {
                return tutti::all_to_allv(world_, b.send, std::span<const std::size_t>(counts_),
                                          b.recv, std::span<const std::size_t>(counts_), o);
            });
        case collective::reduce_scatter:
            return reducing(body, [&](buffer_set& b, const auto& op) {
                return tutti::reduce_scatter(world_, b.send, b.recv, op, o);
            });
        case collective::scan:
            return reducing(body, [&](buffer_set& b, const auto& op) {
                return tutti::scan(world_, b.send, b.recv, op, o);
            });
        case collective::exscan:
            return reducing(body, [&](buffer_set& b, const auto& op) {
                return tutti::exscan(world_, b.send, b.recv, op, o);
            });
        }
        throw std::logic_error("tutti-bench: a collective without a call");
    }

    // body given a reduction's call on the operation asked for (--op).
    template <class Body, class Call>
    auto reducing(Body& body, Call call) const {
        if (layout_.op == reduction::compose)
            return body([this, call](buffer_set& b) { return call(b, compose_); });
        return body([call](buffer_set& b) { return call(b, tutti::sum); });
    }

    static tutti::task<void> copy(buffer_set& b) {
        tutti::copy_bytes(b.recv.data(), b.send.data(), b.send.size() * sizeof(element));
        co_return;
    }

    // Which algorithm the calls run (the default choice when "auto").
    choice resolve_algorithm(buffer_set& b, const std::string& algorithm) const {
        using tutti::collective;
        if (memcpy_) return {true, "memcpy"};
        const auto op = layout_.op == reduction::compose
                            ? tutti::erase_operation<element>(compose_)
                            : tutti::erase_operation<element>(tutti::sum);
        const auto send = std::as_bytes(std::span(b.send));
        const auto recv = std::as_writable_bytes(std::span(b.recv));
        const std::vector<std::size_t> bytes(counts_.size(), layout_.block * sizeof(element));
        std::vector<std::size_t> offsets(counts_.size());
        for (std::size_t j = 0; j < offsets.size(); ++j)
            offsets[j] = j * layout_.block * sizeof(element);
        const int root = layout_.root;
        switch (layout_.kind) {
        case collective::barrier:
        case collective::split:
            return resolve(world_, tutti::barrier_args{}, algorithm);
        case collective::broadcast:
            return resolve(world_,
                           tutti::broadcast_args{std::as_writable_bytes(std::span(b.send)), root},
                           algorithm);
        case collective::reduce:
            return resolve(world_, tutti::reduce_args{send, recv, layout_.block, &op, root},
                           algorithm);
        case collective::all_reduce:
            return resolve(world_, tutti::all_reduce_args{send, recv, layout_.block, &op},
                           algorithm);
        case collective::gather:
            return resolve(world_, tutti::gather_args{send, recv, root}, algorithm);
        case collective::scatter:
            return resolve(world_, tutti::scatter_args{send, recv, root}, algorithm);
        case collective::all_gather:
            return resolve(world_, tutti::all_gather_args{send, recv}, algorithm);
        case collective::all_to_all:
            return resolve(world_, tutti::all_to_all_args{send, recv}, algorithm);
        case collective::all_to_allv:
            return resolve(world_,
                           tutti::all_to_allv_args{send, bytes, offsets, recv, bytes, offsets},
                           algorithm);
        case collective::reduce_scatter:
            return resolve(world_, tutti::reduce_scatter_args{send, recv, counts_, &op}, algorithm);
        case collective::scan:
            return resolve(world_, tutti::scan_args{send, recv, layout_.block, &op}, algorithm);
        case collective::exscan:
            return resolve(world_, tutti::exscan_args{send, recv, layout_.block, &op}, algorithm);
        }
        return {false, "unknown collective"};
    }

private:
    tutti::communicator world_;
    layout layout_;
    bool memcpy_;
    std::vector<std::size_t> counts_;
    tutti::call_options options_;
    tutti::user_op<compose_affine_op> compose_ =
        tutti::make_op(compose_affine_op{}, tutti::commutativity::non_commutative);
};

struct timing {
    rank_sample sample;
    int iterations = 0;
    int warmup = 0;
};

// A stretch of the method: calls on the pool's next buffer sets, each after
// a barrier and timed alone, and the stretch's wall time (barriers included).
struct stretch {
    double call_seconds = 0;
    clock_type::duration wall{};
};

// The calls awaited one after another in one coroutine (--form coroutine).
template <class MakeCall>
tutti::task<stretch> awaited_calls(tutti::communicator world, MakeCall make_call,
                                   std::vector<buffer_set>& pool, const layout& l,
                                   const settings& s, std::size_t& next, int calls) {
    stretch r;
    const auto begin = clock_type::now();
    for (int i = 0; i < calls; ++i) {
        auto& set = next_set(s, l, pool, next);
        co_await tutti::barrier(world);
        const auto start = clock_type::now();
        co_await make_call(set);
        r.call_seconds += std::chrono::duration<double>(clock_type::now() - start).count();
    }
    r.wall = clock_type::now() - begin;
    co_return r;
}

// Every call, the barriers too, through tutti::wait, one at a time (--form
// blocking), as a program without coroutines makes them and as the MPI
// reference calls MPI. A loop of its own: a coroutine cannot wait for a call
// on the context that runs it.
template <class MakeCall>
stretch blocking_calls(const tutti::communicator& world, MakeCall make_call,
                       std::vector<buffer_set>& pool, const layout& l, const settings& s,
                       std::size_t& next, int calls) {
    stretch r;
    const auto begin = clock_type::now();
    for (int i = 0; i < calls; ++i) {
        auto& set = next_set(s, l, pool, next);
        tutti::wait(world, tutti::barrier(world));
        const auto start = clock_type::now();
        tutti::wait(world, make_call(set));
        r.call_seconds += std::chrono::duration<double>(clock_type::now() - start).count();
    }
    r.wall = clock_type::now() - begin;
    return r;
}

// The method: one check on fresh buffers, the warm-up, an agreement on how
// many timed calls fit in the time limit, then the timed calls.
// run_calls(next, n) makes n calls in the form asked for.
template <class RunCalls>
timing time_size(const tutti::communicator& world, RunCalls run_calls,
                 std::vector<buffer_set>& pool, const layout& l, const settings& s, bool validate) {
    timing t;
    if (validate) {
        std::size_t first = 0;
        run_calls(first, 1);
        if (const auto wrong = check(l, pool[0]); !wrong.empty()) {
            fmt::print(stderr, "tutti-bench: WRONG RESULT: {}\n", wrong);
            t.sample.failed = 1;
        }
    }
    int iterations = scheduled_iterations(s, l);
    t.warmup = warmup_iterations(s, iterations);
    std::size_t next = 0;
    // The slowest rank's mean over `calls` warm-up calls (every rank runs
    // the same count, so the all_reduce matches).
    const auto warm_batch = [&](int calls) {
        std::vector<double> mine{run_calls(next, calls).call_seconds / calls}, slowest(1);
        tutti::wait(world, tutti::all_reduce(world, mine, slowest, tutti::max));
        return slowest[0];
    };
    const auto warm = warm_up(s, t.warmup, warm_batch);
    t.warmup = warm.calls;
    if (warm.calls > 0) iterations = iterations_within_limit(s, iterations, warm.settled_seconds);
    const auto timed = run_calls(next, iterations);
    t.iterations = iterations;
    t.sample.mean_us = timed.call_seconds / iterations * 1e6;
    t.sample.iteration_us = std::chrono::duration<double>(timed.wall).count() / iterations * 1e6;
    return t;
}

struct cli {
    settings s;
    std::string algorithm = "auto";
    bool memcpy_only = false;
    std::string memory = "private";
    std::string form = "coroutine";
};

// The series a row belongs to when --label does not name it.
std::string default_label(const cli& c) {
    if (c.memcpy_only) return "memcpy";
    std::string label = "tutti";
    if (c.memory == "shared") label += "-shared";
    if (c.form == "blocking") label += "-blocking";
    return label;
}

int run(tutti::job& job, const cli& c, const std::vector<std::string>& command) {
    const auto& s = c.s;
    const auto& world = job.world();
    const bool lead = job.rank() == 0;
    if (s.root >= job.size()) {
        if (lead)
            fmt::print(stderr, "tutti-bench: --root {} is not a rank of this {}-rank job\n", s.root,
                       job.size());
        return 2;
    }
    const std::string transport{world.transport().name()};
    std::optional<report> out;
    int bad_file = 0;
    if (lead) {
        out.emplace(s, run_info{.tool = "tutti-bench",
                                .implementation = c.memcpy_only ? "memcpy" : "tutti",
                                .transport = transport,
                                .launch = std::string(job.launch().method()),
                                .ranks = job.size(),
                                .command = command,
                                .label = default_label(c),
                                .form = c.memcpy_only ? "" : c.form});
        try {
            out->begin();
        } catch (const std::exception& e) {
            fmt::print(stderr, "tutti-bench: {}\n", e.what());
            bad_file = 1;
        }
    }
    std::vector<int> mine_bad{bad_file}, any_bad(1);
    tutti::wait(world, tutti::all_reduce(world, mine_bad, any_bad, tutti::max));
    if (any_bad[0]) return 2;
    const std::vector<tutti::collective> kinds =
        c.memcpy_only ? std::vector{tutti::collective::all_reduce} : s.collectives;
    std::size_t steps = 0;
    for (auto kind : kinds)
        steps += kind == tutti::collective::barrier ? 1 : s.sizes.size();
    progress shown(lead ? s : settings{.quiet = true}, steps);
    bool failed = false;
    bool measured = false;
    const int ranks_here = ranks_on_this_node(job);
    const std::size_t memory_here = machine_memory_bytes();

    for (auto kind : kinds) {
        const std::string name{c.memcpy_only ? "memcpy" : to_string(kind)};
        for (std::size_t size : s.sizes) {
            const auto l = layout_for(kind, size, job.size(), job.rank(), s.root, s.op);
            shown.step(fmt::format("{} {}", name, human_bytes(l.bytes)));
            shared_memory_resource shared;
            std::vector<buffer_set> pool;
            const auto cannot = try_make_pool(pool, s, l, ranks_here, memory_here,
                                              c.memory == "shared"
                                                  ? static_cast<std::pmr::memory_resource*>(&shared)
                                                  : std::pmr::new_delete_resource());
            std::vector<int> mine_short{cannot.empty() ? 0 : 1}, any_short(1);
            tutti::wait(world, tutti::all_reduce(world, mine_short, any_short, tutti::max));
            if (any_short[0]) {
                if (lead) out->skip(name, l.bytes, skip_reason(cannot));
                if (kind == tutti::collective::barrier) break;
                continue;
            }
            const bench_call call(world, l, c.algorithm, c.memcpy_only);
            const auto chosen = call.resolve_algorithm(pool[0], c.algorithm);
            if (!chosen.runs) {
                if (lead) out->skip(name, l.bytes, chosen.text);
                // One row for a name the collective does not know at all.
                if (chosen.unknown_name || kind == tutti::collective::barrier) break;
                continue;
            }
            measured = true;
            const bool validate = s.validate && !c.memcpy_only;
            const auto t = call.with_call([&](auto make_call) {
                if (c.form == "blocking")
                    return time_size(
                        world,
                        [&](std::size_t& next, int calls) {
                            return blocking_calls(world, make_call, pool, l, s, next, calls);
                        },
                        pool, l, s, validate);
                return time_size(
                    world,
                    [&](std::size_t& next, int calls) {
                        return tutti::wait(
                            world, awaited_calls(world, make_call, pool, l, s, next, calls));
                    },
                    pool, l, s, validate);
            });
            const auto samples = tutti::wait(world, tutti::gather(world, t.sample));
            if (lead) {
                row r{.implementation = c.memcpy_only ? "memcpy" : "tutti",
                      .label = !s.label.empty() ? s.label : default_label(c),
                      .transport = transport,
                      .collective = name,
                      .algorithm = c.memcpy_only ? "memcpy" : c.algorithm,
                      .chosen = chosen.text,
                      .ranks = job.size(),
                      .bytes = l.bytes,
                      .iterations = t.iterations,
                      .warmup = t.warmup,
                      .buffers = static_cast<int>(pool.size())};
                summarize(r, samples, s.validate && !c.memcpy_only);
                failed = failed || r.valid == "NO";
                out->add(r);
            }
            if (kind == tutti::collective::barrier) break; // no message, one size
        }
    }
    shown.done();
    if (lead) {
        try {
            out->finish();
        } catch (const std::exception& e) {
            fmt::print(stderr, "tutti-bench: {}\n", e.what());
            failed = true;
        }
    }
    std::vector<int> mine{failed ? 1 : 0}, any(1);
    tutti::wait(world, tutti::all_reduce(world, mine, any, tutti::max));
    if (any[0]) return 1;
    if (!measured) {
        // The choices and the sizes skipped are the same on every rank.
        if (lead) fmt::print(stderr, "tutti-bench: nothing measured: every size was skipped\n");
        return 2;
    }
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    cli c;
    CLI::App app{"tutti-bench: OSU-style latency and bandwidth of tutti's collectives. Run it "
                 "as the ranks of a job: tuttirun -n 2 tutti-bench all_reduce"};
    add_options(app, c.s);
    app.add_option("-a,--algorithm", c.algorithm,
                   "the algorithm every call runs, by name (see the catalog), or auto for the "
                   "default choice; collectives without it are skipped")
        ->capture_default_str();
    app.add_flag("--memcpy", c.memcpy_only,
                 "measure memcpy instead, at the same sizes and the same way (each rank copies "
                 "its own buffer; one rank gives the single-thread figure)");
    app.add_option(
           "--memory", c.memory,
           "where the buffers live: private (the ordinary heap, as in the MPI reference) or "
           "shared (tutti::shared_allocator: memory the node's other ranks can map, so "
           "large messages are copied once by the receiver)")
        ->check(CLI::IsMember({"private", "shared"}))
        ->capture_default_str();
    app.add_option("--form", c.form,
                   "how the calls are made: coroutine (awaited one after another in one "
                   "coroutine) or blocking (each through tutti::wait, as a program without "
                   "coroutines, and the MPI reference, makes them)")
        ->check(CLI::IsMember({"coroutine", "blocking"}))
        ->capture_default_str();
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int code = e.get_exit_code();
        app.exit(e);
        return code == 0 ? 0 : 2;
    }
    const std::vector<std::string> command(argv, argv + argc);

    std::optional<tutti::job> job;
    try {
        job.emplace();
    } catch (const tutti::error& e) {
        fmt::print(stderr, "tutti-bench: cannot join a job: {}\n", e.what());
        return e.code() == tutti::errc::invalid_argument ? 2 : 1;
    }
    try {
        return run(*job, c, command);
    } catch (const tutti::error& e) {
        fmt::print(stderr, "rank {}: tutti-bench failed: {} ({})\n", job->rank(), e.what(),
                   tutti::to_string(e.code()));
        return 1;
    } catch (const std::exception& e) {
        fmt::print(stderr, "rank {}: tutti-bench failed: {}\n", job->rank(), e.what());
        return 1;
    }
}
