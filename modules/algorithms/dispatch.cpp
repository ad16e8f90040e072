#include "algorithms/dispatch.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "hierarchy/hierarchy.hpp"
#include "select/choose.hpp"

namespace tutti::detail {

void throw_empty_communicator(collective kind) {
    throw error(errc::invalid_argument,
                fmt::format("{} on an empty communicator (a split with undefined_color gives "
                            "one); it has no ranks to talk to",
                            to_string(kind)));
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

template <class Args>
const algorithm<Args>& decide_choice(const communicator& comm, call_signature shape,
                                     const selection_request& request, bool named,
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

#define TUTTI_DECIDE_CHOICE(Args)                                                                  \
    template const algorithm<Args>& decide_choice(const communicator&, call_signature,             \
                                                  const selection_request&, bool,                  \
                                                  const choice_key&, std::uintptr_t, bool);
TUTTI_DECIDE_CHOICE(barrier_args)
TUTTI_DECIDE_CHOICE(broadcast_args)
TUTTI_DECIDE_CHOICE(reduce_args)
TUTTI_DECIDE_CHOICE(all_reduce_args)
TUTTI_DECIDE_CHOICE(gather_args)
TUTTI_DECIDE_CHOICE(scatter_args)
TUTTI_DECIDE_CHOICE(all_gather_args)
TUTTI_DECIDE_CHOICE(all_to_all_args)
TUTTI_DECIDE_CHOICE(all_to_allv_args)
TUTTI_DECIDE_CHOICE(reduce_scatter_args)
TUTTI_DECIDE_CHOICE(scan_args)
TUTTI_DECIDE_CHOICE(exscan_args)
#undef TUTTI_DECIDE_CHOICE

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
