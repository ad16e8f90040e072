// From a user's call to an algorithm run: options, the generation, the
// choice of algorithm, and the call context the algorithm sees.
#pragma once

#include <coroutine>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "algorithms/args.hpp"
#include "algorithms/remembered_choice.hpp"
#include "algorithms/restriction.hpp"
#include "core/call_context.hpp"
#include "core/communicator.hpp"
#include "core/generation.hpp"
#include "core/reduction.hpp"
#include "core/task.hpp"
#include "select/selection.hpp"

namespace tutti {

// The root of a rooted collective (broadcast, reduce, gather, scatter).
struct root {
    int value;
};

// Names the algorithm to run instead of the default choice: use("ring").
struct use {
    std::string name;
    explicit use(std::string_view n) : name(n) {}
};

// What a call asks of selection: an algorithm named in code (empty or "auto":
// the default choice), what to do when its restriction fails (empty:
// TUTTI_COLL_FALLBACK, else error), and whether it is a composition's
// sub-call, which the environment's overrides do not reach.
struct algorithm_choice {
    std::string name;
    std::optional<fallback_mode> on_fail;
    bool sub_call = false;

    algorithm_choice() = default;
    algorithm_choice(std::string n) : name(std::move(n)) {}
    algorithm_choice(std::string_view n) : name(n) {}
    algorithm_choice(const char* n) : name(n) {}

    // Every call moves its options, and its name is nearly always empty:
    // libstdc++ moves even an empty short string by a call to memcpy.
    algorithm_choice(algorithm_choice&& other) noexcept
        : on_fail(other.on_fail), sub_call(other.sub_call) {
        if (!other.name.empty()) name = std::move(other.name);
    }
    algorithm_choice& operator=(algorithm_choice&& other) noexcept {
        if (!other.name.empty() || !name.empty()) name = std::move(other.name);
        on_fail = other.on_fail;
        sub_call = other.sub_call;
        return *this;
    }
    algorithm_choice(const algorithm_choice&) = default;
    algorithm_choice& operator=(const algorithm_choice&) = default;
    ~algorithm_choice() = default;
};

struct call_options {
    std::optional<std::uint64_t> generation;
    algorithm_choice algorithm;
    int root = 0;
};

template <class T>
concept call_option = std::is_same_v<std::remove_cvref_t<T>, tutti::generation> ||
    std::is_same_v<std::remove_cvref_t<T>, tutti::root> ||
    std::is_same_v<std::remove_cvref_t<T>, tutti::use> ||
    std::is_same_v<std::remove_cvref_t<T>, tutti::fallback> ||
    std::is_same_v<std::remove_cvref_t<T>, call_options>;

namespace detail {

inline void apply_option(call_options& o, const tutti::generation& g) {
    o.generation = g.value;
}
inline void apply_option(call_options& o, const tutti::root& r) {
    o.root = r.value;
}
inline void apply_option(call_options& o, const tutti::use& u) {
    o.algorithm.name = u.name;
}
inline void apply_option(call_options& o, const tutti::fallback& f) {
    o.algorithm.on_fail = f.mode;
}
inline void apply_option(call_options& o, tutti::use&& u) {
    o.algorithm.name = std::move(u.name);
}
inline void apply_option(call_options& o, const call_options& given) {
    o = given;
}
inline void apply_option(call_options& o, call_options&& given) {
    o = std::move(given);
}

// The coroutine front ends hand over their own copies (moved: no string
// copied twice); the others forward what they were given.
template <class... Options>
requires(call_option<Options>&&...) call_options make_options(Options&&... options) {
    // Options passed whole (a benchmark's, a composition's) are taken as
    // they are, not assigned over defaults: every call makes them.
    if constexpr (sizeof...(Options) == 1 &&
                  (std::is_same_v<std::remove_cvref_t<Options>, call_options> && ...)) {
        return call_options(std::forward<Options>(options)...);
    } else {
        call_options o;
        (apply_option(o, std::forward<Options>(options)), ...);
        return o;
    }
}

// A call on an empty communicator.
[[noreturn]] void throw_empty_communicator(collective kind);

// Claims the call's generation and checks what every collective checks.
// Inline: out of line its call and the generation's were a tenth of a
// barrier's own instructions.
inline call_context begin_call(const communicator& comm, collective kind,
                               const call_options& options) {
    if (!comm.valid()) [[unlikely]]
        throw_empty_communicator(kind);
    const auto generation =
        comm.claim_generation(options.generation ? &*options.generation : nullptr);
    // The call itself, before any phase: the id of the name "call".
    constexpr std::uint32_t whole_call = algorithm_id("call");
    return call_context(comm, generation, kind, whole_call);
}

// Throws errc::invalid_root unless 0 <= root < size.
void check_root(const communicator& comm, collective kind, int root);

// One part of a call, ready to run: the context the chosen algorithm sees
// and the algorithm's task, which refers to that context. Awaiting it runs
// the task. It is not a coroutine of its own but an object in the awaiting
// coroutine's frame: every call runs one or more parts, and a frame per part
// cost as much as the choice of algorithm. Neither copied nor moved, since
// the task refers to the context inside it.
template <class Args>
class [[nodiscard]] phase_run {
public:
    // The context is made in place (a copy of one just made would read
    // what the store buffer still holds, in pieces of other sizes: a stall).
    phase_run(const call_context& call, unsigned index, const algorithm<Args>& chosen,
              const Args& args)
        : context_(call.phase(index, chosen.info.id)), work_(chosen.run(context_, args)) {}
    phase_run(const phase_run&) = delete;
    phase_run& operator=(const phase_run&) = delete;

