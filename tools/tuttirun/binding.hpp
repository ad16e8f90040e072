// --bind core: rank r runs on core r mod (cores of this machine), as hwloc
// sees the machine (HWLOC_OBJ_CORE, restricted to the CPUs tuttirun may run
// on: its cgroup's and its own affinity's).
#pragma once

#include <hwloc.h>

#include <string>

namespace tuttirun {

class core_binder {
public:
    // Loads this machine's topology; throws tutti::error when hwloc cannot,
    // or when it finds no core.
    core_binder();
    ~core_binder();
    core_binder(const core_binder&) = delete;
    core_binder& operator=(const core_binder&) = delete;

    int core_count() const noexcept { return cores_; }
    int core_for_rank(int rank) const noexcept { return rank % cores_; }

    // Binds the calling process (all its threads) to a core. Meant for the
    // child between fork and exec, where it runs single-threaded. Returns 0,
    // or the errno hwloc left.
    int bind_process(int core) const noexcept;

    // The core's CPUs as hwloc prints a list ("0,2-3"), for messages and tests.
    std::string cpu_list(int core) const;

private:
    hwloc_topology_t topology_ = nullptr;
    int cores_ = 0;
};

} // namespace tuttirun
