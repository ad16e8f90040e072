// The launcher's pieces on their own: the command line, line tagging, exit
// statuses, the rank environment, segment cleanup.
#include "job.hpp"
#include "options.hpp"
#include "output.hpp"
#include "secret.hpp"
#include "segments.hpp"
#include "spawn.hpp"
#include "status.hpp"

#include <core/error.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <csignal>
#include <fstream>

#include <sys/wait.h>

using namespace tuttirun;

TEST_CASE("parse_command_line: defaults and the program with its own options") {
    const auto parsed = parse_command_line({"-n", "3", "prog", "-n", "5", "--prefix"});
    REQUIRE(parsed.options);
    const auto& o = *parsed.options;
    CHECK(o.ranks == 3);
    CHECK(o.command == std::vector<std::string>{"prog", "-n", "5", "--prefix"});
    CHECK_FALSE(o.prefix);
    CHECK_FALSE(o.output_dir);
    CHECK(o.rendezvous.empty());
    CHECK_FALSE(o.node);
    CHECK(o.bootstrap_timeout == std::chrono::milliseconds(30000));
    CHECK(o.grace == std::chrono::milliseconds(2000));
    CHECK_FALSE(o.timeout);
    CHECK(o.bind == bind_policy::none);
    CHECK_FALSE(o.verbose);
}

TEST_CASE("parse_command_line: every option") {
    const auto parsed =
        parse_command_line({"--ranks", "4", "--prefix", "--rendezvous", "host.example:4000",
                            "--node", "n7", "--timeout-bootstrap", "1500", "--grace-ms", "250",
                            "--timeout", "2.5", "--bind", "core", "-v", "--", "prog", "a"});
    REQUIRE(parsed.options);
    const auto& o = *parsed.options;
    CHECK(o.ranks == 4);
    CHECK(o.prefix);
    CHECK(o.rendezvous == "host.example:4000");
    CHECK(o.node == "n7");
    CHECK(o.bootstrap_timeout == std::chrono::milliseconds(1500));
    CHECK(o.grace == std::chrono::milliseconds(250));
    CHECK(o.timeout == std::chrono::milliseconds(2500));
    CHECK(o.bind == bind_policy::core);
    CHECK(o.verbose);
    CHECK(o.command == std::vector<std::string>{"prog", "a"});

    const auto with_dir = parse_command_line({"-n", "1", "--output-dir", "/tmp/x", "prog"});
    REQUIRE(with_dir.options);
    CHECK(with_dir.options->output_dir == std::filesystem::path("/tmp/x"));
}

TEST_CASE("parse_command_line: usage errors give status 2 and say what is wrong") {
    struct bad_case {
        std::vector<std::string> args;
        std::string says;
    };
    const std::vector<bad_case> cases = {
        {{}, "--ranks"},
        {{"prog"}, "--ranks"},
        {{"-n", "0", "prog"}, "--ranks"},
        {{"-n", "-2", "prog"}, "--ranks"},
        {{"-n", "two", "prog"}, "--ranks"},
        {{"-n", "2"}, "no program"},
        {{"--bogus", "-n", "2", "prog"}, "--bogus"},
        {{"-n", "2", "--bind", "socket", "prog"}, "socket"},
        {{"-n", "2", "--rendezvous", "nohost", "prog"}, "nohost"},
        {{"-n", "2", "--rendezvous", "h:70000", "prog"}, "70000"},
        {{"-n", "2", "--timeout", "0", "prog"}, "--timeout"},
        {{"-n", "2", "--grace-ms", "-1", "prog"}, "--grace-ms"},
        {{"-n", "2", "--prefix", "--output-dir", "d", "prog"}, "--output-dir"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.says);
        const auto parsed = parse_command_line(c.args);
        CHECK_FALSE(parsed.options);
        CHECK(parsed.exit_status == usage_error_status);
        CHECK(parsed.err.find(c.says) != std::string::npos);
        CHECK(parsed.err.find("Usage: tuttirun") != std::string::npos);
    }
}

TEST_CASE("parse_command_line: --help prints the options and succeeds") {
    const auto parsed = parse_command_line({"--help"});
    CHECK_FALSE(parsed.options);
    CHECK(parsed.exit_status == 0);
    CHECK(parsed.out.find("--output-dir") != std::string::npos);
    CHECK(parsed.err.empty());
}

TEST_CASE("line_prefixer tags whole lines and holds partial ones") {
    line_prefixer lines("[2] ");
    CHECK(lines.feed("ab") == "");
    CHECK(lines.feed("c\nde") == "[2] abc\n");
    CHECK(lines.feed("\n\nf\ng") == "[2] de\n[2] \n[2] f\n");
    CHECK(lines.finish() == "[2] g\n");
    CHECK(lines.finish() == "");
    CHECK(lines.feed("") == "");
}

