#include "hierarchy/all_to_all.hpp"

#include <algorithm>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "core/scratch.hpp"
#include "hierarchy/compose.hpp"

namespace tutti::hierarchy_detail {

namespace {
std::size_t as_size(int v) {
    return static_cast<std::size_t>(v);
}
} // namespace

std::size_t representative_peak_bytes(const hierarchy& h, std::size_t block, block_layout layout) {
    const auto n = as_size(h.size());
    const auto largest = as_size(h.largest_group());
    // Rows with the blocks to send, then the blocks received with the
    // columns: two buffers of g_max N blocks (the padded exchange carries
    // groups g_max^2, the same when groups are balanced), plus the seed's
    // g_max^2 for one sub-matrix in flight: (2/arity + 1/arity^2) N^2 m.
    const auto exchanged = layout == block_layout::padded
                               ? std::max(largest * n, largest * largest * as_size(h.group_count()))
                               : largest * n;
    return (2 * exchanged + largest * largest) * block;
}

task<void> three_phase_all_to_all(const call_context& ctx, const all_to_all_args& a,
                                  block_layout layout) {
    const auto& h = hierarchy_of(ctx);
    const auto n = as_size(ctx.size());
    if (a.send.size() % n != 0 || a.recv.size() != a.send.size())
        throw error(errc::invalid_count,
                    fmt::format("all_to_all: each rank sends one block per rank and receives as "
                                "much; {} bytes to send and {} to receive cannot be {} equal "
                                "blocks",
                                a.send.size(), a.recv.size(), n));
    const std::size_t block = a.send.size() / n;
    if (delegate_to_flat(ctx, h) ||
        representative_peak_bytes(h, block, layout) > h.max_representative_bytes()) {
        co_await run_flat(ctx, a);
        co_return;
    }
    if (block == 0) co_return;
    const auto s = slots_for(ctx.generation());
    const auto groups = as_size(h.group_count());
    const auto largest = as_size(h.largest_group());
    const auto own = as_size(h.group_size(h.my_group()));
    const auto row = n * block;
    const bool rep = h.is_representative();

    // Phase 1: my group's rows, in the group's member order. Temporaries
    // come from the scratch cache (a fresh vector per call faults its pages
    // in every time); rows and outgoing go back to it as soon as they are
    // spent, which keeps the peak of representative_peak_bytes and lets
    // incoming take their blocks.
    std::optional<scratch<>> rows(std::in_place, rep ? own * row : 0);
    co_await sub_step(h.group(), gather_args{a.send, rows->span(), 0}, s.first);

    scratch<> columns(rep ? own * row : 0);
    if (rep) {
        // Phase 2: the sub-matrix for group d is, row x of mine by column y
        // of d, block (x * |G_d| + y), padded or not.
        std::vector<std::size_t> send_counts(groups), send_offsets(groups);
        std::vector<std::size_t> recv_counts(groups), recv_offsets(groups);
        std::size_t send_total = 0, recv_total = 0;
        for (std::size_t g = 0; g < groups; ++g) {
            const auto size = as_size(h.group_size(static_cast<int>(g)));
            send_counts[g] =
                (layout == block_layout::padded ? largest * largest : own * size) * block;
            recv_counts[g] =
                (layout == block_layout::padded ? largest * largest : size * own) * block;
            send_offsets[g] = send_total;
            recv_offsets[g] = recv_total;
            send_total += send_counts[g];
            recv_total += recv_counts[g];
        }
        std::optional<scratch<>> outgoing(std::in_place, send_total);
        for (std::size_t d = 0; d < groups; ++d) {
            const auto& members = h.groups()[d];
            for (std::size_t x = 0; x < own; ++x)
                for (std::size_t y = 0; y < members.size(); ++y) {
                    const auto from = block_at(rows->span(), block, x * n + as_size(members[y]));
                    std::copy(from.begin(), from.end(),
                              outgoing->data() + send_offsets[d] +
                                  (x * members.size() + y) * block);
                }
        }
        rows.reset();
        scratch<> incoming(recv_total);
        if (layout == block_layout::padded) {
            co_await sub_step(h.leaders(), all_to_all_args{outgoing->span(), incoming.span()},
                              s.middle);
        } else {
            co_await sub_step(h.leaders(),
                              all_to_allv_args{outgoing->span(), send_counts, send_offsets,
                                               incoming.span(), recv_counts, recv_offsets},
                              s.middle);
        }
        outgoing.reset();
        // Column y of mine gets, from row x of source group s, the block at
        // (x * |G_me| + y) of s's sub-matrix, cropped to |G_s| rows.
        for (std::size_t src = 0; src < groups; ++src) {
            const auto& members = h.groups()[src];
            for (std::size_t x = 0; x < members.size(); ++x)
                for (std::size_t y = 0; y < own; ++y) {
                    const auto from = incoming.data() + recv_offsets[src] + (x * own + y) * block;
                    std::copy(from, from + block,
                              block_at(columns.span(), block, y * n + as_size(members[x])).begin());
                }
        }
    }
    // Phase 3: each member's column, in the group's member order.
    co_await sub_step(h.group(), scatter_args{columns.span(), a.recv, 0}, s.last);
}

} // namespace tutti::hierarchy_detail
