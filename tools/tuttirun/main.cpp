// tuttirun -n N [options] program [args...]: starts N ranks of a tutti program
// on this machine. The work is in options.cpp (the command line) and job.cpp.
#include "job.hpp"
#include "options.hpp"

#include <core/error.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    auto parsed = tuttirun::parse_command_line(args);
    std::fputs(parsed.out.c_str(), stdout);
    std::fputs(parsed.err.c_str(), stderr);
    if (!parsed.options) return parsed.exit_status;
    // The same switch as the library's own debug messages.
    if (const char* debug = std::getenv("TUTTI_DEBUG");
        debug && *debug && std::string(debug) != "0")
        parsed.options->verbose = true;
    try {
        tuttirun::job job(std::move(*parsed.options));
        return job.run();
    } catch (const tutti::error& e) {
        std::fprintf(stderr, "tuttirun: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tuttirun: %s\n", e.what());
        return 1;
    }
}
