#include "transports/inproc/inproc.hpp"

#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "core/error.hpp"

namespace tutti::inproc {

namespace {

class endpoint final : public tutti::transport {
public:
    endpoint(std::shared_ptr<world> w, int rank, asio::io_context& context)
        : world_(std::move(w)), rank_(rank), context_(context) {}

    std::string_view name() const noexcept override { return "inproc"; }
    int rank() const noexcept override { return rank_; }
    int size() const noexcept override { return world_->size(); }
    asio::io_context& context() noexcept override { return context_; }
    bool single_copy_now() const noexcept override { return true; }
    transport_capabilities capabilities() const noexcept override {
        return {.single_copy = single_copy_now(),
                .remote_memory_access = false,
                .latency_us = 0.1,
                .bandwidth_gb_per_s = 20.0};
    }

    request isend(int dest, const message_header& header,
                  std::span<const std::byte> data) override {
        if (dest < 0 || dest >= size())
            throw error(errc::invalid_argument,
                        fmt::format("send to rank {} outside the world of {}", dest, size()));
        // Delivered (copied) before returning: the send is already complete.
        world_->mailbox_of(dest).deliver(header, data);
        return completed_request();
    }

    request irecv(const message_header& expected, std::span<std::byte> into) override {
        return world_->mailbox_of(rank_).post(expected, into, false);
    }

    request irecv_any_size(const message_header& expected) override {
        return world_->mailbox_of(rank_).post(expected, {}, true);
    }

    bool withdraw(const request& receive) override {
        return world_->mailbox_of(rank_).withdraw(receive);
    }

private:
    std::shared_ptr<world> world_;
    int rank_;
    asio::io_context& context_;
};

void check_size(int size) {
    if (size < 1)
        throw error(errc::invalid_argument,
                    fmt::format("an in-process world needs at least one rank, not {}", size));
}

} // namespace

world::world(int size) {
    check_size(size);
    for (int i = 0; i < size; ++i)
        mailboxes_.push_back(std::make_unique<mailbox>());
}

std::shared_ptr<tutti::transport> world::endpoint(int rank, asio::io_context& context) {
    return std::make_shared<inproc::endpoint>(shared_from_this(), rank, context);
}

void world::lose(int rank, const std::string& why) {
    fail_everything(std::make_exception_ptr(
        error(errc::peer_lost, fmt::format("rank {} failed: {}", rank, why))));
}

void world::fail_everything(std::exception_ptr failure) {
    for (auto& box : mailboxes_)
        box->fail(failure);
}

std::vector<std::string> world::pending() const {
    std::vector<std::string> lines;
    for (std::size_t r = 0; r < mailboxes_.size(); ++r)
        for (auto& line : mailboxes_[r]->pending())
            lines.push_back(fmt::format("rank {}: {}", r, line));
    return lines;
}

namespace {

std::string what_of(const std::exception_ptr& e) {
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& x) {
        return x.what();
    } catch (...) {
        return "unknown exception";
    }
}

// Collects the outcome of every rank; the first failure is the cause, the
// peer_lost failures it provokes in other ranks are consequences.
struct outcomes {
    std::mutex mutex;
    std::exception_ptr first_failure;
    int finished = 0;

    void record(world& w, int rank, std::exception_ptr e) {
        bool lose_rank = false;
        {
            std::lock_guard lock(mutex);
            ++finished;
            if (e && !first_failure) {
                first_failure = e;
                lose_rank = true;
            }
        }
        if (lose_rank) w.lose(rank, what_of(e));
    }

    // The deadlock report, from the receives still waiting.
    std::string deadlock_report(const world& w, int size) {
        int unfinished;
        {
            std::lock_guard lock(mutex);
            unfinished = size - finished;
        }
        std::string report = fmt::format(
            "deadlock: {} of {} ranks never finished; receives still waiting:", unfinished, size);
        auto lines = w.pending();
        for (std::size_t i = 0; i < lines.size() && i < 32; ++i)
            report += "\n  " + lines[i];
        if (lines.size() > 32) report += fmt::format("\n  ... and {} more", lines.size() - 32);
        return report;
    }

    void finish(const std::string& deadlock) {
        if (first_failure) std::rethrow_exception(first_failure);
        if (!deadlock.empty()) throw error(errc::deadlock, deadlock);
    }
};

constexpr auto quiet_spell = std::chrono::milliseconds(200);

} // namespace

void run(int size, const std::function<task<void>(communicator)>& body) {
    check_size(size);
    auto w = std::make_shared<world>(size);
    asio::io_context context;
    outcomes result;
    for (int r = 0; r < size; ++r) {
        communicator comm(w->endpoint(r, context));
        spawn(context, body(comm),
              [&result, &w, r](std::exception_ptr e) { result.record(*w, r, e); });
    }
    // A suspended rank's completion handler counts as work for Asio, so
    // run() would never return from a deadlock. Every event here comes from
    // this thread, so a quiet spell with ranks unfinished means nobody will
    // ever send what they wait for (the spell allows for a rank's own timers).
    std::string deadlock;
    while (true) {
        if (context.poll() > 0) continue;
        if (context.stopped()) break; // no work left at all
        if (context.run_one_for(quiet_spell) > 0) continue;
        if (!deadlock.empty()) break; // failing the waits did not end them
        // Fail every wait with the report, so the ranks unwind and free
        // their frames instead of being abandoned mid-call.
        deadlock = result.deadlock_report(*w, size);
        w->fail_everything(std::make_exception_ptr(error(errc::deadlock, deadlock)));
    }
    result.finish(deadlock);
}

void run_threads(int size, const std::function<void(communicator)>& body) {
    check_size(size);
    auto w = std::make_shared<world>(size);
    outcomes result;
    std::vector<std::thread> threads;
    threads.reserve(static_cast<std::size_t>(size));
    for (int r = 0; r < size; ++r) {
        threads.emplace_back([&, r] {
            asio::io_context context;
            std::exception_ptr failure;
            try {
                body(communicator(w->endpoint(r, context)));
            } catch (...) {
                failure = std::current_exception();
            }
            result.record(*w, r, failure);
        });
    }
    for (auto& t : threads)
        t.join();
    result.finish({});
}

} // namespace tutti::inproc
