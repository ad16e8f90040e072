#include "transports/tcp/tcp.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <fstream>
#include <limits>
#include <optional>
#include <span>
#include <sstream>
#include <unordered_map>
#include <vector>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <asio/buffer.hpp>
#include <asio/ip/host_name.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/write.hpp>

#include "core/debug.hpp"
#include "core/error.hpp"
#include "core/mailbox.hpp"
#include "core/placement.hpp"
#include "core/progress.hpp"
#include "core/scratch.hpp"
#include "transports/tcp/frame.hpp"
#include "transports/tcp/handshake.hpp"

namespace tutti::tcp {

namespace {

namespace ip = asio::ip;
using clock = std::chrono::steady_clock;
using socket_ptr = std::shared_ptr<ip::tcp::socket>;

// Small frames are read in batches into this buffer, one receive call for
// many messages; a payload larger than half of it is read straight into its
// destination instead.
constexpr std::size_t read_buffer_bytes = 256 * 1024;
// Where in a page that buffer starts: half a page from a page's start. A
// sender's kernel writes a frame into its page fragment from the fragment's
// start whenever its earlier frames have been read (sk_page_frag_refill
// reuses the page from offset 0), so frames often start a page; the
// receiver's kernel copies them out with `rep movsb`, which on this machine
// (AMD, FSRM) crawled where the destination lay 16-24 bytes past the source
// within a page, and not from 32 bytes on. A heap buffer starts 16 bytes into
// a page: the kernel's copy took 9-12 % of the CPU time of the 4-rank 128
// KiB gather over TCP (blocks of 32 KiB), against 2 % from half a page, and
// the gather 0.6-0.7 of its time (docs/performance.md, seventy-first
// session).
constexpr std::size_t page_bytes = 4096;
constexpr std::size_t read_buffer_start_in_page = page_bytes / 2;

// The reader's buffer within `storage` (read_buffer_bytes + page_bytes),
// starting read_buffer_start_in_page into a page.
std::span<std::byte> read_buffer_within(std::vector<std::byte>& storage) {
    const auto in_page = reinterpret_cast<std::uintptr_t>(storage.data()) % page_bytes;
    const std::size_t skip = (read_buffer_start_in_page + page_bytes - in_page) % page_bytes;
    return std::span(storage).subspan(skip, read_buffer_bytes);
}

// How far a reader reads beyond the bytes it needs: enough to take many small
// frames in one call, little of a large message's payload, which from there
// is copied a second time (the rest goes straight into its receive). Reading
// up to the whole buffer took 256 KiB of each large message through that
// second copy; at 2 ranks over TCP, 1 MiB all_reduce then took 19 % longer
// and all_gather 14 % (docs/performance.md, "ninth session").
constexpr std::size_t read_ahead_bytes = 64 * 1024;
// A payload of more than this whose receive is already posted when its header
// is read goes straight into that receive, as a large one does; one whose
// receive is not posted is read through the buffer, without waiting for it
// (the wait is for large ones, core::await_receive). The copy out of the
// buffer was what made 4 ranks sharing cores over TCP take longer for a
// 128 KiB all_reduce gathered to rank 0 than for a 192 KiB one; going
// straight, the 4-rank 96-128 KiB reduce took 0.67-0.88 of the time, that
// all_reduce 0.8, and the rest stayed level (docs/performance.md,
// sixty-ninth session).
// Waiting for unposted mid-size receives too had lost (sixty-eighth).
constexpr std::size_t straight_when_posted_above = 64 * 1024;
// Frames gathered into one write when several are queued for one peer.
constexpr std::size_t max_gathered_frames = 64;

// How much one system call moves. Asio's async_write and async_read move at
// most 64 KiB per call (transfer_all's default_max_transfer_size). A large
// message's payload is read in as few calls as the socket allows: at 2
// ranks, 16 MiB all_reduce, all_gather and all_to_all took 7-25 % less
// time. Writes go out in calls of up to 256 KiB: uncapped, they made the
// 16 MiB broadcast slower, and more than 256 KiB gained nothing
// (docs/performance.md, "ninth session").
struct per_call_limit {
    std::size_t bytes;
    std::size_t operator()(const asio::error_code& failed, std::size_t) const noexcept {
        return failed ? 0 : bytes;
    }
};
constexpr per_call_limit read_in_fewest_calls{std::numeric_limits<std::size_t>::max()};
constexpr per_call_limit write_in_calls_of_256k{std::size_t{256} * 1024};

// The rest of a large message, from byte `from` on, read straight into its
// receive as the socket gives it, `observer` told after each read how much
// has landed (landing_observer), so that the receiver uses each part while
// the sender still sends the next: a 2-rank reduce over loopback took
// 0.82-0.86 of the time from 1 MiB (docs/performance.md, forty-fifth
// session). The last read is not reported: the owner takes it at
// completion.
asio::awaitable<void> read_observed(asio::ip::tcp::socket& socket, std::span<std::byte> into,
                                    std::size_t from, landing_observer& observer) {
    if (from > 0) observer.landed(from);
    while (from < into.size()) {
        from += co_await socket.async_read_some(
            asio::buffer(into.data() + from, into.size() - from), asio::use_awaitable);
        if (from < into.size()) observer.landed(from);
    }
}

// The read loop's pause between messages (see core::read_loop): it goes on
// in the progress loop's resume(), after the coroutines its messages
// completed (detail::defer_past_waiters).
template <class Handler>
class reader_after_waiters final : public detail::deferred_work {
public:
    explicit reader_after_waiters(Handler handler) : handler_(std::move(handler)) {}
    void run() override { std::move(handler_)(); }

private:
    Handler handler_;
};

auto after_waiters(asio::io_context& context) {
    return asio::async_initiate<const asio::use_awaitable_t<>&, void()>(
        [&context](auto handler) {
            std::unique_ptr<detail::deferred_work> work =
                std::make_unique<reader_after_waiters<decltype(handler)>>(std::move(handler));
            if (!detail::defer_past_waiters(context, work))
                asio::post(context, [work = std::move(work)] { work->run(); });
        },
        asio::use_awaitable);
}

// A refused connection means nobody listens there any more: the peer is gone.
constexpr int refusals_before_lost = 3;
constexpr auto first_retry_delay = std::chrono::milliseconds(5);
constexpr auto longest_retry_delay = std::chrono::milliseconds(200);
// At the end, how long to wait for peers to see our goodbye and send theirs.
constexpr auto goodbye_grace = std::chrono::milliseconds(2000);

template <class... Args>
void debug(fmt::format_string<Args...> format, Args&&... args) {
    detail::debug_log("tcp", format, std::forward<Args>(args)...);
}

// What a tutti::error says without its "tutti: " prefix, to quote it.
std::string_view text_of(const std::exception& e) {
    std::string_view text = e.what();
    if (text.starts_with("tutti: ")) text.remove_prefix(7);
    return text;
}

std::string describe_failure(const std::exception_ptr& failure) {
    try {
        std::rethrow_exception(failure);
    } catch (const asio::system_error& e) {
        return e.code().message();
    } catch (const std::exception& e) {
        return std::string(text_of(e));
    } catch (...) {
        return "an unknown failure";
    }
}

bool is_closure(const std::exception_ptr& failure) {
    try {
        std::rethrow_exception(failure);
    } catch (const asio::system_error& e) {
        const auto code = e.code();
        return code == asio::error::eof || code == asio::error::connection_reset ||
               code == asio::error::broken_pipe || code == asio::error::connection_aborted ||
               code == asio::error::operation_aborted || code == asio::error::bad_descriptor;
    } catch (...) {
        return false;
    }
}

std::string join_address(const std::string& host, std::uint16_t port) {
    if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
    return fmt::format("{}:{}", host, port);
}

std::optional<std::string> environment(const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
}

// The host's own address: the first IPv4 address its name resolves to.
std::string host_address() {
    asio::io_context io;
    ip::tcp::resolver resolver(io);
    asio::error_code ec;
    const auto results = resolver.resolve(ip::host_name(), "0", ec);
    if (!ec)
        for (const auto& entry : results)
            if (entry.endpoint().address().is_v4()) return entry.endpoint().address().to_string();
    return "127.0.0.1";
}

struct message_key_hash {
    std::size_t operator()(const message_key& k) const noexcept {
        return call_key_hash{}(call_of(k)) ^ (k.step * 0x9E3779B97F4A7C15ull);
    }
};

// One frame waiting to be written: its header and, in place, the user's bytes
// (or a small payload owned here for control frames).
struct outgoing {
    frame_header_bytes header{};
    std::span<const std::byte> data;
    std::vector<std::byte> owned;
    request done; // null for control frames
    std::size_t written = 0;

