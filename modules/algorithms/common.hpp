// Small pieces shared by the pure algorithms in the subfolders: how a vector
// is cut into pieces, where blocks of given counts start, binomial trees over
// ranks renumbered from the root, and the local copies around in-place calls.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "algorithms/args.hpp"
#include "core/call_context.hpp"
#include "core/copy.hpp"
#include "core/reduction.hpp"
#include "core/scratch.hpp"
#include "core/task.hpp"
#include "topology/topology.hpp"

namespace tutti::algorithms_detail {

// Keeps a send's request only while it is pending (call_context::start_send
// gives an empty one for a send done at once): a round whose sends all left
// at once neither allocates nor waits (`if (!sends.empty())` before
// wait_all).
inline void keep_pending(std::vector<request>& sends, request sent) {
    if (sent) sends.push_back(std::move(sent));
}

// One round with every other rank at once, as the direct algorithms run it:
// a receive from each rank into into(source), then a send to each of
// from(dest), awaited at the call's end. The receives come first, so that
// no message waits unexpected; sends start at r + 1 and walk around the
// ring, so that not every rank targets rank 0 first. Await the requests
// with wait_all.
template <typename Into, typename From>
std::vector<request> post_to_every_rank(const call_context& ctx, std::uint64_t step, Into into,
                                        From from, receive_use use = receive_use::kept) {
    const int p = ctx.size();
    const int r = ctx.rank();
    std::vector<request> requests;
    requests.reserve(2 * static_cast<std::size_t>(p - 1));
    for (int k = 1; k < p; ++k) {
        const int source = r - k < 0 ? r - k + p : r - k;
        requests.push_back(ctx.irecv(source, step, into(source), use));
    }
    for (int k = 1; k < p; ++k) {
        const int dest = r + k >= p ? r + k - p : r + k;
        keep_pending(requests, ctx.start_send(dest, step, from(dest), send_awaited::at_end));
    }
    return requests;
}

// out = ((x(0) op x(1)) op x(2)) ... op x(p - 1) for p >= 2: the strict rank
// order, right for any operation, and the same bits on every rank that
// folds the same operands. out may be any x(i) with i < 2 (each combine
// reads its operands before it writes).
template <typename Contribution>
void fold_in_rank_order(const reduction_op& op, int p, Contribution x, std::byte* out,
                        std::size_t count) {
    op.combine(x(0), x(1), out, count);
    for (int i = 2; i < p; ++i)
        op.combine(out, x(i), out, count);
}

// Whether a rank may copy its own block (from -> to) after posting its
// messages, so that the copy runs while they travel: when send and receive
// are apart, or when the block is already in place (nothing to copy). Else
// one lies inside the other, and a receive could overwrite, or the copy
// change, data not yet read.
inline bool own_copy_can_wait(std::span<const std::byte> send, std::span<const std::byte> recv,
                              std::span<const std::byte> from, std::span<const std::byte> to) {
    return !overlapping(send, recv) || from.data() == to.data();
}

// Copies unless the data is already there (in place); memmove where a send
// buffer overlaps the receive buffer without starting at the same byte.
inline void copy_unless_same(std::byte* to, const std::byte* from, std::size_t bytes) {
    if (!bytes || to == from) return;
    if (overlapping({to, bytes}, {from, bytes}))
        std::memmove(to, from, bytes);
    else
        copy_bytes(to, from, bytes);
}

// Whether a call whose buffers take `bytes_per_rank` on each rank leaves
// none of them in the caches: every rank of the communicator counted as
// sharing this machine's last-level cache (exact over shared memory, more
// than there is across hosts), and the buffers taking three quarters of
// it or more. The rest goes to the call's other traffic (the cells, the
// other ranks' copies), which evicts what it writes before anyone reads it.
// Streaming the own block from a margin of half the cache (32 MiB here)
// against 1.5 times it, three runs of 15-25 rounds (docs/performance.md,
// seventy-eighth session): where the buffers took 24 MiB or more, the
// 2-rank all_gather of 8-16 MiB took 0.74-0.88 of the time and the
// all_to_all of 6-12 MiB 0.86-0.96, over TCP 8 MiB 0.88 (quicker in most
// rounds, p < 0.05 in most runs); at 18 MiB (the all_gather of 6 MiB)
// 0.79, 0.96 and 1.05, none significant; at 12 MiB level. Where the
// buffers fit the cache, streaming lost 30-45 % (thirty-fourth session).
// Small calls never ask hwloc; the first large one reads the cache's size
// from it (about 2 ms, once a process).
inline bool buffers_exceed_cache(const call_context& ctx, std::size_t bytes_per_rank) {
    const auto node_bytes =
        static_cast<std::uint64_t>(bytes_per_rank) * static_cast<std::uint64_t>(ctx.size());
    if (node_bytes < (std::uint64_t{4} << 20)) return false;
    const auto cache = topology::last_level_cache_bytes();
    return cache != 0 && node_bytes >= cache / 4 * 3;
}

// The same for a call of an exchange's arguments, whose buffers are its send
// and receive buffers: whether its own block's copy is written past the
// caches (copy_block, own_block_copy).
template <class Args>
bool buffers_exceed_cache(const call_context& ctx, const Args& a) {
    return buffers_exceed_cache(ctx, a.send.size() + a.recv.size());
}

// A rank's own block of an exchange, which it copies itself (from -> to, of
// one size; both empty where the rank keeps none). The copy is made at once
// when it must come first (own_copy_can_wait says no), else when
// copy_if_deferred() is called after the messages are posted, so that it
// runs while they travel; with `beyond_cache` (buffers_exceed_cache), a
// deferred copy is written past the caches (copy_block).
class own_block_copy {
public:
    own_block_copy(std::span<const std::byte> send, std::span<const std::byte> recv,
                   std::span<const std::byte> from, std::span<std::byte> to,
                   bool beyond_cache = false)
        : from_(from), to_(to), deferred_(own_copy_can_wait(send, recv, from, to)),
          beyond_cache_(beyond_cache) {
        if (!deferred_) copy_unless_same(to_.data(), from_.data(), from_.size());
    }
    // Makes the copy if the constructor left it; later calls do nothing.
    void copy_if_deferred() {
        if (!deferred_) return;
        deferred_ = false;
        // Deferred: the two blocks do not overlap, or are the same.
        if (!from_.empty() && to_.data() != from_.data())
            copy_block(to_.data(), from_.data(), from_.size(), beyond_cache_);
    }

private:
    std::span<const std::byte> from_;
    std::span<std::byte> to_;
    bool deferred_;
    bool beyond_cache_;
};

// Where piece i starts when n units are cut into `pieces` nearly equal pieces:
// the first n mod pieces are one unit longer, so piece 0 is the largest and
// pieces are empty only when n < pieces.
inline std::size_t even_piece_start(std::size_t n, std::size_t pieces, int i) {
    const auto u = static_cast<std::size_t>(i);
    return u * (n / pieces) + std::min(u, n % pieces);
}

// A vector of `count` elements of `element` bytes cut into `pieces` nearly
// equal pieces (even_piece_start): where piece i starts, its elements, and
// its bytes in a buffer holding the vector.
struct even_pieces {
    std::size_t count, pieces, element;

