// tutti's one error type. Every failure a caller can see at run time is a
// tutti::error carrying a code (what kind of problem) and a message that names
// the problem in the caller's terms (which collective, which count, which
// rank). "This algorithm does not apply here" is not an error but a value
// (see algorithms/restriction.hpp); it becomes an error only when a caller
// forced that algorithm. The codes are documented in docs/errors.md.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace tutti {

enum class errc {
    invalid_count,         // element counts that cannot be right (not a multiple of size, ...)
    invalid_root,          // root rank outside the communicator
    invalid_generation,    // generation 0
    reused_generation,     // a generation already used on this communicator
    unknown_algorithm,     // no algorithm of that name for that collective
    restriction_violated,  // a named algorithm whose restriction fails here
    invalid_argument,      // any other malformed argument
    mismatched_collective, // ranks called different collectives for one generation
    message_size_mismatch, // ranks disagree on how much data a step carries
    peer_lost,             // a peer failed or vanished while we waited for it
    deadlock,              // the in-process world ran out of work with ranks still waiting
    serialization_failure, // Boost.Serialization could not read or write a payload
    timeout,               // a wait ran past its limit
    resource_unavailable,  // the system refused memory or a descriptor tutti asked for
};

std::string_view to_string(errc code) noexcept;

class error : public std::runtime_error {
public:
    error(errc code, const std::string& message);
    errc code() const noexcept { return code_; }

private:
    errc code_;
};

} // namespace tutti
