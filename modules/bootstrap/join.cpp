#include "bootstrap/join.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

#ifdef TUTTI_HAVE_PMIX
#include "bootstrap/pmix_bootstrap.hpp"
#endif

namespace tutti {

bool pmix_supported() noexcept {
#ifdef TUTTI_HAVE_PMIX
    return true;
#else
    return false;
#endif
}

std::unique_ptr<bootstrap> join_job() {
    return join_job(process_env);
}

std::unique_ptr<bootstrap> join_job(const env_lookup& lookup) {
    const bool under_pmix = lookup("PMIX_RANK") || lookup("PMIX_NAMESPACE");
#ifdef TUTTI_HAVE_PMIX
    if (under_pmix) {
        return std::make_unique<pmix_bootstrap>(bootstrap_timeout_from(lookup));
    }
#endif
    if (under_pmix && !lookup("TUTTI_RANK"))
        throw error(errc::invalid_argument,
                    "started by a PMIx launcher (PMIX_RANK is set), but this tutti was built "
                    "without PMIx support: install libpmix-dev and rebuild, or start the "
                    "program with `tuttirun -n N program`");
    return std::make_unique<env_bootstrap>(env_config_from(lookup));
}

} // namespace tutti
