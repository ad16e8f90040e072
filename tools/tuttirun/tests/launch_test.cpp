// The built tuttirun, run as a subprocess on the probe program. Every wait is
// bounded; limits are generous and only decide "finished at all".
#include "binding.hpp"
#include "job.hpp"
#include "spawn.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include <sched.h>
#include <sys/stat.h>

using namespace tuttirun_test;
using namespace std::chrono_literals;

namespace {

// "[r] NAME=value" lines of `tuttirun --prefix probe env` as rank -> name -> value.
std::map<int, std::map<std::string, std::string>> variables_by_rank(const std::string& out) {
    std::map<int, std::map<std::string, std::string>> vars;
    const std::regex line(R"(\[(\d+)\] (TUTTI_[A-Z_]+)=(.*))");
    for (const auto& l : split_lines(out)) {
        std::smatch m;
        REQUIRE_MESSAGE(std::regex_match(l, m, line), "unexpected line: ", l);
        vars[std::stoi(m[1])][m[2]] = m[3];
    }
    return vars;
}

std::vector<std::filesystem::path> pid_files(const temp_dir& dir, int ranks) {
    std::vector<std::filesystem::path> files;
    for (int r = 0; r < ranks; ++r)
        files.push_back(dir.path() / ("pid." + std::to_string(r)));
    return files;
}

std::vector<pid_t> read_pids(const temp_dir& dir, int ranks) {
    std::vector<pid_t> pids;
    for (const auto& f : pid_files(dir, ranks)) {
        if (std::filesystem::exists(f)) pids.push_back(std::stoi(read_file(f)));
    }
    return pids;
}

bool any_done(const temp_dir& dir) {
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
        if (entry.path().filename().string().starts_with("done.")) return true;
    }
    return false;
}

} // namespace

TEST_CASE("every rank gets its own rank and the job's size, id and rendezvous") {
    const int n = 4;
    const auto r = run({"-n", std::to_string(n), "--prefix", probe_path(), "env"});
    REQUIRE(r.finished);
    CHECK(r.status == 0);
    const auto vars = variables_by_rank(r.out);
    REQUIRE(vars.size() == n);
    const auto& first = vars.at(0);
    const std::string job_id = first.at("TUTTI_JOB_ID");
    CHECK(job_id.size() == 16);
    CHECK(job_id.find_first_not_of("0123456789abcdef") == std::string::npos);
    CHECK(std::regex_match(first.at("TUTTI_RENDEZVOUS"), std::regex(R"(127\.0\.0\.1:\d+)")));
    for (int rank = 0; rank < n; ++rank) {
        CAPTURE(rank);
        const auto& v = vars.at(rank);
        CHECK(v.at("TUTTI_RANK") == std::to_string(rank));
        CHECK(v.at("TUTTI_LOCAL_RANK") == std::to_string(rank));
        CHECK(v.at("TUTTI_SIZE") == std::to_string(n));
        CHECK(v.at("TUTTI_LOCAL_SIZE") == std::to_string(n));
        CHECK(v.at("TUTTI_JOB_ID") == job_id);
        CHECK(v.at("TUTTI_RENDEZVOUS") == first.at("TUTTI_RENDEZVOUS"));
        CHECK(v.at("TUTTI_BOOTSTRAP_TIMEOUT_MS") == "30000");
        CHECK(v.count("TUTTI_BOUND_CORE") == 0);
    }

    const auto again = run({"-n", "1", "--prefix", probe_path(), "env"});
    REQUIRE(again.finished);
    CHECK(variables_by_rank(again.out).at(0).at("TUTTI_JOB_ID") != job_id);
}

