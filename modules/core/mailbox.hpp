// The matching engine every transport shares: the receives a rank has posted
// and the messages that arrived before their receive. A transport delivers
// into a mailbox; an algorithm posts into it. Matching is on (communicator,
// generation, step, source); within one (communicator, generation, source) a
// different collective or algorithm is reported as a mismatch, not waited on.
//
// Every message passes here, so the lists are flat vectors scanned in order:
// a rank has few receives and early messages outstanding at once, and a scan
// of a few entries costs less than hashing, and allocates nothing once the
// vectors have grown. Payloads that arrive early and are small are kept
// inside their entry.
#pragma once

#include <array>
#include <cstddef>
#include <exception>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/message.hpp"
#include "core/request.hpp"
#include "core/scratch.hpp"

namespace tutti {

class landing_observer; // core/transport.hpp

class mailbox {
public:
    // Who calls into the mailbox. A transport that posts and delivers only
    // on the rank's own thread (shared memory, TCP: both progress on the
    // rank's io_context) says so, and the mailbox takes no lock: an
    // uncontended lock is still two locked instructions per call, and on the
    // shared-memory path each waits for the ring write before it to reach
    // the other core.
    enum class threads { many, owner_only };
    explicit mailbox(threads callers = threads::many) : mutex_(callers == threads::many) {}

    // combined_at_once: the receiver reads every byte of `into` as soon as
    // the receive completes (transport::irecv_combined_at_once), which a
    // transport that receives in pieces learns from claim().
    // observer: told how much has landed by a transport that receives the
    // message in pieces itself (claim()); the mailbox never calls it.
    request post(const message_header& expected, std::span<std::byte> into, bool any_size,
                 bool combined_at_once = false, landing_observer* observer = nullptr);

    // A receive that is never posted: if the message for `expected` has
    // arrived, copies it into `into` and returns true; false if it has not
    // (nothing is left behind). Throws the error post()'s request would
    // fail with for a message that does not fit. A small receive saves the
    // request this way (see transport::try_recv).
    bool take_arrived(const message_header& expected, std::span<std::byte> into);

    // A receive that waits without being posted (transport::poll_recv):
    // while it is set, the message for it is copied straight into it, or
    // its mismatch kept, as it is delivered, instead of being queued for
    // take_arrived(). One at a time, on the owner's thread only.
    struct awaited_receive {
        const message_header& expected;
        std::span<std::byte> into;
        bool done = false;
        std::exception_ptr failed;
    };
    void await_here(awaited_receive* receive) noexcept { awaited_ = receive; }

    // Messages up to this size that arrive before their receive are kept
    // inside their entry, with no allocation.
    static constexpr std::size_t kept_inline = 64;

    // Copies payload straight into a posted receive if one matches, otherwise
    // keeps a copy until the receive is posted.
    void deliver(const message_header& header, std::span<const std::byte> payload);

    // As deliver(), for a payload (its first header.bytes bytes) that a
    // transport staged itself because it arrived before its receive: queued
    // as it is, no second copy. Stage in a private scratch_block
    // (scratch_memory::private_only): a block of a megabyte or more made new
    // is pages from the system, each faulted in and zeroed, and freed they
    // are unmapped (a TLB shootdown on every core), while a block from the
    // scratch cache is neither. Over TCP, 4 ranks on 2 cores, the 4 MiB
    // all_to_all stages most of its blocks and took 4-5 times as long with
    // fresh ones (docs/performance.md, thirty-fifth session).
    void deliver(const message_header& header, scratch_block&& staged);

    // How many payloads deliver() has copied aside in this process (larger
    // than kept_inline, arrived before their receive, into a scratch block):
    // the transport's share of the memory a call takes, which tests tell
    // apart from the algorithms' (tests/select/allocation_test.cpp).
    static std::size_t payloads_copied_to_heap() noexcept;

    // For transports that receive a message in pieces: takes the posted
    // receive that matches header off the list so the pieces can be copied
    // straight into it, then completed by the transport. nullopt when none
    // is posted yet, or when the posted one does not fit (it is failed with
    // the reason); the transport then stages the message and deliver()s it.
    struct claimed_receive {
        std::span<std::byte> into;
        bool any_size;
        request done;
        bool combined_at_once = false;
        landing_observer* observer = nullptr;
    };
    std::optional<claimed_receive> claim(const message_header& header);