    std::size_t first(int i) const { return even_piece_start(count, pieces, i); }
    std::size_t count_of(int i) const { return first(i + 1) - first(i); }
    template <typename T>
    std::span<T> of(std::span<T> buffer, int i) const {
        return buffer.subspan(first(i) * element, count_of(i) * element);
    }
};

// Blocks [first, first + n) of a buffer laid out as equal blocks, one per
// rank, so that rank-indexed arithmetic is written (and checked) once.
template <typename T>
std::span<T> blocks_of(std::span<T> buffer, std::size_t block, int first, int n = 1) {
    return buffer.subspan(static_cast<std::size_t>(first) * block,
                          static_cast<std::size_t>(n) * block);
}

// Byte offsets of consecutive blocks of counts[i] elements each: block i is
// [offsets[i], offsets[i + 1]), and offsets.back() is the total.
inline detail::per_rank_sizes prefix_offsets(std::span<const std::size_t> counts,
                                             std::size_t element) {
    detail::per_rank_sizes offsets;
    const auto o = offsets.resize(counts.size() + 1);
    o[0] = 0;
    for (std::size_t i = 0; i < counts.size(); ++i)
        o[i + 1] = o[i] + counts[i] * element;
    return offsets;
}

// In place, received data would overwrite data not yet sent, so the send
// side is read from a copy kept in `saved`; otherwise straight from send.
inline std::span<const std::byte> send_side(std::span<const std::byte> send,
                                            std::span<const std::byte> recv,
                                            std::optional<scratch<>>& saved) {
    if (send.empty() || send.data() != recv.data()) return send;
    saved.emplace(send.size());
    copy_bytes(saved->data(), send.data(), send.size());
    return saved->span();
}

// The largest power of two <= p (p >= 1): the ranks that take part in the
// recursive steps once the other p - p' ranks have been folded in.
inline int power_of_two_floor(int p) {
    int pof2 = 1;
    while (pof2 * 2 <= p)
        pof2 *= 2;
    return pof2;
}

// The real rank of folded rank `folded`, when the first 2 * extra ranks were
// paired up (even r into r + 1) and the rest renumbered r - extra.
inline int unfolded_rank(int folded, int extra) {
    return folded < extra ? folded * 2 + 1 : folded + extra;
}

// `i` (0 <= i < pof2, a power of two) with its log2(pof2) bits reversed. The
// recursive halving and doubling rounds run on reversed ranks so that the
// largest exchange goes to the nearest rank (r xor 1): ranks of one node are
// consecutive, and only the smaller exchanges cross between nodes.
inline int reversed_bits(int i, int pof2) {
    int reversed = 0;
    for (int bit = 1; bit < pof2; bit <<= 1) {
        reversed <<= 1;
        if (i & bit) reversed |= 1;
    }
    return reversed;
}

// Ranks renumbered so that `root` is 0, the numbering binomial trees use.
inline int relative_rank(int rank, int root, int p) {
    return (rank - root + p) % p;
}
inline int actual_rank(int relative, int root, int p) {
    return (relative + root) % p;
}

// A reduce or all_reduce that sends nothing: an empty vector, or one rank,
// whose result is its own data (copied to recv). True when the call is done.
template <typename Args>
bool reduce_without_messages(const Args& a, int p) {
    const std::size_t bytes = a.count * a.op->element_size;
    if (bytes != 0 && p != 1) return false;
    copy_unless_same(a.recv.data(), a.send.data(), bytes);
    return true;
}

// Where a reduce's tree ends: at the root for a commutative operation, at
// rank 0 for another, since only the true rank order keeps a
// non-commutative result; rank 0 then sends the result on to the root
// (result_to_root). Ranks are numbered from that end (vr).
struct reduce_tree {
    int top = 0;
    int vr = 0;
    int p = 1;
    reduce_tree(const call_context& ctx, const reduce_args& a)
        : top(a.op->commutative ? a.root : 0), vr(relative_rank(ctx.rank(), top, ctx.size())),
          p(ctx.size()) {}
    int actual(int relative) const { return actual_rank(relative, top, p); }
};

// A received vector's part in a combination: out = left op right, one of
// the two operands being the receive's buffer (which side it is keeps a
// non-commutative operation's order).
struct combination {
    const reduction_op& op;
    const std::byte* left;
    const std::byte* right;
    std::byte* out;
    std::size_t count;
};

// Vectors from this length are combined as they land where the transport
// reports it (transport::irecv_observed; over TCP, the part of a large
// message read so far): while the sender still sends, and while the landed
// part is still in the cache. Over TCP from 1 MiB a 2-rank reduce took
// 0.82-0.86 of the time and a 4 MiB scan 0.86-0.87; from 64 to 256 KiB the
// reduce and scan read 0.98-1.06 (docs/performance.md, forty-fifth
// session), so shorter ones are combined whole.
inline constexpr std::size_t combined_as_it_lands_from = 1024 * 1024;

// Combines a received vector up to its last whole element landed, the rest
// once the receive completes (finish): the same operations on the same
// elements as combining it whole. Where the transport hands the message
// over in pieces (take), it combines straight from them: the receive's
// buffer (`received`, one of the combination's operands) then holds only
// the bytes of elements cut between two pieces. A failure of the operation
// is kept for finish to throw, since landed() and take() run in the
// transport's reader.
class combining_as_it_lands final : public landing_observer {
public:
    // Whether the pieces are taken (the buffer then does not hold the
    // message), or left to land in the buffer, whose owner keeps it.
    enum class pieces { taken, left_in_buffer };
    // Whether a report of bytes landed in the buffer (landed()) combines
    // them at once, or only pieces taken are.
    enum class reports { combine, ignore };