TEST_CASE("ranks join one job through tutti's bootstrap") {
    const int n = 3;
    const auto r = run({"-n", std::to_string(n), "--prefix", "--timeout-bootstrap", "20000",
                        probe_path(), "join"});
    REQUIRE(r.finished);
    CHECK(r.status == 0);
    CAPTURE(r.err);
    const std::regex line(
        R"(\[(\d+)\] rank=(\d+) size=(\d+) job=(\w+) method=(\w+) gathered=(.*))");
    std::set<int> ranks;
    std::set<std::string> jobs;
    for (const auto& l : split_lines(r.out)) {
        std::smatch m;
        REQUIRE_MESSAGE(std::regex_match(l, m, line), "unexpected line: ", l);
        CHECK(m[1] == m[2]);
        CHECK(m[3] == std::to_string(n));
        CHECK(m[5] == "env");
        CHECK(m[6] == "0,1,2");
        ranks.insert(std::stoi(m[2]));
        jobs.insert(m[4]);
    }
    CHECK(ranks == std::set<int>{0, 1, 2});
    CHECK(jobs.size() == 1);
}

TEST_CASE("without --prefix each rank's output passes through unchanged") {
    const auto r = run({"-n", "3", probe_path(), "env"});
    REQUIRE(r.finished);
    CHECK(r.status == 0);
    std::set<std::string> ranks;
    for (const auto& l : split_lines(r.out)) {
        if (l.starts_with("TUTTI_RANK=")) ranks.insert(l);
    }
    CHECK(ranks == std::set<std::string>{"TUTTI_RANK=0", "TUTTI_RANK=1", "TUTTI_RANK=2"});
}

TEST_CASE("--rendezvous, --node and --timeout-bootstrap reach every rank") {
    const auto r = run({"-n", "2", "--prefix", "--rendezvous", "10.1.2.3:4567", "--node", "nodeA",
                        "--timeout-bootstrap", "1234", probe_path(), "env"});
    REQUIRE(r.finished);
    CHECK(r.status == 0);
    const auto vars = variables_by_rank(r.out);
    REQUIRE(vars.size() == 2);
    for (const auto& [rank, v] : vars) {
        CAPTURE(rank);
        CHECK(v.at("TUTTI_RENDEZVOUS") == "10.1.2.3:4567");
        CHECK(v.at("TUTTI_NODE") == "nodeA");
        CHECK(v.at("TUTTI_BOOTSTRAP_TIMEOUT_MS") == "1234");
    }
}

TEST_CASE("TUTTI_NODE passes through and stale job variables are replaced") {
    launcher l({"-n", "2", "--prefix", probe_path(), "env"}, {},
               {"TUTTI_NODE=outer", "TUTTI_RANK=77", "TUTTI_JOB_ID=stale"});
    REQUIRE(l.wait());
    CHECK(l.status() == 0);
    const auto vars = variables_by_rank(l.out());
    REQUIRE(vars.size() == 2);
    for (const auto& [rank, v] : vars) {
        CHECK(v.at("TUTTI_NODE") == "outer");
        CHECK(v.at("TUTTI_RANK") == std::to_string(rank));
        CHECK(v.at("TUTTI_JOB_ID") != "stale");
    }
}

TEST_CASE("--prefix tags every line and never splits one") {
    const int n = 3;
    const int count = 600;
    const auto r =
        run({"-n", std::to_string(n), "--prefix", probe_path(), "lines", std::to_string(count)});
    REQUIRE(r.finished);
    CHECK(r.status == 0);
    const std::regex line(R"(\[(\d+)\] rank (\d+) line (\d+) (x*))");
    for (const auto* text : {&r.out, &r.err}) {
        std::map<int, int> per_rank;
        for (const auto& l : split_lines(*text)) {
            std::smatch m;
            REQUIRE_MESSAGE(std::regex_match(l, m, line), "mangled line: ", l);
            CHECK(m[1] == m[2]);
            CHECK(m[4].length() == std::stoi(m[3]) % 97);
            ++per_rank[std::stoi(m[1])];
        }
        REQUIRE(per_rank.size() == n);
        for (const auto& [rank, lines] : per_rank)
            CHECK(lines == count / 2);
    }
}

