// A rank of a TCP job killed mid-collective: every survivor fails with
// peer_lost naming it (directly, or told by a rank that saw it go), and
// tuttirun exits with the victim's status. TUTTIRUN and TCP_FAULT_PROBE name
// the programs.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

struct finished {
    int status = -1;
    std::string output;
};

finished run(const std::string& command) {
    finished f;
    FILE* pipe = popen((command + " 2>&1").c_str(), "r");
    REQUIRE(pipe != nullptr);
    char buffer[4096];
    while (std::fgets(buffer, sizeof buffer, pipe))
        f.output += buffer;
    const int raw = pclose(pipe);
    f.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
    return f;
}

std::string program(const char* variable) {
    const char* value = std::getenv(variable);
    REQUIRE_MESSAGE(value != nullptr, variable << " must name the program to run");
    return value;
}

} // namespace

TEST_CASE("tcp: a rank killed mid-collective is named by every survivor") {
    const auto tuttirun = program("TUTTIRUN");
    const auto probe = program("TCP_FAULT_PROBE");
    for (auto [ranks, victim] : {std::pair{2, 1}, {3, 2}, {4, 1}, {4, 3}}) {
        CAPTURE(ranks);
        CAPTURE(victim);
        auto f = run("timeout 120 " + tuttirun + " -n " + std::to_string(ranks) +
                     " --grace-ms 5000 " + probe + " " + std::to_string(victim));
        CAPTURE(f.output);
        CHECK(f.status == 128 + 9); // the victim's SIGKILL, as a shell reports it
        for (int r = 0; r < ranks; ++r) {
            if (r == victim) continue;
            CHECK(f.output.find("rank " + std::to_string(r) + ": peer lost: tutti: rank " +
                                std::to_string(victim) + " ") != std::string::npos);
        }
    }
}
