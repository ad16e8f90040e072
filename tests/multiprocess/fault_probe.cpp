// Jobs in which one rank goes away, for fault_test.cpp.
//
// fault-probe V: every rank meets at a barrier and enters an all_reduce;
// rank V kills itself with SIGKILL after the barrier instead. The others must
// fail with peer_lost naming it; they print what they got and exit 0 only in
// that case. They ignore SIGTERM so the launcher's clean-up does not end them
// before they can tell.
//
// fault-probe --closes V: rank V leaves by an exception after the barrier,
// so its job closes its transports in order (no last barrier), and stays
// alive a while; the others enter an all_reduce and must fail with peer_lost
// naming it, not wait for it forever.
//
// fault-probe --leaves V: the others first split off a communicator without
// V; V leaves as above, and the others must carry on among themselves (a
// peer closing in order is no loss), checking every sum.
//
// FAULT_REPORTS names a folder of the job's own (fault_test.cpp makes one
// per job): each survivor puts a file there once it has its answer, and the
// ranks that must stay alive for the others wait for those files instead of
// sleeping a fixed while.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tutti.hpp"

namespace {

struct leaving {}; // thrown by the rank that leaves in order

void report_answer(int rank) {
    if (const char* folder = std::getenv("FAULT_REPORTS"))
        std::ofstream(std::filesystem::path(folder) / std::to_string(rank)) << "answered\n";
}

// Stays alive until `survivors` ranks have reported their answers: one that
// went sooner would be a loss of its own to a survivor still waiting, which
// might name it instead of the victim. At most 30 s (the answers come within
// milliseconds; a survivor that never answers fails the test anyway);
// without FAULT_REPORTS, a fixed 2 s.
void stay_until_answered(int survivors) {
    const char* folder = std::getenv("FAULT_REPORTS");
    if (folder == nullptr) {
        std::this_thread::sleep_for(std::chrono::seconds(2));
        return;
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    auto answered = [&] {
        const std::filesystem::directory_iterator files(folder);
        return std::distance(begin(files), end(files));
    };
    while (answered() < survivors && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

// --closes and --leaves: 0 when the survivors saw what they should.
int leave_in_order(int leaver, bool others_carry_on) {
    int rank = -1;
    int size = 0;
    try {
        tutti::job job;
        rank = job.rank();
        size = job.size();
        auto world = job.world();
        auto others = tutti::wait(world, world.split(rank == leaver ? 1 : 0));
        tutti::wait(world, tutti::barrier(world));
        if (rank == leaver) throw leaving{};
        if (others_carry_on) {
            // Long enough for the others to see the leaver's close.
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            for (int round = 0; round < 20; ++round) {
                std::vector<std::int64_t> data(1000, round + rank);
                tutti::wait(others, tutti::all_reduce(others, data, tutti::sum));
                std::int64_t expected = 0;
                for (int r = 0; r < job.size(); ++r)
                    if (r != leaver) expected += round + r;
                if (data[999] != expected) {
                    std::printf("rank %d: round %d summed %lld, not %lld\n", rank, round,
                                static_cast<long long>(data[999]),
                                static_cast<long long>(expected));
                    return 1;
                }
            }
            std::printf("rank %d: carried on without rank %d\n", rank, leaver);
            std::fflush(stdout);
            report_answer(rank);
            return 0; // the job's last barrier fails on the leaver, quietly
        }
        std::vector<std::int64_t> data(1 << 16, rank);
        tutti::wait(world, tutti::all_reduce(world, data, tutti::sum));
        std::printf("rank %d: the all_reduce finished without rank %d\n", rank, leaver);
        return 1;
    } catch (const leaving&) {
        // Closed in order; alive, so the others see the close, not an exit.
        stay_until_answered(size - 1);
        return 0;
    } catch (const tutti::error& e) {
        std::printf("rank %d: %s: %s\n", rank, std::string(tutti::to_string(e.code())).c_str(),
                    e.what());
        std::fflush(stdout);
        report_answer(rank);
        const bool named =
            std::string(e.what()).find("rank " + std::to_string(leaver)) != std::string::npos;
        return !others_carry_on && e.code() == tutti::errc::peer_lost && named ? 0 : 1;
    }
}

} // namespace

int main(int argc, char** argv) {
    std::signal(SIGTERM, SIG_IGN);
    if (argc > 2 && std::string(argv[1]) == "--closes")
        return leave_in_order(std::atoi(argv[2]), false);
    if (argc > 2 && std::string(argv[1]) == "--leaves")
        return leave_in_order(std::atoi(argv[2]), true);
    const int victim = argc > 1 ? std::atoi(argv[1]) : 1;
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
        report_answer(job.rank());
        // So the other survivors see the victim's loss rather than ours.
        stay_until_answered(job.size() - 1);
        const bool named =
            std::string(e.what()).find("rank " + std::to_string(victim)) != std::string::npos;
        std::_Exit(e.code() == tutti::errc::peer_lost && named ? 0 : 1);
    }
}