TEST_CASE("--output-dir writes rank.r.out and rank.r.err") {
    temp_dir dir;
    const auto out_dir = dir.path() / "logs";
    const auto r = run({"-n", "2", "--output-dir", out_dir.string(), probe_path(), "lines", "10"});
    REQUIRE(r.finished);
    CHECK(r.status == 0);
    CHECK(r.out.empty());
    for (int rank = 0; rank < 2; ++rank) {
        for (const char* kind : {"out", "err"}) {
            const auto file = out_dir / ("rank." + std::to_string(rank) + "." + kind);
            REQUIRE(std::filesystem::exists(file));
            const auto lines = split_lines(read_file(file));
            CHECK(lines.size() == 5);
            for (const auto& l : lines)
                CHECK(l.starts_with("rank " + std::to_string(rank) + " line "));
        }
    }
}

TEST_CASE("a rank whose output file cannot be opened ends the ranks already started") {
    temp_dir dir;
    const auto out_dir = dir.path() / "logs";
    std::filesystem::create_directories(out_dir / "rank.1.out");
    const auto r = run({"-n", "2", "--output-dir", out_dir.string(), probe_path(), "sleep", "120",
                        dir.path().string()});
    REQUIRE(r.finished);
    CHECK(r.status == 1);
    CHECK(r.err.find("cannot start rank 1") != std::string::npos);
    CHECK(r.err.find("rank.1.out") != std::string::npos);
    CHECK_FALSE(any_done(dir));
    for (pid_t pid : read_pids(dir, 1))
        CHECK_FALSE(process_exists(pid));
}

TEST_CASE("a failing rank's status is returned and the other ranks are ended") {
    temp_dir dir;
    const auto r = run({"-n", "3", probe_path(), "fail", "1", "7", "120", dir.path().string()});
    REQUIRE(r.finished);
    CHECK(r.status == 7);
    CHECK(r.err.find("tuttirun: rank 1 (pid ") != std::string::npos);
    CHECK(r.err.find("exited with status 7") != std::string::npos);
    CHECK_FALSE(any_done(dir));
    for (pid_t pid : read_pids(dir, 3))
        CHECK_FALSE(process_exists(pid));
}

TEST_CASE("a rank killed by a signal gives 128+S and is named") {
    temp_dir dir;
    const auto r = run({"-n", "2", probe_path(), "fail", "0", "KILL", "120", dir.path().string()});
    REQUIRE(r.finished);
    CHECK(r.status == 128 + SIGKILL);
    CHECK(r.err.find("tuttirun: rank 0 (pid ") != std::string::npos);
    CHECK(r.err.find("killed by SIGKILL") != std::string::npos);
    CHECK_FALSE(any_done(dir));
}

TEST_CASE("every rank succeeding gives status 0") {
    const auto r = run({"-n", "4", probe_path(), "exit", "0"});
    REQUIRE(r.finished);
    CHECK(r.status == 0);
    CHECK(r.err.empty());
}

TEST_CASE("SIGINT to tuttirun ends every rank") {
    temp_dir dir;
    launcher l({"-n", "3", probe_path(), "sleep", "120", dir.path().string()});
    REQUIRE(wait_for_files(pid_files(dir, 3)));
    const auto pids = read_pids(dir, 3);
    REQUIRE(pids.size() == 3);
    REQUIRE(::kill(l.pid(), SIGINT) == 0);
    REQUIRE(l.wait());
    CHECK(l.status() == 128 + SIGINT);
    CHECK(l.err().find("got SIGINT") != std::string::npos);
    CHECK_FALSE(any_done(dir));
    for (pid_t pid : pids)
        CHECK_FALSE(process_exists(pid));
}

