// The TCP job driver: every rank joins the job it was launched into
// (tuttirun, or mpirun through PMIx), connects to the others through the TCP
// transport alone, and runs the doctest cases that work on a job's world:
// every collective and algorithm (tests/algorithms) and the TCP cases of
// tcp_job_test.cpp. Run as
//   ./build/tools/tuttirun/tuttirun -n 3
//   ./build/transports/tcp/tests/multiprocess/tutti-tcp-job-tests
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <memory>
#include <string>

#include "bootstrap/join.hpp"
#include "support/harness.hpp"
#include "transports/tcp/tcp.hpp"

int main(int argc, char** argv) {
    asio::io_context context;
    auto launch = tutti::join_job();
    auto transport = tutti::tcp::create_transport(*launch, context);
    tutti::communicator world(transport);
    if (world.rank() == 0)
        std::printf("tutti-tcp-job-tests: %d ranks over tcp (rank 0 at %s), joined through %s\n",
                    world.size(), transport->endpoint().c_str(),
                    std::string(launch->method()).c_str());
    tutti::testing::job_world() = world;
    doctest::Context doctest_context(argc, argv);
    if (world.rank() != 0) doctest_context.setOption("minimal", true);
    doctest_context.setOption("no-colors", true);
    const int failed = doctest_context.run();
    tutti::testing::job_world() = {};
    // No rank leaves while another still reads from it; then the goodbyes.
    tutti::wait(world, tutti::barrier(world));
    world = {};
    transport.reset();
    return failed;
}
