// A request is the completion of one posted send or receive. A transport
// completes it (from any thread); an algorithm co_awaits it. This is the one
// place where a transport's event meets a suspended coroutine.
#pragma once

#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "core/task.hpp"

namespace tutti {

class request_state {
public:
    // Marks the request complete and resumes its waiter, if any, on the
    // waiter's own executor. A second completion is ignored, so a transport
    // failing everything pending cannot race a late success into a crash.
    void complete(std::exception_ptr failure = nullptr);
    void complete_with_payload(std::vector<std::byte> payload);

    bool done() const;

    // Suspends until complete; rethrows the failure if there was one.
    task<void> wait();

    // The payload of a receive whose size was not known in advance.
    std::vector<std::byte> take_payload();

private:
    struct waiter {
        virtual ~waiter() = default;
        virtual void resume() = 0;
    };
    template <class Handler>
    struct waiter_for final : waiter {
        explicit waiter_for(Handler&& h) : handler(std::move(h)) {}
        void resume() override {
            auto ex = asio::get_associated_executor(handler);
            asio::post(ex, std::move(handler));
        }
        Handler handler;
    };

    mutable std::mutex mutex_;
    bool done_ = false;
    std::exception_ptr failure_;
    std::vector<std::byte> payload_;
    std::unique_ptr<waiter> waiter_;
};

using request = std::shared_ptr<request_state>;

inline request make_request() {
    return std::make_shared<request_state>();
}

// Waits for every request, and rethrows the first failure only after all of
// them are done, so no transport still writes into a buffer we give up.
task<void> wait_all(std::span<const request> requests);

} // namespace tutti