TEST_CASE("a rank that ignores SIGTERM is killed after the grace period") {
    temp_dir dir;
    launcher l({"-n", "2", "--grace-ms", "100", "-v", probe_path(), "stubborn", "120",
                dir.path().string()});
    REQUIRE(wait_for_files(pid_files(dir, 2)));
    const auto pids = read_pids(dir, 2);
    REQUIRE(::kill(l.pid(), SIGTERM) == 0);
    REQUIRE(l.wait());
    CHECK(l.status() == 128 + SIGTERM);
    CHECK(l.err().find("sending SIGKILL") != std::string::npos);
    CHECK_FALSE(any_done(dir));
    for (pid_t pid : pids)
        CHECK_FALSE(process_exists(pid));
}

TEST_CASE("--timeout ends a job that runs too long with status 124") {
    temp_dir dir;
    const auto r =
        run({"-n", "2", "--timeout", "0.3", probe_path(), "sleep", "120", dir.path().string()});
    REQUIRE(r.finished);
    CHECK(r.status == 124);
    CHECK(r.err.find("--timeout") != std::string::npos);
    CHECK_FALSE(any_done(dir));

    const auto quick = run({"-n", "2", "--timeout", "100", probe_path(), "exit", "0"});
    REQUIRE(quick.finished);
    CHECK(quick.status == 0);
}

TEST_CASE("ranks die when tuttirun is killed with SIGKILL") {
    temp_dir dir;
    launcher l({"-n", "2", probe_path(), "sleep", "120", dir.path().string()});
    REQUIRE(wait_for_files(pid_files(dir, 2)));
    const auto pids = read_pids(dir, 2);
    REQUIRE(pids.size() == 2);
    REQUIRE(::kill(l.pid(), SIGKILL) == 0);
    REQUIRE(l.wait());
    for (pid_t pid : pids)
        CHECK(wait_for_exit(pid));
    CHECK_FALSE(any_done(dir));
}

TEST_CASE("a segment a rank leaves in /dev/shm is removed after the job") {
    // Another job's segment must survive.
    const std::filesystem::path other = "/dev/shm/tutti-0000000000000000-keep";
    std::ofstream(other) << "x";
    REQUIRE(std::filesystem::exists(other));
    const auto r = run({"-n", "2", "-v", probe_path(), "shm"});
    REQUIRE(r.finished);
    CHECK(r.status == 0);
    const auto lines = split_lines(r.out);
    REQUIRE(lines.size() == 2);
    for (const auto& segment : lines) {
        CHECK(segment.starts_with("/dev/shm/tutti-"));
        CHECK_FALSE(std::filesystem::exists(segment));
        CHECK(r.err.find("removed leftover shared-memory segment " + segment) != std::string::npos);
    }
    CHECK(std::filesystem::exists(other));
    std::filesystem::remove(other);
}

TEST_CASE("usage errors give status 2") {
    for (const auto& args : std::vector<std::vector<std::string>>{
             {}, {"-n", "0", "prog"}, {"--no-such-option", "-n", "1", "prog"}, {"-n", "2"}}) {
        const auto r = run(args);
        REQUIRE(r.finished);
        CHECK(r.status == 2);
        CHECK(r.err.find("Usage: tuttirun") != std::string::npos);
    }
}

TEST_CASE("--help documents every option") {
    const auto r = run({"--help"});
    REQUIRE(r.finished);
    CHECK(r.status == 0);
    for (const char* option : {"-n", "--ranks", "--prefix", "--output-dir", "--rendezvous",
                               "--node", "--timeout-bootstrap", "--grace-ms", "--timeout", "--bind",
                               "-v", "--verbose", "--help"}) {
        CAPTURE(option);
        CHECK(r.out.find(option) != std::string::npos);
    }
}

TEST_CASE("a program that cannot be run gives a clear error") {
    const auto missing = run({"-n", "2", "/nonexistent/tutti-program"});
    REQUIRE(missing.finished);
    CHECK(missing.status == 127);
    CHECK(missing.err.find("tuttirun: cannot run '/nonexistent/tutti-program': No such file or "
                           "directory") != std::string::npos);

    const auto in_path = run({"-n", "1", "tutti-no-such-program-in-path"});
    REQUIRE(in_path.finished);
    CHECK(in_path.status == 127);

    temp_dir dir;
    const auto not_executable = dir / "plain-file";
    std::ofstream(not_executable) << "not a program\n";
    ::chmod(not_executable.c_str(), 0644);
    const auto denied = run({"-n", "1", not_executable});
    REQUIRE(denied.finished);
    CHECK(denied.status == 126);
    CHECK(denied.err.find("Permission denied") != std::string::npos);
}

