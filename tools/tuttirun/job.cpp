#include "job.hpp"

#include "output.hpp"
#include "secret.hpp"
#include "segments.hpp"
#include "status.hpp"

#include <bootstrap/env_bootstrap.hpp>
#include <core/error.hpp>
#include <transports/tcp/handshake.hpp>

#include <asio/buffer.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <system_error>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace tuttirun {

namespace {

constexpr std::array<std::string_view, 9> job_variables = {
    "TUTTI_RANK",       "TUTTI_SIZE",   "TUTTI_LOCAL_RANK", "TUTTI_LOCAL_SIZE",
    "TUTTI_RENDEZVOUS", "TUTTI_JOB_ID", "TUTTI_JOB_SECRET", "TUTTI_BOOTSTRAP_TIMEOUT_MS",
    "TUTTI_BOUND_CORE",
};

bool names_variable(std::string_view entry, std::string_view name) {
    return entry.size() > name.size() && entry.starts_with(name) && entry[name.size()] == '=';
}

// False when fd no longer takes output (a closed pipe).
bool write_all(int fd, std::string_view text) {
    while (!text.empty()) {
        const ssize_t n = ::write(fd, text.data(), text.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        text.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

void say(std::string_view message) {
    write_all(STDERR_FILENO, fmt::format("tuttirun: {}\n", message));
}

// What a child reports through its close-on-exec pipe when it cannot become
// the rank program; a successful exec closes the pipe and reports nothing.
struct child_failure {
    enum step_kind : int { setup, bind, exec } step;
    int error;
};

int open_output_file(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        throw tutti::error(
            tutti::errc::invalid_argument,
            fmt::format("--output-dir: cannot open '{}': {}", path.string(), std::strerror(errno)));
    }
    return fd;
}

// A descriptor that closes itself, so that no early return leaks one into
// the next rank.
struct owned_fd {
    int fd = -1;
    owned_fd() = default;
    explicit owned_fd(int f) : fd(f) {}
    owned_fd(owned_fd&& o) noexcept : fd(std::exchange(o.fd, -1)) {}
    owned_fd& operator=(owned_fd&& o) noexcept {
        reset();
        fd = std::exchange(o.fd, -1);
        return *this;
    }
    ~owned_fd() { reset(); }
    void reset() {
        if (fd >= 0) ::close(fd);
        fd = -1;
    }
    int release() { return std::exchange(fd, -1); }
};

struct pipe_pair {
    owned_fd read_end;
    owned_fd write_end;
};

pipe_pair make_pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
        throw std::system_error(errno, std::generic_category(), "cannot create a pipe");
    return {owned_fd(fds[0]), owned_fd(fds[1])};
}

} // namespace

std::vector<std::string> rank_environment(const std::vector<std::string>& base,
                                          const rank_identity& identity) {
    std::vector<std::string> env;
    env.reserve(base.size() + job_variables.size() + 1);
    for (const auto& entry : base) {
        bool ours = false;
        for (auto name : job_variables)
            ours = ours || names_variable(entry, name);
        // The ranks form a job of their own, not part of an enclosing PMIx
        // job (tuttirun itself started by mpirun), which tutti would join first.
        ours = ours || entry.starts_with("PMIX_");
        if (identity.node) ours = ours || names_variable(entry, "TUTTI_NODE");
        if (!ours) env.push_back(entry);
    }
    env.push_back(fmt::format("TUTTI_RANK={}", identity.rank));
    env.push_back(fmt::format("TUTTI_SIZE={}", identity.size));
    // The ranks this tuttirun starts are on this machine.
    env.push_back(fmt::format("TUTTI_LOCAL_RANK={}", identity.local_rank.value_or(identity.rank)));
    env.push_back(fmt::format("TUTTI_LOCAL_SIZE={}", identity.local_size.value_or(identity.size)));
    env.push_back(fmt::format("TUTTI_RENDEZVOUS={}", identity.rendezvous));
    env.push_back(fmt::format("TUTTI_JOB_ID={}", identity.job_id));
    env.push_back(fmt::format("TUTTI_BOOTSTRAP_TIMEOUT_MS={}", identity.bootstrap_timeout.count()));
    if (!identity.secret.empty())
        env.push_back(fmt::format("TUTTI_JOB_SECRET={}", identity.secret));
    if (identity.node) env.push_back(fmt::format("TUTTI_NODE={}", *identity.node));
    if (identity.bound_core)
        env.push_back(fmt::format("TUTTI_BOUND_CORE={}", *identity.bound_core));
    return env;
}

std::string make_job_id() {
    std::random_device device;
    const std::uint64_t high = device();
    const std::uint64_t low = device();
    return fmt::format("{:016x}", (high << 32) | low);
}

std::string free_rendezvous() {
    asio::io_context io;
    asio::ip::tcp::acceptor acceptor(io,
                                     asio::ip::tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    const auto port = acceptor.local_endpoint().port();
    acceptor.close();
    return fmt::format("127.0.0.1:{}", port);
}

struct job::output_stream {
    output_stream(asio::io_context& io, int fd, std::string tag, int target)
        : pipe(io, fd), lines(std::move(tag)), target_fd(target) {}
    asio::posix::stream_descriptor pipe;
    line_prefixer lines;
    int target_fd;
    std::array<char, 16 * 1024> buffer;
};

struct job::rank_process {
    int rank = 0;
    pid_t pid = -1;
    bool running = false;
    std::vector<std::unique_ptr<output_stream>> streams;
};

job::job(launch_options options)
    : options_(std::move(options)), id_(options_.job_id.value_or(make_job_id())),
      rendezvous_(options_.rendezvous.empty() ? free_rendezvous() : options_.rendezvous),
      secret_(job_secret_for(options_.secret_file,
                             tutti::process_env(tutti::tcp::job_secret_variable),
                             options_.partial())),
      child_signal_(io_, SIGCHLD), stop_signals_(io_, SIGINT, SIGTERM, SIGHUP), timeout_timer_(io_),
      grace_timer_(io_), drain_timer_(io_) {
    if (options_.ranks < 1) {
        throw tutti::error(tutti::errc::invalid_argument,
                           fmt::format("-n must be at least 1, not {}", options_.ranks));
    }
    if (options_.command.empty())
        throw tutti::error(tutti::errc::invalid_argument, "no program to run");
    if (options_.first_rank < 0 || options_.first_rank + options_.ranks > options_.size())
        throw tutti::error(tutti::errc::invalid_argument,
                           fmt::format("ranks {}..{} are not part of a job of {}",
                                       options_.first_rank,
                                       options_.first_rank + options_.ranks - 1, options_.size()));
    if (options_.bind == bind_policy::core) binder_.emplace();
    for (char** e = environ; *e != nullptr; ++e)
        base_environment_.emplace_back(*e);
}

job::~job() = default;

void job::debug(std::string_view message) const {
    if (options_.verbose) say(fmt::format("debug: {}", message));
}

void job::fail(int status) {
    if (!status_) status_ = status;
    end_ranks();
}

int job::run() {
    // A closed stdout must not kill the launcher and leave its ranks behind.
    ::signal(SIGPIPE, SIG_IGN);
    if (options_.output_dir) {
        std::error_code ec;
        std::filesystem::create_directories(*options_.output_dir, ec);
        if (ec) {
            throw tutti::error(tutti::errc::invalid_argument,
                               fmt::format("--output-dir: cannot create '{}': {}",
                                           options_.output_dir->string(), ec.message()));
        }
    }
    if (options_.partial())
        debug(fmt::format("job {}: ranks {}..{} of {} of '{}', rendezvous {}", id_,
                          options_.first_rank, options_.first_rank + options_.ranks - 1,
                          options_.size(), options_.command.front(), rendezvous_));
    else
        debug(fmt::format("job {}: {} rank(s) of '{}', rendezvous {}", id_, options_.ranks,
                          options_.command.front(), rendezvous_));

    for (int r = 0; r < options_.ranks && !ending_; ++r) {
        try {
            if (!launch(r)) break;
        } catch (const std::exception& e) {
            // The ranks already started must still be ended and reaped.
            say(fmt::format("cannot start rank {}: {}", r, e.what()));
            fail(1);
        }
    }
    wait_for_children();
    wait_for_stop_signal();
    start_timeout();
    // Children may have ended before the first wait was armed.
    reap();
    // No rank started (the program cannot be run), or all ended already.
    if (running_ == 0) on_all_ended();
    io_.run();

    for (const auto& name : remove_job_segments(id_))
        debug(fmt::format("removed leftover shared-memory segment /dev/shm/{}", name));
    return status_.value_or(0);
}

bool job::launch(int local_rank) {
    const int rank = options_.first_rank + local_rank;
    auto process = std::make_unique<rank_process>();
    process->rank = rank;
    rank_identity identity{.rank = rank,
                           .size = options_.size(),
                           .job_id = id_,
                           .rendezvous = rendezvous_,
                           .bootstrap_timeout = options_.bootstrap_timeout,
                           .node = options_.node,
                           .local_rank = local_rank,
                           .local_size = options_.ranks,
                           .secret = secret_};
    int core = -1;
    if (binder_) {
        core = binder_->core_for_rank(local_rank);
        identity.bound_core = core;
    }

    // Everything the child needs is built here: after fork it only calls
    // what is safe there.
    std::vector<std::string> env = rank_environment(base_environment_, identity);
    std::vector<char*> envp;
    for (auto& e : env)
        envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = options_.command;
    std::vector<char*> argv;
    for (auto& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);

    owned_fd null_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    owned_fd child_out, child_err, parent_out, parent_err;
    if (options_.prefix) {
        auto out = make_pipe();
        auto err = make_pipe();
        parent_out = std::move(out.read_end);
        child_out = std::move(out.write_end);
        parent_err = std::move(err.read_end);
        child_err = std::move(err.write_end);
    } else if (options_.output_dir) {
        const auto& dir = *options_.output_dir;
        child_out = owned_fd(open_output_file(dir / fmt::format("rank.{}.out", rank)));
        child_err = owned_fd(open_output_file(dir / fmt::format("rank.{}.err", rank)));
    }
    auto report = make_pipe();
    const pid_t parent = ::getpid();
    const core_binder* binder = binder_ ? &*binder_ : nullptr;

    const pid_t pid = ::fork();
    if (pid < 0) {
        say(fmt::format("cannot start rank {}: fork: {}", rank, std::strerror(errno)));
        fail(1);
        return false;
    }
    if (pid == 0) {
        auto give_up = [&](child_failure::step_kind step, int error) {
            const child_failure failure{step, error};
            [[maybe_unused]] const auto written =
                ::write(report.write_end.fd, &failure, sizeof failure);
            ::_exit(not_found_status);
        };
        // The launcher's handlers and mask are not the rank's.
        for (int s : {SIGINT, SIGTERM, SIGCHLD, SIGPIPE, SIGHUP, SIGQUIT})
            ::signal(s, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        // Its own process group: a terminal's Ctrl-C reaches only tuttirun,
        // which ends the ranks in order, and ending a rank ends its children.
        ::setpgid(0, 0);
        // If tuttirun is killed outright, the ranks go too.
        if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) give_up(child_failure::setup, errno);
        if (::getppid() != parent) ::_exit(1);
        if (null_fd.fd >= 0 && ::dup2(null_fd.fd, STDIN_FILENO) < 0)
            give_up(child_failure::setup, errno);
        if (child_out.fd >= 0 && ::dup2(child_out.fd, STDOUT_FILENO) < 0)
            give_up(child_failure::setup, errno);
        if (child_err.fd >= 0 && ::dup2(child_err.fd, STDERR_FILENO) < 0)
            give_up(child_failure::setup, errno);
        if (binder != nullptr) {
            if (const int error = binder->bind_process(core); error != 0)
                give_up(child_failure::bind, error);
        }
        ::execvpe(argv[0], argv.data(), envp.data());
        give_up(child_failure::exec, errno);
    }

    // Set here too, so that the group exists whichever of us runs first.
    ::setpgid(pid, pid);
    report.write_end.reset();
    child_out.reset();
    child_err.reset();
    child_failure failure{};
    ssize_t n;
    do {
        n = ::read(report.read_end.fd, &failure, sizeof failure);
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
        int ignored;
        while (::waitpid(pid, &ignored, 0) < 0 && errno == EINTR) {
        }
        switch (failure.step) {
        case child_failure::exec:
            say(fmt::format("cannot run '{}': {}", options_.command.front(),
                            std::strerror(failure.error)));
            fail(failure.error == ENOENT ? not_found_status : cannot_execute_status);
            break;
        case child_failure::bind:
            say(fmt::format("cannot bind rank {} to core {} (cpus {}): {}", rank, core,
                            binder_->cpu_list(core), std::strerror(failure.error)));
            fail(1);
            break;
        case child_failure::setup:
            say(fmt::format("cannot set up rank {}: {}", rank, std::strerror(failure.error)));
            fail(1);
            break;
        }
        return false;
    }

    process->pid = pid;
    process->running = true;
    ++running_;
    if (options_.prefix) {
        const std::string tag = fmt::format("[{}] ", rank);
        process->streams.push_back(
            std::make_unique<output_stream>(io_, parent_out.release(), tag, STDOUT_FILENO));
        process->streams.push_back(
            std::make_unique<output_stream>(io_, parent_err.release(), tag, STDERR_FILENO));
        for (auto& stream : process->streams) {
            ++open_streams_;
            read_output(*stream);
        }
    }
    if (binder_) {
        debug(fmt::format("rank {} started (pid {}), bound to core {} (cpus {})", rank, pid, core,
                          binder_->cpu_list(core)));
    } else {
        debug(fmt::format("rank {} started (pid {})", rank, pid));
    }
    ranks_.push_back(std::move(process));
    return true;
}

void job::read_output(output_stream& stream) {
    stream.pipe.async_read_some(
        asio::buffer(stream.buffer), [this, &stream](std::error_code ec, std::size_t n) {
            if (!ec) {
                // Where our output is gone, closing the rank's pipe passes that
                // on: its next write fails, as in a shell pipeline.
                if (write_all(stream.target_fd, stream.lines.feed({stream.buffer.data(), n})))
                    read_output(stream);
                else
                    close_stream(stream);
                return;
            }
            (void)write_all(stream.target_fd, stream.lines.finish());
            close_stream(stream);
        });
}

void job::close_stream(output_stream& stream) {
    std::error_code ignored;
    stream.pipe.close(ignored);
    if (--open_streams_ == 0) drain_timer_.cancel();
}

void job::wait_for_children() {
    child_signal_.async_wait([this](std::error_code ec, int) {
        if (ec) return;
        reap();
        if (running_ > 0) wait_for_children();
    });
}

void job::reap() {
    for (auto& process : ranks_) {
        if (!process->running) continue;
        int wait_status = 0;
        pid_t got;
        do {
            got = ::waitpid(process->pid, &wait_status, WNOHANG);
        } while (got < 0 && errno == EINTR);
        if (got == process->pid) on_rank_end(*process, wait_status);
    }
}

void job::on_rank_end(rank_process& process, int wait_status) {
    process.running = false;
    --running_;
    const auto how = describe_wait_status(wait_status);
    debug(fmt::format("rank {} (pid {}) {}", process.rank, process.pid, how));
    if (!ending_ && shell_status(wait_status) != 0) {
        say(fmt::format("rank {} (pid {}) {}", process.rank, process.pid, how));
        if (running_ > 0) debug(fmt::format("ending the other {} rank(s)", running_));
        fail(shell_status(wait_status));
    }
    if (running_ == 0) on_all_ended();
}

void job::on_all_ended() {
    if (all_ended_) return;
    all_ended_ = true;
    child_signal_.cancel();
    stop_signals_.cancel();
    timeout_timer_.cancel();
    grace_timer_.cancel();
    stop_streams_when_drained();
}

void job::stop_streams_when_drained() {
    if (open_streams_ == 0) return;
    // A rank's own children may still hold its pipes open; give them the
    // grace period to finish writing, then stop listening.
    drain_timer_.expires_after(options_.grace);
    drain_timer_.async_wait([this](std::error_code ec) {
        if (!ec) stop_reading_output();
    });
}

void job::stop_reading_output() {
    for (auto& process : ranks_) {
        for (auto& stream : process->streams) {
            std::error_code ignored;
            stream->pipe.cancel(ignored);
        }
    }
}

void job::wait_for_stop_signal() {
    stop_signals_.async_wait([this](std::error_code ec, int signal) {
        if (ec) return;
        if (!ending_) {
            say(fmt::format("got {}; ending {} rank(s)", signal_name(signal), running_));
            fail(128 + signal);
        } else {
            // Asked twice: do not wait out the grace period.
            say(fmt::format("got {} again; killing {} rank(s)", signal_name(signal), running_));
            signal_running(SIGKILL);
        }
        wait_for_stop_signal();
    });
}

void job::start_timeout() {
    if (!options_.timeout || all_ended_) return;
    timeout_timer_.expires_after(*options_.timeout);
    timeout_timer_.async_wait([this](std::error_code ec) {
        if (ec || ending_) return;
        say(fmt::format("the job ran longer than --timeout {} s; ending {} rank(s)",
                        static_cast<double>(options_.timeout->count()) / 1000.0, running_));
        fail(timeout_status);
    });
}

void job::end_ranks() {
    if (ending_) return;
    ending_ = true;
    if (running_ == 0) return;
    signal_running(SIGTERM);
    grace_timer_.expires_after(options_.grace);
    grace_timer_.async_wait([this](std::error_code ec) {
        if (ec || running_ == 0) return;
        debug(fmt::format("{} rank(s) still running after {} ms; sending SIGKILL", running_,
                          options_.grace.count()));
        signal_running(SIGKILL);
    });
}

void job::signal_running(int signal) {
    for (auto& process : ranks_) {
        if (!process->running) continue;
        // The whole group, so that what a rank started ends with it.
        if (::kill(-process->pid, signal) != 0) ::kill(process->pid, signal);
    }
}

} // namespace tuttirun
