// The job secret that every rank of a job proves it knows before its TCP
// connections are trusted (TUTTI_JOB_SECRET, see transports/tcp/handshake.hpp).
// The launcher creates it: a tuttirun that starts a whole job makes a new one;
// the tuttiruns that start parts of one job on several hosts share one through
// a file (the first to need it creates it) or the environment.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace tuttirun {

// The secret as 64 hex digits: read from secret_file, or created there (mode
// 0600, atomically, so tuttiruns racing to create it agree) when it does not
// exist; else TUTTI_JOB_SECRET from the environment (`from_environment`);
// else a new one, unless `partial` (part of a job), which is then an error:
// the other parts could not know it. Throws tutti::error
// (errc::invalid_argument) for a malformed secret or a file others may read,
// without ever quoting the secret.
std::string job_secret_for(const std::optional<std::filesystem::path>& secret_file,
                           const std::optional<std::string>& from_environment, bool partial);

} // namespace tuttirun