    std::size_t total() const { return frame_header_size + data.size(); }
};

// Closes a socket whose handshake or connect ran past its deadline; shared
// with the timer's handler, which may run after the coroutine moved on.
struct watchdog {
    bool settled = false;
    bool timed_out = false;
    void expired(const asio::error_code& e, ip::tcp::socket& socket) {
        if (e || settled) return;
        timed_out = true;
        asio::error_code ignored;
        socket.close(ignored);
    }
};

enum class peer_state { idle, connecting, up, closed, lost };

struct peer {
    peer_state state = peer_state::idle;
    socket_ptr socket;
    std::deque<outgoing> queue;
    bool writing = false;
    bool goodbye_received = false;
    bool reader_done = true;
    std::exception_ptr failure; // why sends to it fail (closed or lost)
    // While its reader waits for the receive of a large message
    // (core::await_receive): the timer it waits on, which a receive posted
    // for this peer cancels.
    asio::steady_timer* awaiting_receive = nullptr;
};

// options::congestion_control's choice for a connection within this host,
// and for one between hosts where the system's default paces.
constexpr std::string_view non_pacing_congestion_control = "reno";

// Whether a congestion control paces its sends: BBR and its successors send
// each burst at the rate they measured last, which held 1 MiB collectives
// back 2-3 times over loopback and over veth between network namespaces
// alike (docs/transport-tcp.md); the loss-based ones (reno, cubic, dctcp)
// send a burst as fast as the window allows.
bool paces(std::string_view name) {
    return name.starts_with("bbr");
}

// A congestion control named in the options or the environment must exist
// here: a misspelt name would otherwise be dropped without a word.
void check_congestion_control(const std::string& name) {
    if (name.empty() || name == "system") return;
    std::ifstream file("/proc/sys/net/ipv4/tcp_available_congestion_control");
    if (!file) return; // this system does not say; setsockopt will tell
    std::string available;
    std::getline(file, available);
    std::istringstream names(available);
    for (std::string one; names >> one;)
        if (one == name) return;
    throw error(errc::invalid_argument,
                fmt::format("tcp transport: congestion control '{}' is not available here (this "
                            "system has: {}; or \"system\" for its default)",
                            name, available));
}

class core : public std::enable_shared_from_this<core> {
public:
    core(bootstrap& boot, asio::io_context& context, options opts);

    void start();
    void shutdown();

    int rank() const noexcept { return rank_; }
    int size() const noexcept { return size_; }
    int ranks_on_this_machine() const noexcept { return ranks_on_this_machine_; }
    std::uint32_t ranks_per_core() const noexcept { return ranks_per_core_; }
    asio::io_context& context() noexcept { return context_; }
    bool busy_poll() const noexcept { return busy_poll_; }

    request isend(int dest, const message_header& header, std::span<const std::byte> data);
    request irecv(const message_header& expected, std::span<std::byte> into, bool any_size,
                  landing_observer* observer = nullptr);
    // A receive being read into is no longer posted: the mailbox says false.
    bool withdraw(const request& receive) { return mailbox_.withdraw(receive); }
    std::size_t progress() {
        const auto n = woken_;
        woken_ = 0;
        return n;
    }
    void await_activity(std::chrono::microseconds limit) {
        if (context_.stopped()) context_.restart();
        woken_ += context_.run_one_for(limit);
    }

    std::string endpoint_of(int r) const {
        if (r < 0 || r >= size_)
            throw error(
                errc::invalid_argument,
                fmt::format("tcp transport: rank {} is outside the job of {} ranks", r, size_));
        return endpoints_[static_cast<std::size_t>(r)];
    }
    const tcp::counters& counters() const noexcept { return counters_; }
    // A loss seen elsewhere: this rank reports it as if a peer had.
    void report_loss(int r, const std::string& why) { lose(r, why, rank_); }

private:
    peer& peer_of(int r) { return peers_[static_cast<std::size_t>(r)]; }

    frame_header_bytes header_bytes(frame_kind kind, const message_header& m) const;
    void enqueue(int dest, outgoing item, bool front = false);
    bool try_write_now(peer& p, outgoing& item);
    void start_writer(int dest);
    asio::awaitable<void> write_loop(int dest);
    void send_control(int dest, frame_kind kind, std::vector<std::byte> payload);

    asio::awaitable<void> accept_loop();
    asio::awaitable<void> greet(socket_ptr socket);
    asio::awaitable<void> connect_to(int dest);
    void commit(int r, socket_ptr socket);
    void choose_congestion_control(ip::tcp::socket& socket);
    asio::awaitable<void> write_frame(ip::tcp::socket& socket, frame_kind kind,
                                      std::span<const std::byte> payload);
    asio::awaitable<std::vector<std::byte>> read_frame(ip::tcp::socket& socket, frame_kind want,
                                                       std::size_t payload_bytes);

    asio::awaitable<void> read_loop(int src, socket_ptr socket);
    asio::awaitable<void> deliver(const message_header& m, std::span<const std::byte> payload);
    asio::awaitable<std::optional<mailbox::claimed_receive>>
    claim_or_make_room(const message_header& m);
    asio::awaitable<std::optional<mailbox::claimed_receive>> await_receive(int src,
                                                                           const message_header& m);
    void account_unexpected(const message_header& m);
    void reader_ended(int src, const socket_ptr& socket, std::exception_ptr failure);

