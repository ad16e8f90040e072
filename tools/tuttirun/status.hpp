// How a rank ended, in words and as the status a shell would report.
#pragma once

#include <string>

namespace tuttirun {

// "SIGKILL" for 9; "signal 77" for a number without a name.
std::string signal_name(int signal);

// From a waitpid() status: "exited with status 3", "killed by SIGKILL".
std::string describe_wait_status(int wait_status);

// From a waitpid() status: the exit code, or 128+S for a death by signal S.
int shell_status(int wait_status);

} // namespace tuttirun