    bool await_ready() const noexcept { return false; }
    template <class Promise>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> awaiting) noexcept {
        return work_.await_suspend(awaiting);
    }
    void await_resume() { work_.await_resume(); }
    // The algorithm's task, for tutti::wait, which runs it as the root of
    // its own chain instead of from an awaiting coroutine.
    task<void>& task_in_place() noexcept { return work_; }

private:
    call_context context_;
    task<void> work_;
};

// The choice when none is remembered (dispatch.cpp): the signature
// completed, selection asked (and its explanation printed when `print` and
// explanations are asked for), the choice kept for the next call. Out of
// line: a remembered choice costs no more than its comparison.
template <class Args>
const algorithm<Args>& decide_choice(const communicator& comm, call_signature shape,
                                     const selection_request& request, bool named,
                                     const choice_key& key, std::uintptr_t token, bool print);

// The algorithm for part `phase`'s Args: the named one, checked, or what
// selection picks. A phase of another collective than the call's (an
// all_reduce inside a gather) is a sub-call: the environment's overrides are
// for the user's collective. Inline, where the front end built the
// signature: its constant fields fold into the key, which an out-of-line
// check packed field by field on every call (143 instructions a call there).
template <class Args>
[[gnu::always_inline]] inline const algorithm<Args>& choose_phase(const call_context& call,
                                                                  const call_signature& shape,
                                                                  const algorithm_choice& choice) {
    const auto& comm = call.comm();
    const selection_request request{.forced = choice.name,
                                    .on_fail = choice.on_fail,
                                    .sub_call = choice.sub_call || call.kind() != Args::kind};
    const bool named = !choice.name.empty() && choice.name != "auto";
    const bool single_copy = comm.transport().single_copy_now();
    const auto key = choice_key_of(shape, single_copy, request, named);
    const auto token = selection_token();
    if (token)
        if (const auto* remembered =
                last_choices<Args>.find(comm.serial(), token, key, request, named))
            return *remembered;
    return decide_choice<Args>(comm, shape, request, named, key, token, call.rank() == 0);
}

// Chooses the algorithm for `args` for part `phase` of the call; co_await
// the result to run it. args must outlive that (a temporary in the co_await
// expression does).
template <class Args>
phase_run<Args> run_phase(const call_context& call, unsigned phase, const Args& args,
                          const call_signature& signature, const algorithm_choice& choice) {
    return {call, phase, choose_phase<Args>(call, signature, choice), args};
}

// A call awaited a second time, or moved once awaited.
[[noreturn]] void throw_started(collective kind);

// What a one-part call's inputs give once checked: the algorithm's arguments
// and what selection knows of them.
template <class Args>
struct prepared_call {
    Args args;
    call_signature signature;
};

// The communicator of a call object, as a front end takes it: the caller's
// own when it is named (an lvalue), the call's copy when it is a temporary.
// A copy costs two locked instructions on the reference count, up and down
// again, about a tenth of an 8-byte barrier here (docs/performance.md,
// "eleventh session"), and a call is awaited where it is made, within the
// named communicator's life. A call kept for later (converted to a
// task<void> to be stored or spawned) takes its own copy then.
class call_communicator {
public:
    call_communicator(const communicator& named) noexcept : comm_(&named) {}
    call_communicator(communicator&& temporary) : owned_(std::move(temporary)), comm_(&*owned_) {}
    call_communicator(call_communicator&& other)
        : owned_(std::move(other.owned_)), comm_(owned_ ? &*owned_ : other.comm_) {}
    call_communicator& operator=(call_communicator&&) = delete;