    void lose(int r, const std::string& why, int reported_by = -1);
    void fail_sends(peer& p, const std::exception_ptr& failure);
    void reject(const std::string& from, const std::string& why);
    std::shared_ptr<core> self() { return shared_from_this(); }

    int rank_;
    int size_;
    int ranks_on_this_machine_ = 1;
    // transport_capabilities::ranks_per_core: rank 0's figure where the whole
    // job runs on one machine, else 0 (unknown).
    std::uint32_t ranks_per_core_ = 0;
    std::string job_id_;
    asio::io_context& context_;
    options opts_;
    std::optional<job_secret> secret_;
    frame_limits limits_;
    ip::tcp::acceptor acceptor_;
    std::vector<std::string> endpoints_;
    std::vector<ip::tcp::endpoint> addresses_;
    std::vector<peer> peers_;
    mailbox mailbox_{mailbox::threads::owner_only};
    tcp::counters counters_;
    std::size_t woken_ = 0;
    bool busy_poll_ = false;
    std::string congestion_control_; // options::congestion_control, or the environment's
    bool shutting_down_ = false;     // goodbyes sent, waiting for the peers' ends
    bool closing_ = false;           // sockets closed, coroutines ending
    std::exception_ptr first_loss_;

    // Messages delivered before their receive was posted: how many bytes the
    // mailbox keeps for us, and the readers held back because of it.
    std::unordered_map<message_key, std::uint64_t, message_key_hash> unexpected_;
    std::uint64_t unexpected_bytes_ = 0;
    asio::steady_timer room_;
    int waiting_for_room_ = 0;
    // options::unposted_wait_ns_per_byte, or the environment's.
    double unposted_wait_ns_per_byte_ = 0;
};

core::core(bootstrap& boot, asio::io_context& context, options opts)
    : rank_(boot.rank()), size_(boot.size()), job_id_(boot.job_id()), context_(context),
      opts_(std::move(opts)), acceptor_(context), room_(context) {
    if (opts_.connect_timeout.count() <= 0)
        throw error(errc::invalid_argument,
                    fmt::format("tcp transport: connect_timeout of {} ms; it must be positive",
                                opts_.connect_timeout.count()));
    if (opts_.max_frame_payload == 0)
        throw error(errc::invalid_argument,
                    "tcp transport: max_frame_payload of 0 bytes; it must be positive");
    limits_ = {opts_.max_frame_payload, size_};
    busy_poll_ = opts_.busy_poll;
    if (auto poll = environment("TUTTI_TCP_BUSY_POLL")) busy_poll_ = *poll != "0";
    congestion_control_ = environment("TUTTI_TCP_CONGESTION").value_or(opts_.congestion_control);
    check_congestion_control(congestion_control_);
    // Up to a million: over a second per byte is no bound, and a NaN none.
    const auto valid_wait = [](double ns) { return ns >= 0 && ns <= 1e6; };
    unposted_wait_ns_per_byte_ = opts_.unposted_wait_ns_per_byte;
    if (!valid_wait(unposted_wait_ns_per_byte_))
        throw error(errc::invalid_argument,
                    fmt::format("tcp transport: unposted_wait_ns_per_byte of {}; it must be from 0 "
                                "to 1000000",
                                unposted_wait_ns_per_byte_));
    if (auto text = environment("TUTTI_TCP_UNPOSTED_WAIT_NS_PER_BYTE")) {
        char* end = nullptr;
        unposted_wait_ns_per_byte_ = std::strtod(text->c_str(), &end);
        if (*end != '\0' || !valid_wait(unposted_wait_ns_per_byte_))
            throw error(errc::invalid_argument,
                        fmt::format("TUTTI_TCP_UNPOSTED_WAIT_NS_PER_BYTE='{}' is not a number of "
                                    "nanoseconds per byte from 0 to 1000000",
                                    *text));
    }
    peers_.resize(static_cast<std::size_t>(size_));

    // Where to listen: the options, the environment, the bootstrap, the host.
    std::string address = opts_.listen_address;
    if (address.empty()) address = environment("TUTTI_TCP_ADDRESS").value_or("");
    if (address.empty()) address = boot.reachable_address();
    if (address.empty()) address = host_address();
    std::uint16_t port = opts_.listen_port;
    if (port == 0)
        if (auto text = environment("TUTTI_TCP_PORT")) {
            char* end = nullptr;
            const long value = std::strtol(text->c_str(), &end, 10);
            if (*end != '\0' || value < 0 || value > 65535)
                throw error(
                    errc::invalid_argument,
                    fmt::format("TUTTI_TCP_PORT='{}' is not a port number (0 to 65535)", *text));
            port = static_cast<std::uint16_t>(value);
        }
    asio::error_code ec;
    const auto listen_ip = ip::make_address(address, ec);
    if (ec)
        throw error(errc::invalid_argument,
                    fmt::format("tcp transport: rank {} cannot listen at '{}': not an IP address "
                                "({}); set TUTTI_TCP_ADDRESS or options::listen_address",
                                rank_, address, ec.message()));
    const ip::tcp::endpoint local(listen_ip, port);
    acceptor_.open(local.protocol(), ec);
    if (!ec) acceptor_.set_option(ip::tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(local, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
        throw error(errc::invalid_argument,
                    fmt::format("tcp transport: rank {} cannot listen at {}: {}", rank_,
                                join_address(address, port), ec.message()));
    const auto mine = join_address(address, acceptor_.local_endpoint().port());

    // The secret: given, from the environment, or made by rank 0 and shared.
    std::string secret_hex = opts_.secret;
    if (secret_hex.empty()) secret_hex = environment(job_secret_variable).value_or("");
    std::string shared;
    if (secret_hex.empty() && rank_ == 0) {
        secret_hex = job_secret::generate().to_hex();
        shared = secret_hex;
    }
    const std::string machine = opts_.machine.empty() ? this_machine_id() : opts_.machine;
    // What ranks_per_core would be were every rank on this machine: rank 0's
    // is the one all take, so that every rank's selection weighs the same.
    const std::string blob =
        mine + "|" + shared + "|" + std::to_string(tutti::ranks_per_core(size_)) + "|" + machine;
    const auto* bytes = reinterpret_cast<const std::byte*>(blob.data());
    const auto blobs = boot.all_gather(std::span(bytes, blob.size()));
    if (blobs.size() != static_cast<std::size_t>(size_))
        throw error(errc::invalid_argument,
                    fmt::format("tcp transport: the bootstrap returned {} blobs for {} ranks",
                                blobs.size(), size_));
    std::string secret_of_rank0;
    std::uint32_t ranks_per_core_if_one_machine = 0;
    ranks_on_this_machine_ = 0;
    for (int r = 0; r < size_; ++r) {
        const auto& b = blobs[static_cast<std::size_t>(r)];
        const std::string text(reinterpret_cast<const char*>(b.data()), b.size());
        const auto bar = text.find('|');
        const auto colon = text.rfind(':', bar);
        const auto second_bar =
            bar == std::string::npos ? std::string::npos : text.find('|', bar + 1);
        const auto third_bar =
            second_bar == std::string::npos ? std::string::npos : text.find('|', second_bar + 1);
        ip::tcp::endpoint where;
        bool valid = bar != std::string::npos && colon != std::string::npos && colon < bar &&
                     third_bar != std::string::npos;
        unsigned long figure = 0;
        if (valid) {
            const std::string figure_text = text.substr(second_bar + 1, third_bar - second_bar - 1);
            char* end = nullptr;
            figure = std::strtoul(figure_text.c_str(), &end, 10);
            valid = !figure_text.empty() && *end == '\0' && figure <= 1u << 20;
        }
        if (valid) {
            auto host = text.substr(0, colon);
            if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
            const auto peer_ip = ip::make_address(host, ec);
            char* end = nullptr;
            const std::string port_text = text.substr(colon + 1, bar - colon - 1);
            const long peer_port = std::strtol(port_text.c_str(), &end, 10);
            valid =
                !ec && !port_text.empty() && *end == '\0' && peer_port > 0 && peer_port <= 65535;
            if (valid) where = {peer_ip, static_cast<std::uint16_t>(peer_port)};
        }
        if (!valid)
            throw error(errc::invalid_argument,
                        fmt::format("tcp transport: rank {} published a malformed endpoint (is "
                                    "every rank running the same tutti?)",
                                    r));
        endpoints_.push_back(text.substr(0, bar));
        addresses_.push_back(where);
        if (r == 0) {
            secret_of_rank0 = text.substr(bar + 1, second_bar - bar - 1);
            ranks_per_core_if_one_machine = static_cast<std::uint32_t>(figure);
        }
        if (text.compare(third_bar + 1, std::string::npos, machine) == 0) ++ranks_on_this_machine_;
    }
    // Every rank sees alike whether the whole job is on one machine: where a
    // rank is elsewhere, every rank counts fewer than all.
    ranks_per_core_ = ranks_on_this_machine_ == size_ ? ranks_per_core_if_one_machine : 0;
    if (secret_hex.empty()) secret_hex = secret_of_rank0;
    if (secret_hex.empty())
        throw error(errc::invalid_argument,
                    fmt::format("tcp transport: rank {} has no job secret while rank 0 has one: "
                                "set {} for every rank or for none",
                                rank_, job_secret_variable));
    secret_.emplace(job_secret::from_hex(secret_hex));
}

void core::start() {
    asio::co_spawn(context_, accept_loop(), asio::detached);
}

frame_header_bytes core::header_bytes(frame_kind kind, const message_header& m) const {
    frame_header h;
    h.kind = kind;
    h.message = m;
    return encode_frame_header(h);
}

// ---------------------------------------------------------------- sending

request core::isend(int dest, const message_header& header, std::span<const std::byte> data) {
    auto done = make_request();
    if (dest < 0 || dest >= size_) {
        done->complete(std::make_exception_ptr(
            error(errc::invalid_argument,
                  fmt::format("tcp transport: send to rank {} outside the job of {} ranks", dest,
                              size_))));
        return done;
    }
    if (header.bytes != data.size() || header.key.source != rank_) {
        done->complete(std::make_exception_ptr(error(
            errc::invalid_argument,
            fmt::format("tcp transport: a send of {} bytes whose header says {} bytes from rank "
                        "{} (this is rank {})",
                        data.size(), header.bytes, header.key.source, rank_))));
        return done;
    }
    if (dest == rank_) {
        mailbox_.deliver(header, data);
        done->complete();
        return done;
    }
    auto& p = peer_of(dest);
    if (p.state == peer_state::closed || p.state == peer_state::lost) {
        done->complete(p.failure);
        return done;
    }
    outgoing item;
    item.header = header_bytes(frame_kind::data, header);
    item.data = data;
    item.done = done;
    enqueue(dest, std::move(item));
    return done;
}

void core::enqueue(int dest, outgoing item, bool front) {
    auto& p = peer_of(dest);
    if (p.state == peer_state::up && !p.writing && p.queue.empty() && try_write_now(p, item)) {
        ++counters_.frames_sent;
        if (item.done) item.done->complete();
        return;
    }
    if (front)
        p.queue.push_front(std::move(item));
    else
        p.queue.push_back(std::move(item));
    if (p.state == peer_state::idle) {
        p.state = peer_state::connecting;
        asio::co_spawn(context_, connect_to(dest), asio::detached);
    } else if (p.state == peer_state::up) {
        start_writer(dest);
    }
}

// Writes what the socket takes at once, without a trip through the event
// loop; true when the whole frame went out.
bool core::try_write_now(peer& p, outgoing& item) {
    const std::array<asio::const_buffer, 2> buffers{
        asio::buffer(item.header), asio::buffer(item.data.data(), item.data.size())};
    asio::error_code ec;
    const auto n = p.socket->write_some(buffers, ec);
    if (ec) return false; // would block or failed: the writer finds out which
    item.written = n;
    return n == item.total();
}

void core::start_writer(int dest) {
    auto& p = peer_of(dest);
    if (p.writing || p.queue.empty() || p.state != peer_state::up) return;
    p.writing = true;
    asio::co_spawn(context_, write_loop(dest), asio::detached);
}

asio::awaitable<void> core::write_loop(int dest) {
    auto keep = self();
    auto& p = peer_of(dest);
    auto socket = p.socket;
    std::vector<asio::const_buffer> buffers;
    while (!p.queue.empty() && p.state == peer_state::up && p.socket == socket) {
        // Gather several queued frames into one write; each frame's header
        // and payload go out as they are, never copied together.
        buffers.clear();
        std::size_t frames = 0;
        for (auto& item : p.queue) {
            if (frames == max_gathered_frames) break;
            std::size_t skip = item.written;
            if (skip < frame_header_size) buffers.push_back(asio::buffer(item.header) + skip);
            skip = skip > frame_header_size ? skip - frame_header_size : 0;
            if (skip < item.data.size())
                buffers.push_back(asio::buffer(item.data.data(), item.data.size()) + skip);
            ++frames;
        }
        asio::error_code ec;
        co_await asio::async_write(*socket, buffers, write_in_calls_of_256k,
                                   asio::redirect_error(asio::use_awaitable, ec));
        if (ec) {
            // The reader sees the same end and says whether it was a loss.
            debug("rank {}: writing to rank {} failed: {}", rank_, dest, ec.message());
            break;
        }
        for (std::size_t i = 0; i < frames; ++i) {
            auto item = std::move(p.queue.front());
            p.queue.pop_front();
            ++counters_.frames_sent;
            if (item.done) item.done->complete();
        }
    }
    p.writing = false;
}

void core::send_control(int dest, frame_kind kind, std::vector<std::byte> payload) {
    message_header m;
    m.key.source = rank_;
    m.bytes = payload.size();
    outgoing item;
    item.header = header_bytes(kind, m);
    item.owned = std::move(payload);
    item.data = item.owned;
    enqueue(dest, std::move(item));
}

// ---------------------------------------------------------- connections

asio::awaitable<void> core::write_frame(ip::tcp::socket& socket, frame_kind kind,
                                        std::span<const std::byte> payload) {
    message_header m;
    m.key.source = rank_;
    m.bytes = payload.size();
    const auto header = header_bytes(kind, m);
    const std::array<asio::const_buffer, 2> buffers{asio::buffer(header),
                                                    asio::buffer(payload.data(), payload.size())};
    co_await asio::async_write(socket, buffers, asio::use_awaitable);
}

asio::awaitable<std::vector<std::byte>> core::read_frame(ip::tcp::socket& socket, frame_kind want,
                                                         std::size_t payload_bytes) {
    frame_header_bytes raw{};
    co_await asio::async_read(socket, asio::buffer(raw), asio::use_awaitable);
    const auto header = decode_frame_header(raw, limits_);
    if (header.kind != want)
        throw error(errc::invalid_argument,
                    fmt::format("a {} frame where the handshake expects a {} frame",
                                to_string(header.kind), to_string(want)));
    if (header.message.bytes != payload_bytes)
        throw error(errc::invalid_argument,
                    fmt::format("a {} frame of {} bytes where the handshake expects {}",
                                to_string(want), header.message.bytes, payload_bytes));
    std::vector<std::byte> payload(payload_bytes);
    co_await asio::async_read(socket, asio::buffer(payload), asio::use_awaitable);
    co_return payload;
}

asio::awaitable<void> core::accept_loop() {
    auto keep = self();
    for (;;) {
        asio::error_code ec;
        auto socket = std::make_shared<ip::tcp::socket>(context_);
        co_await acceptor_.async_accept(*socket, asio::redirect_error(asio::use_awaitable, ec));
        if (closing_ || ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
        if (ec) {
            // Out of descriptors and the like: wait instead of spinning.
            asio::steady_timer pause(context_, first_retry_delay * 4);
            co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
            continue;
        }
        asio::co_spawn(context_, greet(std::move(socket)), asio::detached);
    }
}

void core::reject(const std::string& from, const std::string& why) {
    ++counters_.rejected_connections;
    fmt::print(stderr, "tutti tcp: rank {} closed a connection from {}: {}\n", rank_, from, why);
}

// The acceptor's side of the handshake (handshake.hpp). A connection that
// does not prove the secret within connect_timeout is closed and counted.
asio::awaitable<void> core::greet(socket_ptr socket) {
    auto keep = self();
    asio::error_code ec;
    const auto remote = socket->remote_endpoint(ec);
    const std::string from = ec ? std::string("an unknown address")
                                : join_address(remote.address().to_string(), remote.port());
    socket->set_option(ip::tcp::no_delay(true), ec);
    asio::steady_timer deadline(context_, opts_.connect_timeout);
    auto watch = std::make_shared<watchdog>();
    deadline.async_wait([socket, watch](asio::error_code e) { watch->expired(e, *socket); });
    int connector = -1;
    try {
        const auto hello_bytes = co_await read_frame(*socket, frame_kind::hello, hello_size);
        const auto hello = decode_hello(hello_bytes, size_);
        if (hello.acceptor_rank != rank_)
            throw error(errc::invalid_argument,
                        fmt::format("its hello is for rank {}, this is rank {}",
                                    hello.acceptor_rank, rank_));
        connector = hello.connector_rank;
        const nonce mine = make_challenge();
        co_await write_frame(*socket, frame_kind::challenge, mine);
        const auto proof = co_await read_frame(*socket, frame_kind::proof, proof_size);
        const handshake_binding binding{job_id_, connector, rank_};
        verify_proof(*secret_, handshake_role::connector, hello.challenge, mine, binding, proof);
        watch->settled = true;
        deadline.cancel();
        auto& p = peer_of(connector);
        // One connection per pair: when both ranks connect at once, the lower
        // rank's connection is kept and the other closed; its connector then
        // finds the pair up through the connection it accepted.
        const bool keep_ours = p.state == peer_state::connecting && rank_ < connector;
        if (closing_ || keep_ours || p.state == peer_state::up || p.state == peer_state::closed ||
            p.state == peer_state::lost) {
            debug("rank {}: a second connection from rank {} closed ({})", rank_, connector,
                  keep_ours ? "ours is kept" : "already connected");
            socket->close(ec);
            co_return;
        }
        const auto welcome =
            make_proof(*secret_, handshake_role::acceptor, mine, hello.challenge, binding);
        message_header m;
        m.key.source = rank_;
        m.bytes = welcome.size();
        outgoing item;
        item.header = header_bytes(frame_kind::welcome, m);
        item.owned.assign(welcome.begin(), welcome.end());
        item.data = item.owned;
        commit(connector, socket);
        // The welcome goes out before anything queued for this peer.
        enqueue(connector, std::move(item), true);
    } catch (const std::exception& e) {
        watch->settled = true;
        deadline.cancel();
        socket->close(ec);
        std::string why = watch->timed_out ? fmt::format("no valid handshake within {} ms",
                                                         opts_.connect_timeout.count())
                                           : std::string(text_of(e));
        if (connector >= 0) why = fmt::format("claims to be rank {}: {}", connector, why);
        reject(from, why);
    }
}

// The connector's side: retried until connect_timeout, unless the pair comes
// up through the peer's own connection meanwhile.
asio::awaitable<void> core::connect_to(int dest) {
    auto keep = self();
    const auto& where = addresses_[static_cast<std::size_t>(dest)];
    const auto& name = endpoints_[static_cast<std::size_t>(dest)];
    const auto deadline = clock::now() + opts_.connect_timeout;
    auto delay = first_retry_delay;
    int refusals = 0;
    std::string last = "no attempt finished";
    while (peer_of(dest).state == peer_state::connecting && !closing_) {
        auto socket = std::make_shared<ip::tcp::socket>(context_);
        asio::steady_timer limit(context_, deadline - clock::now());
        auto watch = std::make_shared<watchdog>();
        limit.async_wait([socket, watch](asio::error_code e) { watch->expired(e, *socket); });
        try {
            co_await socket->async_connect(where, asio::use_awaitable);
            asio::error_code ec;
            socket->set_option(ip::tcp::no_delay(true), ec);
            hello_message hello;
            hello.challenge = make_challenge();
            hello.connector_rank = rank_;
            hello.acceptor_rank = dest;
            co_await write_frame(*socket, frame_kind::hello, encode_hello(hello));
            const auto challenge_bytes =
                co_await read_frame(*socket, frame_kind::challenge, nonce_size);
            const nonce theirs = decode_challenge(challenge_bytes);
            const handshake_binding binding{job_id_, rank_, dest};
            co_await write_frame(
                *socket, frame_kind::proof,
                make_proof(*secret_, handshake_role::connector, hello.challenge, theirs, binding));
            const auto welcome = co_await read_frame(*socket, frame_kind::welcome, proof_size);
            verify_proof(*secret_, handshake_role::acceptor, theirs, hello.challenge, binding,
                         welcome);
            watch->settled = true;
            limit.cancel();
            if (peer_of(dest).state != peer_state::connecting || closing_) {
                socket->close(ec);
                co_return;
            }
            commit(dest, socket);
            start_writer(dest);
            co_return;
        } catch (const asio::system_error& e) {
            last = watch->timed_out ? "timed out" : e.code().message();
            if (e.code() == asio::error::connection_refused) ++refusals;
        } catch (const error& e) {
            // Whoever answers there cannot prove the secret: not our peer.
            last = fmt::format("the handshake failed: {}", text_of(e));
        }
        watch->settled = true;
        limit.cancel();
        asio::error_code ignored;
        socket->close(ignored);
        if (peer_of(dest).state != peer_state::connecting || closing_) co_return;
        const auto left = deadline - clock::now();
        if (left <= clock::duration::zero() || refusals >= refusals_before_lost) break;
        asio::steady_timer pause(context_, std::min<clock::duration>(delay, left));
        co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
        delay = std::min(delay * 2, longest_retry_delay);
    }
    if (peer_of(dest).state != peer_state::connecting || closing_) co_return;
    lose(dest, refusals >= refusals_before_lost
                   ? fmt::format("cannot be reached at {}: connection refused (nothing listens "
                                 "there any more)",
                                 name)
                   : fmt::format("cannot be reached at {}: no connection within {} ms (last "
                                 "attempt: {})",
                                 name, opts_.connect_timeout.count(), last));
}

// See options::congestion_control. Set after the handshake, on the
// connection that carries the job's data; a refusal is not an error (the
// connection works as well with the system's choice, only slower).
void core::choose_congestion_control(ip::tcp::socket& socket) {
#ifdef TCP_CONGESTION
    const int fd = socket.native_handle();
    const auto in_use_now = [fd] {
        std::array<char, 16> in_use{};
        auto length = static_cast<socklen_t>(in_use.size() - 1);
        if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, in_use.data(), &length) != 0)
            in_use[0] = '\0';
        return in_use;
    };
    std::string name = congestion_control_;
    if (name.empty()) {
        asio::error_code local_error, remote_error;
        const auto local = socket.local_endpoint(local_error);
        const auto remote = socket.remote_endpoint(remote_error);
        const bool within_host =
            !local_error && !remote_error && local.address() == remote.address();
        if (within_host || paces(in_use_now().data())) name = non_pacing_congestion_control;
    }
    if (!name.empty() && name != "system" &&
        setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(),
                   static_cast<socklen_t>(name.size())) != 0)
        debug("rank {}: TCP congestion control '{}' refused ({}); the system's default stays",
              rank_, name, std::strerror(errno));
    counters_.congestion_control = in_use_now();
#else
    (void)socket;
#endif
}

void core::commit(int r, socket_ptr socket) {
    auto& p = peer_of(r);
    asio::error_code ec;
    socket->non_blocking(true, ec);
    choose_congestion_control(*socket);
    p.socket = socket;
    p.state = peer_state::up;
    p.reader_done = false;
    ++counters_.connections;
    debug("rank {}: connected with rank {} at {}", rank_, r,
          endpoints_[static_cast<std::size_t>(r)]);
    asio::co_spawn(context_, read_loop(r, socket), asio::detached);
}

// ---------------------------------------------------------------- receiving

request core::irecv(const message_header& expected, std::span<std::byte> into, bool any_size,
                    landing_observer* observer) {
    auto done = mailbox_.post(expected, into, any_size, false, observer);
    if (done->done()) {
        // It may have taken a message that waited for it: room for more.
        if (auto found = unexpected_.find(expected.key); found != unexpected_.end()) {
            unexpected_bytes_ -= found->second;
            unexpected_.erase(found);
            if (waiting_for_room_ > 0) room_.cancel();
        }
        return done;
    }
    const int src = expected.key.source;
    if (src >= 0 && src < size_ && src != rank_) {
        auto& p = peer_of(src);
        // Its reader may be waiting for this very receive.
        if (p.awaiting_receive) p.awaiting_receive->cancel();
        if (p.state == peer_state::closed || p.state == peer_state::lost)
            mailbox_.fail_source(src, p.failure);
    }
    return done;
}

void core::account_unexpected(const message_header& m) {
    unexpected_[m.key] += m.bytes;
    unexpected_bytes_ += m.bytes;
}

// The posted receive for m, or nullopt after making sure the bytes of
// unclaimed messages stay within max_unexpected_bytes: a reader over the
// bound waits for receives to be posted (TCP then holds its sender back).
asio::awaitable<std::optional<mailbox::claimed_receive>>
core::claim_or_make_room(const message_header& m) {
    for (;;) {
        if (auto claimed = mailbox_.claim(m)) co_return claimed;
        if (unexpected_bytes_ == 0 || unexpected_bytes_ + m.bytes <= opts_.max_unexpected_bytes)
            co_return std::nullopt;
        debug("rank {}: {} bytes wait for their receives; rank {} is read no further until "
              "receives are posted",
              rank_, unexpected_bytes_, m.key.source);
        ++waiting_for_room_;
        room_.expires_after(std::chrono::milliseconds(100));
        asio::error_code ec;
        co_await room_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        --waiting_for_room_;
        if (closing_) throw asio::system_error(asio::error::operation_aborted);
    }
}

// The receive of a large message m from src that arrived before it
// (options::unposted_wait_ns_per_byte): waits for it to be posted, up to the
// bound, and claims it; nullopt if it was not posted in time (or room for m
// where the unexpected bytes are bounded, as claim_or_make_room).
asio::awaitable<std::optional<mailbox::claimed_receive>>
core::await_receive(int src, const message_header& m) {
    const auto wait = std::chrono::nanoseconds(
        static_cast<std::int64_t>(unposted_wait_ns_per_byte_ * static_cast<double>(m.bytes)));
    if (wait.count() <= 0) co_return std::nullopt;
    ++counters_.unposted_waits;
    const auto deadline = clock::now() + wait;
    asio::steady_timer timer(context_, deadline);
    auto& p = peer_of(src);
    p.awaiting_receive = &timer;
    struct forget {
        peer& p;
        ~forget() { p.awaiting_receive = nullptr; }
    } forget_on_exit{p};
    while (!closing_) {
        asio::error_code ec;
        co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        if (closing_) break;
        if (auto claimed = mailbox_.claim(m)) co_return claimed;
        if (clock::now() >= deadline) break;
        timer.expires_at(deadline); // woken by a receive for another message
    }
    if (closing_) throw asio::system_error(asio::error::operation_aborted);
    auto claimed = co_await claim_or_make_room(m);
    if (!claimed) ++counters_.staged_messages;
    co_return claimed;
}

asio::awaitable<void> core::deliver(const message_header& m, std::span<const std::byte> payload) {
    auto claimed = co_await claim_or_make_room(m);
    if (!claimed) {
        account_unexpected(m);
        mailbox_.deliver(m, payload);
    } else if (claimed->any_size) {
        claimed->done->complete_with_payload(
            std::vector<std::byte>(payload.begin(), payload.end()));
    } else {
        if (!payload.empty()) std::memcpy(claimed->into.data(), payload.data(), payload.size());
        claimed->done->complete();
    }
}

asio::awaitable<void> core::read_loop(int src, socket_ptr socket) {
    auto keep = self();
    std::vector<std::byte> storage(read_buffer_bytes + page_bytes);
    const std::span<std::byte> buffer = read_buffer_within(storage);
    std::size_t begin = 0;
    std::size_t end = 0;
    // Whether the last read left the socket empty (it returned less than it
    // asked for).
    bool drained = false;
    const bool crowded = ranks_outnumber_cores(ranks_on_this_machine_);
    // Reads until at least `want` bytes are buffered from `begin`.
    auto fill = [&](std::size_t want) -> asio::awaitable<void> {
        if (begin + want > buffer.size()) {
            std::memmove(buffer.data(), buffer.data() + begin, end - begin);
            end -= begin;
            begin = 0;
        }
        while (end - begin < want) {
            const std::size_t room =
                std::min(buffer.size() - end, std::max(want - (end - begin), read_ahead_bytes));
            const std::size_t n = co_await socket->async_read_some(
                asio::buffer(buffer.data() + end, room), asio::use_awaitable);
            end += n;
            drained = n < room;
        }
    };
    std::exception_ptr failure;
    try {
        for (;;) {
            if (end - begin < frame_header_size) {
                if (begin == end) {
                    begin = end = 0;
                    // Every message read so far is delivered and the last
                    // read emptied the socket: the next read waits until the
                    // coroutines those messages completed have gone on (and
                    // sent what they send). Asio 1.22 reads again at once
                    // after any read that returned bytes (it counts only end
                    // of file as empty), and that read mostly finds nothing:
                    // a system call of 0.7 us here (EAGAIN) ahead of the
                    // coroutine, on every small exchange's critical path.
                    // Made after it, the read finds the next message already
                    // there as often, and an empty socket costs time this
                    // rank waits anyway. Waiting for readiness instead lost
                    // those finds, and was slower. Not where ranks outnumber
                    // the cores: there the coroutine soon waits and yields,
                    // and reading first was quicker (docs/performance.md,
                    // sixty-second session).
                    if (drained && !crowded && detail::resumption_context() == &context_)
                        co_await after_waiters(context_);
                }
                co_await fill(frame_header_size);
            }
            const auto header =
                decode_frame_header(std::span(buffer.data() + begin, frame_header_size), limits_);
            begin += frame_header_size;
            ++counters_.frames_received;
            const auto& m = header.message;
            if (m.key.source != src)
                throw error(errc::invalid_argument,
                            fmt::format("a {} frame claiming to come from rank {} on the "
                                        "connection with rank {}",
                                        to_string(header.kind), m.key.source, src));
            if (header.kind == frame_kind::data) {
                const std::size_t n = m.bytes;
                // Mid-size with its receive posted, and large: straight into
                // the posted receive; a large one waits a while for it if it
                // is not posted yet, and else goes into a buffer of its own
                // that the mailbox then keeps.
                std::optional<mailbox::claimed_receive> claimed;
                if (n <= buffer.size() / 2) {
                    if (n > straight_when_posted_above && end - begin < n)
                        claimed = mailbox_.claim(m);
                    if (!claimed) {
                        if (end - begin < n) co_await fill(n);
                        co_await deliver(m, std::span(buffer.data() + begin, n));
                        begin += n;
                        continue;
                    }
                } else {
                    claimed = co_await claim_or_make_room(m);
                    if (!claimed) claimed = co_await await_receive(src, m);
                }
                std::optional<scratch_block> staging;
                const auto into = mailbox::landing(claimed, n, staging);
                const std::size_t buffered = std::min(n, end - begin);
                std::memcpy(into.data(), buffer.data() + begin, buffered);
                begin += buffered;
                try {
                    if (buffered < n && claimed && claimed->observer)
                        co_await read_observed(*socket, into, buffered, *claimed->observer);
                    else if (buffered < n)
                        co_await asio::async_read(
                            *socket, asio::buffer(into.data() + buffered, n - buffered),
                            read_in_fewest_calls, asio::use_awaitable);
                } catch (...) {
                    // The receive is no longer the mailbox's, which a loss
                    // fails: it fails here, with a tutti error naming the
                    // peer (the reader then reports the loss itself).
                    if (claimed)
                        claimed->done->complete(std::make_exception_ptr(error(
                            errc::peer_lost,
                            fmt::format("rank {}'s message of {} bytes to rank {} was cut off "
                                        "mid-way: {}",
                                        src, n, rank_,
                                        closing_ ? std::string("the transport shut down")
                                                 : describe_failure(std::current_exception())))));
                    throw;
                }
                if (claimed)
                    ++counters_.straight_reads;
                else
                    account_unexpected(m);
                mailbox_.land(m, claimed, staging);
                // Read to its end, not past it: more may be there.
                drained = false;
                continue;
            }
            // Control frames: a few bytes at most (frame.hpp bounds them).
            if (end - begin < m.bytes) co_await fill(m.bytes);
            const std::span payload(buffer.data() + begin, m.bytes);
            begin += m.bytes;
            if (header.kind == frame_kind::goodbye) {
                auto& p = peer_of(src);
                p.goodbye_received = true;
                // While we shut down ourselves, our own goodbye may still be
                // queued for it: keep writing.
                if (p.state == peer_state::up && !shutting_down_) {
                    p.state = peer_state::closed;
                    p.failure = std::make_exception_ptr(error(
                        errc::peer_lost, fmt::format("rank {} has closed its TCP transport", src)));
                    fail_sends(p, p.failure);
                }
                // Nothing more will come from it: whoever still waits for it
                // would wait forever.
                mailbox_.fail_source(
                    src, std::make_exception_ptr(error(
                             errc::peer_lost, fmt::format("rank {} closed its TCP transport while "
                                                          "rank {} still waited for its message",
                                                          src, rank_))));
                continue;
            }
            if (header.kind == frame_kind::lost && m.bytes == 4) {
                std::uint32_t lost = 0;
                for (int i = 3; i >= 0; --i)
                    lost = (lost << 8) | std::to_integer<std::uint32_t>(payload[i]);
                if (lost < static_cast<std::uint32_t>(size_) && static_cast<int>(lost) != rank_)
                    lose(static_cast<int>(lost), fmt::format("was lost (reported by rank {})", src),
                         src);
                continue;
            }
            throw error(errc::invalid_argument,
                        fmt::format("an unexpected {} frame of {} bytes after the handshake",
                                    to_string(header.kind), m.bytes));
        }
    } catch (...) {
        failure = std::current_exception();
    }
    reader_ended(src, socket, failure);
}

void core::reader_ended(int src, const socket_ptr& socket, std::exception_ptr failure) {
    auto& p = peer_of(src);
    asio::error_code ec;
    if (p.socket != socket) return;
    p.reader_done = true;
    // Once we have begun to end, a clean end is a peer's answer to our
    // goodbye: one that heard it takes us as gone and says none back, and we
    // wait for nothing more from it. Taken for a loss, it would be reported
    // at the end of every job whose ranks finish at different times.
    if (closing_ || p.goodbye_received || (shutting_down_ && is_closure(failure))) {
        socket->close(ec);
        if (p.state == peer_state::up) p.state = peer_state::closed;
        return;
    }
    if (!is_closure(failure)) {
        // A malformed frame from an authenticated peer: the stream cannot be
        // trusted any more, and what the peer meant to send is lost with it.
        ++counters_.bad_frames;
        const auto why = describe_failure(failure);
        fmt::print(stderr, "tutti tcp: rank {} closes its connection with rank {}: {}\n", rank_,
                   src, why);
        lose(src, fmt::format("sent a malformed frame ({}); its connection was closed", why));
        return;
    }
    lose(src, fmt::format("at {} was lost: its TCP connection ended without a goodbye ({})",
                          endpoints_[static_cast<std::size_t>(src)], describe_failure(failure)));
}

// ---------------------------------------------------------------- failures

void core::fail_sends(peer& p, const std::exception_ptr& failure) {
    auto queue = std::move(p.queue);
    p.queue.clear();
    for (auto& item : queue)
        if (item.done) item.done->complete(failure);
}

// Rank r is gone (or unreachable): every pending and later receive fails
// naming it, since its collectives cannot finish, and the ranks we are
// connected to hear of it, so that they name it too rather than us.
void core::lose(int r, const std::string& why, int reported_by) {
    if (closing_) return;
    auto failure =
        std::make_exception_ptr(error(errc::peer_lost, fmt::format("rank {} {}", r, why)));
    if (reported_by < 0) {
        auto& p = peer_of(r);
        if (p.state == peer_state::lost) return;
        p.state = peer_state::lost;
        p.failure = failure;
        asio::error_code ec;
        if (p.socket) p.socket->close(ec);
        fail_sends(p, failure);
    }
    debug("rank {}: rank {} {}", rank_, r, why);
    if (first_loss_) return;
    first_loss_ = failure;
    mailbox_.fail(failure);
    std::vector<std::byte> payload(4);
    for (int i = 0; i < 4; ++i)
        payload[static_cast<std::size_t>(i)] =
            static_cast<std::byte>(static_cast<std::uint32_t>(r) >> (8 * i));
    for (int q = 0; q < size_; ++q)
        if (q != r && q != reported_by && peer_of(q).state == peer_state::up)
            send_control(q, frame_kind::lost, payload);
}

// An orderly end: a goodbye to every connected peer, then a bounded wait for
// theirs, so that neither side takes the other's exit for a loss.
void core::shutdown() {
    shutting_down_ = true;
    asio::error_code ec;
    acceptor_.close(ec);
    for (int r = 0; r < size_; ++r)
        if (peer_of(r).state == peer_state::up) send_control(r, frame_kind::goodbye, {});
    const auto deadline = clock::now() + goodbye_grace;
    auto settled = [&] {
        for (auto& p : peers_) {
            if (p.state == peer_state::up && (p.writing || !p.queue.empty())) return false;
            if (p.socket && !p.reader_done && !p.goodbye_received && p.state != peer_state::lost)
                return false;
        }
        return true;
    };
    // Our goodbyes first; then stop writing so each peer reads our end.
    bool ended = false;
    while (!settled() && clock::now() < deadline) {
        bool writes_done = true;
        for (auto& p : peers_)
            writes_done =
                writes_done && !(p.state == peer_state::up && (p.writing || !p.queue.empty()));
        if (writes_done && !ended) {
            ended = true;
            for (auto& p : peers_)
                if (p.socket && p.socket->is_open())
                    p.socket->shutdown(ip::tcp::socket::shutdown_send, ec);
        }
        if (context_.stopped()) context_.restart();
        context_.run_one_for(std::chrono::milliseconds(10));
    }
    closing_ = true;
    for (auto& p : peers_) {
        if (p.socket) p.socket->close(ec);
        fail_sends(p, std::make_exception_ptr(
                          error(errc::peer_lost, "tcp transport: shut down with sends pending")));
    }
    room_.cancel();
    for (auto& p : peers_)
        if (p.awaiting_receive) p.awaiting_receive->cancel();
    // Receives still posted (from a peer that left without its goodbye
    // reaching us) end too: dropped with the mailbox, their waiters would
    // never finish.
    mailbox_.fail(std::make_exception_ptr(error(
        errc::peer_lost,
        fmt::format("rank {} shut its TCP transport down while a receive was pending", rank_))));
    // Let the coroutines see their sockets closed and end.
    if (context_.stopped()) context_.restart();
    context_.poll();
}

class transport_impl final : public tcp::transport {
public:
    transport_impl(bootstrap& boot, asio::io_context& context, options opts)
        : core_(std::make_shared<core>(boot, context, std::move(opts))) {
        core_->start();
    }
    ~transport_impl() override { core_->shutdown(); }