TEST_CASE("line_prefixer passes on an endless line in bounded pieces") {
    line_prefixer lines("[0] ");
    const std::string chunk(line_prefixer::max_pending / 2 + 1, 'y');
    CHECK(lines.feed(chunk) == "");
    const std::string out = lines.feed(chunk);
    CHECK(out == "[0] " + chunk + chunk + "\n");
    CHECK(lines.feed("z\n") == "[0] z\n");
}

TEST_CASE("exit statuses read as a shell reads them") {
    CHECK(shell_status(W_EXITCODE(0, 0)) == 0);
    CHECK(shell_status(W_EXITCODE(3, 0)) == 3);
    CHECK(shell_status(W_EXITCODE(0, SIGKILL)) == 128 + SIGKILL);
    CHECK(describe_wait_status(W_EXITCODE(3, 0)) == "exited with status 3");
    CHECK(describe_wait_status(W_EXITCODE(0, SIGKILL)) == "killed by SIGKILL");
    CHECK(describe_wait_status(W_EXITCODE(0, SIGSEGV) | WCOREFLAG) ==
          "killed by SIGSEGV (core dumped)");
    CHECK(signal_name(SIGTERM) == "SIGTERM");
    CHECK(signal_name(200) == "signal 200");
}

TEST_CASE("rank_environment sets the job variables and replaces stale ones") {
    const std::vector<std::string> base = {
        "PATH=/bin",           "TUTTI_RANK=9",           "TUTTI_NODE=outer",
        "TUTTI_BOUND_CORE=5",  "TUTTI_RANKS_EXTRA=keep", "PMIX_RANK=3",
        "PMIX_NAMESPACE=outer"};
    rank_identity id{.rank = 2,
                     .size = 5,
                     .job_id = "00ff",
                     .rendezvous = "127.0.0.1:9",
                     .bootstrap_timeout = std::chrono::milliseconds(700)};
    auto env = rank_environment(base, id);
    auto has = [&](const std::string& entry) {
        return std::count(env.begin(), env.end(), entry) == 1;
    };
    CHECK(has("PATH=/bin"));
    CHECK(has("TUTTI_RANKS_EXTRA=keep"));
    CHECK(has("TUTTI_RANK=2"));
    CHECK(has("TUTTI_SIZE=5"));
    CHECK(has("TUTTI_LOCAL_RANK=2"));
    CHECK(has("TUTTI_LOCAL_SIZE=5"));
    CHECK(has("TUTTI_JOB_ID=00ff"));
    CHECK(has("TUTTI_RENDEZVOUS=127.0.0.1:9"));
    CHECK(has("TUTTI_BOOTSTRAP_TIMEOUT_MS=700"));
    CHECK(has("TUTTI_NODE=outer"));
    CHECK_FALSE(has("TUTTI_RANK=9"));
    CHECK(std::none_of(env.begin(), env.end(),
                       [](const std::string& e) { return e.starts_with("PMIX_"); }));
    CHECK(std::none_of(env.begin(), env.end(),
                       [](const std::string& e) { return e.starts_with("TUTTI_BOUND_CORE="); }));

    id.node = "inner";
    id.bound_core = 1;
    env = rank_environment(base, id);
    CHECK(has("TUTTI_NODE=inner"));
    CHECK_FALSE(has("TUTTI_NODE=outer"));
    CHECK(has("TUTTI_BOUND_CORE=1"));
}

TEST_CASE("job ids are 16 hex digits and differ; the rendezvous is on loopback") {
    const auto a = make_job_id();
    const auto b = make_job_id();
    CHECK(a.size() == 16);
    CHECK(a.find_first_not_of("0123456789abcdef") == std::string::npos);
    CHECK(a != b);
    const auto r = free_rendezvous();
    REQUIRE(r.starts_with("127.0.0.1:"));
    CHECK(std::stoi(r.substr(10)) > 0);
}

TEST_CASE("remove_job_segments removes this job's entries only") {
    tuttirun_test::temp_dir dir;
    for (const char* name : {"tutti-abc", "tutti-abc-0-ring", "tutti-abc.lock", "tutti-abcd-1",
                             "tutti-ab", "other-abc"})
        std::ofstream(dir.path() / name) << "x";
    auto removed = remove_job_segments("abc", dir.path());
    std::sort(removed.begin(), removed.end());
    CHECK(removed == std::vector<std::string>{"tutti-abc", "tutti-abc-0-ring", "tutti-abc.lock"});
    CHECK(std::filesystem::exists(dir.path() / "tutti-abcd-1"));
    CHECK(std::filesystem::exists(dir.path() / "tutti-ab"));
    CHECK(std::filesystem::exists(dir.path() / "other-abc"));
    CHECK(remove_job_segments("abc", dir.path()).empty());
    CHECK(remove_job_segments("abc", dir.path() / "missing").empty());
    CHECK(remove_job_segments("", dir.path()).empty());
}