    const communicator& get() const noexcept { return *comm_; }
    // From here on independent of the caller's communicator.
    void own() {
        if (owned_) return;
        owned_.emplace(*comm_);
        comm_ = &*owned_;
    }

private:
    std::optional<communicator> owned_;
    const communicator* comm_;
};

// A collective of one part, as its typed front end returns it: an awaitable
// that lives in the awaiting coroutine's frame, like phase_run, not a
// coroutine of its own. Awaiting it checks the inputs, claims the generation,
// chooses the algorithm and runs the algorithm's task as the awaiting
// coroutine's own child, so the algorithm's frame is the call's only one. A
// front end written as a coroutine cost a second frame per call: its
// allocation, start, release and the hand-overs between the two (an 8-byte
// barrier ran 3 % faster without it; docs/performance.md, "ninth session").
//
// Like a task it is lazy: nothing happens before it is awaited, and it runs
// once. Where a task<void> is needed (to keep it, spawn it or wait on it) it
// converts to one, at the cost of that second frame.
//
// prepare(comm, options, operation) checks the inputs, throwing as the call
// does, and returns the prepared_call; `operation` is a slot in this object
// for a reduction's type-erased operation, which the arguments point to.
template <class Args, class Prepare>
class [[nodiscard]] single_phase_call {
public:
    // By reference: the front end's communicator and options are moved once,
    // into this object (each move is a handful of instructions per call).
    single_phase_call(call_communicator&& comm, call_options&& options, Prepare prepare)
        : comm_(std::move(comm)), options_(std::move(options)), prepare_(std::move(prepare)) {}
    // Moved only before it is awaited (into its task<void>, say): the running
    // algorithm refers to the arguments and context inside.
    single_phase_call(single_phase_call&& other)
        : comm_((other.run_ ? throw_started(Args::kind) : void(), std::move(other.comm_))),
          options_(std::move(other.options_)), prepare_(std::move(other.prepare_)) {}
    single_phase_call& operator=(single_phase_call&&) = delete;

    // Prepared before the awaiting coroutine suspends: a bad input or a
    // failed choice throws from the co_await, as from a function.
    bool await_ready() {
        prepare();
        return false;
    }
    template <class Promise>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> awaiting) noexcept {
        return run_->await_suspend(awaiting);
    }
    void await_resume() { run_->await_resume(); }

    operator task<void>() && {
        comm_.own();
        return as_task(std::move(*this));
    }

