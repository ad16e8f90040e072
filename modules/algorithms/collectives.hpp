// The collectives as users call them: typed, coroutine-shaped, with options
// given as typed arguments in any order:
//
//   co_await tutti::all_reduce(comm, data, tutti::sum);
//   co_await tutti::broadcast(comm, text, tutti::root(2), tutti::generation(7));
//   auto rows = co_await tutti::all_to_all(comm, values, tutti::use("bruck"));
//
// Contiguous ranges of trivially copyable elements travel as bytes and must
// have the same length on every rank where the collective says so. Other
// values (std::string, nested vectors, user structs with serialize) travel
// serialized; their size may differ per rank. Buffers passed by reference
// must stay alive until the co_await completes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <ranges>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "algorithms/dispatch.hpp"
#include "core/error.hpp"
#include "core/payload.hpp"
#include "core/reduction.hpp"

namespace tutti {

namespace detail {

template <class R>
using element_of = std::ranges::range_value_t<R>;

template <class T>
std::span<const std::byte> bytes_of_value(const T& value) {
    return std::as_bytes(std::span(&value, 1));
}

template <class T>
std::span<std::byte> writable_bytes_of_value(T& value) {
    return std::as_writable_bytes(std::span(&value, 1));
}

inline bool same_memory(std::span<const std::byte> a, std::span<const std::byte> b) {
    return a.data() == b.data() && !a.empty();
}

[[noreturn]] void count_error(collective kind, const std::string& what);

inline call_signature signature_for(collective kind, const communicator& comm, std::size_t bytes) {
    return {.kind = kind, .comm_size = comm.size(), .bytes = bytes};
}

inline call_signature signature_for(collective kind, const communicator& comm, std::size_t bytes,
                                    std::size_t count, const reduction_op& op, bool in_place) {
    return {.kind = kind,
            .comm_size = comm.size(),
            .bytes = bytes,
            .count = count,
            .has_op = true,
            .commutative = op.commutative,
            .builtin_op = op.builtin,
            .in_place = in_place};
}

// Serialized values travel in blocks of one size: an 8-byte length, the
// bytes, then padding up to the largest value of the call. That lets every
// fixed-block algorithm carry them unchanged.
std::vector<std::byte> pack_padded(const std::vector<std::vector<std::byte>>& values,
                                   std::size_t block);
std::span<const std::byte> unpack_padded(std::span<const std::byte> block);
std::size_t largest(const std::vector<std::vector<std::byte>>& values);

// The largest block any rank has, by an all_reduce(max) as part 0 of the call.
task<std::uint64_t> agree_on_block(const call_context& call, std::uint64_t mine);

// all_reduce, scan and exscan: element-wise reductions of two buffers of
// one length, whose arguments have one shape.
template <class Args, class In, class Out, class Op>
auto elementwise_reduction(call_communicator comm, const In& send, Out& recv, Op op,
                           call_options options) {
    return make_single_phase_call<Args>(
        std::move(comm), std::move(options),
        [&send, &recv, op = std::move(op)](const communicator& comm, const call_options&,
                                           reduction_op& erased) {
            using T = element_of<In>;
            const std::size_t count = std::ranges::size(send);
            if (std::ranges::size(recv) != count)
                count_error(Args::kind, fmt::format("the receive buffer holds {} elements, the "
                                                    "send buffer {}",
                                                    std::ranges::size(recv), count));
            erased = erase_operation<T>(op);
            Args args{bytes_of(send), writable_bytes_of(recv), count, &erased};
            return prepared_call<Args>{args,
                                       signature_for(Args::kind, comm, count * sizeof(T), count,
                                                     erased, same_memory(args.send, args.recv))};
        });
}

} // namespace detail

// ---- barrier ------------------------------------------------------------

template <call_option... Options>
auto barrier(detail::call_communicator comm, Options&&... options) {
    return detail::make_single_phase_call<barrier_args>(
        std::move(comm), detail::make_options(std::forward<Options>(options)...),
        [](const communicator& comm, const call_options&, reduction_op&) {
            return detail::prepared_call<barrier_args>{
                {}, detail::signature_for(collective::barrier, comm, 0)};
        });
}

// ---- broadcast ------------------------------------------------------------

// The root's data replaces everyone's; same length on every rank.
template <byte_range R, call_option... Options>
auto broadcast(detail::call_communicator comm, R& data, Options&&... options) {
    return detail::make_single_phase_call<broadcast_args>(
        std::move(comm), detail::make_options(std::forward<Options>(options)...),
        [&data](const communicator& comm, const call_options& o, reduction_op&) {
            detail::check_root(comm, collective::broadcast, o.root);
            broadcast_args args{writable_bytes_of(data), o.root};
            return detail::prepared_call<broadcast_args>{
                args, detail::signature_for(collective::broadcast, comm, args.buffer.size())};
        });
}

// One value: trivially copyable ones as bytes, others serialized (their size
// need not be known outside the root).
template <class T, call_option... Options>
requires(!byte_range<T> && trivially_copyable<T>) auto broadcast(detail::call_communicator comm,
                                                                 T& value, Options&&... options) {
    return detail::make_single_phase_call<broadcast_args>(
        std::move(comm), detail::make_options(std::forward<Options>(options)...),
        [&value](const communicator& comm, const call_options& o, reduction_op&) {
            detail::check_root(comm, collective::broadcast, o.root);
            return detail::prepared_call<broadcast_args>{
                {detail::writable_bytes_of_value(value), o.root},
                detail::signature_for(collective::broadcast, comm, sizeof(T))};
        });
}

template <class T, call_option... Options>
requires(!byte_range<T> && !trivially_copyable<T> &&
         serializable<T>) task<void> broadcast(communicator comm, T& value, Options... options) {
    auto o = detail::make_options(std::move(options)...);
    detail::check_root(comm, collective::broadcast, o.root);
    auto call = detail::begin_call(comm, collective::broadcast, o);
    std::vector<std::byte> bytes;
    if (comm.rank() == o.root) bytes = serialize(value);
    std::uint64_t length = bytes.size();
    broadcast_args size_args{detail::writable_bytes_of_value(length), o.root};
    co_await detail::run_phase(call, 0, size_args,
                               detail::signature_for(collective::broadcast, comm, 8), "");
    bytes.resize(length);
    broadcast_args data_args{std::span(bytes), o.root};
    co_await detail::run_phase(call, 1, data_args,
                               detail::signature_for(collective::broadcast, comm, length),
                               o.algorithm);
    if (comm.rank() != o.root) deserialize(bytes, value);
}

// ---- reduce and all_reduce --------------------------------------------------

// recv gets the reduction at the root (elsewhere it may be empty).
template <byte_range In, byte_range Out, class Op, call_option... Options>
requires operation_for<Op, detail::element_of<In>> &&
    std::is_same_v<detail::element_of<In>, detail::element_of<Out>>
auto reduce(detail::call_communicator comm, const In& send, Out& recv, Op op,
            Options&&... options) {
    return detail::make_single_phase_call<reduce_args>(
        std::move(comm), detail::make_options(std::forward<Options>(options)...),
        [&send, &recv, op = std::move(op)](const communicator& comm, const call_options& o,
                                           reduction_op& erased) {
            using T = detail::element_of<In>;
            detail::check_root(comm, collective::reduce, o.root);
            const std::size_t count = std::ranges::size(send);
            if (comm.rank() == o.root && std::ranges::size(recv) != count)
                detail::count_error(collective::reduce,
                                    fmt::format("the root's receive buffer holds {} elements, the "
                                                "send buffer {}",
                                                std::ranges::size(recv), count));
            erased = erase_operation<T>(op);
            reduce_args args{bytes_of(send), writable_bytes_of(recv), count, &erased, o.root};
            return detail::prepared_call<reduce_args>{
                args, detail::signature_for(collective::reduce, comm, count * sizeof(T), count,
                                            erased, detail::same_memory(args.send, args.recv))};
        });
}

// In place: data holds the contribution, and the result at the root.
template <byte_range R, class Op, call_option... Options>
requires operation_for<Op, detail::element_of<R>>
auto reduce(detail::call_communicator comm, R& data, Op op, Options&&... options) {
    // Not a coroutine: the two-buffer form's task is the call's (a frame less).
    return reduce(std::move(comm), std::as_const(data), data, std::move(op),
                  std::forward<Options>(options)...);
}

template <byte_range In, byte_range Out, class Op, call_option... Options>
requires operation_for<Op, detail::element_of<In>> &&
    std::is_same_v<detail::element_of<In>, detail::element_of<Out>>
auto all_reduce(detail::call_communicator comm, const In& send, Out& recv, Op op,
                Options&&... options) {
    return detail::elementwise_reduction<all_reduce_args>(
        std::move(comm), send, recv, std::move(op),
        detail::make_options(std::forward<Options>(options)...));
}

template <byte_range R, class Op, call_option... Options>
requires operation_for<Op, detail::element_of<R>>
auto all_reduce(detail::call_communicator comm, R& data, Op op, Options&&... options) {
    // Not a coroutine: the two-buffer form's task is the call's (a frame less).
    return all_reduce(std::move(comm), std::as_const(data), data, std::move(op),
                      std::forward<Options>(options)...);
}

// ---- gather and all_gather ------------------------------------------------

// recv (at the root) gets size() blocks of send's length, in rank order.
template <byte_range In, byte_range Out, call_option... Options>
requires std::is_same_v<detail::element_of<In>, detail::element_of<Out>>
auto gather(detail::call_communicator comm, const In& send, Out& recv, Options&&... options) {
    return detail::make_single_phase_call<gather_args>(
        std::move(comm), detail::make_options(std::forward<Options>(options)...),
        [&send, &recv](const communicator& comm, const call_options& o, reduction_op&) {
            detail::check_root(comm, collective::gather, o.root);
            const std::size_t block = std::ranges::size(send);
            const auto n = static_cast<std::size_t>(comm.size());
            if (comm.rank() == o.root && std::ranges::size(recv) != block * n)
                detail::count_error(collective::gather,
                                    fmt::format("the root's receive buffer holds {} elements; {} "
                                                "ranks sending {} each need {}",
                                                std::ranges::size(recv), n, block, block * n));
            return detail::prepared_call<gather_args>{
                {bytes_of(send), writable_bytes_of(recv), o.root},
                detail::signature_for(collective::gather, comm,
                                      block * n * sizeof(detail::element_of<In>))};
        });
}

// Every rank's value, in rank order, at the root (empty elsewhere).
template <class T, call_option... Options>
requires(trivially_copyable<T> || serializable<T>) task<std::vector<T>> gather(communicator comm,
                                                                               const T& value,
                                                                               Options... options) {
    auto o = detail::make_options(std::move(options)...);
    detail::check_root(comm, collective::gather, o.root);
    const auto n = static_cast<std::size_t>(comm.size());
    auto call = detail::begin_call(comm, collective::gather, o);
    std::vector<T> out;
    if constexpr (trivially_copyable<T>) {
        if (comm.rank() == o.root) out.resize(n);
        gather_args args{detail::bytes_of_value(value), std::as_writable_bytes(std::span(out)),
                         o.root};
        co_await detail::run_phase(call, 0, args,
                                   detail::signature_for(collective::gather, comm, n * sizeof(T)),
                                   o.algorithm);
    } else {
        auto mine = serialize(value);
        const auto block = co_await detail::agree_on_block(call, mine.size());
        auto packed = detail::pack_padded({mine}, block);
        std::vector<std::byte> all(comm.rank() == o.root ? packed.size() * n : 0);
        gather_args args{packed, all, o.root};
        co_await detail::run_phase(
            call, 1, args, detail::signature_for(collective::gather, comm, packed.size() * n),
            o.algorithm);
        if (comm.rank() == o.root) {
            out.resize(n);
            for (std::size_t r = 0; r < n; ++r)
                deserialize(
                    detail::unpack_padded(std::span(all).subspan(r * packed.size(), packed.size())),
                    out[r]);
        }
    }
    co_return out;
}

template <byte_range In, byte_range Out, call_option... Options>
requires std::is_same_v<detail::element_of<In>, detail::element_of<Out>>
auto all_gather(detail::call_communicator comm, const In& send, Out& recv, Options&&... options) {
    return detail::make_single_phase_call<all_gather_args>(
        std::move(comm), detail::make_options(std::forward<Options>(options)...),
        [&send, &recv](const communicator& comm, const call_options&, reduction_op&) {
            const std::size_t block = std::ranges::size(send);
            const auto n = static_cast<std::size_t>(comm.size());
            if (std::ranges::size(recv) != block * n)
                detail::count_error(collective::all_gather,
                                    fmt::format("the receive buffer holds {} elements; {} ranks "
                                                "sending {} each need {}",
                                                std::ranges::size(recv), n, block, block * n));
            return detail::prepared_call<all_gather_args>{
                {bytes_of(send), writable_bytes_of(recv)},
                detail::signature_for(collective::all_gather, comm,
                                      block * n * sizeof(detail::element_of<In>))};
        });
}

template <class T, call_option... Options>
requires(trivially_copyable<T> ||
         serializable<T>) task<std::vector<T>> all_gather(communicator comm, const T& value,
                                                          Options... options) {
    auto o = detail::make_options(std::move(options)...);
    const auto n = static_cast<std::size_t>(comm.size());
    auto call = detail::begin_call(comm, collective::all_gather, o);
    std::vector<T> out(n);
    if constexpr (trivially_copyable<T>) {
        all_gather_args args{detail::bytes_of_value(value), std::as_writable_bytes(std::span(out))};
        co_await detail::run_phase(
            call, 0, args, detail::signature_for(collective::all_gather, comm, n * sizeof(T)),
            o.algorithm);
    } else {
        auto mine = serialize(value);
        const auto block = co_await detail::agree_on_block(call, mine.size());
        auto packed = detail::pack_padded({mine}, block);
        std::vector<std::byte> all(packed.size() * n);
        all_gather_args args{packed, all};
        co_await detail::run_phase(call, 1, args,
                                   detail::signature_for(collective::all_gather, comm, all.size()),
                                   o.algorithm);
        for (std::size_t r = 0; r < n; ++r)
            deserialize(
                detail::unpack_padded(std::span(all).subspan(r * packed.size(), packed.size())),
                out[r]);
    }
    co_return out;
}

// ---- scatter ----------------------------------------------------------------

// send (at the root; ignored elsewhere) holds size() blocks of recv's length.
template <byte_range In, byte_range Out, call_option... Options>
requires std::is_same_v<detail::element_of<In>, detail::element_of<Out>>
auto scatter(detail::call_communicator comm, const In& send, Out& recv, Options&&... options) {
    return detail::make_single_phase_call<scatter_args>(
        std::move(comm), detail::make_options(std::forward<Options>(options)...),
        [&send, &recv](const communicator& comm, const call_options& o, reduction_op&) {
            detail::check_root(comm, collective::scatter, o.root);
            const std::size_t block = std::ranges::size(recv);
            const auto n = static_cast<std::size_t>(comm.size());
            if (comm.rank() == o.root && std::ranges::size(send) != block * n)
                detail::count_error(collective::scatter,
                                    fmt::format("the root sends {} elements; {} ranks receiving "
                                                "{} each need {}",
                                                std::ranges::size(send), n, block, block * n));
            return detail::prepared_call<scatter_args>{
                {bytes_of(send), writable_bytes_of(recv), o.root},
                detail::signature_for(collective::scatter, comm,
                                      block * n * sizeof(detail::element_of<Out>))};
        });
}

// values (at the root) holds one value per rank; each rank gets its own.
template <class T, call_option... Options>
requires(trivially_copyable<T> || serializable<T>) task<T> scatter(communicator comm,
                                                                   const std::vector<T>& values,
                                                                   Options... options) {
    auto o = detail::make_options(std::move(options)...);
    detail::check_root(comm, collective::scatter, o.root);
    const auto n = static_cast<std::size_t>(comm.size());
    const bool at_root = comm.rank() == o.root;
    if (at_root && values.size() != n)
        detail::count_error(collective::scatter,
                            fmt::format("the root passes {} values for {} ranks; it must pass one "
                                        "per rank",
                                        values.size(), n));
    auto call = detail::begin_call(comm, collective::scatter, o);
    T mine{};
    if constexpr (trivially_copyable<T>) {
        scatter_args args{std::as_bytes(std::span(values)), detail::writable_bytes_of_value(mine),
                          o.root};
        co_await detail::run_phase(call, 0, args,
                                   detail::signature_for(collective::scatter, comm, n * sizeof(T)),
                                   o.algorithm);
    } else {
        std::vector<std::vector<std::byte>> serialized;
        if (at_root)
            for (const auto& v : values)
                serialized.push_back(serialize(v));
        std::uint64_t block = detail::largest(serialized);
        broadcast_args size_args{detail::writable_bytes_of_value(block), o.root};
        co_await detail::run_phase(call, 0, size_args,
                                   detail::signature_for(collective::broadcast, comm, 8), "");
        std::vector<std::byte> packed;
        if (at_root) packed = detail::pack_padded(serialized, block);
        std::vector<std::byte> own(block + sizeof(std::uint64_t));
        scatter_args args{packed, own, o.root};
        co_await detail::run_phase(call, 1, args,
                                   detail::signature_for(collective::scatter, comm, own.size() * n),
                                   o.algorithm);
        deserialize(detail::unpack_padded(own), mine);
    }
    co_return mine;
}

// ---- all_to_all and all_to_allv ---------------------------------------------

// send holds size() equal blocks, block j for rank j; recv gets block i from
// rank i. send and recv have the same length.
template <byte_range In, byte_range Out, call_option... Options>
requires std::is_same_v<detail::element_of<In>, detail::element_of<Out>>
auto all_to_all(detail::call_communicator comm, const In& send, Out& recv, Options&&... options) {
    return detail::make_single_phase_call<all_to_all_args>(
        std::move(comm), detail::make_options(std::forward<Options>(options)...),
        [&send, &recv](const communicator& comm, const call_options&, reduction_op&) {
            const std::size_t count = std::ranges::size(send);
            const auto n = static_cast<std::size_t>(comm.size());
            if (count % n != 0)
                detail::count_error(collective::all_to_all,
                                    fmt::format("{} elements cannot be split into {} equal "
                                                "blocks, one per rank",
                                                count, n));
            if (std::ranges::size(recv) != count)
                detail::count_error(collective::all_to_all,
                                    fmt::format("the receive buffer holds {} elements, the send "
                                                "buffer {}",
                                                std::ranges::size(recv), count));
            all_to_all_args args{bytes_of(send), writable_bytes_of(recv)};
            return detail::prepared_call<all_to_all_args>{
                args, detail::signature_for(collective::all_to_all, comm, args.send.size())};
        });
}

// values[j] goes to rank j; the result's [i] came from rank i.
template <class T, call_option... Options>
requires(trivially_copyable<T> || serializable<T>) task<std::vector<T>> all_to_all(
    communicator comm, const std::vector<T>& values, Options... options) {
    const auto n = static_cast<std::size_t>(comm.size());
    if (values.size() != n)
        detail::count_error(collective::all_to_all,
                            fmt::format("{} values passed for {} ranks; pass exactly one per rank",
                                        values.size(), n));
    auto o = detail::make_options(std::move(options)...);
    auto call = detail::begin_call(comm, collective::all_to_all, o);
    std::vector<T> out(n);
    if constexpr (trivially_copyable<T>) {
        all_to_all_args args{std::as_bytes(std::span(values)),
                             std::as_writable_bytes(std::span(out))};
        co_await detail::run_phase(
            call, 0, args, detail::signature_for(collective::all_to_all, comm, n * sizeof(T)),
            o.algorithm);
    } else {
        std::vector<std::vector<std::byte>> serialized;
        for (const auto& v : values)
            serialized.push_back(serialize(v));
        const auto block = co_await detail::agree_on_block(call, detail::largest(serialized));
        auto packed = detail::pack_padded(serialized, block);
        std::vector<std::byte> received(packed.size());
        all_to_all_args args{packed, received};
        co_await detail::run_phase(
            call, 1, args, detail::signature_for(collective::all_to_all, comm, packed.size()),
            o.algorithm);
        const std::size_t stride = packed.size() / n;
        for (std::size_t i = 0; i < n; ++i)
            deserialize(detail::unpack_padded(std::span(received).subspan(i * stride, stride)),
                        out[i]);
    }
    co_return out;
}

// send_counts[j] elements go to rank j, in order; recv_counts[i] arrive from
// rank i, in order. Each rank's send_counts[j] must equal rank j's
// recv_counts[i]. The counts are read when the call is awaited: they must
// stay alive until then, as the buffers must.
template <byte_range In, byte_range Out, call_option... Options>
requires std::is_same_v<detail::element_of<In>, detail::element_of<Out>>
auto all_to_allv(detail::call_communicator comm, const In& send,
                 std::span<const std::size_t> send_counts, Out& recv,
                 std::span<const std::size_t> recv_counts, Options&&... options) {
    return detail::make_single_phase_call<all_to_allv_args>(
        std::move(comm), detail::make_options(std::forward<Options>(options)...),
        [&send, &recv, send_counts, recv_counts, layout = detail::per_rank_sizes()](
            const communicator& comm, const call_options&, reduction_op&) mutable {
            using T = detail::element_of<In>;
            const auto n = static_cast<std::size_t>(comm.size());
            if (send_counts.size() != n || recv_counts.size() != n)
                detail::count_error(collective::all_to_allv,
                                    fmt::format("{} send counts and {} receive counts given for "
                                                "{} ranks; give one of each per rank",
                                                send_counts.size(), recv_counts.size(), n));
            // Byte counts and offsets: send's, then recv's.
            const std::span<std::size_t> all = layout.resize(4 * n);
            const auto sc = all.subspan(0, n);
            const auto so = all.subspan(n, n);
            const auto rc = all.subspan(2 * n, n);
            const auto ro = all.subspan(3 * n, n);
            std::size_t send_total = 0, recv_total = 0;
            for (std::size_t j = 0; j < n; ++j) {
                sc[j] = send_counts[j] * sizeof(T);
                so[j] = send_total;
                send_total += sc[j];
                rc[j] = recv_counts[j] * sizeof(T);
                ro[j] = recv_total;
                recv_total += rc[j];
            }
            if (send_total != std::ranges::size(send) * sizeof(T) ||
                recv_total != std::ranges::size(recv) * sizeof(T))
                detail::count_error(collective::all_to_allv,
                                    fmt::format("the counts add up to {} to send and {} to "
                                                "receive, but the buffers hold {} and {} elements",
                                                send_total / sizeof(T), recv_total / sizeof(T),
                                                std::ranges::size(send), std::ranges::size(recv)));
            // The own piece is copied locally, with no message to compare lengths.
            const auto me = static_cast<std::size_t>(comm.rank());
            if (send_counts[me] != recv_counts[me])
                detail::count_error(collective::all_to_allv,
                                    fmt::format("rank {} sends itself {} elements but expects {} "
                                                "from itself; its own send and receive counts "
                                                "must be equal",
                                                me, send_counts[me], recv_counts[me]));
            auto signature = detail::signature_for(collective::all_to_allv, comm, 0);
            signature.equal_counts = false;
            return detail::prepared_call<all_to_allv_args>{
                {bytes_of(send), sc, so, writable_bytes_of(recv), rc, ro}, signature};
        });
}

// per_peer[j] goes to rank j; the result's [i] came from rank i. Lengths may
// differ per peer and per rank: they are exchanged first.
template <class T, call_option... Options>
requires(trivially_copyable<T> || serializable<T>) task<std::vector<std::vector<T>>> all_to_allv(
    communicator comm, const std::vector<std::vector<T>>& per_peer, Options... options) {
    const auto n = static_cast<std::size_t>(comm.size());
    if (per_peer.size() != n)
        detail::count_error(collective::all_to_allv,
                            fmt::format("{} vectors passed for {} ranks; pass exactly one per rank",
                                        per_peer.size(), n));
    auto o = detail::make_options(std::move(options)...);
    auto call = detail::begin_call(comm, collective::all_to_allv, o);
    std::vector<std::vector<std::byte>> outgoing(n);
    for (std::size_t j = 0; j < n; ++j) {
        if constexpr (trivially_copyable<T>) {
            auto b = std::as_bytes(std::span(per_peer[j]));
            outgoing[j].assign(b.begin(), b.end());
        } else {
            outgoing[j] = serialize(per_peer[j]);
        }
    }
    std::vector<std::uint64_t> send_bytes(n), recv_bytes(n);
    for (std::size_t j = 0; j < n; ++j)
        send_bytes[j] = outgoing[j].size();
    all_to_all_args size_args{std::as_bytes(std::span(send_bytes)),
                              std::as_writable_bytes(std::span(recv_bytes))};
    co_await detail::run_phase(call, 0, size_args,
                               detail::signature_for(collective::all_to_all, comm, 8 * n), "");
    std::vector<std::size_t> sc(n), so(n), rc(n), ro(n);
    std::size_t send_total = 0, recv_total = 0;
    for (std::size_t j = 0; j < n; ++j) {
        sc[j] = send_bytes[j];
        so[j] = send_total;
        send_total += sc[j];
        rc[j] = recv_bytes[j];
        ro[j] = recv_total;
        recv_total += rc[j];
    }
    std::vector<std::byte> send(send_total), recv(recv_total);
    for (std::size_t j = 0; j < n; ++j)
        if (sc[j]) std::memcpy(send.data() + so[j], outgoing[j].data(), sc[j]);
    all_to_allv_args args{send, sc, so, recv, rc, ro};
    call_signature signature = detail::signature_for(collective::all_to_allv, comm, 0);
    signature.equal_counts = false;
    co_await detail::run_phase(call, 1, args, signature, o.algorithm);
    std::vector<std::vector<T>> out(n);
    for (std::size_t i = 0; i < n; ++i) {
        auto piece = std::span(recv).subspan(ro[i], rc[i]);
        if constexpr (trivially_copyable<T>) {
            if (piece.size() % sizeof(T) != 0)
                throw error(errc::message_size_mismatch,
                            fmt::format("all_to_allv: rank {} sent {} bytes, not a whole number of "
                                        "{}-byte elements",
                                        i, piece.size(), sizeof(T)));
            out[i].resize(piece.size() / sizeof(T));
            if (!piece.empty()) std::memcpy(out[i].data(), piece.data(), piece.size());
        } else {
            deserialize(piece, out[i]);
        }
    }
    co_return out;
}

// ---- reduce_scatter -----------------------------------------------------------

namespace detail {

// The reduce_scatter's inputs checked, its operation erased into `erased`.
template <class In, class Out, class Op>
prepared_call<reduce_scatter_args>
prepare_reduce_scatter(const communicator& comm, const In& send, Out& recv,
                       std::span<const std::size_t> counts, const Op& op, reduction_op& erased) {
    using T = element_of<In>;
    const auto n = static_cast<std::size_t>(comm.size());
    if (counts.size() != n)
        count_error(
            collective::reduce_scatter,
            fmt::format("{} counts given for {} ranks; give one per rank", counts.size(), n));
    const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
    if (std::ranges::size(send) != total)
        count_error(collective::reduce_scatter,
                    fmt::format("the send buffer holds {} elements, the counts add up to {}",
                                std::ranges::size(send), total));
    const auto mine = counts[static_cast<std::size_t>(comm.rank())];
    if (std::ranges::size(recv) != mine)
        count_error(collective::reduce_scatter,
                    fmt::format("the receive buffer holds {} elements, this rank's count is {}",
                                std::ranges::size(recv), mine));
    erased = erase_operation<T>(op);
    auto signature =
        signature_for(collective::reduce_scatter, comm, total * sizeof(T), total, erased, false);
    signature.equal_counts =
        std::all_of(counts.begin(), counts.end(), [&](std::size_t c) { return c == counts[0]; });
    return {{bytes_of(send), writable_bytes_of(recv), counts, &erased}, signature};
}

} // namespace detail

// send holds counts[0] + ... + counts[size()-1] elements; rank r receives in
// recv (counts[r] elements) the reduction of its part.
template <byte_range In, byte_range Out, class Op, call_option... Options>
requires operation_for<Op, detail::element_of<In>> &&
    std::is_same_v<detail::element_of<In>, detail::element_of<Out>>
auto reduce_scatter(detail::call_communicator comm, const In& send, Out& recv,
                    std::span<const std::size_t> counts, Op op, Options&&... options) {
    return detail::make_single_phase_call<reduce_scatter_args>(
        std::move(comm), detail::make_options(std::forward<Options>(options)...),
        [&send, &recv, counts, op = std::move(op)](const communicator& comm, const call_options&,
                                                   reduction_op& erased) {
            return detail::prepare_reduce_scatter(comm, send, recv, counts, op, erased);
        });
}

// Equal blocks: send holds size() blocks of recv's length.
template <byte_range In, byte_range Out, class Op, call_option... Options>
requires operation_for<Op, detail::element_of<In>> &&
    std::is_same_v<detail::element_of<In>, detail::element_of<Out>>
auto reduce_scatter(detail::call_communicator comm, const In& send, Out& recv, Op op,
                    Options&&... options) {
    return detail::make_single_phase_call<reduce_scatter_args>(
        std::move(comm), detail::make_options(std::forward<Options>(options)...),
        [&send, &recv, op = std::move(op), counts = detail::per_rank_sizes()](
            const communicator& comm, const call_options&, reduction_op& erased) mutable {
            const auto n = static_cast<std::size_t>(comm.size());
            const std::size_t block = std::ranges::size(recv);
            if (std::ranges::size(send) != block * n)
                detail::count_error(collective::reduce_scatter,
                                    fmt::format("the send buffer holds {} elements; {} ranks "
                                                "receiving {} each need {}",
                                                std::ranges::size(send), n, block, block * n));
            const auto each = counts.resize(n);
            std::ranges::fill(each, block);
            return detail::prepare_reduce_scatter(comm, send, recv,
                                                  std::span<const std::size_t>(each), op, erased);
        });
}

// ---- scan and exscan -----------------------------------------------------------

// recv on rank r gets x0 op ... op xr.
template <byte_range In, byte_range Out, class Op, call_option... Options>
requires operation_for<Op, detail::element_of<In>> &&
    std::is_same_v<detail::element_of<In>, detail::element_of<Out>>
auto scan(detail::call_communicator comm, const In& send, Out& recv, Op op, Options&&... options) {
    return detail::elementwise_reduction<scan_args>(
        std::move(comm), send, recv, std::move(op),
        detail::make_options(std::forward<Options>(options)...));
}

template <byte_range R, class Op, call_option... Options>
requires operation_for<Op, detail::element_of<R>>
auto scan(detail::call_communicator comm, R& data, Op op, Options&&... options) {
    // Not a coroutine: the two-buffer form's task is the call's (a frame less).
    return scan(std::move(comm), std::as_const(data), data, std::move(op),
                std::forward<Options>(options)...);
}

// recv on rank r > 0 gets x0 op ... op x(r-1); rank 0's recv is unchanged.
template <byte_range In, byte_range Out, class Op, call_option... Options>
requires operation_for<Op, detail::element_of<In>> &&
    std::is_same_v<detail::element_of<In>, detail::element_of<Out>>
auto exscan(detail::call_communicator comm, const In& send, Out& recv, Op op,
            Options&&... options) {
    return detail::elementwise_reduction<exscan_args>(
        std::move(comm), send, recv, std::move(op),
        detail::make_options(std::forward<Options>(options)...));
}

template <byte_range R, class Op, call_option... Options>
requires operation_for<Op, detail::element_of<R>>
auto exscan(detail::call_communicator comm, R& data, Op op, Options&&... options) {
    // Not a coroutine: the two-buffer form's task is the call's (a frame less).
    return exscan(std::move(comm), std::as_const(data), data, std::move(op),
                  std::forward<Options>(options)...);
}

} // namespace tutti
