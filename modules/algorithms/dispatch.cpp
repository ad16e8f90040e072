#include "algorithms/dispatch.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "hierarchy/hierarchy.hpp"
#include "select/choose.hpp"

namespace tutti::detail {

call_context begin_call(const communicator& comm, collective kind, const call_options& options) {
    if (!comm.valid())
        throw error(errc::invalid_argument,
                    fmt::format("{} on an empty communicator (a split with undefined_color gives "
                                "one); it has no ranks to talk to",
                                to_string(kind)));
    const auto generation =
        comm.claim_generation(options.generation ? &*options.generation : nullptr);
    // The call itself, before any phase: the id of the name "call".
    constexpr std::uint32_t whole_call = algorithm_id("call");
    return call_context(comm, generation, kind, whole_call);
}

void throw_started(collective kind) {
    throw error(errc::invalid_argument,
                fmt::format("{}: this call was awaited already; a collective call runs once "
                            "(call the collective again for another round)",
                            to_string(kind)));
}

void check_root(const communicator& comm, collective kind, int root) {
    if (root < 0 || root >= comm.size())
        throw error(errc::invalid_root,
                    fmt::format("{}: root {} is out of range for a communicator of {} ranks",
                                to_string(kind), root, comm.size()));
}

void add_communicator(call_signature& signature, const communicator& comm) {
    // A hierarchy's top level stands for the nodes (it is the node level in
    // a machine hierarchy); without one, every rank reads as on one node.
    if (const auto* levels = comm.hierarchy_view()) {
        signature.has_hierarchy = true;
        if (!levels->flat()) {
            signature.nodes = levels->group_count();
            signature.ranks_per_node = levels->largest_group();
        }
        signature.node_consecutive = levels->order_preserving();
    } else {
        signature.has_hierarchy = false;
    }
    const auto& transport = comm.transport();
    signature.transport = transport.name();
    const auto capabilities = transport.capabilities();
    signature.single_copy = capabilities.single_copy;
    signature.slow_single_copy = capabilities.slow_single_copy;
    signature.line_ns = capabilities.line_ns;
    signature.readv_percent = capabilities.readv_percent;
    signature.ranks_per_core = capabilities.ranks_per_core;
}

namespace {

// What a remembered choice was made for, in a few words: the signature as
// the front end built it, the transport's single-copy capability and the
// request. Equal keys mean an equal call; the transport's name is compared
// by address (a literal), so the same name at another address only misses.
// Compared on every call: a handful of word compares instead of one per
// field of the signature.
struct choice_key {
    std::uint64_t bytes = 0;
    std::uint64_t count = 0;
    std::uint64_t shape = 0;     // kind, size, flags, request
    std::uint64_t placement = 0; // ranks per node, nodes
    const char* transport = nullptr;
    std::size_t transport_length = 0;
    friend bool operator==(const choice_key&, const choice_key&) = default;
};

// A field added to call_signature must be added to the key too, unless, as
// line_ns, readv_percent, slow_single_copy and ranks_per_core, it is the communicator's for good
// (the remembered choice is the communicator's). This check catches an addition that changes the
// signature's size; a small field that fits in existing padding (a bool after node_consecutive) it
// does not.
static_assert(sizeof(call_signature) == 80, "call_signature changed: update choice_key_of");

choice_key choice_key_of(const call_signature& s, bool single_copy,
                         const selection_request& request, bool named) noexcept {
    const std::uint64_t flags =
        std::uint64_t{s.has_op} | std::uint64_t{s.commutative} << 1 |
        std::uint64_t{s.builtin_op} << 2 | std::uint64_t{s.in_place} << 3 |
        std::uint64_t{s.equal_counts} << 4 | std::uint64_t{s.has_hierarchy} << 5 |
        std::uint64_t{s.single_copy} << 6 | std::uint64_t{s.node_consecutive} << 7 |
        std::uint64_t{single_copy} << 8 | std::uint64_t{request.sub_call} << 9 |
        std::uint64_t{named} << 10 | std::uint64_t{request.on_fail.has_value()} << 11 |
        std::uint64_t(request.on_fail ? static_cast<unsigned>(*request.on_fail) : 0) << 12;
    return {.bytes = s.bytes,
            .count = s.count,
            .shape = static_cast<std::uint64_t>(s.kind) |
                     std::uint64_t{static_cast<std::uint32_t>(s.comm_size)} << 8 | flags << 40,
            .placement = std::uint64_t{static_cast<std::uint32_t>(s.ranks_per_node)} |
                         std::uint64_t{static_cast<std::uint32_t>(s.nodes)} << 32,
            .transport = s.transport.data(),
            .transport_length = s.transport.size()};
}

// A thread's last few choices for one argument type: a loop of identical
// calls (the usual shape of a program) is served without completing the
// signature or consulting selection. Each is keyed by the communicator's
// serial, which no other communicator of the process ever has, and by the
// token of the selection that chose, which a reload replaces. Constant-
// initialized and trivially destroyed: no thread_local guard.
template <class Args>
struct remembered_choice {
    std::uint64_t communicator = 0; // serial; 0: nothing remembered
    std::uintptr_t selection = 0;
    choice_key key;
    const algorithm<Args>* chosen = nullptr;