TEST_CASE("arguments after the program are the program's") {
    const auto r = run({"-n", "1", probe_path(), "args", "-n", "5", "--prefix"});
    REQUIRE(r.finished);
    CHECK(r.status == 0);
    CHECK(r.out == "-n\n5\n--prefix\n");
    const auto dashed = run({"-n", "1", "--", probe_path(), "args", "x"});
    REQUIRE(dashed.finished);
    CHECK(dashed.status == 0);
    CHECK(dashed.out == "x\n");
}

TEST_CASE("ranks read an empty stdin") {
    temp_dir dir;
    const auto input = dir / "input";
    std::ofstream(input) << "data the ranks must not see\n";
    launcher l({"-n", "2", probe_path(), "stdin"}, input);
    REQUIRE(l.wait());
    CHECK(l.status() == 0);
    CHECK(l.out() == "stdin bytes 0\nstdin bytes 0\n");
}

// Each rank's line of the probe's "affinity": its rank, TUTTI_BOUND_CORE and
// the CPUs it may run on.
struct rank_placement {
    int rank;
    int core;
    std::string cpus;
};

std::vector<rank_placement> placements_in(const std::string& out) {
    const std::regex line(R"(\[(\d+)\] rank=(\d+) core=(\d+) cpus=(.*))");
    std::vector<rank_placement> found;
    for (const auto& l : split_lines(out)) {
        std::smatch m;
        REQUIRE_MESSAGE(std::regex_match(l, m, line), "unexpected line: ", l);
        found.push_back({std::stoi(m[2]), std::stoi(m[3]), m[4]});
    }
    return found;
}

TEST_CASE("--bind core puts rank r on core r mod cores") {
    const tuttirun::core_binder machine;
    const int n = machine.core_count() + 1;
    const auto r =
        run({"-n", std::to_string(n), "--bind", "core", "--prefix", probe_path(), "affinity"});
    REQUIRE(r.finished);
    CHECK(r.status == 0);
    const auto placed = placements_in(r.out);
    for (const auto& p : placed) {
        CHECK(p.core == p.rank % machine.core_count());
        CHECK(p.cpus == machine.cpu_list(p.core));
    }
    CHECK(placed.size() == static_cast<std::size_t>(n));
}

TEST_CASE("--bind core binds within the CPUs tuttirun may run on") {
    cpu_set_t before;
    CPU_ZERO(&before);
    REQUIRE(sched_getaffinity(0, sizeof before, &before) == 0);
    int last = -1;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
        if (CPU_ISSET(cpu, &before)) last = cpu;
    REQUIRE(last >= 0);
    // tuttirun inherits this thread's affinity: its last CPU alone, as under
    // `taskset -c LAST`.
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(last, &one);
    REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
    const auto r = run({"-n", "3", "--bind", "core", "--prefix", probe_path(), "affinity"});
    REQUIRE(sched_setaffinity(0, sizeof before, &before) == 0);
    REQUIRE(r.finished);
    CHECK(r.status == 0);
    const auto placed = placements_in(r.out);
    for (const auto& p : placed) {
        CHECK(p.core == 0);
        CHECK(p.cpus == std::to_string(last));
    }
    CHECK(placed.size() == 3);
}

