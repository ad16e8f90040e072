// Plays a rank for the launcher tests: each mode does one thing a real rank
// might (print its job variables, fail, sleep, ignore SIGTERM, leave a
// shared-memory segment behind), reporting through stdout or marker files.
//
//   probe env                         print every TUTTI_* variable
//   probe args ARGS...                print each argument on a line of its own
//   probe lines COUNT                 COUNT lines to stdout and stderr, each written in pieces
//   probe exit CODE                   exit with CODE
//   probe shm                         create /dev/shm/tutti-<job id>-x<rank>, then exit 0
//   probe sleep SECONDS DIR           write DIR/pid.<rank>, sleep, write DIR/done.<rank>
//   probe stubborn SECONDS DIR        like sleep, ignoring SIGTERM
//   probe fail RANK ACTION SECONDS DIR  rank RANK exits with ACTION (a number) or
//                                     raises it (a signal name: KILL, SEGV); others sleep
//   probe affinity                    print rank, TUTTI_BOUND_CORE and the CPUs it may run on
//   probe stdin                       print how many bytes stdin holds
//   probe join                        join the job through tutti's bootstrap, all_gather
//                                     the ranks, print what it learned
#include <bootstrap/join.hpp>

#include <hwloc.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

extern char** environ;

namespace {

int env_int(const char* name) {
    const char* v = std::getenv(name);
    if (v == nullptr) {
        std::fprintf(stderr, "probe: %s is not set\n", name);
        std::exit(90);
    }
    return std::atoi(v);
}

void write_text(int fd, const std::string& text) {
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) std::exit(91);
        done += static_cast<std::size_t>(n);
    }
}

// Written whole or not at all, so a test never reads half a pid.
void write_marker(const std::string& dir, const std::string& name, const std::string& text) {
    const std::string tmp = dir + "/." + name + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) std::exit(92);
    write_text(fd, text);
    ::close(fd);
    if (::rename(tmp.c_str(), (dir + "/" + name).c_str()) != 0) std::exit(93);
}

int sleep_then_mark(double seconds, const std::string& dir) {
    const int rank = env_int("TUTTI_RANK");
    write_marker(dir, "pid." + std::to_string(rank), std::to_string(::getpid()));
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    write_marker(dir, "done." + std::to_string(rank), "done");
    return 0;
}

int usage() {
    std::fputs("probe: bad arguments (see the head of probe.cpp)\n", stderr);
    return 99;
}

} // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty()) return usage();
    const std::string& mode = args[0];

    if (mode == "env") {
        std::string text;
        for (char** e = environ; *e != nullptr; ++e) {
            if (std::strncmp(*e, "TUTTI_", 6) == 0) text += std::string(*e) + "\n";
        }
        write_text(STDOUT_FILENO, text);
        return 0;
    }
    if (mode == "args") {
        std::string text;
        for (std::size_t i = 1; i < args.size(); ++i)
            text += args[i] + "\n";
        write_text(STDOUT_FILENO, text);
        return 0;
    }
    if (mode == "lines" && args.size() == 2) {
        const int rank = env_int("TUTTI_RANK");
        const int count = std::atoi(args[1].c_str());
        for (int i = 0; i < count; ++i) {
            // Lengths vary with i; every line reaches the pipe in two writes.
            const std::string line = "rank " + std::to_string(rank) + " line " + std::to_string(i) +
                                     " " + std::string(i % 97, 'x') + "\n";
            const std::size_t cut = line.size() / 2;
            const int fd = i % 2 == 0 ? STDOUT_FILENO : STDERR_FILENO;
            write_text(fd, line.substr(0, cut));
            write_text(fd, line.substr(cut));
        }
        return 0;
    }
    if (mode == "exit" && args.size() == 2) return std::atoi(args[1].c_str());
    if (mode == "shm") {
        const char* job = std::getenv("TUTTI_JOB_ID");
        if (job == nullptr) return 90;
        const std::string path =
            "/dev/shm/tutti-" + std::string(job) + "-x" + std::to_string(env_int("TUTTI_RANK"));
        const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0) return 94;
        ::close(fd);
        write_text(STDOUT_FILENO, path + "\n");
        return 0;
    }
    if (mode == "sleep" && args.size() == 3)
        return sleep_then_mark(std::atof(args[1].c_str()), args[2]);
    if (mode == "stubborn" && args.size() == 3) {
        std::signal(SIGTERM, SIG_IGN);
        return sleep_then_mark(std::atof(args[1].c_str()), args[2]);
    }
    if (mode == "fail" && args.size() == 5) {
        if (env_int("TUTTI_RANK") != std::atoi(args[1].c_str()))
            return sleep_then_mark(std::atof(args[3].c_str()), args[4]);
        const std::string& action = args[2];
        if (action == "KILL") std::raise(SIGKILL);
        if (action == "SEGV") {
            std::signal(SIGSEGV, SIG_DFL);
            std::raise(SIGSEGV);
        }
        return std::atoi(action.c_str());
    }
    if (mode == "affinity") {
        hwloc_topology_t topology;
        if (hwloc_topology_init(&topology) != 0 || hwloc_topology_load(topology) != 0) return 95;
        hwloc_bitmap_t set = hwloc_bitmap_alloc();
        if (hwloc_get_cpubind(topology, set, HWLOC_CPUBIND_PROCESS) != 0) return 96;
        char* list = nullptr;
        hwloc_bitmap_list_asprintf(&list, set);
        const char* core = std::getenv("TUTTI_BOUND_CORE");
        write_text(STDOUT_FILENO, "rank=" + std::to_string(env_int("TUTTI_RANK")) +
                                      " core=" + (core ? core : "none") + " cpus=" + list + "\n");
        std::free(list);
        hwloc_bitmap_free(set);
        hwloc_topology_destroy(topology);
        return 0;
    }
    if (mode == "join") {
        const auto job = tutti::join_job();
        const std::string mine = std::to_string(job->rank());
        const auto blobs = job->all_gather(std::as_bytes(std::span(mine)));
        std::string gathered;
        for (const auto& blob : blobs) {
            if (!gathered.empty()) gathered += ",";
            gathered.append(reinterpret_cast<const char*>(blob.data()), blob.size());
        }
        write_text(STDOUT_FILENO,
                   "rank=" + std::to_string(job->rank()) + " size=" + std::to_string(job->size()) +
                       " job=" + job->job_id() + " method=" + std::string(job->method()) +
                       " gathered=" + gathered + "\n");
        return 0;
    }
    if (mode == "stdin") {
        char buffer[256];
        std::size_t total = 0;
        ssize_t n;
        while ((n = ::read(STDIN_FILENO, buffer, sizeof buffer)) > 0)
            total += n;
        write_text(STDOUT_FILENO, "stdin bytes " + std::to_string(total) + "\n");
        return 0;
    }
    return usage();
}
