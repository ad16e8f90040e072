// Ranks that go away: one killed in the middle of a collective (the others
// fail with peer_lost naming it, tuttirun exits non-zero, and no segment is
// left behind), and one that closes its transports in order (a receive from
// it fails, naming it; the others carry on among themselves).
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

// Runs a job of fault-probe with a folder of its own for the survivors'
// answers (FAULT_REPORTS, see fault_probe.cpp), removed after.
finished run(const std::string& command) {
    char folder[] = "/tmp/tutti-fault-XXXXXX";
    REQUIRE(mkdtemp(folder) != nullptr);
    finished f;
    FILE* pipe =
        popen(("FAULT_REPORTS=" + std::string(folder) + " " + command + " 2>&1").c_str(), "r");
    REQUIRE(pipe != nullptr);
    char buffer[4096];
    while (std::fgets(buffer, sizeof buffer, pipe))
        f.output += buffer;
    const int raw = pclose(pipe);
    f.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
    std::filesystem::remove_all(folder);
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

// The same with TCP alone on one node (TUTTI_TRANSPORT=tcp): the loss
// arrives as a connection that ends without a goodbye, and the ranks not
// connected to the victim learn it from those that are.
TEST_CASE("a rank killed in a job over TCP alone: every survivor names it") {
    const auto tuttirun = program("TUTTIRUN");
    const auto probe = program("FAULT_PROBE");
    for (auto [ranks, victim] : {std::pair{2, 1}, {3, 2}, {4, 1}, {4, 3}}) {
        CAPTURE(ranks);
        CAPTURE(victim);
        auto f =
            run("TUTTI_TRANSPORT=tcp timeout 120 " + tuttirun + " -n " + std::to_string(ranks) +
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

// The same across nodes: one tuttirun per (posed or namespaced) host, see
// multi_host.sh. The survivors on the victim's node learn of it through
// shared memory, the others through TCP, and every one must name it.
TEST_CASE("a rank killed on one node: the ranks on every node name it") {
    const auto tuttirun = program("TUTTIRUN");
    const auto probe = program("FAULT_PROBE");
    const auto multi_host = program("MULTI_HOST");
    struct layout {
        const char* environment;
        const char* how;
        int hosts, per_host, victim;
    };
    // Mixed shared memory and TCP on posed nodes and in network namespaces,
    // with the node hierarchy (the default: a survivor that waits only
    // within its node hears of the loss from a node-mate) and without;
    // TCP alone with every rank on a node of its own, and there the
    // all_reduce through rank 0 (`linear`), whose other survivor waits only
    // for rank 0 and hears of the loss from it.
    const char* through_rank_0 =
        "env TUTTI_ALL_REDUCE_COMPOSITION=flat TUTTI_ALL_REDUCE_ALGORITHM=linear ";
    for (const auto& l :
         {layout{"", "", 2, 2, 3}, layout{"env TUTTI_NODE_HIERARCHY=0 ", "", 2, 2, 3},
          layout{"", "", 2, 2, 0}, layout{"", "", 3, 1, 1}, layout{through_rank_0, "", 3, 1, 2},
          layout{"", "--netns ", 2, 2, 2}}) {
        CAPTURE(l.environment);
        CAPTURE(l.how);
        CAPTURE(l.hosts);
        CAPTURE(l.per_host);
        CAPTURE(l.victim);
        auto f = run(std::string(l.environment) + "timeout 120 bash " + multi_host + " " + l.how +
                     "--hosts " + std::to_string(l.hosts) + " --ranks-per-host " +
                     std::to_string(l.per_host) + " --grace-ms 5000 --timeout 60 -- " + tuttirun +
                     " " + probe + " " + std::to_string(l.victim));
        CAPTURE(f.output);
        if (f.status == 77) {
            MESSAGE("network namespaces are not available here: " << f.output);
            continue;
        }
        CHECK(f.status == 128 + 9); // the victim's tuttirun reports its SIGKILL
        for (int r = 0; r < l.hosts * l.per_host; ++r) {
            if (r == l.victim) continue;
            CHECK(f.output.find("rank " + std::to_string(r) + ": peer lost: tutti: rank " +
                                std::to_string(l.victim) + " ") != std::string::npos);
        }
    }
}

TEST_CASE("a rank that closes in order: its shared-memory peers' receives from it fail, naming "
          "it") {
    const auto tuttirun = program("TUTTIRUN");
    const auto probe = program("FAULT_PROBE");
    auto f = run("timeout 120 " + tuttirun + " -n 2 --timeout 60 " + probe + " --closes 1");
    CAPTURE(f.output);
    CHECK(f.status == 0);
    CHECK(f.output.find("rank 0: peer lost: tutti: rank 1 ") != std::string::npos);
    CHECK(f.output.find("closed its shared-memory transport") != std::string::npos);
    CHECK(tutti_segments() == 0);
}

TEST_CASE("a rank that closes in order is no loss: the others carry on without it") {
    const auto tuttirun = program("TUTTIRUN");
    const auto probe = program("FAULT_PROBE");
    const auto multi_host = program("MULTI_HOST");
    // Shared memory alone; and shared memory and TCP mixed, where the leaver
    // (rank 1) shares a node with rank 0, with the node hierarchy (the
    // default) and without.
    const auto two_hosts =
        "bash " + multi_host + " --hosts 2 --ranks-per-host 2 --timeout 60 -- " + tuttirun + " ";
    for (const std::string& how :
         {tuttirun + " -n 3 --timeout 60 ", two_hosts, "env TUTTI_NODE_HIERARCHY=0 " + two_hosts}) {
        CAPTURE(how);
        auto f = run("timeout 120 " + how + probe + " --leaves 1");
        CAPTURE(f.output);
        CHECK(f.status == 0);
        const int ranks = how.find(multi_host) == std::string::npos ? 3 : 4;
        for (int r = 0; r < ranks; ++r)
            if (r != 1)
                CHECK(f.output.find("rank " + std::to_string(r) + ": carried on without rank 1") !=
                      std::string::npos);
    }
}
