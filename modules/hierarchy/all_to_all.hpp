// The 3-phase hierarchical all_to_all of the HPX design (seed 000, after
// Träff and Rougier 2014 and Chochia et al. 2022), shared by its two block
// layouts in modules/algorithms/all_to_all/hierarchical*.cpp:
//
//   1. (slot 3k-2) each group gathers its members' rows at its
//      representative: g rows of N blocks;
//   2. (slot 3k-1) the representatives exchange, for every pair of groups
//      (s, d), the |G_s| x |G_d| blocks rows of s send to columns of d;
//   3. (slot 3k) each representative scatters the columns down its group.
//
// Padded (the seed's v1): every pair's sub-matrix is padded to the largest
// group's g_max x g_max blocks and travels through a flat all_to_all.
// Ragged: only the real |G_s| x |G_d| blocks travel, through all_to_allv.
// Receivers crop by the source group's real size from the partition, never
// by assuming balanced groups, and place blocks by the groups' member lists,
// so groups need not be consecutive ranks.
//
// Memory: a representative holds about (2 g_max N + g_max^2) m bytes at
// once (m the block size), the seed's (2/arity + 1/arity^2) N^2 m for
// balanced groups. Above the hierarchy's max_representative_bytes the call
// runs the flat algorithm instead.
#pragma once

#include <cstddef>

#include "algorithms/args.hpp"
#include "core/call_context.hpp"
#include "core/task.hpp"
#include "hierarchy/hierarchy.hpp"

namespace tutti::hierarchy_detail {

enum class block_layout { padded, ragged };

// The bytes a representative holds at its peak for blocks of `block` bytes.
std::size_t representative_peak_bytes(const hierarchy& h, std::size_t block, block_layout layout);

task<void> three_phase_all_to_all(const call_context& ctx, const all_to_all_args& a,
                                  block_layout layout);

} // namespace tutti::hierarchy_detail