    combining_as_it_lands(const combination& c, std::span<std::byte> received,
                          pieces taking = pieces::taken, reports landed_reports = reports::combine)
        : c_(c), received_(received.data()), taking_(taking), landed_reports_(landed_reports) {}

    void landed(std::size_t bytes) noexcept override {
        if (landed_reports_ == reports::combine)
            combine_up_to(std::min(bytes / c_.op.element_size, c_.count));
    }
    bool takes_pieces() const noexcept override {
        return taking_ == pieces::taken && (c_.left == received_ || c_.right == received_);
    }
    void take(std::size_t at, std::span<const std::byte> piece) noexcept override {
        const std::size_t element = c_.op.element_size;
        const std::size_t end = at + piece.size();
        // Elements wholly before the piece are in the buffer.
        combine_up_to(std::min(at / element, c_.count));
        if (failed_) return;
        // One begun in an earlier piece: its bytes gathered in the buffer,
        // and combined from there once complete.
        std::size_t kept_to = at;
        if (done_ * element < at) {
            kept_to = std::min(end, (done_ + 1) * element);
            copy_unless_same(received_ + at, piece.data(), kept_to - at);
            if (kept_to % element == 0) combine_up_to(done_ + 1);
        }
        // Whole elements straight from the piece.
        const std::size_t whole = std::min(end / element, c_.count);
        if (!failed_ && whole > done_ && done_ * element >= at)
            combine_up_to(whole, piece.data(), at);
        // The start of an element that a later piece ends.
        const std::size_t tail = std::max(kept_to, done_ * element);
        if (tail < end) copy_unless_same(received_ + tail, piece.data() + (tail - at), end - tail);
    }
    void finish() {
        combine_up_to(c_.count);
        if (failed_) std::rethrow_exception(failed_);
    }

private:
    // Combines elements [done_, elements), the received operand read from
    // the buffer, or from `piece` (bytes from `piece_at` of the message) if
    // given.
    void combine_up_to(std::size_t elements, const std::byte* piece = nullptr,
                       std::size_t piece_at = 0) noexcept {
        if (failed_ || elements <= done_) return;
        const std::size_t at = done_ * c_.op.element_size;
        const std::byte* received = piece ? piece + (at - piece_at) : received_ + at;
        const std::byte* left = c_.left == received_ ? received : c_.left + at;
        const std::byte* right = c_.right == received_ ? received : c_.right + at;
        try {
            c_.op.combine(left, right, c_.out + at, elements - done_);
            done_ = elements;
        } catch (...) {
            failed_ = std::current_exception();
        }
    }

