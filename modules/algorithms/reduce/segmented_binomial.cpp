// reduce: segmented binomial tree
//
// Collective:   reduce
// Kind:         pure
// Restrictions: none (any communicator size and root; non-commutative
//               operations give the rank-ordered result)
// Parameters:   segment length: at most the transport's segment_bytes
//               capability (a shared-memory cell's payload, else 32 KiB),
//               whole elements, equal segments, at least least_segments (4)
//               of at least least_segment_bytes (4 KiB) where the vector
//               allows; longer when a vector would need more segments than a
//               call has steps. segments_ahead (8 receives posted per child)
//
// The binomial tree of `binomial`, with the vector cut into segments that
// travel one after another: a rank combines segment k of its children as
// soon as each arrives and sends the result on to its parent, while segment
// k + 1 is still on its way. The whole-vector tree makes a parent wait for
// the whole message before it combines anything; here the transfer of one
// segment overlaps the combining of the one before, so a vector costs about
// the longer of the two instead of their sum, plus one segment. Over shared
// memory a segment fills one cell, which its receiver copies while its
// sender writes the next. (Open MPI's tuned reduce segments its trees the
// same way.)
//
// Children are combined in the binomial's order (the nearest first), so a
// rank's partial result covers a contiguous range of ranks starting at
// itself, and a non-commutative operation keeps the rank order: as in
// `binomial`, its tree ends at rank 0, which sends the result to the root.

#include <algorithm>
#include <deque>
#include <exception>
#include <vector>

#include "algorithms/catalog.hpp"
#include "algorithms/common.hpp"
#include "core/progress.hpp"

