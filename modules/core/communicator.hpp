// A communicator: an ordered group of ranks reached through one transport,
// with its own generation namespace. A cheap, copyable handle; copies share
// the same group and the same generations.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "core/generation.hpp"
#include "core/task.hpp"
#include "core/transport.hpp"

namespace tutti {

class hierarchy; // modules/hierarchy/hierarchy.hpp

// A split colour meaning "not in any new communicator", as MPI_UNDEFINED.
inline constexpr int undefined_color = -1;

class communicator {
public:
    // An empty communicator: what split() gives ranks with undefined_color.
    communicator() = default;

    // The communicator of every rank the transport reaches, with identity
    // `id`. Every rank must pass the same id for the same world.
    communicator(std::shared_ptr<tutti::transport> transport, std::uint64_t id = 1);

    bool valid() const noexcept { return state_ != nullptr; }
    explicit operator bool() const noexcept { return valid(); }

    int rank() const noexcept { return state_ ? state_->rank : -1; }
    int size() const noexcept { return state_ ? state_->size : 0; }
    std::uint64_t id() const noexcept { return state_ ? state_->id : 0; }
    // Unlike id(), never the same for two communicators of this process, not
    // even for one made after another is gone: what a thread's memory of its
    // earlier calls on a communicator is keyed by. 0 for an empty one.
    std::uint64_t serial() const noexcept { return state_ ? state_->serial : 0; }

    // MPI semantics: ranks with equal colour form a new communicator, ordered
    // by key and then by their rank here; undefined_color gives an empty one.
    // A collective call on this communicator (it uses one generation).
    task<communicator> split(int color, int key) const;
    task<communicator> split(int color) const { return split(color, rank()); }

    tutti::transport& transport() const noexcept { return *state_->transport; }
    // This communicator's rank -> the transport's.
    int world_rank(int rank) const noexcept {
        return state_->world_ranks.empty() ? rank
                                           : state_->world_ranks[static_cast<std::size_t>(rank)];
    }
    asio::io_context& context() const noexcept { return transport().context(); }

    // The generation a call uses: the given one (checked) or the next unused.
    // Inline for the usual call (one thread, the next generation in order),
    // which every collective makes on its way to its first message.
    std::uint64_t claim_generation(const std::uint64_t* wanted) const {
        if (state_ && state_->one_thread && !wanted) return state_->generations.claim_next();
        return claim_generation_out_of_line(wanted);
    }
    // Split bookkeeping, so every rank derives the same new identity.
    std::uint64_t next_split_sequence() const;

    // The hierarchy the hierarchical compositions follow; nullptr: none.
    std::shared_ptr<const tutti::hierarchy> hierarchy() const noexcept;
    // The same without sharing ownership (no reference count touched): for
    // looking at it during a call, which holds the communicator.
    const tutti::hierarchy* hierarchy_view() const noexcept {
        return state_ ? state_->levels.get() : nullptr;
    }
    // A new communicator of the same ranks, with an identity and generations
    // of its own, carrying `levels`. Local (no message): every rank must call
    // it in the same order on this communicator, as it numbers like split.
    communicator with_hierarchy(std::shared_ptr<const tutti::hierarchy> levels) const;

    friend bool operator==(const communicator& a, const communicator& b) noexcept {
        return a.state_ == b.state_;
    }

private:
    // Guards a communicator's generations: every call takes it for a few
    // instructions, and calls from several threads at once are rare. A
    // std::mutex costs two locked instructions and two library calls per
    // call; this costs one locked instruction and a store.
    class claim_lock {
    public:
        void lock() noexcept {
            while (taken_.test_and_set(std::memory_order_acquire))
                std::this_thread::yield();
        }
        void unlock() noexcept { taken_.clear(std::memory_order_release); }

    private:
        std::atomic_flag taken_;
    };

    std::uint64_t claim_generation_out_of_line(const std::uint64_t* wanted) const;
    static std::uint64_t next_serial() noexcept;
    struct state {
        std::shared_ptr<tutti::transport> transport;
        std::uint64_t id = 0;
        std::uint64_t serial = next_serial();
        int rank = 0;
        int size = 0;
        std::vector<int> world_ranks; // empty: identity mapping
        mutable claim_lock mutex;
        // The transport's one_thread: generations are claimed without the
        // lock, whose locked instruction is a twentieth of an 8-byte call.
        bool one_thread = false;
        generation_registry generations;
        std::uint64_t splits = 0;
        std::shared_ptr<const tutti::hierarchy> levels;
    };
    explicit communicator(std::shared_ptr<state> s) : state_(std::move(s)) {}
    // A new communicator's state over this one's transport, as split and
    // with_hierarchy make it: what the transport implies is carried over.
    std::shared_ptr<state> child_state(std::uint64_t id) const;

    std::shared_ptr<state> state_;
};

} // namespace tutti
