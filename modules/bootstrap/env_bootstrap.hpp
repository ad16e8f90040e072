// The bootstrap for jobs started by tuttirun or by hand: the rank, size and
// rendezvous address come from environment variables, and rank 0 listens on
// TCP at the rendezvous; every other rank connects to it and keeps that one
// connection for the whole job. all_gather goes through rank 0 (it collects
// every blob and answers everyone), which is plenty for the few small
// exchanges a job makes before its transports exist.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "bootstrap/bootstrap.hpp"

namespace tutti {

struct env_config {
    int rank = 0;
    int size = 1;
    std::string rendezvous; // host:port where rank 0 listens; may be empty for one rank
    std::string job_id;     // empty: rank 0 makes a random one and hands it out
    std::string node;
    std::chrono::milliseconds timeout{30000};
};

// How to read one environment variable: nullopt when it is not set. Lets the
// parser be tested with a map instead of the process environment.
using env_lookup = std::function<std::optional<std::string>(std::string_view name)>;

// Reads TUTTI_RANK, TUTTI_SIZE, TUTTI_RENDEZVOUS, TUTTI_JOB_ID (optional),
// TUTTI_NODE (optional, default the host name) and TUTTI_BOOTSTRAP_TIMEOUT_MS
// (optional, default 30000). A missing or malformed value is a tutti::error
// (errc::invalid_argument) that names the variable and says how to launch.
env_config env_config_from(const env_lookup& lookup);
env_config env_config_from_environment();

// TUTTI_BOOTSTRAP_TIMEOUT_MS alone (default 30000 ms), for the PMIx bootstrap too.
std::chrono::milliseconds bootstrap_timeout_from(const env_lookup& lookup);

// Reads the process environment.
std::optional<std::string> process_env(std::string_view name);

// Splits "host:port" or "[v6 address]:port"; port 0 is allowed here (rank 0
// may listen on a port the system picks). Throws errc::invalid_argument.
std::pair<std::string, std::uint16_t> split_host_port(std::string_view address);

class env_bootstrap final : public bootstrap {
public:
    // Joins the job and returns once every rank has joined, or throws
    // tutti::error: errc::timeout naming the ranks that never came (rank 0)
    // or the address that could not be reached (other ranks),
    // errc::invalid_argument for a bad config or a rank that rank 0 turned
    // away (wrong size, duplicate rank, other job id).
    explicit env_bootstrap(env_config config);
    // As above; rank 0 calls on_listening with the port it listens on before
    // it waits for the others, so a rendezvous port of 0 can be used.
    env_bootstrap(env_config config, std::function<void(std::uint16_t port)> on_listening);
    ~env_bootstrap() override;

    env_bootstrap(const env_bootstrap&) = delete;
    env_bootstrap& operator=(const env_bootstrap&) = delete;

    int rank() const noexcept override;
    int size() const noexcept override;
    const std::string& job_id() const noexcept override;
    const std::string& node() const noexcept override;
    std::string_view method() const noexcept override { return "env"; }
    // The local address of this rank's connection with the rendezvous (for
    // rank 0: the address rank 1 reached it at); "" for a job of one rank.
    std::string reachable_address() const override;

    // Blobs up to 64 MiB each. After a failure (timeout, lost peer) the
    // bootstrap is unusable: every later call throws that failure again.
    std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> mine) override;

private:
    struct impl;
    std::unique_ptr<impl> impl_; // keeps Asio out of this header
};

} // namespace tutti