    // tutti::wait's way in: prepared as await_ready prepares, and the
    // algorithm's task handed over to run as the root of a chain, so that
    // no coroutine of wait's own awaits this object. That coroutine (its
    // frame, start and end) was about 25 of the 50-60 ns a blocking 8-byte
    // barrier or all_reduce took beyond the awaited call here
    // (benchmarks/blocking_latency; docs/performance.md, forty-third
    // session). await_resume() then gives the outcome.
    task<void>& prepare_in_place() {
        prepare();
        return run_->task_in_place();
    }

private:
    static task<void> as_task(single_phase_call call) { co_await call; }

    void prepare() {
        if (run_) throw_started(Args::kind);
        auto ready = prepare_(comm_.get(), std::as_const(options_), operation_);
        args_ = ready.args;
        auto call = begin_call(comm_.get(), Args::kind, options_);
        run_.emplace(call, 0, choose_phase<Args>(call, ready.signature, options_.algorithm), args_);
    }

    call_communicator comm_;
    call_options options_;
    Prepare prepare_;
    reduction_op operation_;
    Args args_{};
    std::optional<phase_run<Args>> run_;
};

template <class Args, class Prepare>
single_phase_call<Args, Prepare> make_single_phase_call(call_communicator&& comm,
                                                        call_options&& options, Prepare prepare) {
    return {std::move(comm), std::move(options), std::move(prepare)};
}

// Adds to the signature what the communicator tells: transport, its
// capabilities, hierarchy. In place: every call does it.
void add_communicator(call_signature& signature, const communicator& comm);
inline call_signature with_communicator(call_signature signature, const communicator& comm) {
    add_communicator(signature, comm);
    return signature;
}

} // namespace detail

namespace detail {
// The call's own part of its signature: kind, sizes, operation. Where the
// call runs (transport, nodes) is added by add_communicator, once per new
// choice rather than on every call.
call_signature shape_of(const communicator& comm, const barrier_args& args);
call_signature shape_of(const communicator& comm, const broadcast_args& args);
call_signature shape_of(const communicator& comm, const reduce_args& args);
call_signature shape_of(const communicator& comm, const all_reduce_args& args);
call_signature shape_of(const communicator& comm, const gather_args& args);
call_signature shape_of(const communicator& comm, const scatter_args& args);
call_signature shape_of(const communicator& comm, const all_gather_args& args);
call_signature shape_of(const communicator& comm, const all_to_all_args& args);
call_signature shape_of(const communicator& comm, const all_to_allv_args& args);
call_signature shape_of(const communicator& comm, const reduce_scatter_args& args);
call_signature shape_of(const communicator& comm, const scan_args& args);
call_signature shape_of(const communicator& comm, const exscan_args& args);
} // namespace detail

// What selection knows of a call with these arguments on comm: the call and
// where it runs, as a call of the library completes it before choosing.
template <class Args>
call_signature signature_of(const communicator& comm, const Args& args) requires requires {
    detail::shape_of(comm, args);
}
{ return detail::with_communicator(detail::shape_of(comm, args), comm); }

// Runs a collective from its type-erased arguments on comm, as a call of its
// own: it takes the given generation (or the next), the named algorithm (or
// the default choice) and checks restrictions as any call does. This is how a
// composition issues a sub-collective on another communicator, e.g. with
// generation(3 * k - 2) on a part for the user's generation k. It is a
// sub-call: where it names no algorithm, selection chooses with the trees,
// never with the environment's overrides (which are for the user's call).
// Like the typed front ends it returns a call object (single_phase_call):
// awaited, it runs the algorithm as the awaiting coroutine's child.
template <class Args, call_option... Options>
auto run_collective(detail::call_communicator comm, Args args, Options&&... options) {
    auto o = detail::make_options(std::forward<Options>(options)...);
    o.algorithm.sub_call = true;
    return detail::make_single_phase_call<Args>(
        std::move(comm), std::move(o),
        [args](const communicator& comm, const call_options&, reduction_op&) {
            return detail::prepared_call<Args>{args, detail::shape_of(comm, args)};
        });
}

} // namespace tutti
