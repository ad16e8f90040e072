#include "core/mailbox.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/names.hpp"

namespace tutti {

std::string describe(const message_key& key) {
    return fmt::format("communicator {:#x} generation {} step {:#x} from rank {}", key.communicator,
                       key.generation, key.step, key.source);
}

std::exception_ptr check_match(const message_header& expected, const message_header& arrived,
                               bool any_size) {
    if (arrived.kind != expected.kind)
        return std::make_exception_ptr(error(
            errc::mismatched_collective,
            fmt::format("mismatched collective for generation {}: world rank {} called {} while "
                        "this rank called {}",
                        expected.key.generation, arrived.key.source, to_string(arrived.kind),
                        to_string(expected.kind))));
    if (arrived.algorithm != expected.algorithm)
        return std::make_exception_ptr(
            error(errc::mismatched_collective,
                  fmt::format("mismatched algorithm for {} generation {}: world rank {} ran '{}' "
                              "while this rank ran '{}'",
                              to_string(expected.kind), expected.key.generation,
                              arrived.key.source, algorithm_name(arrived.algorithm),
                              algorithm_name(expected.algorithm))));
    if (!any_size && arrived.bytes != expected.bytes)
        return std::make_exception_ptr(error(
            errc::message_size_mismatch,
            fmt::format("{} (algorithm '{}', generation {}): world rank {} sent {} bytes where "
                        "this rank expected {}; do all ranks pass the same counts?",
                        to_string(expected.kind), algorithm_name(expected.algorithm),
                        expected.key.generation, arrived.key.source, arrived.bytes,
                        expected.bytes)));
    return nullptr;
}

namespace {

void fill(std::span<std::byte> into, bool any_size, const request& done,
          std::span<const std::byte> payload) {
    if (any_size) {
        done->complete_with_payload(std::vector<std::byte>(payload.begin(), payload.end()));
    } else {
        if (!payload.empty()) std::memcpy(into.data(), payload.data(), payload.size());
        done->complete();
    }
}

} // namespace

request mailbox::post(const message_header& expected, std::span<std::byte> into, bool any_size) {
    auto done = make_request();
    std::unique_lock lock(mutex_);
    auto& b = buckets_[call_of(expected.key)];
    auto same_step = std::find_if(b.arrived.begin(), b.arrived.end(), [&](const auto& m) {
        return m.header.key.step == expected.key.step;
    });
    if (same_step != b.arrived.end()) {
        arrived_message m = std::move(*same_step);
        b.arrived.erase(same_step);
        if (b.posted.empty() && b.arrived.empty()) buckets_.erase(call_of(expected.key));
        lock.unlock();
        if (auto bad = check_match(expected, m.header, any_size)) {
            done->complete(bad);
        } else if (any_size) {
            done->complete_with_payload(std::move(m.payload));
        } else {
            fill(into, false, done, m.payload);
        }
        return done;
    }
    // A message of the same call but another collective will never be
    // followed by ours: report it now instead of waiting.
    for (const auto& m : b.arrived) {
        if (m.header.kind != expected.kind) {
            auto bad = check_match(expected, m.header, true);
            lock.unlock();
            done->complete(bad);
            return done;
        }
    }
    if (failure_) {
        lock.unlock();
        done->complete(failure_);
        return done;
    }
    b.posted.push_back({expected, into, any_size, done});
    return done;
}

void mailbox::deliver(const message_header& header, std::span<const std::byte> payload) {
    std::unique_lock lock(mutex_);
    auto& b = buckets_[call_of(header.key)];
    auto same_step = std::find_if(b.posted.begin(), b.posted.end(), [&](const auto& r) {
        return r.expected.key.step == header.key.step;
    });
    if (same_step != b.posted.end()) {
        posted_receive r = std::move(*same_step);
        b.posted.erase(same_step);
        if (b.posted.empty() && b.arrived.empty()) buckets_.erase(call_of(header.key));
        // Copy outside the lock: the receive is off the list, and its owner
        // cannot resume before complete(), so nobody else touches its buffer.
        lock.unlock();
        if (auto bad = check_match(r.expected, header, r.any_size))
            r.done->complete(bad);
        else
            fill(r.into, r.any_size, r.done, payload);
        return;
    }
    std::vector<request> mismatched;
    std::vector<std::exception_ptr> reasons;
    for (auto it = b.posted.begin(); it != b.posted.end();) {
        if (it->expected.kind != header.kind) {
            reasons.push_back(check_match(it->expected, header, true));
            mismatched.push_back(it->done);
            it = b.posted.erase(it);
        } else {
            ++it;
        }
    }
    b.arrived.push_back({header, std::vector<std::byte>(payload.begin(), payload.end())});
    lock.unlock();
    for (std::size_t i = 0; i < mismatched.size(); ++i) mismatched[i]->complete(reasons[i]);
}

void mailbox::fail(std::exception_ptr failure) {
    std::vector<request> waiting;
    {
        std::lock_guard lock(mutex_);
        if (!failure_) failure_ = failure;
        for (auto& [key, b] : buckets_) {
            for (auto& r : b.posted) waiting.push_back(r.done);
            b.posted.clear();
        }
    }
    for (auto& r : waiting) r->complete(failure);
}

std::vector<std::string> mailbox::pending() const {
    std::vector<std::string> lines;
    std::lock_guard lock(mutex_);
    for (const auto& [key, b] : buckets_)
        for (const auto& r : b.posted)
            lines.push_back(fmt::format("{} '{}' waits for {}", to_string(r.expected.kind),
                                        algorithm_name(r.expected.algorithm),
                                        describe(r.expected.key)));
    std::sort(lines.begin(), lines.end());
    return lines;
}

} // namespace tutti
