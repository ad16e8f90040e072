#include "core/mailbox.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>

#include <fmt/format.h>

#include "core/copy.hpp"
#include "core/error.hpp"
#include "core/names.hpp"

namespace tutti {

namespace {
// payloads_copied_to_heap(); relaxed: a count for tests, ordered by nothing.
std::atomic<std::size_t> heap_copies{0};
} // namespace

std::string describe(const message_key& key) {
    return fmt::format("communicator {:#x} generation {} step {:#x} from rank {}", key.communicator,
                       key.generation, key.step, key.source);
}

std::exception_ptr mismatch_of(const message_header& expected, const message_header& arrived,
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
        copy_bytes(into.data(), payload.data(), payload.size());
        done->complete();
    }
}

} // namespace

namespace {

bool same_call(const message_key& a, const message_key& b) noexcept {
    return a.communicator == b.communicator && a.generation == b.generation && a.source == b.source;
}

bool same_message(const message_key& a, const message_key& b) noexcept {
    return a.step == b.step && same_call(a, b);
}

// A message of the receive's own call but of another collective: the
// receive's message will never follow it, so it is reported at once.
bool other_collective(const message_header& expected, const message_header& arrived) noexcept {
    return same_call(expected.key, arrived.key) && expected.kind != arrived.kind;
}

} // namespace

mailbox::arrived_match mailbox::match_arrived(const message_header& expected, bool any_size) const {
    auto same_step = std::find_if(arrived_.begin(), arrived_.end(), [&](const auto& m) {
        return same_message(m.header.key, expected.key);
    });
    if (same_step != arrived_.end())
        return {same_step - arrived_.begin(), check_match(expected, same_step->header, any_size)};
    // A message of the same call but another collective will never be
    // followed by ours: report it now instead of waiting.
    for (const auto& m : arrived_)
        if (other_collective(expected, m.header))
            return {-1, check_match(expected, m.header, true)};
    return {};
}

request mailbox::post(const message_header& expected, std::span<std::byte> into, bool any_size,
                      bool combined_at_once, landing_observer* observer) {
    auto done = make_request();
    std::unique_lock lock(mutex_);
    if (!arrived_.empty()) {
        auto found = match_arrived(expected, any_size);
        if (found.index < 0 && found.mismatch) {
            lock.unlock();
            done->complete(found.mismatch);
            return done;
        }
        if (found.index >= 0) {
            const auto same_step = arrived_.begin() + found.index;
            if (found.mismatch) {
                arrived_.erase(same_step);
                lock.unlock();
                done->complete(found.mismatch);
            } else if (any_size) {
                const auto payload = same_step->payload();
                std::vector<std::byte> copy(payload.begin(), payload.end());
                arrived_.erase(same_step);
                lock.unlock();
                done->complete_with_payload(std::move(copy));
            } else {
                // Copied under the lock: the entry's bytes die with it.
                const auto payload = same_step->payload();
                copy_bytes(into.data(), payload.data(), payload.size());
                arrived_.erase(same_step);
                lock.unlock();
                done->complete();
            }
            return done;
        }
    }
    if (failure_) {
        lock.unlock();
        done->complete(failure_);
        return done;
    }
    posted_.push_back({expected, into, any_size, done, combined_at_once, observer});
    return done;
}

bool mailbox::take_arrived(const message_header& expected, std::span<std::byte> into) {
    std::unique_lock lock(mutex_);
    if (arrived_.empty()) return false;
    auto found = match_arrived(expected, false);
    if (found.index < 0) {
        if (!found.mismatch) return false;
        lock.unlock();
        std::rethrow_exception(found.mismatch);
    }
    const auto same_step = arrived_.begin() + found.index;
    if (!found.mismatch) {
        const auto payload = same_step->payload();
        copy_bytes(into.data(), payload.data(), payload.size());
    }
    arrived_.erase(same_step);
    lock.unlock();
    if (found.mismatch) std::rethrow_exception(found.mismatch);
    return true;
}

void mailbox::complete_mismatched(std::unique_lock<optional_mutex>& lock) {
    if (mismatched_.empty()) return;
    auto failed = std::move(mismatched_);
    mismatched_.clear();
    lock.unlock();
    for (auto& [done, why] : failed)
        done->complete(why);
}

std::optional<mailbox::claimed_receive> mailbox::claim(const message_header& header) {
    std::unique_lock lock(mutex_);
    auto claimed = claim_locked(lock, header);
    if (claimed) return claimed;
    complete_mismatched(lock);
    return std::nullopt;
}

// Takes the matching posted receive off its list; a receive that does not
// fit is failed (outside the lock) and nullopt returned. Unlocks the lock
// only when it returns a receive or failed one.
std::optional<mailbox::claimed_receive>
mailbox::claim_locked(std::unique_lock<optional_mutex>& lock, const message_header& header) {
    auto same_step = std::find_if(posted_.begin(), posted_.end(), [&](const auto& r) {
        return same_message(r.expected.key, header.key);
    });
    if (same_step == posted_.end()) return std::nullopt;
    posted_receive r = std::move(*same_step);
    posted_.erase(same_step);
    if (auto bad = check_match(r.expected, header, r.any_size)) {
        // The message itself is still queued below, under the lock.
        mismatched_.push_back({r.done, bad});
        return std::nullopt;
    }
    lock.unlock();
    return claimed_receive{r.into, r.any_size, std::move(r.done), r.combined_at_once, r.observer};
}

