// A job in which one rank dies in the middle of a collective, for
// fault_test.cpp. Every rank meets at a barrier and enters an all_reduce;
// rank `victim` kills itself with SIGKILL after the barrier instead. The others must fail with
// peer_lost naming it; they print what they got and exit 0 only in that case. They ignore SIGTERM
// so the launcher's clean-up does not end them before they can tell.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tutti.hpp"

int main(int argc, char** argv) {
    const int victim = argc > 1 ? std::atoi(argv[1]) : 1;
    std::signal(SIGTERM, SIG_IGN);
    tutti::job job;
    auto world = job.world();
    std::vector<std::int64_t> data(1 << 16, job.rank());
    try {
        // The victim may leave the barrier while a peer still waits in it
        // for a third rank; a transport that sees the loss at once (TCP)
        // then fails that wait, which must name the victim too.
        tutti::wait(world, tutti::barrier(world));
        if (job.rank() == victim) std::raise(SIGKILL);
        tutti::wait(world, tutti::all_reduce(world, data, tutti::sum));
        std::printf("rank %d: the all_reduce finished without rank %d\n", job.rank(), victim);
        return 1;
    } catch (const tutti::error& e) {
        std::printf("rank %d: %s: %s\n", job.rank(),
                    std::string(tutti::to_string(e.code())).c_str(), e.what());
        std::fflush(stdout);
        // Stay a moment, so the other survivors see the victim's loss rather
        // than ours.
        std::this_thread::sleep_for(std::chrono::seconds(2));
        const bool named =
            std::string(e.what()).find("rank " + std::to_string(victim)) != std::string::npos;
        std::_Exit(e.code() == tutti::errc::peer_lost && named ? 0 : 1);
    }
}
