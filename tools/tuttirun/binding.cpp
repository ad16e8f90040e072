#include "binding.hpp"

#include <core/error.hpp>

#include <cerrno>
#include <cstdlib>

namespace tuttirun {

core_binder::core_binder() {
    if (hwloc_topology_init(&topology_) != 0 || hwloc_topology_load(topology_) != 0) {
        if (topology_ != nullptr) hwloc_topology_destroy(topology_);
        throw tutti::error(tutti::errc::invalid_argument,
                           "--bind core: hwloc could not read this machine's topology");
    }
    // hwloc leaves out what a cgroup forbids, not what this process's own
    // affinity does (taskset, a scheduler's binding of the launcher): the
    // ranks go on the CPUs tuttirun itself was given.
    if (hwloc_bitmap_t allowed = hwloc_bitmap_alloc()) {
        if (hwloc_get_cpubind(topology_, allowed, HWLOC_CPUBIND_PROCESS) == 0 &&
            !hwloc_bitmap_iszero(allowed))
            hwloc_topology_restrict(topology_, allowed, 0);
        hwloc_bitmap_free(allowed);
    }
    cores_ = hwloc_get_nbobjs_by_type(topology_, HWLOC_OBJ_CORE);
    if (cores_ <= 0) {
        hwloc_topology_destroy(topology_);
        throw tutti::error(tutti::errc::invalid_argument,
                           "--bind core: hwloc finds no core on this machine");
    }
}

core_binder::~core_binder() {
    hwloc_topology_destroy(topology_);
}

int core_binder::bind_process(int core) const noexcept {
    hwloc_obj_t obj = hwloc_get_obj_by_type(topology_, HWLOC_OBJ_CORE, static_cast<unsigned>(core));
    if (obj == nullptr) return EINVAL;
    if (hwloc_set_cpubind(topology_, obj->cpuset, HWLOC_CPUBIND_PROCESS) != 0)
        return errno != 0 ? errno : EINVAL;
    return 0;
}

std::string core_binder::cpu_list(int core) const {
    hwloc_obj_t obj = hwloc_get_obj_by_type(topology_, HWLOC_OBJ_CORE, static_cast<unsigned>(core));
    if (obj == nullptr) return {};
    char* text = nullptr;
    if (hwloc_bitmap_list_asprintf(&text, obj->cpuset) < 0) return {};
    std::string list(text);
    std::free(text);
    return list;
}

} // namespace tuttirun