TEST_CASE("a job refuses fewer than one rank or no program") {
    launch_options o;
    o.ranks = 0;
    o.command = {"prog"};
    CHECK_THROWS_AS(job{o}, tutti::error);
    o.ranks = 1;
    o.command.clear();
    CHECK_THROWS_AS(job{o}, tutti::error);
}

TEST_CASE("parse_command_line: part of a job started on several hosts") {
    const auto parsed =
        parse_command_line({"-n", "2", "--first-rank", "4", "--size", "6", "--job-id", "abc123",
                            "--rendezvous", "10.0.0.1:7000", "--secret-file", "/tmp/s", "prog"});
    REQUIRE(parsed.options);
    const auto& o = *parsed.options;
    CHECK(o.first_rank == 4);
    CHECK(o.size() == 6);
    CHECK(o.partial());
    CHECK(o.job_id == "abc123");
    CHECK(o.secret_file == std::filesystem::path("/tmp/s"));

    const auto whole = parse_command_line({"-n", "3", "prog"});
    REQUIRE(whole.options);
    CHECK(whole.options->first_rank == 0);
    CHECK(whole.options->size() == 3);
    CHECK_FALSE(whole.options->partial());
    CHECK_FALSE(whole.options->job_id);

    struct bad_case {
        std::vector<std::string> args;
        std::string says;
    };
    const std::vector<bad_case> cases = {
        {{"-n", "2", "--first-rank", "3", "--size", "4", "--job-id", "j", "--rendezvous", "h:1",
          "prog"},
         "go past the job's 4 ranks"},
        {{"-n", "2", "--size", "4", "--job-id", "j", "prog"}, "--rendezvous must name"},
        {{"-n", "2", "--size", "4", "--rendezvous", "h:1", "prog"}, "needs --job-id"},
        {{"-n", "2", "--job-id", "a/b", "prog"}, "is not 1 to 64 letters and digits"},
        {{"-n", "2", "--first-rank", "-1", "prog"}, "--first-rank"},
        {{"-n", "2", "--size", "0", "prog"}, "--size"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.says);
        const auto bad = parse_command_line(c.args);
        CHECK_FALSE(bad.options);
        CHECK(bad.exit_status == usage_error_status);
        CHECK(bad.err.find(c.says) != std::string::npos);
    }
}

TEST_CASE("job_secret_for: the first tuttirun creates the file, the others read it") {
    tuttirun_test::temp_dir dir;
    const auto file = dir.path() / "secret";
    const auto made = job_secret_for(file, std::nullopt, true);
    CHECK(made.size() == 64);
    CHECK(made.find_first_not_of("0123456789abcdef") == std::string::npos);
    const auto perms = std::filesystem::status(file).permissions() & std::filesystem::perms::all;
    CHECK((perms == (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write)));
    // The file wins over the environment, so every part of the job agrees.
    CHECK(job_secret_for(file, std::string(64, 'a'), true) == made);

    CHECK(job_secret_for(std::nullopt, std::string(64, 'B'), true) == std::string(64, 'b'));
    const auto fresh = job_secret_for(std::nullopt, std::nullopt, false);
    CHECK(fresh.size() == 64);
    CHECK(fresh != job_secret_for(std::nullopt, std::string(), false));
    CHECK_THROWS_WITH_AS(job_secret_for(std::nullopt, std::nullopt, true),
                         doctest::Contains("--secret-file"), tutti::error);
}

TEST_CASE("job_secret_for: a secret others may read, or that is malformed, is refused") {
    tuttirun_test::temp_dir dir;
    const auto open_file = dir.path() / "open";
    std::ofstream(open_file) << std::string(64, 'c') << "\n";
    std::filesystem::permissions(open_file, std::filesystem::perms::owner_read |
                                                std::filesystem::perms::owner_write |
                                                std::filesystem::perms::others_read);
    CHECK_THROWS_WITH_AS(job_secret_for(open_file, std::nullopt, true),
                         doctest::Contains("others may read it (mode 0604)"), tutti::error);
    const auto short_file = dir.path() / "short";
    std::ofstream(short_file) << "abcd\n";
    std::filesystem::permissions(short_file, std::filesystem::perms::owner_read |
                                                 std::filesystem::perms::owner_write);
    try {
        (void)job_secret_for(short_file, std::nullopt, true);
        FAIL("a short secret was accepted");
    } catch (const tutti::error& e) {
        CHECK(std::string(e.what()).find("--secret-file") != std::string::npos);
        CHECK(std::string(e.what()).find("abcd") == std::string::npos);
    }
    CHECK_THROWS_WITH_AS(job_secret_for(std::nullopt, std::string("xyz"), false),
                         doctest::Contains("TUTTI_JOB_SECRET"), tutti::error);
}
