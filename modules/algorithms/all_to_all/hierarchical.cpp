// all_to_all: hierarchical (ragged blocks)
//
// Collective:   all_to_all
// Kind:         hierarchical composition
// Restrictions: hierarchy_available
// Parameters:   max_representative_bytes (the hierarchy's; default 256 MiB)
//
// The 3-phase all_to_all (modules/hierarchy/all_to_all.hpp): gather the
// group's rows at its representative, exchange only the real |G_s| x |G_d|
// sub-matrices among representatives with all_to_allv, scatter the columns
// down. Against a flat all_to_all's N(N-1) messages, each rank sends one
// message up and receives one down, and the representatives exchange
// groups^2 sub-matrices. A representative whose peak would pass the
// hierarchy's max_representative_bytes runs the flat algorithm instead.

#include "algorithms/catalog.hpp"
#include "hierarchy/all_to_all.hpp"

namespace tutti {
namespace {

const bool registered = register_algorithm<all_to_all_args>({
    .info = {.name = "hierarchical",
             .form = algorithm_kind::hierarchical,
             .restrictions = {restriction::hierarchy_available},
             .parameters = {{.name = "max_representative_bytes",
                             .default_value =
                                 static_cast<std::int64_t>(default_max_representative_bytes),
                             .meaning = "above this peak at a representative, about "
                                        "(2 g N + g^2) m bytes, run the flat algorithm (set "
                                        "with the hierarchy's options)"}},
             .summary = "gather rows in each group, all_to_allv of real sub-matrices among "
                        "representatives, scatter columns in each group"},
    .run =
        [](const call_context& ctx, const all_to_all_args& a) {
            return hierarchy_detail::three_phase_all_to_all(ctx, a,
                                                            hierarchy_detail::block_layout::ragged);
        },
});

} // namespace
} // namespace tutti
