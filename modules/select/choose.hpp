// Picks the algorithm a call runs: the one the caller named (checked against
// its restrictions), or the first of the collective's default preference
// list whose restrictions hold. The full JSON decision tree is a later layer
// over the same catalog; this is its simple, always-valid baseline.
#pragma once

#include <string_view>
#include <vector>

#include "algorithms/catalog.hpp"

namespace tutti {

// The default preference for a call, best first. Names only; the caller
// skips names whose restrictions fail.
std::vector<std::string_view> default_preference(const call_signature& call);

// Throws tutti::error: unknown_algorithm when `forced` names no algorithm of
// the collective, restriction_violated when its restrictions fail here.
// An empty `forced` or "auto" means the default choice.
template <class Args>
const algorithm<Args>& choose(const call_signature& call, std::string_view forced);

} // namespace tutti
