#include "status.hpp"

#include <fmt/format.h>

#include <string.h>
#include <sys/wait.h>

namespace tuttirun {

std::string signal_name(int signal) {
    if (const char* abbrev = sigabbrev_np(signal)) return fmt::format("SIG{}", abbrev);
    return fmt::format("signal {}", signal);
}

std::string describe_wait_status(int wait_status) {
    if (WIFEXITED(wait_status))
        return fmt::format("exited with status {}", WEXITSTATUS(wait_status));
    if (WIFSIGNALED(wait_status)) {
        return fmt::format("killed by {}{}", signal_name(WTERMSIG(wait_status)),
                           WCOREDUMP(wait_status) ? " (core dumped)" : "");
    }
    return fmt::format("ended with wait status {:#x}", wait_status);
}

int shell_status(int wait_status) {
    if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
    if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
    return 1;
}

} // namespace tuttirun