    bool holds_for(std::uint64_t serial, std::uintptr_t token, const choice_key& now,
                   const selection_request& request, bool named_now) const {
        return communicator == serial && selection == token && key == now &&
               (!named_now || chosen->info.name == request.forced);
    }
};

// More than one, because loops alternate calls of one type: a composition's
// sub-calls run on other communicators than its own call (the hierarchical
// barrier's on the node's, inside a loop of world barriers), and a call that
// names its algorithm sits beside the program's other calls (a 2-rank barrier
// naming `dissemination` between tutti-bench's own barriers took 0.33-0.36 us
// against 0.26-0.28 unnamed: with one choice kept, both decided afresh every
// call). The slot found last is looked at first, so a loop of one call
// compares one key (callgrind: 144 instructions a call in choose_phase, 137
// with one slot); a new choice replaces the oldest.
template <class Args>
struct remembered_choices {
    static constexpr std::uint8_t slots = 4;
    remembered_choice<Args> slot[slots]{};
    std::uint8_t found_last = 0;
    std::uint8_t filled_next = 0;

    const algorithm<Args>* find(std::uint64_t serial, std::uintptr_t token, const choice_key& now,
                                const selection_request& request, bool named_now) {
        const auto& last = slot[found_last];
        if (last.holds_for(serial, token, now, request, named_now)) return last.chosen;
        return find_in_others(serial, token, now, request, named_now);
    }
    // Out of line: a loop of one call never gets here, and keeping the loop
    // out of find() keeps its check nearly as short as the one slot's was.
    [[gnu::noinline]] const algorithm<Args>*
    find_in_others(std::uint64_t serial, std::uintptr_t token, const choice_key& now,
                   const selection_request& request, bool named_now) {
        for (std::uint8_t at = 0; at < slots; ++at)
            if (at != found_last && slot[at].holds_for(serial, token, now, request, named_now)) {
                found_last = at;
                return slot[at].chosen;
            }
        return nullptr;
    }
    void remember(const remembered_choice<Args>& choice) {
        slot[filled_next] = choice;
        found_last = filled_next;
        filled_next = static_cast<std::uint8_t>((filled_next + 1) % slots);
    }
};

template <class Args>
constinit thread_local remembered_choices<Args> last_choices;

// The choice when none is remembered: the signature completed, selection
// asked (and its explanation printed when asked for), the choice kept for
// the next call. Out of line, so that a remembered choice costs no more
// than its comparison.
template <class Args>
[[gnu::noinline]] const algorithm<Args>&
decide(const communicator& comm, call_signature shape, const selection_request& request, bool named,
       const choice_key& key, std::uintptr_t token, bool print) {
    // Whatever built the signature, the communicator says where the call
    // runs (the typed front ends do not look).
    add_communicator(shape, comm);
    const algorithm<Args>* chosen = nullptr;
    if (selection_debug()) {
        selection_explanation why;
        chosen = &choose<Args>(shape, request, &why);
        if (print) print_explanation_once(why);
    } else {
        chosen = &choose<Args>(shape, request);
    }
    // A named algorithm that fell back is decided again next time, so that
    // its note is given (or its error thrown) as selection says.
    if (token && (!named || chosen->info.name == request.forced))
        last_choices<Args>.remember(
            {.communicator = comm.serial(), .selection = token, .key = key, .chosen = chosen});
    return *chosen;
}

} // namespace

template <class Args>
const algorithm<Args>& choose_phase(const call_context& call, call_signature shape,
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
    return decide<Args>(comm, shape, request, named, key, token, call.rank() == 0);
}

template const algorithm<barrier_args>& choose_phase(const call_context&, call_signature,
                                                     const algorithm_choice&);
template const algorithm<broadcast_args>& choose_phase(const call_context&, call_signature,
                                                       const algorithm_choice&);
template const algorithm<reduce_args>& choose_phase(const call_context&, call_signature,
                                                    const algorithm_choice&);
template const algorithm<all_reduce_args>& choose_phase(const call_context&, call_signature,
                                                        const algorithm_choice&);
template const algorithm<gather_args>& choose_phase(const call_context&, call_signature,
                                                    const algorithm_choice&);
template const algorithm<scatter_args>& choose_phase(const call_context&, call_signature,
                                                     const algorithm_choice&);
template const algorithm<all_gather_args>& choose_phase(const call_context&, call_signature,
                                                        const algorithm_choice&);
template const algorithm<all_to_all_args>& choose_phase(const call_context&, call_signature,
                                                        const algorithm_choice&);
template const algorithm<all_to_allv_args>& choose_phase(const call_context&, call_signature,
                                                         const algorithm_choice&);
template const algorithm<reduce_scatter_args>& choose_phase(const call_context&, call_signature,
                                                            const algorithm_choice&);
template const algorithm<scan_args>& choose_phase(const call_context&, call_signature,
                                                  const algorithm_choice&);
template const algorithm<exscan_args>& choose_phase(const call_context&, call_signature,
                                                    const algorithm_choice&);

} // namespace tutti::detail

