// A bootstrap for tests that fork their ranks: all_gather through an
// anonymous shared mapping made before fork(), so the shm transport can be
// tested without the real launcher. Each round writes into one of two
// buffers; a rank can only reuse a buffer two rounds later, after every rank
// arrived at the round in between and so finished reading it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include <csignal>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>

#include "bootstrap/bootstrap.hpp"
#include "core/error.hpp"

namespace tutti::testing {

class fork_bootstrap final : public bootstrap {
public:
    static constexpr std::size_t slot_bytes = 4096;
    static constexpr int max_ranks = 64;

    // The shared area, made by the parent before it forks the ranks.
    struct area {
        std::uint64_t arrived[max_ranks];
        std::uint64_t lengths[2][max_ranks];
        std::byte slots[2][max_ranks][slot_bytes];
    };

    static area* make_area() {
        void* p =
            mmap(nullptr, sizeof(area), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw error(errc::invalid_argument, "cannot map the test bootstrap");
        return static_cast<area*>(p);
    }
    static void free_area(area* a) { munmap(a, sizeof(area)); }

    fork_bootstrap(area* shared, int rank, int size, std::string job, std::string node)
        : area_(shared), rank_(rank), size_(size), job_(std::move(job)), node_(std::move(node)) {}

    // How long all_gather waits for the others.
    void set_timeout(std::chrono::milliseconds limit) { timeout_ = limit; }
    // Makes this rank die by SIGKILL on entering all_gather round `round`
    // (1 is the first), to test what the others do about it.
    void die_at_round(std::uint64_t round) { die_at_ = round; }

    int rank() const noexcept override { return rank_; }
    int size() const noexcept override { return size_; }
    const std::string& job_id() const noexcept override { return job_; }
    const std::string& node() const noexcept override { return node_; }
    std::string_view method() const noexcept override { return "fork"; }

    std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> mine) override {
        if (mine.size() > slot_bytes)
            throw error(
                errc::invalid_argument,
                fmt::format("test bootstrap blob of {} bytes exceeds {}", mine.size(), slot_bytes));
        const std::uint64_t round = ++round_;
        if (round == die_at_) raise(SIGKILL);
        const auto buffer = round % 2;
        const auto me = static_cast<std::size_t>(rank_);
        if (!mine.empty()) std::memcpy(area_->slots[buffer][me], mine.data(), mine.size());
        area_->lengths[buffer][me] = mine.size();
        std::atomic_ref(area_->arrived[me]).store(round, std::memory_order_release);
        const auto deadline = std::chrono::steady_clock::now() + timeout_;
        for (int r = 0; r < size_; ++r) {
            auto& arrived = area_->arrived[static_cast<std::size_t>(r)];
            while (std::atomic_ref(arrived).load(std::memory_order_acquire) < round) {
                if (std::chrono::steady_clock::now() > deadline)
                    throw error(
                        errc::timeout,
                        fmt::format("test bootstrap round {}: rank {} did not arrive", round, r));
                sched_yield();
            }
        }
        std::vector<std::vector<std::byte>> all;
        for (int r = 0; r < size_; ++r) {
            const auto i = static_cast<std::size_t>(r);
            const auto* from = area_->slots[buffer][i];
            all.emplace_back(from, from + area_->lengths[buffer][i]);
        }
        return all;
    }

private:
    area* area_;
    int rank_;
    int size_;
    std::string job_;
    std::string node_;
    std::uint64_t round_ = 0;
    std::uint64_t die_at_ = 0;
    std::chrono::milliseconds timeout_{20000};
};

} // namespace tutti::testing
