#include "options.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

namespace tuttirun {

namespace {

// host:port with a non-empty host and a port in 1..65535; CLI11 reports the
// returned text as the reason the value was refused.
std::string check_rendezvous(const std::string& value) {
    const auto colon = value.rfind(':');
    if (colon == std::string::npos || colon == 0) return "'" + value + "' is not host:port";
    const auto port_text = std::string_view(value).substr(colon + 1);
    int port = 0;
    const auto [end, ec] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc{} || end != port_text.data() + port_text.size() || port < 1 || port > 65535)
        return "port '" + std::string(port_text) + "' in '" + value +
               "' is not a number in 1..65535";
    return {};
}

// Job ids name shared-memory segments and must not be the start of another
// job's id followed by a separator (see segments.hpp): letters and digits.
std::string check_job_id(const std::string& value) {
    if (value.empty() || value.size() > 64 ||
        value.find_first_not_of("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") !=
            std::string::npos)
        return "job id '" + value + "' is not 1 to 64 letters and digits";
    return {};
}

constexpr const char* usage_line = "Usage: tuttirun -n N [options] [--] program [args...]";

// CLI11 would print "tuttirun [OPTIONS]", which hides the program.
class usage_formatter : public CLI::Formatter {
public:
    std::string make_usage(const CLI::App*, std::string) const override {
        return std::string(usage_line) + "\n";
    }
};

} // namespace