namespace tutti {

namespace {
call_signature base(const communicator& comm, collective kind, std::size_t bytes) {
    return {.kind = kind,
            .comm_size = comm.size(),
            .bytes = bytes,
            .has_hierarchy = comm.hierarchy_view() != nullptr};
}
template <class Args>
call_signature with_op(const communicator& comm, const Args& a, std::size_t bytes) {
    auto s = base(comm, Args::kind, bytes);
    s.count = a.count;
    s.has_op = true;
    s.commutative = a.op->commutative;
    s.builtin_op = a.op->builtin;
    s.in_place = a.send.data() == a.recv.data() && !a.send.empty();
    return s;
}
} // namespace

namespace detail {

call_signature shape_of(const communicator& comm, const barrier_args&) {
    return base(comm, collective::barrier, 0);
}
call_signature shape_of(const communicator& comm, const broadcast_args& a) {
    return base(comm, collective::broadcast, a.buffer.size());
}
call_signature shape_of(const communicator& comm, const reduce_args& a) {
    return with_op(comm, a, a.count * a.op->element_size);
}
call_signature shape_of(const communicator& comm, const all_reduce_args& a) {
    return with_op(comm, a, a.count * a.op->element_size);
}
call_signature shape_of(const communicator& comm, const gather_args& a) {
    return base(comm, collective::gather, a.send.size() * static_cast<std::size_t>(comm.size()));
}
call_signature shape_of(const communicator& comm, const scatter_args& a) {
    return base(comm, collective::scatter, a.recv.size() * static_cast<std::size_t>(comm.size()));
}
call_signature shape_of(const communicator& comm, const all_gather_args& a) {
    return base(comm, collective::all_gather, a.recv.size());
}
call_signature shape_of(const communicator& comm, const all_to_all_args& a) {
    return base(comm, collective::all_to_all, a.send.size());
}
call_signature shape_of(const communicator& comm, const all_to_allv_args&) {
    // No size: this rank's counts are not the others' (call_has_size).
    auto s = base(comm, collective::all_to_allv, 0);
    s.equal_counts = false;
    return s;
}
call_signature shape_of(const communicator& comm, const reduce_scatter_args& a) {
    std::size_t total = 0;
    bool equal = true;
    for (auto c : a.counts) {
        total += c;
        equal = equal && c == a.counts.front();
    }
    auto s = base(comm, collective::reduce_scatter, total * a.op->element_size);
    s.count = total;
    s.has_op = true;
    s.commutative = a.op->commutative;
    s.builtin_op = a.op->builtin;
    s.equal_counts = equal;
    return s;
}
call_signature shape_of(const communicator& comm, const scan_args& a) {
    return with_op(comm, a, a.count * a.op->element_size);
}
call_signature shape_of(const communicator& comm, const exscan_args& a) {
    return with_op(comm, a, a.count * a.op->element_size);
}

} // namespace detail

} // namespace tutti
