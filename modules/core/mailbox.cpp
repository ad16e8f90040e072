#include "core/mailbox.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

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
        return std::make_exception_ptr(error(
            errc::mismatched_collective,
            fmt::format("mismatched algorithm for {} generation {}: world rank {} ran '{}' "
                        "while this rank ran '{}'",
                        to_string(expected.kind), expected.key.generation, arrived.key.source,
                        algorithm_name(arrived.algorithm), algorithm_name(expected.algorithm))));
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

std::optional<mailbox::claimed_receive> mailbox::claim(const message_header& header) {
    std::unique_lock lock(mutex_);
    auto claimed = claim_locked(lock, header);
    if (claimed) return claimed;
    auto failed = std::move(mismatched_);
    mismatched_.clear();
    lock.unlock();
    for (auto& [done, why] : failed)
        done->complete(why);
    return std::nullopt;
}

// Takes the matching posted receive off its list; a receive that does not
// fit is failed (outside the lock) and nullopt returned. Unlocks the lock
// only when it returns a receive or failed one.
std::optional<mailbox::claimed_receive> mailbox::claim_locked(std::unique_lock<std::mutex>& lock,
                                                              const message_header& header) {
    auto found = buckets_.find(call_of(header.key));
    if (found == buckets_.end()) return std::nullopt;
    auto& b = found->second;
    auto same_step = std::find_if(b.posted.begin(), b.posted.end(), [&](const auto& r) {
        return r.expected.key.step == header.key.step;
    });
    if (same_step == b.posted.end()) return std::nullopt;
    posted_receive r = std::move(*same_step);
    b.posted.erase(same_step);
    if (b.posted.empty() && b.arrived.empty()) buckets_.erase(found);
    if (auto bad = check_match(r.expected, header, r.any_size)) {
        // The message itself is still queued below, under the lock.
        mismatched_.push_back({r.done, bad});
        return std::nullopt;
    }
    lock.unlock();
    return claimed_receive{r.into, r.any_size, r.done};
}

template <class Payload>
void mailbox::deliver_any(const message_header& header, Payload&& payload) {
    std::unique_lock lock(mutex_);
    if (auto claimed = claim_locked(lock, header)) {
        if (claimed->any_size) {
            claimed->done->complete_with_payload(
                std::vector<std::byte>(payload.begin(), payload.end()));
        } else {
            fill(claimed->into, false, claimed->done, payload);
        }
        return;
    }
    // Nobody waits for it yet. A receive of the same call waiting for another
    // collective will never be matched: fail it now rather than hang.
    auto& b = buckets_[call_of(header.key)];
    for (auto it = b.posted.begin(); it != b.posted.end();) {
        if (it->expected.kind != header.kind) {
            mismatched_.push_back({it->done, check_match(it->expected, header, true)});
            it = b.posted.erase(it);
        } else {
            ++it;
        }
    }
    if constexpr (std::is_same_v<std::remove_cvref_t<Payload>, std::vector<std::byte>>)
        b.arrived.push_back({header, std::move(payload)});
    else
        b.arrived.push_back({header, std::vector<std::byte>(payload.begin(), payload.end())});
    auto failed = std::move(mismatched_);
    mismatched_.clear();
    lock.unlock();
    for (auto& [done, why] : failed)
        done->complete(why);
}

void mailbox::deliver(const message_header& header, std::span<const std::byte> payload) {
    deliver_any(header, payload);
}

void mailbox::deliver(const message_header& header, std::vector<std::byte>&& payload) {
    deliver_any(header, std::move(payload));
}

void mailbox::fail(std::exception_ptr failure) {
    std::vector<request> waiting;
    {
        std::lock_guard lock(mutex_);
        if (!failure_) failure_ = failure;
        for (auto& [key, b] : buckets_) {
            for (auto& r : b.posted)
                waiting.push_back(r.done);
            b.posted.clear();
        }
    }
    for (auto& r : waiting)
        r->complete(failure);
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
