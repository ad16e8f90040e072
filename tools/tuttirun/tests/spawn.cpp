#include "spawn.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace tuttirun_test {

namespace {

std::string required_env(const char* name) {
    const char* v = std::getenv(name);
    if (v == nullptr)
        throw std::runtime_error(std::string(name) + " is not set (run the tests through meson)");
    return v;
}

int pidfd_open(pid_t pid) {
    return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

// Waits for the pidfd to report the process's end; false after limit.
bool poll_pidfd(int fd, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() < 0) return false;
        pollfd p{fd, POLLIN, 0};
        const int n = ::poll(&p, 1, static_cast<int>(left.count()));
        if (n > 0) return true;
        if (n < 0 && errno != EINTR) return false;
    }
}

} // namespace

temp_dir::temp_dir() {
    std::string pattern = "/tmp/tuttirun-test-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
}

temp_dir::~temp_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
}

std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        lines.push_back(line);
    return lines;
}

std::string tuttirun_path() {
    return required_env("TUTTIRUN");
}
std::string probe_path() {
    return required_env("TUTTIRUN_PROBE");
}

launcher::launcher(const std::vector<std::string>& args, const std::string& stdin_file,
                   const std::vector<std::string>& extra_env) {
    std::vector<std::string> argv_strings{tuttirun_path()};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_strings)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_strings;
    // The test's own TUTTI_* settings (TUTTI_DEBUG, say) would change what
    // tuttirun prints; each test says what it wants.
    for (char** e = environ; *e != nullptr; ++e) {
        if (std::strncmp(*e, "TUTTI_", 6) != 0) env_strings.emplace_back(*e);
    }
    env_strings.insert(env_strings.end(), extra_env.begin(), extra_env.end());
    std::vector<char*> envp;
    for (auto& e : env_strings)
        envp.push_back(e.data());
    envp.push_back(nullptr);

    const std::string out = files_ / "out";
    const std::string err = files_ / "err";
    const std::string in = stdin_file.empty() ? "/dev/null" : stdin_file;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, in.c_str(), O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    // Whatever the test runner ignores or blocks, tuttirun starts clean.
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    const int rc = ::posix_spawn(&pid_, argv[0], &actions, &attr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (rc != 0)
        throw std::runtime_error(std::string("cannot start tuttirun: ") + std::strerror(rc));
    pidfd_ = pidfd_open(pid_);
    if (pidfd_ < 0) throw std::runtime_error(std::string("pidfd_open: ") + std::strerror(errno));
}

launcher::~launcher() {
    if (!ended_) {
        // A launcher that did not end in time: do not leave it (or a test) hanging.
        ::kill(pid_, SIGKILL);
        int ignored;
        ::waitpid(pid_, &ignored, 0);
    }
    ::close(pidfd_);
}

bool launcher::wait(std::chrono::milliseconds limit) {
    if (ended_) return true;
    if (!poll_pidfd(pidfd_, limit)) return false;
    int wait_status = 0;
    while (::waitpid(pid_, &wait_status, 0) < 0 && errno == EINTR) {
    }
    ended_ = true;
    status_ = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
    return true;
}

std::string launcher::out() const {
    return read_file(files_.path() / "out");
}
std::string launcher::err() const {
    return read_file(files_.path() / "err");
}

result run(const std::vector<std::string>& args, std::chrono::milliseconds limit) {
    launcher l(args);
    result r;
    r.finished = l.wait(limit);
    r.status = l.status();
    r.out = l.out();
    r.err = l.err();
    return r;
}

bool wait_for_files(const std::vector<std::filesystem::path>& files,
                    std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
        bool all = true;
        for (const auto& f : files)
            all = all && std::filesystem::exists(f);
        if (all) return true;
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

bool wait_for_exit(pid_t pid, std::chrono::milliseconds limit) {
    const int fd = pidfd_open(pid);
    // Already gone (and reaped).
    if (fd < 0) return errno == ESRCH;
    const bool ended = poll_pidfd(fd, limit);
    ::close(fd);
    return ended;
}

bool process_exists(pid_t pid) {
    return ::kill(pid, 0) == 0 || errno != ESRCH;
}

} // namespace tuttirun_test