TEST_CASE("every rank of a job gets the same new secret, or the one given") {
    const auto r = run({"-n", "2", "--prefix", probe_path(), "env"});
    REQUIRE(r.finished);
    CHECK(r.status == 0);
    const auto vars = variables_by_rank(r.out);
    REQUIRE(vars.size() == 2);
    const auto secret = vars.at(0).at("TUTTI_JOB_SECRET");
    CHECK(secret.size() == 64);
    CHECK(vars.at(1).at("TUTTI_JOB_SECRET") == secret);

    const std::string given(64, 'e');
    launcher l({"-n", "2", "--prefix", probe_path(), "env"}, {}, {"TUTTI_JOB_SECRET=" + given});
    REQUIRE(l.wait());
    CHECK(l.status() == 0);
    for (const auto& [rank, v] : variables_by_rank(l.out()))
        CHECK(v.at("TUTTI_JOB_SECRET") == given);
}

TEST_CASE("--first-rank and --size start part of a job with its id and secret file") {
    temp_dir dir;
    const auto r =
        run({"-n", "2", "--first-rank", "2", "--size", "4", "--job-id", "part7", "--rendezvous",
             "127.0.0.1:9", "--secret-file", dir / "secret", "--prefix", probe_path(), "env"});
    REQUIRE(r.finished);
    CHECK(r.status == 0);
    CAPTURE(r.err);
    const auto secret = split_lines(read_file(dir.path() / "secret")).at(0);
    const auto vars = variables_by_rank(r.out);
    REQUIRE(vars.size() == 2);
    for (const auto& [rank, v] : vars) {
        CAPTURE(rank);
        CHECK(v.at("TUTTI_RANK") == std::to_string(rank));
        CHECK(v.at("TUTTI_LOCAL_RANK") == std::to_string(rank - 2));
        CHECK(v.at("TUTTI_LOCAL_SIZE") == "2");
        CHECK(v.at("TUTTI_SIZE") == "4");
        CHECK(v.at("TUTTI_JOB_ID") == "part7");
        CHECK(v.at("TUTTI_JOB_SECRET") == secret);
    }
    CHECK(vars.count(2) == 1);
    CHECK(vars.count(3) == 1);

    const auto refused = run({"-n", "2", "--size", "4", "--job-id", "part7", "--rendezvous",
                              "127.0.0.1:9", probe_path(), "env"},
                             std::chrono::seconds(60));
    REQUIRE(refused.finished);
    CHECK(refused.status == 1);
    CHECK(refused.err.find("--secret-file") != std::string::npos);
}

TEST_CASE("two tuttiruns start the two parts of one job") {
    temp_dir dir;
    const auto rendezvous = tuttirun::free_rendezvous();
    const std::vector<std::string> shared = {"--size",        "3",
                                             "--job-id",      "twoparts",
                                             "--rendezvous",  rendezvous,
                                             "--secret-file", dir / "secret",
                                             "--prefix",      "--timeout-bootstrap",
                                             "20000"};
    auto part = [&](std::vector<std::string> own) {
        own.insert(own.end(), shared.begin(), shared.end());
        own.push_back(probe_path());
        own.push_back("join");
        return own;
    };
    launcher first(part({"-n", "1", "--first-rank", "0"}));
    launcher second(part({"-n", "2", "--first-rank", "1"}));
    REQUIRE(first.wait());
    REQUIRE(second.wait());
    CHECK(first.status() == 0);
    CHECK(second.status() == 0);
    CAPTURE(first.err());
    CAPTURE(second.err());
    const std::regex line(
        R"(\[(\d+)\] rank=(\d+) size=(\d+) job=(\w+) method=(\w+) gathered=(.*))");
    std::set<int> ranks;
    for (const auto& l : split_lines(first.out() + second.out())) {
        std::smatch m;
        REQUIRE_MESSAGE(std::regex_match(l, m, line), "unexpected line: ", l);
        CHECK(m[1] == m[2]);
        CHECK(m[3] == "3");
        CHECK(m[4] == "twoparts");
        CHECK(m[6] == "0,1,2");
        ranks.insert(std::stoi(m[2]));
    }
    CHECK(ranks == std::set<int>{0, 1, 2});
}