    // For a transport that receives a message of `bytes` itself (in pieces,
    // or by single copy): where to write it. The claimed receive's buffer,
    // else (none claimed, or one that takes any size) a private scratch
    // block put in `staging`.
    static std::span<std::byte> landing(const std::optional<claimed_receive>& claimed,
                                        std::size_t bytes, std::optional<scratch_block>& staging);
    // Once every byte of the message is in its landing(): completes the
    // claimed receive, or queues the staged block for the receive to come.
    void land(const message_header& header, std::optional<claimed_receive>& claimed,
              std::optional<scratch_block>& staging);

    // Fails every pending receive, and every later one, with this failure
    // (a lost peer, an aborted world). Messages already queued stay readable.
    void fail(std::exception_ptr failure);

    // Fails the receives now pending from world rank `source` only (a peer
    // that closed on purpose while others still wait for it).
    void fail_source(std::int32_t source, std::exception_ptr failure);

    // Takes a posted receive back if no message has been matched to it yet:
    // true then, and it completes failed (nothing will write into its
    // buffer); false if it is no longer posted (done, or being filled).
    bool withdraw(const request& receive);

    // Whether a receive of this call (communicator, generation) from its
    // source is posted and not yet matched: a transport's sign that the peer
    // it sends to is sending to it as well.
    bool expects(const call_key& call) const;

    // One line per receive still waiting, for deadlock and timeout reports.
    std::vector<std::string> pending() const;

private:
    struct posted_receive {
        message_header expected;
        std::span<std::byte> into;
        bool any_size;
        request done;
        bool combined_at_once = false;
        landing_observer* observer = nullptr;
    };
    // A message that arrived before its receive: small payloads inline,
    // others in a scratch block (its first `bytes`), which goes back to the
    // scratch cache when the entry is erased.
    struct arrived_message {
        static constexpr std::size_t inline_bytes = kept_inline;
        message_header header;
        std::optional<scratch_block> block;
        std::array<std::byte, inline_bytes> local;
        std::size_t bytes = 0;

        std::span<const std::byte> payload() const {
            return {block ? block->data() : local.data(), bytes};
        }
    };

    // A mutex that locks only when the mailbox is called from many threads.
    class optional_mutex {
    public:
        explicit optional_mutex(bool on) : on_(on) {}
        void lock() {
            if (on_) mutex_.lock();
        }
        void unlock() {
            if (on_) mutex_.unlock();
        }

    private:
        std::mutex mutex_;
        bool on_;
    };

    std::optional<claimed_receive> claim_locked(std::unique_lock<optional_mutex>& lock,
                                                const message_header& header);
    // What arrived_ holds for a receive of `expected` (under the lock): the
    // message of its step (its index, and the error if it does not fit), a
    // message of the same call but another collective (index -1 and the
    // error: ours will never follow it), or nothing (-1, no error).
    struct arrived_match {
        std::ptrdiff_t index = -1;
        std::exception_ptr mismatch;
    };
    arrived_match match_arrived(const message_header& expected, bool any_size) const;
    // staged: the block payload lies in, queued as it is if nobody waits.
    void deliver_any(const message_header& header, std::span<const std::byte> payload,
                     scratch_block* staged);
    bool fill_awaited(const message_header& header, std::span<const std::byte> payload);
    void complete_mismatched(std::unique_lock<optional_mutex>& lock);

    mutable optional_mutex mutex_;
    std::vector<posted_receive> posted_;   // in the order posted
    std::vector<arrived_message> arrived_; // in the order arrived
    // Receives found not to fit while the lock was held, failed after it.
    std::vector<std::pair<request, std::exception_ptr>> mismatched_;
    std::exception_ptr failure_;
    awaited_receive* awaited_ = nullptr;
};

// The error a receive fails with when the arrived header does not fit what
// it expected (nullptr if it does, though check_match looks first).
std::exception_ptr mismatch_of(const message_header& expected, const message_header& arrived,
                               bool any_size);

// Whether the arrived header fits what the receive expected: the same
// collective and algorithm, and (unless any_size) the same length.
inline bool fits(const message_header& expected, const message_header& arrived,
                 bool any_size) noexcept {
    return arrived.kind == expected.kind && arrived.algorithm == expected.algorithm &&
           (any_size || arrived.bytes == expected.bytes);
}

// The error a receive fails with when the arrived header does not fit what
// it expected; nullptr when it fits. Every message is checked: the fitting
// case is a few comparisons here, inline.
inline std::exception_ptr check_match(const message_header& expected, const message_header& arrived,
                                      bool any_size) {
    if (fits(expected, arrived, any_size)) return nullptr;
    return mismatch_of(expected, arrived, any_size);
}

} // namespace tutti
