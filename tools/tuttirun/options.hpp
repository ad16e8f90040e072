// What `tuttirun` was asked to do, and how a command line becomes that. The
// parse is a function of the arguments alone (nothing is printed), so tests
// check it without running a process.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace tuttirun {

enum class bind_policy { none, core };

struct launch_options {
    int ranks = 1;
    // The program and its arguments, as given after tuttirun's own options.
    std::vector<std::string> command;
    bool prefix = false;
    std::optional<std::filesystem::path> output_dir;
    // host:port where rank 0 listens; empty means a free port on 127.0.0.1.
    std::string rendezvous;
    std::optional<std::string> node;
    std::chrono::milliseconds bootstrap_timeout{30000};
    std::chrono::milliseconds grace{2000};
    std::optional<std::chrono::milliseconds> timeout;
    bind_policy bind = bind_policy::none;
    bool verbose = false;
    // Part of a job started by one tuttirun per host: this one starts ranks
    // first_rank .. first_rank + ranks - 1 of a job of job_size ranks (all of
    // them when job_size is unset), with the job id and secret every part
    // shares (see docs/routing.md).
    int first_rank = 0;
    std::optional<int> job_size;
    std::optional<std::string> job_id;
    // The job secret (TUTTI_JOB_SECRET): read from this file, which the
    // first tuttirun to need it creates (mode 0600).
    std::optional<std::filesystem::path> secret_file;

    int size() const noexcept { return job_size.value_or(ranks); }
    bool partial() const noexcept { return size() != ranks; }
};

// Exit statuses with a meaning of their own, as the shell and timeout(1) use them.
inline constexpr int usage_error_status = 2;
inline constexpr int timeout_status = 124;
inline constexpr int cannot_execute_status = 126;
inline constexpr int not_found_status = 127;

// Either options to run with, or what to print and the status to exit with
// (--help, or a usage error).
struct parse_outcome {
    std::optional<launch_options> options;
    int exit_status = 0;
    std::string out;
    std::string err;
};

parse_outcome parse_command_line(const std::vector<std::string>& args);

} // namespace tuttirun
