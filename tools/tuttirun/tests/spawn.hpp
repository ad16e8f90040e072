// Runs the built tuttirun as a child of the test, its output into files, with
// a limit on every wait so a broken launcher fails a test instead of hanging
// the suite.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace tuttirun_test {

// A fresh directory under /tmp, removed with everything in it at the end.
class temp_dir {
public:
    temp_dir();
    ~temp_dir();
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;
    const std::filesystem::path& path() const { return path_; }
    std::string operator/(const std::string& name) const { return (path_ / name).string(); }

private:
    std::filesystem::path path_;
};

std::string read_file(const std::filesystem::path& path);
std::vector<std::string> split_lines(const std::string& text);

// The built programs, as meson passes them.
std::string tuttirun_path();
std::string probe_path();

class launcher {
public:
    // Starts `tuttirun args...` with stdout/stderr in files of a temp dir and
    // stdin from stdin_file (/dev/null when empty). extra_env entries
    // ("NAME=value") are added to the test's own environment.
    explicit launcher(const std::vector<std::string>& args, const std::string& stdin_file = {},
                      const std::vector<std::string>& extra_env = {});
    ~launcher();
    launcher(const launcher&) = delete;
    launcher& operator=(const launcher&) = delete;

    pid_t pid() const { return pid_; }
    // Waits up to limit for tuttirun to end; false if it is still running.
    bool wait(std::chrono::milliseconds limit = std::chrono::seconds(60));
    // tuttirun's exit status as a shell reports it (128+S for signal S).
    int status() const { return status_; }
    std::string out() const;
    std::string err() const;

private:
    temp_dir files_;
    pid_t pid_ = -1;
    int pidfd_ = -1;
    bool ended_ = false;
    int status_ = -1;
};

// Runs tuttirun to its end (failing the test if it takes longer than limit).
struct result {
    bool finished = false;
    int status = -1;
    std::string out;
    std::string err;
};
result run(const std::vector<std::string>& args,
           std::chrono::milliseconds limit = std::chrono::seconds(60));

// Waits until every file exists; false after limit.
bool wait_for_files(const std::vector<std::filesystem::path>& files,
                    std::chrono::milliseconds limit = std::chrono::seconds(30));

// Waits up to limit for a process that is not our child to end.
bool wait_for_exit(pid_t pid, std::chrono::milliseconds limit = std::chrono::seconds(30));

bool process_exists(pid_t pid);

} // namespace tuttirun_test
