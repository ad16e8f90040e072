// Shared-memory segments a job leaves behind. The shm transport names its
// segments "/tutti-<job id>-...", which appear as files in /dev/shm; a rank
// that crashes or is killed cannot unlink its own, so the launcher does.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace tuttirun {

// Removes every entry of dir named "tutti-<job_id>" or "tutti-<job_id>" and
// then a character other than a letter or digit (so not another job whose id
// merely starts with this one), and
// returns the names removed (in directory order). Entries that vanish
// meanwhile are skipped; a missing dir removes nothing.
std::vector<std::string> remove_job_segments(std::string_view job_id,
                                             const std::filesystem::path& dir = "/dev/shm");

} // namespace tuttirun
