// Where this process runs, as far as sharing cores with the job's other ranks
// goes: its machine and the CPUs it may run on, and how many cores the job's
// ranks on this machine may run on between them.
//
// A process alone cannot tell the last: ranks that may each run on one CPU
// are either bound to a core each by their launcher, or all confined to the
// same CPU (taskset, a container's cpuset, a scheduler's allocation), and a
// rank that spins while its peer needs that CPU holds it until the scheduler's
// tick. So the job's ranks tell each other (runtime/job.cpp, at joining): the
// union of the CPUs of the ranks with this machine's id is what
// ranks_outnumber_cores and ranks_per_core (core/progress.hpp) weigh.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tutti {

// Which machine this process runs on: the kernel's boot id, the same in every
// network namespace and container of one machine (which host names and
// TUTTI_NODE need not be); the host name where the kernel does not say.
std::string this_machine_id();

// This process's machine id and the CPUs it may run on, as one rank's blob of
// the exchange below.
std::vector<std::byte> placement_blob();

// How many CPUs the ranks whose blobs (placement_blob, in rank order) name
// `machine` may run on between them: their CPUs' union; 0 if none of them
// could say. Throws tutti::error (errc::invalid_argument) naming the rank
// whose blob is malformed.
int cores_of_machine(std::span<const std::vector<std::byte>> blobs, std::string_view machine);

} // namespace tutti
