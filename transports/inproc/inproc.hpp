// The in-process transport: N ranks inside one process, as coroutines on one
// io_context (the default, fast and deterministic, for tests that sweep large
// matrices) or as threads with an io_context each (for the blocking API).
// A send copies straight into a posted receive, or queues until one is posted.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/communicator.hpp"
#include "core/mailbox.hpp"
#include "core/task.hpp"
#include "core/transport.hpp"

namespace tutti::inproc {

class world : public std::enable_shared_from_this<world> {
public:
    explicit world(int size);

    int size() const noexcept { return static_cast<int>(mailboxes_.size()); }

    // The endpoint of one rank, whose coroutines run on `context`.
    std::shared_ptr<tutti::transport> endpoint(int rank, asio::io_context& context);

    // Every rank's pending and later receives fail, naming the lost rank,
    // so the others finish instead of waiting for it forever.
    void lose(int rank, const std::string& why);
    void fail_everything(std::exception_ptr failure);

    std::vector<std::string> pending() const;
    mailbox& mailbox_of(int rank) { return *mailboxes_.at(static_cast<std::size_t>(rank)); }

private:
    std::vector<std::unique_ptr<mailbox>> mailboxes_;
};

// Runs body(comm) for every rank of a new world of `size` ranks, all as
// coroutines on one io_context in the calling thread. Returns when all are
// done. Rethrows the first failure of any rank (the others then fail with
// peer_lost and are not reported); throws errc::deadlock, with every
// receive still waiting, when ranks wait for messages nobody will send.
void run(int size, const std::function<task<void>(communicator)>& body);

// As run(), with one thread and one io_context per rank, for code that uses
// the blocking forms (tutti::wait).
void run_threads(int size, const std::function<void(communicator)>& body);

} // namespace tutti::inproc
