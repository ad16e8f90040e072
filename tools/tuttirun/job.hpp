// One run of `tuttirun`: starts the ranks, passes their output on, waits for
// them, ends them all when one fails (or on a signal, or at the timeout), and
// cleans up after them. Everything happens on one thread in one io_context:
// pipes are stream_descriptors, SIGCHLD/SIGINT/SIGTERM come through
// signal_sets, the grace period and the timeout are timers.
#pragma once

#include "binding.hpp"
#include "options.hpp"

#include <asio/io_context.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tuttirun {

// Who a rank is, as its environment tells it.
struct rank_identity {
    int rank = 0;
    int size = 1;
    std::string job_id;
    std::string rendezvous;
    std::chrono::milliseconds bootstrap_timeout{30000};
    std::optional<std::string> node;
    std::optional<int> bound_core;
    // This rank among the ranks this tuttirun starts (default: rank, size).
    std::optional<int> local_rank;
    std::optional<int> local_size;
    std::string secret; // TUTTI_JOB_SECRET; not set when empty
};

// The rank's environment: base ("NAME=value" entries, e.g. tuttirun's own)
// without any job variables it may carry from an enclosing job (TUTTI_RANK
// and the like, PMIX_*), plus this rank's. TUTTI_NODE passes through unless identity.node is set.
std::vector<std::string> rank_environment(const std::vector<std::string>& base,
                                          const rank_identity& identity);

// 16 hex digits from std::random_device: names the job and its segments.
std::string make_job_id();

// "127.0.0.1:PORT" with a port that was free a moment ago: bound to port 0,
// read back, closed, for rank 0 to listen on.
std::string free_rendezvous();

class job {
public:
    // Throws tutti::error when the job cannot be set up (--bind core without
    // a usable topology, say).
    explicit job(launch_options options);
    ~job();
    job(const job&) = delete;
    job& operator=(const job&) = delete;

    const std::string& id() const noexcept { return id_; }
    const std::string& rendezvous() const noexcept { return rendezvous_; }
    const std::string& secret() const noexcept { return secret_; }

    // Runs the job to its end and returns tuttirun's exit status (see the
    // footer of --help). Call once.
    int run();

private:
    struct output_stream;
    struct rank_process;

    bool launch(int local_rank);
    void wait_for_children();
    void reap();
    void on_rank_end(rank_process& process, int wait_status);
    void on_all_ended();
    void wait_for_stop_signal();
    void start_timeout();
    void end_ranks();
    void signal_running(int signal);
    void read_output(output_stream& stream);
    void close_stream(output_stream& stream);
    void stop_reading_output();
    void stop_streams_when_drained();
    void debug(std::string_view message) const;
    void fail(int status);

    launch_options options_;
    std::string id_;
    std::string rendezvous_;
    std::string secret_;
    std::optional<core_binder> binder_;
    std::vector<std::string> base_environment_;

    asio::io_context io_;
    asio::signal_set child_signal_;
    asio::signal_set stop_signals_;
    asio::steady_timer timeout_timer_;
    asio::steady_timer grace_timer_;
    asio::steady_timer drain_timer_;

    std::vector<std::unique_ptr<rank_process>> ranks_;
    int running_ = 0;
    int open_streams_ = 0;
    bool ending_ = false;
    bool all_ended_ = false;
    std::optional<int> status_;
};

} // namespace tuttirun
