#include "transports/routed/routed.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <functional>
#include <map>
#include <regex>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bootstrap/node_bootstrap.hpp"
#include "core/debug.hpp"
#include "core/error.hpp"

namespace tutti::routed {

std::string_view to_string(choice c) noexcept {
    switch (c) {
    case choice::automatic:
        return "auto";
    case choice::shm:
        return "shm";
    case choice::tcp:
        return "tcp";
    }
    return "auto";
}

choice parse_choice(std::string_view text, std::string_view origin) {
    if (text == "auto") return choice::automatic;
    if (text == "shm") return choice::shm;
    if (text == "tcp") return choice::tcp;
    throw error(errc::invalid_argument,
                fmt::format("{}='{}' is not a transport: use auto (shared memory on a node, TCP "
                            "between nodes), shm or tcp",
                            origin, text));
}

choice choice_from_environment() {
    const char* value = std::getenv("TUTTI_TRANSPORT");
    if (!value || !*value) return choice::automatic;
    return parse_choice(value, "TUTTI_TRANSPORT");
}

std::string_view to_string(route r) noexcept {
    return r == route::shm ? "shm" : "tcp";
}

std::vector<std::string> routing_table::describe() const {
    std::vector<std::string> lines;
    for (int r = 0; r < size(); ++r)
        lines.push_back(fmt::format(
            "rank {} on node '{}': {}{}", r, nodes[static_cast<std::size_t>(r)],
            to_string(routes[static_cast<std::size_t>(r)]), r == rank ? " (this rank)" : ""));
    return lines;
}

routing_table plan_routes(int rank, std::vector<std::string> nodes, choice wanted) {
    const int size = static_cast<int>(nodes.size());
    if (rank < 0 || rank >= size)
        throw error(errc::invalid_argument,
                    fmt::format("routing: rank {} outside a job of {} ranks", rank, size));
    std::map<std::string, int> ranks_on;
    for (const auto& n : nodes)
        ++ranks_on[n];
    routing_table t;
    t.rank = rank;
    if (wanted == choice::shm && ranks_on.size() > 1) {
        std::vector<std::string> where;
        for (const auto& [node, count] : ranks_on)
            where.push_back(fmt::format("'{}' ({} ranks)", node, count));
        throw error(errc::invalid_argument,
                    fmt::format("TUTTI_TRANSPORT=shm, but the job's ranks are on {} nodes: {}; "
                                "shared memory reaches one node only (use auto or tcp)",
                                ranks_on.size(), fmt::join(where, ", ")));
    }
    const bool one_node = ranks_on.size() == 1;
    const bool all_alone =
        std::all_of(ranks_on.begin(), ranks_on.end(), [](const auto& n) { return n.second == 1; });
    if (wanted == choice::tcp || (!one_node && all_alone))
        t.transport_name = "tcp";
    else if (one_node)
        t.transport_name = "shm";
    else
        t.transport_name = "shm+tcp";
    const auto& mine = nodes[static_cast<std::size_t>(rank)];
    for (int r = 0; r < size; ++r) {
        const auto& theirs = nodes[static_cast<std::size_t>(r)];
        bool shared = t.transport_name == "shm" ||
                      (t.transport_name == "shm+tcp" && theirs == mine && ranks_on[mine] > 1);
        t.routes.push_back(shared ? route::shm : route::tcp);
    }
    t.nodes = std::move(nodes);
    return t;
}

namespace {

bool is_peer_lost(const std::exception_ptr& e) {
    try {
        std::rethrow_exception(e);
    } catch (const error& x) {
        return x.code() == errc::peer_lost;
    } catch (...) {
        return false;
    }
}

// The key of the receives that watch each peer: never sent, so they end only
// when a transport fails its receives because a peer was lost. Real
// communicator ids are odd (see communicator.cpp), this one is even.
constexpr std::uint64_t watch_communicator = 0x7475747469000000ull;

// What the forwarding coroutines share with the transport; it outlives the
// transport while they finish.
struct shared_state {
    std::vector<int> node_members; // world rank of each shared-memory rank
    std::string node;
    std::exception_ptr failure;
    bool closing = false;
    // Requests handed to callers and not yet seen done, per route: failed
    // together when any route loses a peer, and what await_activity waits on.
    // A shared-memory entry also holds the request of the shared-memory
    // transport behind the caller's, so that a receive can be withdrawn
    // from the transport that holds it.
    struct tracked {
        request caller;
        request inner; // empty for TCP, whose requests are the caller's
    };
    std::vector<tracked> pending_shm, pending_tcp;
    std::size_t prune_shm_at = 64, prune_tcp_at = 64;
    // Tells the peers of the first loss (mixed_transport::announce), so that
    // a rank which waits only for a survivor that leaves after the loss (its
    // node neighbour, in a hierarchical collective) names the lost rank, not
    // that survivor.
    std::function<void(const std::exception_ptr&)> announce;