    combination c_;
    std::byte* received_;
    pieces taking_;
    reports landed_reports_;
    std::size_t done_ = 0;
    std::exception_ptr failed_;
};

// Halves from this length are combined straight from the pieces the
// transport hands over (landing_observer::take: shared memory's cells, or
// its mapping of the sender's buffer) rather than copied into the receive's
// buffer and read from there again. A shorter one fits a few cells.
inline constexpr std::size_t combined_from_pieces_from = 64 * 1024;

// Receives `incoming` from peer as step `step` and combines it as `c` says,
// part by part as it lands (`use` as for call_context::recv; a vector kept
// lands whole in `incoming`, one combined at once may be taken from the
// transport's pieces instead, leaving `incoming` unwritten). For vectors
// of combined_as_it_lands_from bytes or more: a shorter one is received and
// combined in the caller's own frame (call_context::recv may skip its
// request), since a coroutine frame more per call shows in small calls (an
// 8-byte barrier ran 3 % faster without one; docs/performance.md, ninth
// session).
inline task<void> receive_and_combine(const call_context& ctx, int peer, std::uint64_t step,
                                      std::span<std::byte> incoming, combination c,
                                      receive_use use = receive_use::combined_at_once) {
    combining_as_it_lands combining(c, incoming,
                                    use == receive_use::kept
                                        ? combining_as_it_lands::pieces::left_in_buffer
                                        : combining_as_it_lands::pieces::taken);
    const auto arrived = ctx.irecv_observed(peer, step, incoming, combining, use);
    if (arrived->must_wait()) co_await arrived->wait();
    combining.finish();
}

// Whether an exchange of `given` for `into` whose arrival is combined as `c`
// says takes the arrival in pieces (exchange_combining_pieces): a long one
// whose combination writes nowhere the send still reads.
inline bool combines_from_pieces(std::span<const std::byte> given, std::span<const std::byte> into,
                                 const combination& c) {
    return into.size() >= combined_from_pieces_from &&
           !overlapping(given, {c.out, c.count * c.op.element_size});
}

// Sends `given` to peer and receives `into` from it as step `step`, combining
// the arrival as `c` says (`into` one of its operands) from the pieces the
// transport hands over, while the send still goes out. Bytes that land in
// `into` instead (TCP) are combined once all have come: combining them in
// the reader as it reports them, while the rank also sends, took 1.01-1.04
// of the time of the 2-rank 4 and 16 MiB all_reduce (docs/performance.md,
// seventy-fourth session).
inline task<void> exchange_combining_pieces(const call_context& ctx, int peer, std::uint64_t step,
                                            std::span<const std::byte> given,
                                            std::span<std::byte> into, combination c) {
    combining_as_it_lands combining(c, into, combining_as_it_lands::pieces::taken,
                                    combining_as_it_lands::reports::ignore);
    // Kept, as send_recv's receive: the transport picks the message's path
    // as before (a single copy into `into` where that is quicker), and only
    // what comes through the cells is taken from them.
    auto arrived = ctx.irecv_observed(peer, step, into, combining, receive_use::kept);
    co_await message_step(std::move(arrived), ctx.start_send(peer, step, given));
    combining.finish();
}

// The hop of a tree that ended away from the root: `result` (held by the
// tree's end) to the root's recv, as step `step`; nothing elsewhere.
inline message_step result_to_root(const call_context& ctx, const reduce_args& a,
                                   const reduce_tree& tree, std::span<const std::byte> result,
                                   std::uint64_t step) {
    if (tree.top == a.root) return {};
    if (ctx.rank() == tree.top) return ctx.send(a.root, step, result, send_awaited::at_end);
    if (ctx.rank() == a.root)
        return ctx.recv(tree.top, step, a.recv.first(a.count * a.op->element_size));
    return {};
}

// A binomial tree over relative ranks: vr's subtree is [vr, vr + extent),
// extent its lowest set bit (the root's: p rounded up to a power of two); its
// parent is vr - extent and its children vr + extent / 2, vr + extent / 4, ...
inline int binomial_extent(int vr, int p) {
    if (vr != 0) return vr & -vr;
    int extent = 1;
    while (extent < p)
        extent *= 2;
    return extent;
}

// The relative blocks [lo, hi) as contiguous runs in rank order: cut in two
// where they wrap from rank p - 1 to rank 0 (relative block `wrap`).
inline std::vector<std::pair<int, int>> unwrapped_runs(int lo, int hi, int wrap) {
    std::vector<std::pair<int, int>> out;
    if (lo < wrap && wrap < hi) {
        out = {{lo, wrap}, {wrap, hi}};
    } else if (lo < hi) {
        out = {{lo, hi}};
    }
    return out;
}

// The recursive-halving rounds of Rabenseifner's all_reduce and reduce: a
// reduce_scatter over the pof2 ranks that take part, numbered 0..pof2-1
// (`me`; rank_of(n) is number n's rank in ctx), the vector of `count`
// elements cut into pof2 pieces (even_piece_start). In each round a rank keeps
// the half of its pieces that holds piece `me`, sends the other half to the
// partner and combines what comes back into `result`. `source` is this rank's
// contribution; once a round has combined, it is read from `result`. At the
// end piece `me` of `result` is complete. `incoming` holds at least the first
// half (the largest). Rounds are steps first_step, first_step + 1, ...
// With last_mask 2 the last round (partner me xor 1) is left to the caller:
// pieces me and me xor 1 then hold what it exchanges and combines.
template <typename RankOf>
task<void> halving_rounds(const call_context& ctx, const reduction_op& op, std::size_t count,
                          int pof2, int me, RankOf rank_of, const std::byte* source,
                          std::byte* result, std::span<std::byte> incoming,
                          std::uint64_t first_step, int last_mask = 1) {
    const std::size_t element = op.element_size;
    const auto pieces = static_cast<std::size_t>(pof2);
    const auto offset = [&](int i) { return even_piece_start(count, pieces, i) * element; };
    int lo = 0;
    std::uint64_t round = 0;
    for (int mask = pof2 / 2; mask >= last_mask; mask /= 2, ++round) {
        const int partner = rank_of(me ^ mask);
        const bool keep_lower = (me & mask) == 0;
        const int keep = keep_lower ? lo : lo + mask;
        const int give = keep_lower ? lo + mask : lo;
        const std::size_t keep_bytes = offset(keep + mask) - offset(keep);
        auto into = incoming.first(keep_bytes);
        const auto given = std::span(source + offset(give), offset(give + mask) - offset(give));
        const std::byte* own = source + offset(keep);
        std::byte* out = result + offset(keep);
        const std::size_t n = keep_bytes / element;
        const combination c = partner < ctx.rank() ? combination{op, into.data(), own, out, n}
                                                   : combination{op, own, into.data(), out, n};
        if (combines_from_pieces(given, into, c)) {
            co_await exchange_combining_pieces(ctx, partner, first_step + round, given, into, c);
        } else {
            co_await ctx.send_recv(partner, given, partner, into, first_step + round);
            op.combine(c.left, c.right, c.out, c.count);
        }
        source = result;
        lo = keep;
    }
}

// The one round of the direct scan and exscan: a receive from every lower
// rank into its slot, and `own` to every higher rank, awaited at the call's
// end. Rank r receives r vectors and sends p - 1 - r. Once done() has been
// awaited, fold_lower(out) writes x0 op ... op x(r-1) to out (r >= 1).
class prefix_round {
public:
    prefix_round(const call_context& ctx, const reduction_op& op, std::size_t count,
                 std::span<const std::byte> own)
        : op_(op), count_(count), bytes_(count * op.element_size), rank_(ctx.rank()),
          lower_(static_cast<std::size_t>(rank_) * bytes_) {
        requests_.reserve(static_cast<std::size_t>(ctx.size() - 1));
        for (int source = 0; source < rank_; ++source)
            requests_.push_back(ctx.irecv(source, 0, slot(source), receive_use::combined_at_once));
        for (int dest = rank_ + 1; dest < ctx.size(); ++dest)
            keep_pending(requests_, ctx.start_send(dest, 0, own, send_awaited::at_end));
    }
    prefix_round(const prefix_round&) = delete; // the receives write into it
    prefix_round& operator=(const prefix_round&) = delete;