parse_outcome parse_command_line(const std::vector<std::string>& args) {
    launch_options o;
    CLI::App app{
        "Starts N ranks of a tutti program on this machine and waits for them; with\n"
        "--first-rank and --size, one part of a job that spans hosts (a tuttirun per host).\n"
        "Each rank gets TUTTI_RANK, TUTTI_SIZE, TUTTI_LOCAL_RANK, TUTTI_LOCAL_SIZE,\n"
        "TUTTI_RENDEZVOUS, TUTTI_JOB_ID, TUTTI_JOB_SECRET and TUTTI_BOOTSTRAP_TIMEOUT_MS in\n"
        "its environment (and TUTTI_NODE, TUTTI_BOUND_CORE when asked); its stdin is\n"
        "/dev/null.\n",
        "tuttirun"};
    // Everything from the first positional on belongs to the program, even
    // arguments that look like tuttirun's options.
    app.prefix_command();
    app.formatter(std::make_shared<usage_formatter>());
    app.footer(
        "Exit status: the first failing rank's status (128+S for a rank killed by signal S),\n"
        "124 when --timeout expires, 128+S when tuttirun itself gets signal S, 126/127 when\n"
        "the program cannot be run, 2 for a usage error. When a rank fails, or on SIGINT,\n"
        "SIGTERM or SIGHUP, every other rank gets SIGTERM, then SIGKILL after --grace-ms.\n"
        "After the job, shared-memory segments /dev/shm/tutti-<job id>* are removed.");

    app.add_option("-n,--ranks", o.ranks, "number of ranks to start (at least 1)")
        ->required()
        ->type_name("N")
        ->check(CLI::Range(1, 65536));
    app.add_flag("--prefix", o.prefix, "tag each line of a rank's output with \"[rank] \"");
    std::string output_dir;
    auto* dir_opt = app.add_option("--output-dir", output_dir,
                                   "write rank r's stdout and stderr to DIR/rank.r.out and "
                                   "DIR/rank.r.err (DIR is created if needed)")
                        ->type_name("DIR");
    app.get_option("--prefix")->excludes(dir_opt);
    app.add_option("--rendezvous", o.rendezvous,
                   "host:port where rank 0 listens for the bootstrap "
                   "(default: a free port on 127.0.0.1)")
        ->type_name("HOST:PORT")
        ->check(CLI::Validator(check_rendezvous, ""));
    std::string node;
    auto* node_opt =
        app.add_option("--node", node, "set TUTTI_NODE=NAME for every rank")->type_name("NAME");
    int bootstrap_ms = static_cast<int>(o.bootstrap_timeout.count());
    app.add_option("--timeout-bootstrap", bootstrap_ms,
                   "milliseconds the ranks wait for each other at start "
                   "(TUTTI_BOOTSTRAP_TIMEOUT_MS)")
        ->type_name("MS")
        ->capture_default_str()
        ->check(CLI::Range(1, 86'400'000));
    int grace_ms = static_cast<int>(o.grace.count());
    app.add_option("--grace-ms", grace_ms,
                   "milliseconds between SIGTERM and SIGKILL when ending ranks")
        ->type_name("MS")
        ->capture_default_str()
        ->check(CLI::Range(0, 3'600'000));
    double timeout_s = 0;
    auto* timeout_opt =
        app.add_option("--timeout", timeout_s,
                       "end the whole job after SECONDS (may be fractional), exit status 124")
            ->type_name("SECONDS")
            ->check(CLI::Range(0.001, 31'536'000.0));
    std::string bind = "none";
    app.add_option("--bind", bind,
                   "core: bind rank r to core r mod (the cores tuttirun may run on), "
                   "exported as TUTTI_BOUND_CORE; none: leave ranks unbound")
        ->type_name("MODE")
        ->capture_default_str()
        ->check(CLI::IsMember({"core", "none"}));
    app.add_option("--first-rank", o.first_rank,
                   "start ranks R.. of a job that other tuttiruns (other hosts) start the rest "
                   "of; needs --size, --job-id, --rendezvous and a shared secret")
        ->type_name("R")
        ->check(CLI::Range(0, 65535));
    int job_size = 0;
    auto* size_opt = app.add_option("--size", job_size,
                                    "ranks in the whole job, over every tuttirun (default: -n)")
                         ->type_name("N")
                         ->check(CLI::Range(1, 65536));
    std::string job_id;
    auto* job_id_opt = app.add_option("--job-id", job_id,
                                      "the job's id (letters and digits), the same for every "
                                      "tuttirun of the job (default: a random one)")
                           ->type_name("ID")
                           ->check(CLI::Validator(check_job_id, ""));
    std::string secret_file;
    auto* secret_opt =
        app.add_option("--secret-file", secret_file,
                       "read the job secret (TUTTI_JOB_SECRET, 64 hex digits) from FILE, or "
                       "create FILE with a new one (mode 0600) if it does not exist; default: "
                       "TUTTI_JOB_SECRET if set, else a new secret (one tuttirun only)")
            ->type_name("FILE");
    app.add_flag("-v,--verbose", o.verbose,
                 "print debug messages: the job id, each rank's start and end, removed segments "
                 "(also on when TUTTI_DEBUG is set and not 0)");

    parse_outcome outcome;
    std::ostringstream out;
    std::ostringstream err;
    try {
        std::vector<std::string> reversed(args.rbegin(), args.rend());
        app.parse(reversed);
        o.command = app.remaining();
        // prefix_command() lets unknown options through as the program's; an
        // option before the program is tuttirun's, and one it does not know.
        if (!o.command.empty() && o.command.front() == "--") {
            o.command.erase(o.command.begin());
        } else if (!o.command.empty() && o.command.front().starts_with("-")) {
            throw CLI::ExtrasError({o.command.front()});
        }
    } catch (const CLI::CallForHelp& e) {
        outcome.exit_status = app.exit(e, out, err);
        outcome.out = out.str();
        return outcome;
    } catch (const CLI::ParseError& e) {
        err << "tuttirun: " << e.what() << "\n" << usage_line << "  (see tuttirun --help)\n";
        // CLI11's own codes are 100 and up; 2 is what shells and getopt tools use.
        outcome.exit_status = usage_error_status;
        outcome.err = err.str();
        return outcome;
    }
    if (o.command.empty()) {
        outcome.exit_status = usage_error_status;
        outcome.err =
            fmt::format("tuttirun: no program given\n{}  (see tuttirun --help)\n", usage_line);
        return outcome;
    }
    if (!output_dir.empty()) o.output_dir = output_dir;
    if (node_opt->count() > 0) o.node = node;
    o.bootstrap_timeout = std::chrono::milliseconds(bootstrap_ms);
    o.grace = std::chrono::milliseconds(grace_ms);
    if (timeout_opt->count() > 0)
        o.timeout = std::chrono::milliseconds(std::llround(timeout_s * 1000.0));
    o.bind = bind == "core" ? bind_policy::core : bind_policy::none;
    if (size_opt->count() > 0) o.job_size = job_size;
    if (job_id_opt->count() > 0) o.job_id = job_id;
    if (secret_opt->count() > 0) o.secret_file = secret_file;
    std::string part_error;
    if (o.first_rank + o.ranks > o.size())
        part_error = fmt::format("--first-rank {} and -n {} go past the job's {} ranks (--size)",
                                 o.first_rank, o.ranks, o.size());
    else if (o.partial() && o.rendezvous.empty())
        part_error = fmt::format("ranks {}..{} of {} are only part of the job: --rendezvous must "
                                 "name where rank 0 listens, the same for every tuttirun",
                                 o.first_rank, o.first_rank + o.ranks - 1, o.size());
    else if (o.partial() && !o.job_id)
        part_error = "part of a job (--size above -n) needs --job-id, the same for every tuttirun";
    if (!part_error.empty()) {
        outcome.exit_status = usage_error_status;
        outcome.err =
            fmt::format("tuttirun: {}\n{}  (see tuttirun --help)\n", part_error, usage_line);
        return outcome;
    }
    outcome.options = std::move(o);
    return outcome;
}

} // namespace tuttirun