    // The shared-memory transport numbers the ranks of this node 0..k-1;
    // its errors name those numbers, which become the world's here.
    std::exception_ptr from_shm(std::exception_ptr e) const {
        try {
            std::rethrow_exception(e);
        } catch (const error& x) {
            std::string text = x.what();
            if (text.starts_with("tutti: ")) text.erase(0, 7);
            static const std::regex rank_number(R"(\brank (\d+)\b)");
            std::string out;
            std::size_t from = 0;
            for (auto it = std::sregex_iterator(text.begin(), text.end(), rank_number);
                 it != std::sregex_iterator(); ++it) {
                const auto& m = *it;
                const auto local = std::stoul(m[1].str());
                out.append(text, from, static_cast<std::size_t>(m.position(0)) - from);
                out += local < node_members.size() ? fmt::format("rank {}", node_members[local])
                                                   : m.str(0);
                from = static_cast<std::size_t>(m.position(0) + m.length(0));
            }
            out.append(text, from);
            return std::make_exception_ptr(
                error(x.code(), fmt::format("{} (shared memory on node '{}')", out, node)));
        } catch (...) {
            return std::current_exception();
        }
    }

    // A peer is lost on one route: the collectives that wait on the other
    // route will not finish either, so everything pending fails with it.
    void lose(const std::exception_ptr& why) {
        if (failure || closing) return;
        failure = why;
        if (detail::debug_enabled()) {
            try {
                std::rethrow_exception(why);
            } catch (const std::exception& e) {
                detail::debug_log("routed", "failing every pending request: {}", e.what());
            }
        }
        // Before the callers learn of it and perhaps leave.
        if (announce) announce(why);
        for (auto* list : {&pending_shm, &pending_tcp}) {
            for (auto& r : *list)
                r.caller->complete(why);
            list->clear();
        }
    }

