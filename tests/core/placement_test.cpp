// The cores a job's ranks on one machine share (core/placement.hpp): the union
// of the CPUs of the ranks that name the machine, whatever the others name,
// and a clear error for a rank whose placement is malformed.
#include <sched.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/placement.hpp"

#include "support/harness.hpp"

using namespace tutti;

namespace {

// A rank's blob as placement_blob lays it out, for a machine and CPUs given.
std::vector<std::byte> blob_of(const std::string& machine, std::initializer_list<int> cpus) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu : cpus)
        CPU_SET(cpu, &set);
    std::vector<std::byte> blob(machine.size() + 1 + sizeof set);
    std::memcpy(blob.data(), machine.data(), machine.size());
    std::memcpy(blob.data() + machine.size() + 1, &set, sizeof set);
    return blob;
}

} // namespace

TEST_CASE("placement: ranks confined to one CPU share one core, ranks bound apart do not") {
    const std::vector<std::vector<std::byte>> confined{blob_of("m", {0}), blob_of("m", {0})};
    CHECK(cores_of_machine(confined, "m") == 1);
    const std::vector<std::vector<std::byte>> bound{blob_of("m", {0}), blob_of("m", {1}),
                                                    blob_of("m", {2})};
    CHECK(cores_of_machine(bound, "m") == 3);
    const std::vector<std::vector<std::byte>> overlapping{blob_of("m", {0, 1}),
                                                          blob_of("m", {1, 2, 3})};
    CHECK(cores_of_machine(overlapping, "m") == 4);
}

TEST_CASE("placement: only the ranks that name this machine count") {
    // "m" is a prefix of "m2": another machine all the same.
    const std::vector<std::vector<std::byte>> blobs{blob_of("m", {0}), blob_of("m2", {1, 2, 3}),
                                                    blob_of("other", {5}), blob_of("m", {0})};
    CHECK(cores_of_machine(blobs, "m") == 1);
    CHECK(cores_of_machine(blobs, "m2") == 3);
    CHECK(cores_of_machine(blobs, "nowhere") == 0);
}

TEST_CASE("placement: this process's own blob counts the CPUs it may run on") {
    cpu_set_t mine;
    CPU_ZERO(&mine);
    REQUIRE(sched_getaffinity(0, sizeof mine, &mine) == 0);
    const std::vector<std::vector<std::byte>> blobs{placement_blob()};
    CHECK(cores_of_machine(blobs, this_machine_id()) == CPU_COUNT(&mine));
    CHECK_FALSE(this_machine_id().empty());
}

TEST_CASE("placement: a malformed blob is refused, naming its rank") {
    auto without_separator = blob_of("m", {0});
    without_separator.assign(without_separator.size(), std::byte{'x'});
    auto short_cpus = blob_of("m", {0});
    short_cpus.pop_back();
    for (const auto& bad : {without_separator, short_cpus, std::vector<std::byte>{}}) {
        const std::vector<std::vector<std::byte>> blobs{blob_of("m", {0}), bad};
        try {
            (void)cores_of_machine(blobs, "m");
            FAIL("a malformed placement was accepted");
        } catch (const error& e) {
            CHECK(e.code() == errc::invalid_argument);
            CHECK(std::string(e.what()).find("rank 1's placement") != std::string::npos);
        }
    }
}