    std::string_view name() const noexcept override { return "tcp"; }
    int rank() const noexcept override { return core_->rank(); }
    int size() const noexcept override { return core_->size(); }
    int ranks_on_this_machine() const noexcept override { return core_->ranks_on_this_machine(); }
    asio::io_context& context() noexcept override { return core_->context(); }
    bool single_copy_now() const noexcept override { return false; }
    transport_capabilities capabilities() const noexcept override {
        return {.single_copy = single_copy_now(),
                .remote_memory_access = false,
                .latency_us = 15,
                .bandwidth_gb_per_s = 3,
                .one_thread = true,
                .ranks_per_core = core_->ranks_per_core()};
    }
    request isend(int dest, const message_header& header,
                  std::span<const std::byte> data) override {
        return core_->isend(dest, header, data);
    }
    request irecv(const message_header& expected, std::span<std::byte> into) override {
        return core_->irecv(expected, into, false);
    }
    request irecv_any_size(const message_header& expected) override {
        return core_->irecv(expected, {}, true);
    }
    request irecv_observed(const message_header& expected, std::span<std::byte> into,
                           landing_observer& observer, bool) override {
        return core_->irecv(expected, into, false, &observer);
    }
    bool withdraw(const request& receive) override { return core_->withdraw(receive); }
    std::size_t progress() override { return core_->progress(); }
    void await_activity(std::chrono::microseconds limit) override { core_->await_activity(limit); }
    // Polled (options::busy_poll), the progress engine spins and yields
    // before it blocks in await_activity: a few microseconds less per message
    // on idle cores, milliseconds more per yield when other processes want
    // the cores. Otherwise it blocks in the io_context at once.
    bool needs_polling() const noexcept override { return core_->busy_poll(); }

    std::string endpoint() const override { return core_->endpoint_of(core_->rank()); }
    std::string endpoint_of(int rank) const override { return core_->endpoint_of(rank); }
    tcp::counters counters() const noexcept override { return core_->counters(); }
    void report_loss(int rank, const std::string& why) override {
        if (rank < 0 || rank >= core_->size() || rank == core_->rank()) return;
        core_->report_loss(rank, why);
    }

private:
    std::shared_ptr<core> core_;
};

} // namespace

std::shared_ptr<tcp::transport> create_transport(bootstrap& boot, asio::io_context& context,
                                                 options opts) {
    return std::make_shared<transport_impl>(boot, context, std::move(opts));
}

} // namespace tutti::tcp