    static void prune(std::vector<tracked>& list) {
        std::erase_if(list, [](const tracked& r) { return r.caller->done(); });
    }
    static void track(std::vector<tracked>& list, std::size_t& prune_at, tracked r) {
        list.push_back(std::move(r));
        if (list.size() < prune_at) return;
        prune(list);
        prune_at = std::max<std::size_t>(64, 2 * list.size());
    }
};

// Whether a peer_lost from transport `t` is a loss (a peer crashed: the
// transport then fails every later receive) rather than one peer having
// closed its transport in order (only the receives from it fail): a receive
// posted now from this rank itself (`self`, in t's numbering) tells the two
// apart. The probe is taken back when it stays pending.
bool lost_a_peer(tutti::transport& t, int self) {
    message_header probe;
    probe.key = {watch_communicator, 2, 0, self};
    auto r = t.irecv_any_size(probe);
    if (r->done()) return true;
    t.withdraw(r);
    return false;
}

// The same for shared memory, which may be gone already (then: no loss).
bool shm_lost_a_peer(const std::weak_ptr<shm::transport>& weak) {
    const auto shm = weak.lock();
    return shm && lost_a_peer(*shm, shm->rank());
}

// Hands the shared-memory request's outcome on to the caller's request, with
// ranks renamed, and takes a lost peer as the whole world's failure.
task<void> forward(request from, request to, std::shared_ptr<shared_state> state,
                   std::weak_ptr<shm::transport> shm, bool any_size) {
    std::exception_ptr failure;
    try {
        co_await from->wait();
    } catch (...) {
        failure = state->from_shm(std::current_exception());
    }
    if (!failure) {
        if (any_size)
            to->complete_with_payload(from->take_payload());
        else
            to->complete();
        co_return;
    }
    to->complete(failure);
    if (!state->closing && is_peer_lost(failure) && shm_lost_a_peer(shm)) state->lose(failure);
}

// Ends when the sentinel receive from its peer fails: when a peer crashed, or
// when the peer closed its transport in order (its goodbye, or on shared
// memory its closed flag, fails the receives from it alone), which is no
// loss (lost_a_peer tells the two apart). It ends with a message when the
// peer tells of a loss it saw (mixed_transport::announce).
task<void> watch(request sentinel, std::shared_ptr<shared_state> state, route via,
                 tcp::transport* tcp, std::weak_ptr<shm::transport> shm, int self, int peer) {
    std::exception_ptr failure;
    try {
        co_await sentinel->wait();
    } catch (...) {
        failure = std::current_exception();
    }
    if (!failure) {
        if (state->closing) co_return;
        const auto told = sentinel->take_payload();
        state->lose(std::make_exception_ptr(error(
            errc::peer_lost,
            fmt::format("{} (reported by rank {})",
                        std::string_view(reinterpret_cast<const char*>(told.data()), told.size()),
                        peer))));
        co_return;
    }
    if (state->closing || !is_peer_lost(failure)) co_return;
    if (via == route::shm) {
        if (shm_lost_a_peer(shm)) state->lose(state->from_shm(failure));
        co_return;
    }
    if (lost_a_peer(*tcp, self)) state->lose(failure);
}

class mixed_transport final : public tutti::transport {
public:
    mixed_transport(asio::io_context& context, const routing_table& table,
                    std::shared_ptr<shm::transport> shared_memory, std::vector<int> node_members,
                    std::shared_ptr<tcp::transport> tcp, const options& opts)
        : context_(context), rank_(table.rank), size_(table.size()), routes_(table.routes),
          shm_(std::move(shared_memory)), tcp_(std::move(tcp)),
          state_(std::make_shared<shared_state>()), wait_slice_(opts.wait_slice),
          single_route_block_(opts.single_route_block) {
        local_of_.assign(static_cast<std::size_t>(size_), -1);
        for (std::size_t i = 0; i < node_members.size(); ++i)
            local_of_[static_cast<std::size_t>(node_members[i])] = static_cast<int>(i);
        state_->node = table.nodes[static_cast<std::size_t>(rank_)];
        state_->node_members = std::move(node_members);
        for (int peer = 0; peer < size_; ++peer) {
            if (peer == rank_) continue;
            message_header h;
            h.key = {watch_communicator, 1, 0, 0};
            const auto via = route_to(peer);
            h.key.source = via == route::shm ? local(peer) : peer;
            auto sentinel = via == route::shm ? shm_->irecv_any_size(h) : tcp_->irecv_any_size(h);
            spawn(context_, watch(std::move(sentinel), state_, via, tcp_.get(), shm_, rank_, peer),
                  asio::detached);
        }
        // Called by lose() only while this transport lives: it stops once the
        // destructor has set closing.
        state_->announce = [this](const std::exception_ptr& why) { announce(why); };
    }

    ~mixed_transport() override { state_->closing = true; }

    std::string_view name() const noexcept override { return "shm+tcp"; }
    int rank() const noexcept override { return rank_; }
    int size() const noexcept override { return size_; }
    // TCP's count: ranks posed as several nodes on one machine (TUTTI_NODE)
    // still share its cores.
    int ranks_on_this_machine() const noexcept override { return tcp_->ranks_on_this_machine(); }
    asio::io_context& context() noexcept override { return context_; }

