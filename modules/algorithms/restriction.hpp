// Restrictions are data: each algorithm lists the conditions it needs, and
// checking one against a call gives "holds" or the reason it fails, so a
// selection can walk on to the next candidate and say why.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "core/collective.hpp"

namespace tutti {

enum class restriction {
    power_of_two,        // communicator size is a power of two
    commutative_op,      // the reduction is commutative
    builtin_op,          // the reduction is one of tutti's own
    in_place,            // send and receive buffers are the same memory
    not_in_place,        // they are not
    equal_counts,        // every rank contributes the same number of elements
    count_at_least_size, // at least one element per rank (to split the data)
};

std::string_view to_string(restriction r) noexcept;

// What selection and restriction checks know of a call; the same on every
// rank (nothing here may depend on which rank asks).
struct call_signature {
    collective kind = collective::barrier;
    int comm_size = 1;
    std::size_t bytes = 0; // the largest buffer of the call on any rank, as declared
    std::size_t count = 0; // elements per rank for reductions
    bool has_op = false;
    bool commutative = true;
    bool builtin_op = true;
    bool in_place = false;
    bool equal_counts = true;
};

// nullopt when the restriction holds, otherwise the reason it fails.
std::optional<std::string> check(restriction r, const call_signature& call);

} // namespace tutti
