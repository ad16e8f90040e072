// A rank killed in the middle of a collective: the others fail with
// peer_lost naming it, tuttirun exits non-zero, and no segment is left behind.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
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

int tutti_segments() {
    int n = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm"))
        if (entry.path().filename().string().rfind("tutti-", 0) == 0) ++n;
    return n;
}

std::string program(const char* variable) {
    const char* value = std::getenv(variable);
    REQUIRE_MESSAGE(value != nullptr, variable << " must name the program to run");
    return value;
}

} // namespace

TEST_CASE("a rank killed mid-collective: the others name it, tuttirun fails, nothing is left") {
    const auto tuttirun = program("TUTTIRUN");
    const auto probe = program("FAULT_PROBE");
    const int before = tutti_segments();
    for (int ranks : {2, 4}) {
        CAPTURE(ranks);
        const int victim = ranks - 1;
        auto f = run("timeout 120 " + tuttirun + " -n " + std::to_string(ranks) +
                     " --grace-ms 5000 " + probe + " " + std::to_string(victim));
        CAPTURE(f.output);
        CHECK(f.status == 128 + 9); // the victim's SIGKILL, as a shell reports it
        for (int r = 0; r < ranks; ++r) {
            if (r == victim) continue;
            CHECK(f.output.find("rank " + std::to_string(r) + ": peer lost: tutti: rank " +
                                std::to_string(victim) + " ") != std::string::npos);
        }
        CHECK(tutti_segments() == before);
    }
}
