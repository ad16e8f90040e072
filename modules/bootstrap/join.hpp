// Finding out how this process was launched, and joining its job that way.
#pragma once

#include <memory>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/env_bootstrap.hpp"

namespace tutti {

// Whether this build can join jobs through PMIx (libpmix was found).
bool pmix_supported() noexcept;

// PMIx when a PMIx launcher started us (PMIX_RANK or PMIX_NAMESPACE is set)
// and PMIx support was built; otherwise the environment bootstrap
// (TUTTI_RANK, TUTTI_SIZE, TUTTI_RENDEZVOUS); otherwise a tutti::error
// (errc::invalid_argument) that says how to launch.
std::unique_ptr<bootstrap> join_job();
std::unique_ptr<bootstrap> join_job(const env_lookup& lookup);

} // namespace tutti