    // What selection should plan for: the slowest route.
    bool single_copy_now() const noexcept override { return false; }
    transport_capabilities capabilities() const noexcept override {
        auto c = tcp_->capabilities();
        c.single_copy = single_copy_now();
        c.remote_memory_access = false;
        c.one_thread = c.one_thread && (!shm_ || shm_->capabilities().one_thread);
        c.segment_bytes = 0; // pieces differ by route
        // The mixed trees were measured without it (TCP says it where posed
        // nodes share one machine).
        c.ranks_per_core = 0;
        return c;
    }

    request isend(int dest, const message_header& header,
                  std::span<const std::byte> data) override {
        return send(dest, header, data, false);
    }

    request isend_awaited_at_end(int dest, const message_header& header,
                                 std::span<const std::byte> data) override {
        return send(dest, header, data, true);
    }

    request irecv(const message_header& expected, std::span<std::byte> into) override {
        check_rank(expected.key.source, "receive from");
        if (state_->failure) return failed();
        if (route_to(expected.key.source) == route::tcp)
            return tcp_request(tcp_->irecv(expected, into));
        return shm_request(shm_->irecv(local_header(expected), into), false);
    }

    // Over TCP the reader reports what has landed; within the node the
    // cells hand their pieces over.
    request irecv_observed(const message_header& expected, std::span<std::byte> into,
                           landing_observer& observer, bool combined_at_once) override {
        check_rank(expected.key.source, "receive from");
        if (state_->failure) return failed();
        if (route_to(expected.key.source) == route::tcp)
            return tcp_request(tcp_->irecv_observed(expected, into, observer, combined_at_once));
        return shm_request(
            shm_->irecv_observed(local_header(expected), into, observer, combined_at_once), false);
    }

    request irecv_any_size(const message_header& expected) override {
        check_rank(expected.key.source, "receive from");
        if (state_->failure) return failed();
        if (route_to(expected.key.source) == route::tcp)
            return tcp_request(tcp_->irecv_any_size(expected));
        return shm_request(shm_->irecv_any_size(local_header(expected)), true);
    }

    bool withdraw(const request& receive) override {
        if (tcp_ && tcp_->withdraw(receive)) return true;
        const auto& list = state_->pending_shm;
        const auto found = std::find_if(list.begin(), list.end(), [&](const auto& tracked) {
            return tracked.caller == receive;
        });
        // The forwarding coroutine then completes the caller's request.
        return found != list.end() && shm_->withdraw(found->inner);
    }

    std::size_t progress() override { return (shm_ ? shm_->progress() : 0) + tcp_->progress(); }
    bool needs_polling() const noexcept override {
        return tcp_->needs_polling() || shm_ != nullptr;
    }