// Gives the awaited receive its message (or the reason it does not fit);
// true when the message is used up. A message of the same call but another
// collective fails it too, and stays queued for its own receive.
bool mailbox::fill_awaited(const message_header& header, std::span<const std::byte> payload) {
    auto& r = *awaited_;
    const bool ours = same_message(r.expected.key, header.key);
    if (ours) {
        if (auto bad = check_match(r.expected, header, false))
            r.failed = std::move(bad);
        else
            copy_bytes(r.into.data(), payload.data(), payload.size());
    } else if (other_collective(r.expected, header)) {
        r.failed = check_match(r.expected, header, true);
    } else {
        return false;
    }
    r.done = true;
    awaited_ = nullptr;
    return ours;
}

void mailbox::deliver_any(const message_header& header, std::span<const std::byte> payload,
                          scratch_block* staged) {
    std::unique_lock lock(mutex_);
    if (awaited_ && fill_awaited(header, payload)) return;
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
    for (auto it = posted_.begin(); it != posted_.end();) {
        if (other_collective(it->expected, header)) {
            mismatched_.push_back({it->done, check_match(it->expected, header, true)});
            it = posted_.erase(it);
        } else {
            ++it;
        }
    }
    auto& m = arrived_.emplace_back();
    m.header = header;
    m.bytes = payload.size();
    if (staged) {
        m.block.emplace(std::move(*staged));
    } else if (payload.size() <= arrived_message::inline_bytes) {
        if (!payload.empty()) std::memcpy(m.local.data(), payload.data(), payload.size());
    } else {
        // Only ever copied out of: private memory (scratch_memory).
        m.block.emplace(payload.size(), scratch_memory::private_only);
        copy_bytes(m.block->data(), payload.data(), payload.size());
        heap_copies.fetch_add(1, std::memory_order_relaxed);
    }
    complete_mismatched(lock);
}

std::size_t mailbox::payloads_copied_to_heap() noexcept {
    return heap_copies.load(std::memory_order_relaxed);
}

void mailbox::deliver(const message_header& header, std::span<const std::byte> payload) {
    deliver_any(header, payload, nullptr);
}

void mailbox::deliver(const message_header& header, scratch_block&& staged) {
    if (staged.capacity() < header.bytes)
        throw error(errc::invalid_argument,
                    fmt::format("a staged message of {} bytes in a block of {}", header.bytes,
                                staged.capacity()));
    // Copied into a waiting receive, staged goes back to the cache when the
    // caller's block dies; queued, it moved into the entry.
    deliver_any(header, {staged.data(), header.bytes}, &staged);
}

std::span<std::byte> mailbox::landing(const std::optional<claimed_receive>& claimed,
                                      std::size_t bytes, std::optional<scratch_block>& staging) {
    if (claimed && !claimed->any_size) return claimed->into;
    // Only ever copied out of: private memory (scratch_memory).
    staging.emplace(bytes, scratch_memory::private_only);
    return {staging->data(), bytes};
}

void mailbox::land(const message_header& header, std::optional<claimed_receive>& claimed,
                   std::optional<scratch_block>& staging) {
    if (!claimed)
        deliver(header, std::move(*staging));
    else if (claimed->any_size)
        claimed->done->complete_with_payload(
            std::vector<std::byte>(staging->data(), staging->data() + header.bytes));
    else
        claimed->done->complete();
}

void mailbox::fail(std::exception_ptr failure) {
    std::vector<posted_receive> waiting;
    {
        std::lock_guard lock(mutex_);
        if (!failure_) failure_ = failure;
        waiting.swap(posted_);
    }
    for (auto& r : waiting)
        r.done->complete(failure);
}

void mailbox::fail_source(std::int32_t source, std::exception_ptr failure) {
    std::vector<request> waiting;
    {
        std::lock_guard lock(mutex_);
        for (auto it = posted_.begin(); it != posted_.end();) {
            if (it->expected.key.source == source) {
                waiting.push_back(it->done);
                it = posted_.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (auto& r : waiting)
        r->complete(failure);
}

bool mailbox::withdraw(const request& receive) {
    {
        std::lock_guard lock(mutex_);
        const auto found = std::find_if(posted_.begin(), posted_.end(),
                                        [&](const auto& r) { return r.done == receive; });
        if (found == posted_.end()) return false;
        posted_.erase(found);
    }
    // Nobody waits for it: its algorithm reports the failure that made it
    // give up. The text is for a debugger's eyes.
    receive->complete(std::make_exception_ptr(
        error(errc::invalid_argument, "a receive withdrawn after its call failed")));
    return true;
}

bool mailbox::expects(const call_key& call) const {
    std::lock_guard lock(mutex_);
    return std::any_of(posted_.begin(), posted_.end(),
                       [&](const posted_receive& r) { return call_of(r.expected.key) == call; });
}

std::vector<std::string> mailbox::pending() const {
    std::vector<std::string> lines;
    std::lock_guard lock(mutex_);
    for (const auto& r : posted_)
        lines.push_back(fmt::format("{} '{}' waits for {}", to_string(r.expected.kind),
                                    algorithm_name(r.expected.algorithm),
                                    describe(r.expected.key)));
    std::sort(lines.begin(), lines.end());
    return lines;
}

} // namespace tutti