    task<void> done() const { return wait_all(requests_); }

    // out may be the first slot's (slot(0).data()); with one lower rank its
    // vector is copied.
    void fold_lower(std::byte* out) {
        if (rank_ == 1)
            copy_unless_same(out, slot(0).data(), bytes_);
        else
            fold_in_rank_order(
                op_, rank_, [&](int rank) { return slot(rank).data(); }, out, count_);
    }
    std::span<std::byte> slot(int rank) { return blocks_of(lower_.span(), bytes_, rank); }

private:
    const reduction_op& op_;
    std::size_t count_, bytes_;
    int rank_;
    scratch<> lower_;
    std::vector<request> requests_;
};

// The root's fan-in in the linear algorithms: a receive from every other
// rank into slot(peer), all posted at once so that no message waits
// unexpected. Await the requests with wait_all.
template <typename Slot>
std::vector<request> post_receives_at_root(const call_context& ctx, int root, std::uint64_t tag,
                                           Slot slot, receive_use use = receive_use::kept) {
    std::vector<request> requests;
    requests.reserve(static_cast<std::size_t>(ctx.size() - 1));
    for (int peer = 0; peer < ctx.size(); ++peer)
        if (peer != root) requests.push_back(ctx.irecv(peer, tag, slot(peer), use));
    return requests;
}

// The root's half of a linear reduction (reduce linear, and rank 0's in
// all_reduce and reduce_scatter linear): receives every other rank's vector
// of `count` elements, all posted at once so that none waits unexpected
// (over TCP one of 64-128 KiB that arrives before its receive is copied
// twice; docs/performance.md, seventieth session), and writes x0 op x1 op
// ... op x(p-1) to `out`, x(root) being `own`. `out` may be `own`.
inline task<void> fold_every_vector_at_root(const call_context& ctx, int root, std::uint64_t tag,
                                            const reduction_op& op, std::size_t count,
                                            const std::byte* own, std::byte* out) {
    const int p = ctx.size();
    const std::size_t bytes = count * op.element_size;
    // The fold writes `out` from its first combination on: a root past rank
    // 1 whose own vector is there keeps a copy of it in one more slot.
    const bool keep_own = root >= 2 && overlapping({out, bytes}, {own, bytes});
    scratch<> vectors(static_cast<std::size_t>(keep_own ? p : p - 1) * bytes);
    const auto slot = [&](int rank) {
        return blocks_of(vectors.span(), bytes, rank < root ? rank : rank - 1);
    };
    auto requests = post_receives_at_root(ctx, root, tag, slot, receive_use::combined_at_once);
    if (keep_own) {
        const auto kept = blocks_of(vectors.span(), bytes, p - 1);
        copy_bytes(kept.data(), own, bytes);
        own = kept.data();
    }
    co_await wait_all(requests);
    fold_in_rank_order(
        op, p, [&](int rank) { return rank == root ? own : slot(rank).data(); }, out, count);
}

// Rank 0's fan-out in the linear algorithms: part(peer) to every other rank
// at once (an empty part is not sent), all awaited together.
template <typename Part>
task<void> send_from_rank_zero(const call_context& ctx, std::uint64_t tag, Part part) {
    std::vector<request> requests;
    requests.reserve(static_cast<std::size_t>(ctx.size() - 1));
    for (int peer = 1; peer < ctx.size(); ++peer)
        if (const std::span<const std::byte> piece = part(peer); !piece.empty())
            keep_pending(requests, ctx.start_send(peer, tag, piece, send_awaited::at_end));
    co_await wait_all(requests);
}

// The recursive-doubling rounds scan and exscan share: in round k rank r
// exchanges with r xor 2^k `partial`, the reduction over its aligned block of
// 2^k ranks (initially its own data). A reduction from a lower partner is that
// of the block just below: it goes to from_lower(incoming), then on the left
// of partial; one from a higher partner only extends partial, on the right.
template <typename FromLower>
task<void> prefix_doubling(const call_context& ctx, const reduction_op& op, std::size_t count,
                           std::span<const std::byte> own, FromLower from_lower) {
    const int p = ctx.size();
    const int r = ctx.rank();
    const auto bytes = count * op.element_size;
    scratch<> partial(bytes), incoming(bytes);
    copy_bytes(partial.data(), own.data(), bytes);
    std::uint64_t round = 0;
    for (int mask = 1; mask < p; mask <<= 1, ++round) {
        const int partner = r ^ mask;
        if (partner >= p) continue;
        co_await ctx.send_recv(partner, partial.span(), partner, incoming.span(), round);
        if (partner < r) {
            op.combine(incoming.data(), partial.data(), partial.data(), count);
            from_lower(incoming.data());
        } else {
            op.combine(partial.data(), incoming.data(), partial.data(), count);
        }
    }
}

// What the reduce_scatter algorithms that gather every contribution to
// their own block share (pairwise, direct): where each rank's block lies in
// send, a slot per rank for its contribution to this rank's block, and the
// rank-ordered fold of them into recv.
class own_block_contributions {
public:
    own_block_contributions(const call_context& ctx, const reduce_scatter_args& a)
        : args_(a), size_(ctx.size()), rank_(ctx.rank()),
          offset_(
              prefix_offsets(a.counts.first(static_cast<std::size_t>(size_)), a.op->element_size)),
          count_(a.counts[static_cast<std::size_t>(rank_)]), bytes_(count_ * a.op->element_size),
          slots_(static_cast<std::size_t>(size_) * bytes_) {}
    own_block_contributions(const own_block_contributions&) = delete; // slot() points into it
    own_block_contributions& operator=(const own_block_contributions&) = delete;