    // The shared-memory doorbell is a futex and TCP's events come through
    // the io_context's epoll: no one call waits on both. A rank whose
    // pending requests are all on one route blocks there (up to
    // single_route_block); one that waits on both, or on neither, blocks on
    // each in turn for wait_slice.
    void await_activity(std::chrono::microseconds limit) override {
        if (!shm_) {
            tcp_->await_activity(limit);
            return;
        }
        shared_state::prune(state_->pending_shm);
        shared_state::prune(state_->pending_tcp);
        const bool shm_busy = !state_->pending_shm.empty();
        const bool tcp_busy = !state_->pending_tcp.empty();
        if (shm_busy != tcp_busy) {
            const auto block = std::min(limit, single_route_block_);
            if (shm_busy)
                shm_->await_activity(block);
            else
                tcp_->await_activity(block);
            return;
        }
        const auto slice = std::min(limit, wait_slice_);
        shm_->await_activity(slice);
        if (shm_->progress() == 0) tcp_->await_activity(slice);
    }

private:
    // The first loss, told to the peers (shared_state::announce): to the
    // node's other ranks as a message on the watch key, which their
    // sentinels receive; to the TCP peers through the TCP transport's own
    // loss reports, which name the lost rank.
    void announce(const std::exception_ptr& why) {
        std::string text;
        try {
            std::rethrow_exception(why);
        } catch (const std::exception& e) {
            text = e.what();
        }
        if (text.starts_with("tutti: ")) text.erase(0, 7);
        // A loss's message begins with the lost rank ("rank 3 ...").
        static const std::regex lost_rank(R"(^rank (\d+) )");
        std::smatch m;
        const int lost = std::regex_search(text, m, lost_rank) ? std::stoi(m[1].str()) : -1;
        // The TCP transport names the rank itself: it gets the rest.
        const std::string rest = lost >= 0 ? m.suffix().str() : std::string();
        notice_ = std::move(text);
        if (shm_) {
            message_header h;
            h.key = {watch_communicator, 1, 0, local(rank_)};
            h.bytes = notice_.size();
            for (int peer = 0; peer < size_; ++peer)
                if (peer != rank_ && peer != lost && route_to(peer) == route::shm)
                    shm_->isend(local(peer), h, std::as_bytes(std::span(notice_)));
        }
        if (lost >= 0 && lost < size_) tcp_->report_loss(lost, rest);
    }

    route route_to(int peer) const { return routes_[static_cast<std::size_t>(peer)]; }
    int local(int peer) const { return local_of_[static_cast<std::size_t>(peer)]; }

    message_header local_header(const message_header& h) const {
        auto l = h;
        l.key.source = local(h.key.source);
        return l;
    }

    void check_rank(int peer, std::string_view what) const {
        if (peer < 0 || peer >= size_)
            throw error(errc::invalid_argument,
                        fmt::format("{} rank {} outside the world of {}", what, peer, size_));
    }

    // The hint of isend_awaited_at_end matters on shared memory only: TCP
    // has one path.
    request send(int dest, const message_header& header, std::span<const std::byte> data,
                 bool awaited_at_end) {
        check_rank(dest, "send to");
        if (state_->failure) return failed();
        if (route_to(dest) == route::tcp) return tcp_request(tcp_->isend(dest, header, data));
        auto h = header;
        h.key.source = local(rank_);
        return shm_request(awaited_at_end ? shm_->isend_awaited_at_end(local(dest), h, data)
                                          : shm_->isend(local(dest), h, data),
                           false);
    }

    request failed() const {
        auto r = make_request();
        r->complete(state_->failure);
        return r;
    }

    request tcp_request(request r) {
        shared_state::track(state_->pending_tcp, state_->prune_tcp_at, {r, {}});
        return r;
    }

    request shm_request(request from, bool any_size) {
        auto to = make_request();
        shared_state::track(state_->pending_shm, state_->prune_shm_at, {to, from});
        spawn(context_, forward(std::move(from), to, state_, shm_, any_size), asio::detached);
        return to;
    }