namespace tutti {
namespace {

using namespace algorithms_detail;

// Where the transport has no unit of its own.
constexpr std::size_t default_segment_bytes = 32 * 1024;
// A vector is cut into at least this many segments where each can still be
// least_segment_bytes long: at 2 ranks over shared memory 16 KiB took 2.4 us
// in 4 KiB segments, 3.0 in one piece, and 128 KiB 15.2 in 16 KiB segments,
// 16.9 in one piece (docs/performance.md, seventeenth session). Four, not
// eight: a segment costs its receiver a fixed part too, and 128 and 192 KiB
// took 13.9 and 16.9 us in 5 and 7 segments of a cell or nearly, 15.2 and
// 19.7 in 8 (nineteenth session; 32-64 KiB the same either way).
constexpr std::size_t least_segments = 4;
constexpr std::size_t least_segment_bytes = 4 * 1024;
// Receives posted ahead per child: enough to keep a link busy while this
// rank combines, few enough to bound the scratch (segments_ahead segments
// per child).
constexpr std::size_t segments_ahead = 8;

task<void> segmented_binomial(const call_context& ctx, const reduce_args& a) {
    const int p = ctx.size();
    const int r = ctx.rank();
    if (reduce_without_messages(a, p)) co_return;
    const std::size_t element = a.op->element_size;
    const auto bytes = a.count * element;
    const bool at_root = r == a.root;
    const reduce_tree tree(ctx, a);
    const int top = tree.top;
    const int vr = tree.vr;

    // Segments of whole elements and of equal length (a short last one would
    // leave the pipeline idle): as many as the transport's unit needs, but at
    // least least_segments of at least least_segment_bytes each, since a
    // short vector gains from overlap too. One step per segment (the
    // result's hop to a root other than rank 0 takes the step after the
    // last).
    const auto& t = ctx.comm().transport();
    const std::size_t unit = t.capabilities().segment_bytes;
    const std::size_t per_unit =
        std::max((unit ? unit : default_segment_bytes) / element, std::size_t{1});
    // Where ranks share cores a message may cost its receiver a context
    // switch, and only the unit's segments paid (4 ranks on 2 cores, 64 KiB:
    // 8 KiB segments took 58.7 us against the whole vector's 37.3;
    // cell-sized ones 24.6 against 32.3 in another run).
    const std::size_t least =
        ranks_outnumber_cores(t.ranks_on_this_machine())
            ? 1
            : std::min(least_segments, std::max(bytes / least_segment_bytes, std::size_t{1}));
    const std::size_t wanted =
        std::min(std::max((a.count + per_unit - 1) / per_unit, least), call_context::max_steps - 1);
    const std::size_t per_segment = (a.count + wanted - 1) / wanted;
    const std::size_t segments = (a.count + per_segment - 1) / per_segment;
    const auto segment_of = [&](auto whole, std::size_t k) {
        const std::size_t first = k * per_segment;
        return whole.subspan(first * element, std::min(per_segment, a.count - first) * element);
    };

    // Children nearest first (vr + 1, vr + 2, vr + 4, ...), then the parent.
    const int extent = binomial_extent(vr, p);
    std::vector<int> children;
    for (int mask = 1; mask < extent && vr + mask < p; mask *= 2)
        children.push_back(tree.actual(vr + mask));
    const bool has_parent = vr != 0;
    const int parent = has_parent ? tree.actual(vr - extent) : -1;

    // A ring of segments_ahead segments per child for what arrives, and the
    // partial result: the root's recv, else a buffer of ours that the sends
    // to the parent read until the call ends. A leaf sends its own data.
    const std::size_t slot_bytes = per_segment * element;
    const std::size_t ahead = std::min(segments_ahead, segments);
    scratch<> incoming(children.size() * ahead * slot_bytes);
    const bool keeps_partial = !children.empty() && !(at_root && top == a.root);
    scratch<> partial(keeps_partial ? bytes : 0);
    const std::span<std::byte> result = children.empty()           ? std::span<std::byte>()
                                        : at_root && top == a.root ? a.recv.first(bytes)
                                                                   : partial.span();
    const auto slot = [&](std::size_t child, std::size_t k) {
        return incoming.span().subspan((child * ahead + k % ahead) * slot_bytes,
                                       segment_of(a.send, k).size());
    };

    // Receives in flight, per child in segment order.
    std::vector<std::deque<request>> arriving(children.size());
    std::vector<request> sends;
    std::size_t posted = 0;
    std::exception_ptr failed;
    for (std::size_t k = 0; k < segments && !failed; ++k) {
        for (; posted < segments && posted < k + ahead; ++posted)
            for (std::size_t c = 0; c < children.size(); ++c)
                arriving[c].push_back(ctx.irecv(children[c], posted, slot(c, posted)));
        std::span<const std::byte> mine = segment_of(a.send, k);
        for (std::size_t c = 0; c < children.size(); ++c) {
            const request arrived = arriving[c].front();
            try {
                if (arrived->must_wait()) co_await arrived->wait();
            } catch (...) {
                failed = std::current_exception();
                break;
            }
            arriving[c].pop_front();
            const auto out = segment_of(result, k);
            a.op->combine(mine.data(), slot(c, k).data(), out.data(), out.size() / element);
            mine = out;
        }
        // The segment is final here; nothing writes it again before the end.
        if (!failed && has_parent)
            keep_pending(sends, ctx.start_send(parent, k, mine, send_awaited::at_end));
    }
    if (failed) {
        std::vector<request> left;
        for (auto& queue : arriving)
            left.insert(left.end(), queue.begin(), queue.end());
        co_await ctx.abandon(left, sends);
        std::rethrow_exception(failed);
    }
    if (!sends.empty()) co_await wait_all(sends);

    // Only the non-commutative case ends away from the root: rank 0 holds
    // the result (it has a child, as p > 1).
    co_await result_to_root(ctx, a, tree, result, segments);
}

const bool registered = register_algorithm<reduce_args>({
    .info = {.name = "segmented_binomial",
             .form = algorithm_kind::pure,
             .summary = "binomial tree in segments (a shared-memory cell), combining one "
                        "while the next arrives; any op, keeps rank order"},
    .run = segmented_binomial,
});

} // namespace
} // namespace tutti
