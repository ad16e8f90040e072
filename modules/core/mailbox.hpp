// The matching engine every transport shares: the receives a rank has posted
// and the messages that arrived before their receive. A transport delivers
// into a mailbox; an algorithm posts into it. Matching is on (communicator,
// generation, step, source); within one (communicator, generation, source) a
// different collective or algorithm is reported as a mismatch, not waited on.
#pragma once

#include <cstddef>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/message.hpp"
#include "core/request.hpp"

namespace tutti {

class mailbox {
public:
    request post(const message_header& expected, std::span<std::byte> into, bool any_size);

    // Copies payload straight into a posted receive if one matches, otherwise
    // keeps a copy until the receive is posted.
    void deliver(const message_header& header, std::span<const std::byte> payload);

    // As deliver(), taking ownership: no second copy when nobody waits yet.
    void deliver(const message_header& header, std::vector<std::byte>&& payload);

    // For transports that receive a message in pieces: takes the posted
    // receive that matches header off the list so the pieces can be copied
    // straight into it, then completed by the transport. nullopt when none
    // is posted yet, or when the posted one does not fit (it is failed with
    // the reason); the transport then stages the message and deliver()s it.
    struct claimed_receive {
        std::span<std::byte> into;
        bool any_size;
        request done;
    };
    std::optional<claimed_receive> claim(const message_header& header);

    // Fails every pending receive, and every later one, with this failure
    // (a lost peer, an aborted world). Messages already queued stay readable.
    void fail(std::exception_ptr failure);

    // One line per receive still waiting, for deadlock and timeout reports.
    std::vector<std::string> pending() const;

private:
    struct posted_receive {
        message_header expected;
        std::span<std::byte> into;
        bool any_size;
        request done;
    };
    struct arrived_message {
        message_header header;
        std::vector<std::byte> payload;
    };
    struct bucket {
        std::deque<posted_receive> posted;
        std::deque<arrived_message> arrived;
    };

    std::optional<claimed_receive> claim_locked(std::unique_lock<std::mutex>& lock,
                                                const message_header& header);
    template <class Payload>
    void deliver_any(const message_header& header, Payload&& payload);

    mutable std::mutex mutex_;
    std::unordered_map<call_key, bucket, call_key_hash> buckets_;
    // Receives found not to fit while the lock was held, failed after it.
    std::vector<std::pair<request, std::exception_ptr>> mismatched_;
    std::exception_ptr failure_;
};

// The error a receive fails with when the arrived header does not fit what
// it expected; nullptr when it fits.
std::exception_ptr check_match(const message_header& expected, const message_header& arrived,
                               bool any_size);

} // namespace tutti
