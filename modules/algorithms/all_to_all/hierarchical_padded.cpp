// all_to_all: hierarchical_padded
//
// Collective:   all_to_all
// Kind:         hierarchical composition
// Restrictions: hierarchy_available
// Parameters:   max_representative_bytes (the hierarchy's; default 256 MiB)
//
// The HPX design's v1 (seed 000, §7): the 3-phase all_to_all of
// modules/hierarchy/all_to_all.hpp with every sub-matrix among
// representatives padded to g_max x g_max blocks, so that a flat all_to_all
// carries them; receivers crop the padding by the source group's real size.
// The padding costs g_max^2 - |G_s| |G_d| blocks per pair of groups (none
// when the groups are balanced); the ragged layout, "hierarchical", avoids it.

#include "algorithms/catalog.hpp"
#include "hierarchy/all_to_all.hpp"

namespace tutti {
namespace {

const bool registered = register_algorithm<all_to_all_args>({
    .info = {.name = "hierarchical_padded",
             .form = algorithm_kind::hierarchical,
             .restrictions = {restriction::hierarchy_available},
             .parameters = {{.name = "max_representative_bytes",
                             .default_value =
                                 static_cast<std::int64_t>(default_max_representative_bytes),
                             .meaning = "above this peak at a representative, about "
                                        "(2/arity + 1/arity^2) N^2 m bytes, run the flat "
                                        "algorithm (set with the hierarchy's options)"}},
             .summary = "gather rows in each group, all_to_all of padded sub-matrices among "
                        "representatives, scatter columns in each group"},
    .run =
        [](const call_context& ctx, const all_to_all_args& a) {
            return hierarchy_detail::three_phase_all_to_all(ctx, a,
                                                            hierarchy_detail::block_layout::padded);
        },
});

} // namespace
} // namespace tutti
