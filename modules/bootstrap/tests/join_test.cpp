// Choosing how to join from what the environment says.
#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <string>

#include "bootstrap/join.hpp"
#include "core/error.hpp"

namespace {

tutti::env_lookup lookup_in(std::map<std::string, std::string> env) {
    return [env = std::move(env)](std::string_view name) -> std::optional<std::string> {
        auto found = env.find(std::string(name));
        if (found == env.end()) return std::nullopt;
        return found->second;
    };
}

} // namespace

TEST_CASE("join_job: without any launcher's variables it says how to launch") {
    CHECK_THROWS_WITH_AS(tutti::join_job(lookup_in({})),
                         doctest::Contains("TUTTI_RANK is not set: start the program with "
                                           "`tuttirun -n N program`"),
                         tutti::error);
}

TEST_CASE("join_job: TUTTI_ variables give the environment bootstrap") {
    auto boot = tutti::join_job(
        lookup_in({{"TUTTI_RANK", "0"}, {"TUTTI_SIZE", "1"}, {"TUTTI_JOB_ID", "solo"}}));
    REQUIRE(boot);
    CHECK(boot->method() == "env");
    CHECK(boot->rank() == 0);
    CHECK(boot->size() == 1);
    CHECK(boot->job_id() == "solo");
    const std::vector<std::byte> mine{std::byte{7}};
    CHECK(boot->all_gather(mine) == std::vector<std::vector<std::byte>>{mine});
}

TEST_CASE("join_job: PMIx variables choose PMIx, which says when no server answers") {
    // The mpirun tests cover a real PMIx server; here PMIX_RANK is set but nobody serves it.
    if (tutti::process_env("PMIX_RANK") || tutti::process_env("PMIX_SERVER_URI4")) return;
    const auto expected =
        tutti::pmix_supported() ? "no PMIx server answers" : "built without PMIx support";
    CHECK_THROWS_WITH_AS(tutti::join_job(lookup_in({{"PMIX_RANK", "0"}})),
                         doctest::Contains(expected), tutti::error);
    // TUTTI_ variables do not override a PMIx launch when PMIx is built in.
    if (tutti::pmix_supported())
        CHECK_THROWS_WITH_AS(
            tutti::join_job(
                lookup_in({{"PMIX_NAMESPACE", "job"}, {"TUTTI_RANK", "0"}, {"TUTTI_SIZE", "1"}})),
            doctest::Contains("no PMIx server answers"), tutti::error);
}