    // Rank b's block of send: what this rank contributes to b's result.
    std::span<const std::byte> block_of(int b) const {
        return args_.send.subspan(offset_[b], offset_[b + 1] - offset_[b]);
    }
    // Where rank i's contribution to this rank's block is received.
    std::span<std::byte> slot(int i) { return blocks_of(slots_.span(), bytes_, i); }
    std::size_t bytes() const noexcept { return bytes_; }

    // reduce_scatter's `direct` round at `step`: every contribution to this
    // rank's block into its slot, and this rank's contribution to block j to
    // rank j, all at once. Await the requests (sends included, so send may be
    // overwritten afterwards) with wait_all, then fold().
    std::vector<request> post_round(const call_context& ctx, std::uint64_t step) {
        return post_to_every_rank(
            ctx, step, [&](int source) { return slot(source); },
            [&](int dest) { return block_of(dest); }, receive_use::combined_at_once);
    }

    // recv = x0 op x1 op ... op x(p-1) once every other slot is filled. The
    // own contribution is read from send, or from a copy where recv overlaps
    // it: the fold writes recv from its first combine.
    void fold() {
        if (bytes_ == 0) return;
        const std::byte* own = block_of(rank_).data();
        if (overlapping(args_.send, args_.recv.first(bytes_))) {
            copy_bytes(slot(rank_).data(), own, bytes_);
            own = slot(rank_).data();
        }
        fold_in_rank_order(
            *args_.op, size_, [&](int i) { return i == rank_ ? own : slot(i).data(); },
            args_.recv.data(), count_);
    }

private:
    const reduce_scatter_args& args_;
    int size_, rank_;
    detail::per_rank_sizes offset_;
    std::size_t count_, bytes_;
    scratch<> slots_;
};

} // namespace tutti::algorithms_detail
