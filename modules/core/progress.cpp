#include "core/progress.hpp"

#include <sched.h>

namespace tutti {

void backoff::pause(transport& t) {
    ++idle_rounds_;
    if (idle_rounds_ < spin_rounds) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        return;
    }
    if (idle_rounds_ < yield_rounds) {
        sched_yield();
        return;
    }
    t.await_activity(longest_block);
}

} // namespace tutti