    asio::io_context& context_;
    int rank_;
    int size_;
    std::vector<route> routes_;
    std::vector<int> local_of_; // world rank -> shared-memory rank, -1 off this node
    // The announced loss (announce): declared before the transports, so that
    // its bytes outlive the sends they may still hold when they close.
    std::string notice_;
    std::shared_ptr<shm::transport> shm_;
    std::shared_ptr<tcp::transport> tcp_;
    std::shared_ptr<shared_state> state_;
    std::chrono::microseconds wait_slice_;
    std::chrono::microseconds single_route_block_;
};

// The first byte of the blob each rank contributes: its TUTTI_TRANSPORT.
std::vector<std::byte> hello_blob(choice wanted, const std::string& node) {
    std::vector<std::byte> blob;
    blob.push_back(static_cast<std::byte>(wanted));
    for (char c : node)
        blob.push_back(static_cast<std::byte>(c));
    return blob;
}

} // namespace

world connect(bootstrap& boot, asio::io_context& context, options opts) {
    const choice wanted = opts.transport ? *opts.transport : choice_from_environment();
    auto hellos = boot.all_gather(hello_blob(wanted, boot.node()));
    if (hellos.size() != static_cast<std::size_t>(boot.size()))
        throw error(errc::invalid_argument,
                    fmt::format("routing: the bootstrap returned {} blobs for {} ranks",
                                hellos.size(), boot.size()));
    std::vector<std::string> nodes;
    for (int r = 0; r < boot.size(); ++r) {
        const auto& blob = hellos[static_cast<std::size_t>(r)];
        if (blob.empty() || std::to_integer<int>(blob[0]) > static_cast<int>(choice::tcp))
            throw error(errc::invalid_argument,
                        fmt::format("routing: rank {} sent a malformed hello", r));
        const auto theirs = static_cast<choice>(std::to_integer<int>(blob[0]));
        if (theirs != wanted)
            throw error(errc::invalid_argument,
                        fmt::format("routing: rank {} was started with TUTTI_TRANSPORT={} and "
                                    "rank {} with {}; every rank of a job must use the same",
                                    r, to_string(theirs), boot.rank(), to_string(wanted)));
        nodes.emplace_back(reinterpret_cast<const char*>(blob.data() + 1), blob.size() - 1);
    }

    world w;
    w.routes = plan_routes(boot.rank(), nodes, wanted);
    if (w.routes.transport_name == "shm") {
        w.shared_memory = shm::create_transport(boot, context, opts.shared_memory);
        w.transport = w.shared_memory;
        return w;
    }
    if (w.routes.transport_name == "tcp") {
        w.tcp = tcp::create_transport(boot, context, opts.tcp);
        w.transport = w.tcp;
        return w;
    }

    // Shared memory within each node, all nodes at once: each node's ranks
    // set it up through a bootstrap of their own, named after the node's
    // place in the job so that nodes posed on one machine do not collide.
    const auto& mine = nodes[static_cast<std::size_t>(boot.rank())];
    std::vector<int> members;
    std::vector<std::string> distinct;
    for (int r = 0; r < boot.size(); ++r) {
        const auto& n = nodes[static_cast<std::size_t>(r)];
        if (n == mine) members.push_back(r);
        if (std::find(distinct.begin(), distinct.end(), n) == distinct.end()) distinct.push_back(n);
    }
    const auto node_index = std::find(distinct.begin(), distinct.end(), mine) - distinct.begin();
    std::string failure;
    {
        node_bootstrap local(boot, members, fmt::format("{}-node{}", boot.job_id(), node_index));
        try {
            if (members.size() > 1)
                w.shared_memory = shm::create_transport(local, context, opts.shared_memory);
        } catch (const std::exception& e) {
            failure = e.what();
            if (failure.starts_with("tutti: ")) failure.erase(0, 7);
        }
        local.leave();
    }
    // Every rank learns whether every node succeeded, so none waits for a
    // TCP setup that a failed rank will never join.
    std::vector<std::byte> status;
    for (char c : failure)
        status.push_back(static_cast<std::byte>(c));
    auto statuses = boot.all_gather(status);
    for (int r = 0; r < boot.size(); ++r) {
        const auto& s = statuses[static_cast<std::size_t>(r)];
        if (s.empty()) continue;
        const std::string why(reinterpret_cast<const char*>(s.data()), s.size());
        throw error(errc::invalid_argument,
                    r == boot.rank()
                        ? fmt::format("routing: shared memory on node '{}': {}", mine, why)
                        : fmt::format("routing: rank {} on node '{}' could not set up shared "
                                      "memory: {}",
                                      r, nodes[static_cast<std::size_t>(r)], why));
    }
    w.tcp = tcp::create_transport(boot, context, opts.tcp);
    w.transport =
        std::make_shared<mixed_transport>(context, w.routes, w.shared_memory, members, w.tcp, opts);
    return w;
}

} // namespace tutti::routed
