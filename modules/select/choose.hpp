// From a selection (select/selection.hpp) to the typed algorithm a dispatch
// runs: the decision is made on the call's signature alone, then the
// algorithm of that name is looked up for the collective's argument type.
#pragma once

#include <string_view>

#include "algorithms/catalog.hpp"
#include "select/selection.hpp"

namespace tutti {

// The algorithm for a call as `request` asks (see select_algorithm).
template <class Args>
const algorithm<Args>& choose(const call_signature& call, const selection_request& request,
                              selection_explanation* why = nullptr);

// The named algorithm (checked against its restrictions; errors as
// select_algorithm), or for an empty name or "auto" what the trees choose.
// As a composition's sub-call: the environment's overrides do not apply.
template <class Args>
const algorithm<Args>& choose(const call_signature& call, std::string_view forced);

} // namespace tutti
