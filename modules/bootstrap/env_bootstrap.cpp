#include "bootstrap/env_bootstrap.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bootstrap/wire.hpp"
#include "core/asio.hpp"
#include "core/error.hpp"

#include <asio/connect.hpp>
#include <asio/ip/host_name.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/write.hpp>

namespace tutti {

namespace {

using clock = std::chrono::steady_clock;
namespace ip = asio::ip; // not `using asio::ip::tcp`: tutti::tcp (the transport) is in scope
namespace wire = bootstrap_wire;

constexpr std::string_view launch_hint =
    "start the program with `tuttirun -n N program`, under `mpirun`, or set TUTTI_RANK, "
    "TUTTI_SIZE and TUTTI_RENDEZVOUS (host:port where rank 0 listens)";
constexpr std::size_t max_job_id = 64;
constexpr long long max_job_size = 1 << 20;
constexpr long long max_timeout_ms = 24LL * 3600 * 1000;
// A refused connection means rank 0 is not listening yet: try again soon.
constexpr auto connect_retry = std::chrono::milliseconds(20);
// Telling the other ranks why the job ends must not hold up the error itself.
constexpr auto abort_grace = std::chrono::milliseconds(2000);

// What a tutti::error says, without the "tutti: " every message starts with,
// so that it can be quoted inside another message.
std::string_view message_of(const std::exception& e) {
    std::string_view text = e.what();
    if (text.starts_with("tutti: ")) text.remove_prefix(7);
    return text;
}

bool valid_job_id(std::string_view id) {
    return !id.empty() && id.size() <= max_job_id && std::all_of(id.begin(), id.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '.' || c == '_' || c == '-';
    });
}

std::string random_job_id() {
    std::random_device device;
    const std::uint64_t bits = (std::uint64_t{device()} << 32) ^ device();
    return fmt::format("{:016x}", bits);
}

std::optional<long long> parse_integer(std::string_view text) {
    long long value = 0;
    const auto* end = text.data() + text.size();
    auto [stop, failure] = std::from_chars(text.data(), end, value);
    if (failure != std::errc{} || stop != end) return std::nullopt;
    return value;
}

std::string ranks_phrase(const std::vector<int>& ranks) {
    constexpr std::size_t shown = 32;
    std::string list;
    for (std::size_t i = 0; i < ranks.size() && i < shown; ++i)
        list += fmt::format("{}{}", i == 0 ? "" : ", ", ranks[i]);
    if (ranks.size() > shown) list += fmt::format(" and {} more", ranks.size() - shown);
    return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", list);
}

std::string join_address(const std::string& host, std::uint16_t port) {
    if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
    return fmt::format("{}:{}", host, port);
}

// The codes an abort frame can carry; anything else reads as a lost peer.
std::uint32_t abort_code(errc code) {
    switch (code) {
    case errc::timeout:
        return 1;
    case errc::invalid_argument:
        return 3;
    default:
        return 2;
    }
}

errc abort_errc(std::uint32_t code) {
    switch (code) {
    case 1:
        return errc::timeout;
    case 3:
        return errc::invalid_argument;
    default:
        return errc::peer_lost;
    }
}

struct frame {
    wire::frame_kind kind = wire::frame_kind::hello;
    std::vector<std::byte> body;
};

asio::awaitable<frame> read_frame(ip::tcp::socket& socket, int job_size) {
    wire::header_bytes header{};
    co_await asio::async_read(socket, asio::buffer(header), asio::use_awaitable);
    const auto decoded = wire::decode_header(header, job_size);
    frame result{decoded.kind, std::vector<std::byte>(decoded.length)};
    if (!result.body.empty())
        co_await asio::async_read(socket, asio::buffer(result.body), asio::use_awaitable);
    co_return result;
}

asio::awaitable<int> write_frame(ip::tcp::socket& socket,
                                 std::shared_ptr<const std::vector<std::byte>> bytes) {
    co_await asio::async_write(socket, asio::buffer(*bytes), asio::use_awaitable);
    co_return 0;
}

// One asynchronous operation on the private io_context; the shared state
// outlives whoever started it, so a late completion never touches a dead frame.
template <class T>
struct outcome {
    bool done = false;
    std::exception_ptr failure;
    T value{};
};

template <class T>
std::shared_ptr<outcome<T>> start(asio::io_context& io, asio::awaitable<T> operation) {
    auto out = std::make_shared<outcome<T>>();
    asio::co_spawn(io, std::move(operation), [out](std::exception_ptr failure, T value) {
        out->done = true;
        out->failure = failure;
        if (!failure) out->value = std::move(value);
    });
    return out;
}

// Runs the io_context until done() holds or the deadline passes.
template <class Done>
bool run_until(asio::io_context& io, clock::time_point deadline, Done done) {
    while (!done()) {
        if (io.stopped()) io.restart();
        // Nothing ran: either the deadline passed or nothing is left that could make done() true.
        if (io.run_one_until(deadline) == 0 && (clock::now() >= deadline || io.stopped()))
            return done();
    }
    return true;
}

struct failure_info {
    bool closed = false;    // the peer closed or reset the connection
    bool malformed = false; // the peer sent bytes that are not a valid frame
    std::string what;
};

failure_info classify(std::exception_ptr failure) {
    try {
        std::rethrow_exception(failure);
    } catch (const asio::system_error& e) {
        const auto code = e.code();
        const bool closed = code == asio::error::eof || code == asio::error::connection_reset ||
                            code == asio::error::broken_pipe ||
                            code == asio::error::connection_aborted;
        return {closed, false, code.message()};
    } catch (const error& e) {
        return {false, true, std::string(message_of(e))};
    } catch (const std::exception& e) {
        return {false, false, e.what()};
    }
}

} // namespace

std::optional<std::string> process_env(std::string_view name) {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
}

std::pair<std::string, std::uint16_t> split_host_port(std::string_view address) {
    auto bad = [&](std::string_view why) {
        return error(errc::invalid_argument,
                     fmt::format("rendezvous address '{}' is not host:port ({}); examples: "
                                 "127.0.0.1:4242, node01:4242, [::1]:4242",
                                 address, why));
    };
    std::string_view host;
    std::string_view port;
    if (address.starts_with('[')) {
        const auto close = address.find(']');
        if (close == std::string_view::npos) throw bad("no ']' after the IPv6 address");
        host = address.substr(1, close - 1);
        if (close + 1 >= address.size() || address[close + 1] != ':') throw bad("no port");
        port = address.substr(close + 2);
    } else {
        const auto colon = address.rfind(':');
        if (colon == std::string_view::npos) throw bad("no port");
        host = address.substr(0, colon);
        if (host.find(':') != std::string_view::npos)
            throw bad("write an IPv6 address in brackets");
        port = address.substr(colon + 1);
    }
    if (host.empty()) throw bad("no host");
    const auto number = parse_integer(port);
    if (!number || *number < 0 || *number > 65535)
        throw bad(fmt::format("port '{}' is not a number from 0 to 65535", port));
    return {std::string(host), static_cast<std::uint16_t>(*number)};
}

env_config env_config_from(const env_lookup& lookup) {
    // A variable set to the empty string counts as not set: launchers often export empty values.
    auto get = [&](std::string_view name) -> std::optional<std::string> {
        auto value = lookup(name);
        if (value && value->empty()) return std::nullopt;
        return value;
    };
    auto required = [&](std::string_view name) {
        auto value = get(name);
        if (!value)
            throw error(errc::invalid_argument,
                        fmt::format("{} is not set: {}", name, launch_hint));
        return *value;
    };
    auto number = [&](std::string_view name, const std::string& text, long long low, long long high,
                      std::string_view what) {
        const auto value = parse_integer(text);
        if (!value || *value < low || *value > high)
            throw error(errc::invalid_argument,
                        fmt::format("{}='{}' is not {}: expected an integer from {} to {}", name,
                                    text, what, low, high));
        return *value;
    };

    env_config config;
    const auto rank_text = required("TUTTI_RANK");
    const auto size_text = required("TUTTI_SIZE");
    config.size = static_cast<int>(number("TUTTI_SIZE", size_text, 1, max_job_size, "a job size"));
    config.rank = static_cast<int>(
        number("TUTTI_RANK", rank_text, 0, config.size - 1,
               fmt::format("a rank of a job of TUTTI_SIZE={} ranks", config.size)));

    if (auto rendezvous = get("TUTTI_RENDEZVOUS")) {
        const auto [host, port] = split_host_port(*rendezvous);
        if (port == 0)
            throw error(errc::invalid_argument,
                        fmt::format("TUTTI_RENDEZVOUS='{}' has port 0: the other ranks need to "
                                    "know the port, so name one",
                                    *rendezvous));
        config.rendezvous = *rendezvous;
    } else if (config.size > 1) {
        throw error(errc::invalid_argument,
                    fmt::format("TUTTI_RENDEZVOUS is not set: {}", launch_hint));
    }

    if (auto job_id = get("TUTTI_JOB_ID")) {
        if (!valid_job_id(*job_id))
            throw error(errc::invalid_argument,
                        fmt::format("TUTTI_JOB_ID='{}' must be 1 to {} letters, digits, '.', '_' "
                                    "or '-': it names shared memory segments",
                                    *job_id, max_job_id));
        config.job_id = *job_id;
    }
    config.node = get("TUTTI_NODE").value_or(asio::ip::host_name());
    config.timeout = bootstrap_timeout_from(lookup);
    return config;
}

std::chrono::milliseconds bootstrap_timeout_from(const env_lookup& lookup) {
    const auto text = lookup("TUTTI_BOOTSTRAP_TIMEOUT_MS");
    if (!text || text->empty()) return std::chrono::milliseconds(30000);
    const auto value = parse_integer(*text);
    if (!value || *value < 1 || *value > max_timeout_ms)
        throw error(errc::invalid_argument,
                    fmt::format("TUTTI_BOOTSTRAP_TIMEOUT_MS='{}' is not a timeout: expected "
                                "milliseconds from 1 to {}",
                                *text, max_timeout_ms));
    return std::chrono::milliseconds(*value);
}

env_config env_config_from_environment() {
    return env_config_from(process_env);
}

struct env_bootstrap::impl {
    impl(env_config config, std::function<void(std::uint16_t)> on_listening);
    ~impl();

    std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> mine);

    struct join_state {
        int joined = 0;
        std::vector<std::shared_ptr<ip::tcp::socket>> connections;
        std::vector<std::string> turned_away; // the first few, for the timeout message
        int more_turned_away = 0;
    };

    void validate();
    ip::tcp::resolver::results_type resolve(clock::time_point deadline);
    void host(const std::function<void(std::uint16_t)>& on_listening);
    void join();
    asio::awaitable<int> accept_loop(ip::tcp::acceptor& acceptor,
                                     std::shared_ptr<join_state> state);
    asio::awaitable<int> greet(std::shared_ptr<ip::tcp::socket> socket,
                               std::shared_ptr<join_state> state);
    std::string admit(const frame& hello, const std::shared_ptr<ip::tcp::socket>& socket,
                      join_state& state);
    asio::awaitable<int> connect_loop(ip::tcp::resolver::results_type endpoints);
    std::vector<std::vector<std::byte>> gather_as_root(std::span<const std::byte> mine);
    std::vector<std::vector<std::byte>> gather_as_peer(std::span<const std::byte> mine);
    void send_to_all(std::shared_ptr<const std::vector<std::byte>> bytes, std::string_view what);
    [[noreturn]] void fail(errc code, const std::string& message);
    [[noreturn]] void peer_failed(int peer, std::exception_ptr failure, std::string_view during);
    void close_all();
    void drain();

    env_config config_;
    std::string host_;
    std::uint16_t port_ = 0;
    std::string address_; // host:port for messages, with the real port when 0 was asked for
    // Declared before every I/O object so that it is destroyed after them.
    asio::io_context io_;
    ip::tcp::resolver resolver_{io_};
    asio::steady_timer retry_timer_{io_};
    ip::tcp::socket root_{io_};                           // ranks other than 0: the link to rank 0
    std::vector<std::shared_ptr<ip::tcp::socket>> peers_; // rank 0: one per rank, [0] empty
    std::string last_connect_error_ = "no attempt finished";
    std::uint64_t round_ = 0;
    std::optional<std::pair<errc, std::string>> failure_;
};

env_bootstrap::impl::impl(env_config config, std::function<void(std::uint16_t)> on_listening)
    : config_(std::move(config)) {
    validate();
    if (config_.node.empty()) config_.node = asio::ip::host_name();
    if (config_.rank == 0 && config_.job_id.empty()) config_.job_id = random_job_id();
    if (config_.size == 1) return;
    std::tie(host_, port_) = split_host_port(config_.rendezvous);
    address_ = join_address(host_, port_);
    if (config_.rank == 0) {
        host(on_listening);
    } else {
        if (port_ == 0)
            throw error(errc::invalid_argument,
                        fmt::format("bootstrap: rank {} cannot connect to port 0 of {}: only rank "
                                    "0 may listen on a port the system picks",
                                    config_.rank, host_));
        join();
    }
}

env_bootstrap::impl::~impl() {
    close_all();
}

void env_bootstrap::impl::validate() {
    const auto& c = config_;
    if (c.size < 1 || c.size > max_job_size)
        throw error(
            errc::invalid_argument,
            fmt::format("bootstrap: a job of {} ranks; expected 1 to {}", c.size, max_job_size));
    if (c.rank < 0 || c.rank >= c.size)
        throw error(
            errc::invalid_argument,
            fmt::format("bootstrap: rank {} is outside the job of {} ranks", c.rank, c.size));
    if (c.timeout.count() <= 0)
        throw error(
            errc::invalid_argument,
            fmt::format("bootstrap: timeout of {} ms; it must be positive", c.timeout.count()));
    if (!c.job_id.empty() && !valid_job_id(c.job_id))
        throw error(errc::invalid_argument,
                    fmt::format("bootstrap: job id '{}' must be 1 to {} letters, digits, '.', '_' "
                                "or '-': it names shared memory segments",
                                c.job_id, max_job_id));
    if (c.size > 1 && c.rendezvous.empty())
        throw error(errc::invalid_argument,
                    fmt::format("bootstrap: a job of {} ranks needs a rendezvous address: {}",
                                c.size, launch_hint));
}

ip::tcp::resolver::results_type env_bootstrap::impl::resolve(clock::time_point deadline) {
    auto flags = ip::tcp::resolver::numeric_service;
    if (config_.rank == 0) flags |= ip::tcp::resolver::passive;
    auto lookup =
        [](ip::tcp::resolver& resolver, std::string host, std::string port,
           ip::tcp::resolver::flags how) -> asio::awaitable<ip::tcp::resolver::results_type> {
        co_return co_await resolver.async_resolve(host, port, how, asio::use_awaitable);
    };
    auto out = start(io_, lookup(resolver_, host_, std::to_string(port_), flags));
    if (!run_until(io_, deadline, [&] { return out->done; })) {
        resolver_.cancel();
        drain();
        throw error(errc::timeout,
                    fmt::format("bootstrap: rank {} could not resolve the rendezvous host '{}' "
                                "within {} ms",
                                config_.rank, host_, config_.timeout.count()));
    }
    if (out->failure || out->value.empty())
        throw error(errc::invalid_argument,
                    fmt::format("bootstrap: rank {} cannot resolve the rendezvous host '{}' of "
                                "{}: {}",
                                config_.rank, host_, address_,
                                out->failure ? classify(out->failure).what : "no address"));
    return out->value;
}

void env_bootstrap::impl::host(const std::function<void(std::uint16_t)>& on_listening) {
    const auto deadline = clock::now() + config_.timeout;
    const auto endpoint = resolve(deadline).begin()->endpoint();
    ip::tcp::acceptor acceptor(io_);
    asio::error_code ec;
    acceptor.open(endpoint.protocol(), ec);
    // A previous job's connections in TIME_WAIT must not keep the port from this one.
    if (!ec) acceptor.set_option(ip::tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
        throw error(errc::invalid_argument,
                    fmt::format("bootstrap: rank 0 cannot listen at {}: {} (another job on that "
                                "port? set TUTTI_RENDEZVOUS to a free one)",
                                address_, ec.message()));
    if (port_ == 0) {
        port_ = acceptor.local_endpoint().port();
        address_ = join_address(host_, port_);
    }
    if (on_listening) on_listening(port_);

    peers_.assign(static_cast<std::size_t>(config_.size), nullptr);
    auto state = std::make_shared<join_state>();
    start(io_, accept_loop(acceptor, state));
    const bool everyone =
        run_until(io_, deadline, [&] { return state->joined == config_.size - 1; });
    // Stop listening, and drop every connection that did not become a rank.
    acceptor.close(ec);
    retry_timer_.cancel();
    for (auto& connection : state->connections)
        if (std::find(peers_.begin(), peers_.end(), connection) == peers_.end())
            connection->close(ec);
    drain();

    if (!everyone) {
        std::vector<int> missing;
        for (int r = 1; r < config_.size; ++r)
            if (!peers_[static_cast<std::size_t>(r)]) missing.push_back(r);
        auto message =
            fmt::format("bootstrap: {} of {} never reached the rendezvous at {} within "
                        "{} ms",
                        ranks_phrase(missing), config_.size, address_, config_.timeout.count());
        if (state->more_turned_away > 0)
            state->turned_away.push_back(fmt::format("{} more", state->more_turned_away));
        if (!state->turned_away.empty())
            message += fmt::format(" (turned away: {})", fmt::join(state->turned_away, "; "));
        fail(errc::timeout, message);
    }

    wire::encoder welcome(wire::frame_kind::welcome);
    welcome.text(config_.job_id);
    send_to_all(std::make_shared<const std::vector<std::byte>>(std::move(welcome).finish()),
                "the welcome");
}

asio::awaitable<int> env_bootstrap::impl::accept_loop(ip::tcp::acceptor& acceptor,
                                                      std::shared_ptr<join_state> state) {
    for (;;) {
        asio::error_code ec;
        ip::tcp::socket socket =
            co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
        if (!acceptor.is_open() || ec == asio::error::operation_aborted) co_return 0;
        if (ec) {
            // Out of file descriptors and the like: wait a little instead of spinning.
            retry_timer_.expires_after(connect_retry);
            co_await retry_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
            continue;
        }
        socket.set_option(ip::tcp::no_delay(true), ec);
        auto connection = std::make_shared<ip::tcp::socket>(std::move(socket));
        state->connections.push_back(connection);
        start(io_, greet(connection, state));
    }
}

asio::awaitable<int> env_bootstrap::impl::greet(std::shared_ptr<ip::tcp::socket> socket,
                                                std::shared_ptr<join_state> state) {
    asio::error_code ec;
    const auto remote = socket->remote_endpoint(ec);
    const auto from = ec ? std::string("an unknown address")
                         : join_address(remote.address().to_string(), remote.port());
    std::string problem;
    bool answer = false;
    try {
        const frame hello = co_await read_frame(*socket, config_.size);
        problem = admit(hello, socket, *state);
        answer = !problem.empty();
    } catch (const std::exception& e) {
        // Not a tutti rank (a port scanner, a stale job): drop it and keep waiting.
        problem = std::string(message_of(e));
    }
    if (problem.empty()) co_return 0;
    // A port scanner must not grow the list, or the message, without bound.
    if (state->turned_away.size() < 8)
        state->turned_away.push_back(fmt::format("a connection from {}: {}", from, problem));
    else
        ++state->more_turned_away;
    if (answer) {
        wire::encoder reject(wire::frame_kind::reject);
        reject.text(problem);
        const auto bytes = std::move(reject).finish();
        co_await asio::async_write(*socket, asio::buffer(bytes),
                                   asio::redirect_error(asio::use_awaitable, ec));
    }
    socket->close(ec);
    co_return 0;
}

std::string env_bootstrap::impl::admit(const frame& hello,
                                       const std::shared_ptr<ip::tcp::socket>& socket,
                                       join_state& state) {
    if (hello.kind != wire::frame_kind::hello)
        return fmt::format("its first frame is of kind {}, not a hello",
                           static_cast<std::uint32_t>(hello.kind));
    std::uint32_t version = 0;
    int rank = 0;
    int size = 0;
    std::string job_id;
    try {
        wire::decoder fields(hello.body);
        version = fields.u32();
        rank = fields.i32();
        size = fields.i32();
        job_id = fields.text(max_job_id);
        fields.finish();
    } catch (const error& e) {
        return std::string(message_of(e));
    }
    if (version != wire::protocol_version)
        return fmt::format("it speaks bootstrap protocol {}, rank 0 speaks {} (two tutti "
                           "versions in one job?)",
                           version, wire::protocol_version);
    if (size != config_.size)
        return fmt::format("rank {} says the job has {} ranks, rank 0 says {} (TUTTI_SIZE "
                           "differs between ranks)",
                           rank, size, config_.size);
    if (rank < 1 || rank >= config_.size)
        return fmt::format("rank {} is outside ranks 1 to {} of a job of {} ranks", rank,
                           config_.size - 1, config_.size);
    if (!job_id.empty() && job_id != config_.job_id)
        return fmt::format("rank {} belongs to job '{}', rank 0 to job '{}' (two jobs share the "
                           "rendezvous {}?)",
                           rank, job_id, config_.job_id, address_);
    auto& slot = peers_[static_cast<std::size_t>(rank)];
    if (slot)
        return fmt::format("rank {} has already joined (two processes with TUTTI_RANK={}?)", rank,
                           rank);
    slot = socket;
    ++state.joined;
    return {};
}

asio::awaitable<int> env_bootstrap::impl::connect_loop(ip::tcp::resolver::results_type endpoints) {
    for (;;) {
        asio::error_code ec;
        co_await asio::async_connect(root_, endpoints,
                                     asio::redirect_error(asio::use_awaitable, ec));
        if (!ec) co_return 0;
        if (ec == asio::error::operation_aborted) throw asio::system_error(ec);
        last_connect_error_ = ec.message();
        retry_timer_.expires_after(connect_retry);
        co_await retry_timer_.async_wait(asio::use_awaitable);
    }
}

void env_bootstrap::impl::join() {
    const auto started = clock::now();
    const auto deadline = started + config_.timeout;
    const auto endpoints = resolve(deadline);
    auto connected = start(io_, connect_loop(endpoints));
    if (!run_until(io_, deadline, [&] { return connected->done; }) || connected->failure) {
        fail(errc::timeout,
             fmt::format("bootstrap: rank {} of {} could not reach rank 0 at {} within {} ms "
                         "(last attempt: {}); is rank 0 running, with the same "
                         "TUTTI_RENDEZVOUS?",
                         config_.rank, config_.size, address_, config_.timeout.count(),
                         last_connect_error_));
    }
    asio::error_code ec;
    root_.set_option(ip::tcp::no_delay(true), ec);

    wire::encoder hello(wire::frame_kind::hello);
    hello.u32(wire::protocol_version);
    hello.i32(config_.rank);
    hello.i32(config_.size);
    hello.text(config_.job_id);
    auto sent = start(io_, write_frame(root_, std::make_shared<const std::vector<std::byte>>(
                                                  std::move(hello).finish())));
    auto answer = start(io_, read_frame(root_, config_.size));
    // Rank 0 answers once everyone has joined, which takes up to its own timeout after it
    // started; waiting twice as long lets its error, naming the missing ranks, arrive first.
    const auto answer_deadline = started + 2 * config_.timeout;
    const auto finished = [&] { return answer->done || (sent->done && sent->failure); };
    if (!run_until(io_, answer_deadline, finished))
        fail(errc::timeout,
             fmt::format("bootstrap: rank {} reached rank 0 at {} but the job did not assemble "
                         "within {} ms",
                         config_.rank, address_, 2 * config_.timeout.count()));
    const auto failure = answer->failure ? answer->failure : sent->failure;
    if (failure || !answer->done) peer_failed(0, failure, "before every rank had joined");

    try {
        wire::decoder fields(answer->value.body);
        switch (answer->value.kind) {
        case wire::frame_kind::welcome: {
            auto job_id = fields.text(max_job_id);
            fields.finish();
            if (!valid_job_id(job_id)) throw error(errc::invalid_argument, "an invalid job id");
            config_.job_id = std::move(job_id);
            break;
        }
        case wire::frame_kind::reject: {
            const auto why = fields.text(wire::max_small_body);
            fail(errc::invalid_argument, fmt::format("bootstrap: rank 0 at {} turned rank {} "
                                                     "away: {}",
                                                     address_, config_.rank, why));
        }
        case wire::frame_kind::abort: {
            const auto code = abort_errc(fields.u32());
            fail(code, fmt::format("{} (reported by rank 0)", fields.text(wire::max_small_body)));
        }
        default:
            throw error(errc::invalid_argument,
                        fmt::format("a frame of kind {} instead of a welcome",
                                    static_cast<std::uint32_t>(answer->value.kind)));
        }
    } catch (const error& e) {
        if (failure_) throw;
        fail(errc::invalid_argument,
             fmt::format("bootstrap: rank 0 at {} answered rank {}'s hello with nonsense: {}",
                         address_, config_.rank, message_of(e)));
    }
    run_until(io_, answer_deadline, [&] { return sent->done; });
}

std::vector<std::vector<std::byte>>
env_bootstrap::impl::all_gather(std::span<const std::byte> mine) {
    if (failure_)
        throw error(failure_->first,
                    "bootstrap is unusable after an earlier failure: " + failure_->second);
    if (mine.size() > wire::max_blob)
        throw error(errc::invalid_argument,
                    fmt::format("bootstrap: all_gather of {} bytes; a blob may have at most {}",
                                mine.size(), wire::max_blob));
    ++round_;
    if (config_.size == 1) return {std::vector<std::byte>(mine.begin(), mine.end())};
    return config_.rank == 0 ? gather_as_root(mine) : gather_as_peer(mine);
}

std::vector<std::vector<std::byte>>
env_bootstrap::impl::gather_as_root(std::span<const std::byte> mine) {
    const auto size = static_cast<std::size_t>(config_.size);
    const auto deadline = clock::now() + config_.timeout;
    std::vector<std::shared_ptr<outcome<frame>>> reads(size);
    for (std::size_t r = 1; r < size; ++r)
        reads[r] = start(io_, read_frame(*peers_[r], config_.size));
    const auto first_failure = [&]() -> int {
        for (std::size_t r = 1; r < size; ++r)
            if (reads[r]->done && reads[r]->failure) return static_cast<int>(r);
        return 0;
    };
    const auto everyone = [&] {
        return std::all_of(reads.begin() + 1, reads.end(), [](auto& read) { return read->done; });
    };
    const bool arrived = run_until(io_, deadline, [&] { return first_failure() || everyone(); });
    if (const int r = first_failure())
        peer_failed(r, reads[static_cast<std::size_t>(r)]->failure,
                    fmt::format("during all_gather round {}", round_));
    if (!arrived) {
        std::vector<int> missing;
        for (std::size_t r = 1; r < size; ++r)
            if (!reads[r]->done) missing.push_back(static_cast<int>(r));
        fail(errc::timeout,
             fmt::format("bootstrap: {} of {} did not reach all_gather round {} "
                         "within {} ms",
                         ranks_phrase(missing), config_.size, round_, config_.timeout.count()));
    }

    std::vector<std::vector<std::byte>> blobs(size);
    blobs[0].assign(mine.begin(), mine.end());
    for (std::size_t r = 1; r < size; ++r) {
        const auto& contribution = reads[r]->value;
        std::string problem;
        try {
            if (contribution.kind != wire::frame_kind::contribution)
                throw error(errc::invalid_argument,
                            fmt::format("a frame of kind {} instead of its contribution",
                                        static_cast<std::uint32_t>(contribution.kind)));
            wire::decoder fields(contribution.body);
            const auto round = fields.u64();
            const auto rank = fields.i32();
            const auto size_seen = fields.i32();
            const auto job_id = fields.text(max_job_id);
            const auto blob = fields.blob(wire::max_blob);
            fields.finish();
            if (round != round_)
                problem = fmt::format("it is in all_gather round {} while rank 0 is in round {} "
                                      "(ranks called all_gather different numbers of times)",
                                      round, round_);
            else if (rank != static_cast<int>(r) || size_seen != config_.size ||
                     job_id != config_.job_id)
                problem = fmt::format("its contribution says rank {} of {} in job '{}'", rank,
                                      size_seen, job_id);
            blobs[r].assign(blob.begin(), blob.end());
        } catch (const error& e) {
            problem = std::string(message_of(e));
        }
        if (!problem.empty())
            fail(errc::invalid_argument,
                 fmt::format("bootstrap: rank {} sent a bad all_gather round {}: {}", r, round_,
                             problem));
    }

    wire::encoder result(wire::frame_kind::result);
    result.u64(round_);
    result.u32(static_cast<std::uint32_t>(size));
    for (const auto& blob : blobs)
        result.blob(blob);
    send_to_all(std::make_shared<const std::vector<std::byte>>(std::move(result).finish()),
                fmt::format("the answer to all_gather round {}", round_));
    return blobs;
}

std::vector<std::vector<std::byte>>
env_bootstrap::impl::gather_as_peer(std::span<const std::byte> mine) {
    wire::encoder contribution(wire::frame_kind::contribution);
    contribution.u64(round_);
    contribution.i32(config_.rank);
    contribution.i32(config_.size);
    contribution.text(config_.job_id);
    contribution.blob(mine);
    auto sent = start(io_, write_frame(root_, std::make_shared<const std::vector<std::byte>>(
                                                  std::move(contribution).finish())));
    auto answer = start(io_, read_frame(root_, config_.size));
    // Rank 0 waits up to the timeout for the slowest rank, then answers or says who is
    // missing; twice the timeout leaves room for that message to arrive.
    const auto deadline = clock::now() + 2 * config_.timeout;
    const auto finished = [&] { return answer->done || (sent->done && sent->failure); };
    if (!run_until(io_, deadline, finished))
        fail(errc::timeout,
             fmt::format("bootstrap: rank 0 at {} did not answer all_gather round "
                         "{} of rank {} within {} ms",
                         address_, round_, config_.rank, 2 * config_.timeout.count()));
    const auto failure = answer->failure ? answer->failure : sent->failure;
    if (failure || !answer->done)
        peer_failed(0, failure, fmt::format("during all_gather round {}", round_));

    std::vector<std::vector<std::byte>> blobs;
    try {
        wire::decoder fields(answer->value.body);
        if (answer->value.kind == wire::frame_kind::abort) {
            const auto code = abort_errc(fields.u32());
            fail(code, fmt::format("{} (reported by rank 0)", fields.text(wire::max_small_body)));
        }
        if (answer->value.kind != wire::frame_kind::result)
            throw error(errc::invalid_argument,
                        fmt::format("a frame of kind {} instead of the result",
                                    static_cast<std::uint32_t>(answer->value.kind)));
        const auto round = fields.u64();
        const auto count = fields.u32();
        if (round != round_ || count != static_cast<std::uint32_t>(config_.size))
            throw error(errc::invalid_argument,
                        fmt::format("a result for round {} with {} blobs; expected round {} "
                                    "with {}",
                                    round, count, round_, config_.size));
        blobs.reserve(count);
        for (std::uint32_t r = 0; r < count; ++r) {
            const auto blob = fields.blob(wire::max_blob);
            blobs.emplace_back(blob.begin(), blob.end());
        }
        fields.finish();
    } catch (const error& e) {
        if (failure_) throw;
        fail(errc::invalid_argument,
             fmt::format("bootstrap: rank 0 at {} sent rank {} a bad all_gather round {}: {}",
                         address_, config_.rank, round_, message_of(e)));
    }
    run_until(io_, deadline, [&] { return sent->done; });
    return blobs;
}

void env_bootstrap::impl::send_to_all(std::shared_ptr<const std::vector<std::byte>> bytes,
                                      std::string_view what) {
    const auto size = static_cast<std::size_t>(config_.size);
    std::vector<std::shared_ptr<outcome<int>>> writes(size);
    for (std::size_t r = 1; r < size; ++r)
        writes[r] = start(io_, write_frame(*peers_[r], bytes));
    const auto first_failure = [&]() -> int {
        for (std::size_t r = 1; r < size; ++r)
            if (writes[r]->done && writes[r]->failure) return static_cast<int>(r);
        return 0;
    };
    const bool written = run_until(io_, clock::now() + config_.timeout, [&] {
        return first_failure() || std::all_of(writes.begin() + 1, writes.end(),
                                              [](auto& write) { return write->done; });
    });
    if (const int r = first_failure())
        peer_failed(r, writes[static_cast<std::size_t>(r)]->failure,
                    fmt::format("while rank 0 sent it {}", what));
    if (!written) {
        std::vector<int> slow;
        for (std::size_t r = 1; r < size; ++r)
            if (!writes[r]->done) slow.push_back(static_cast<int>(r));
        fail(errc::timeout, fmt::format("bootstrap: {} did not take {} from rank 0 within {} ms",
                                        ranks_phrase(slow), what, config_.timeout.count()));
    }
}

void env_bootstrap::impl::peer_failed(int peer, std::exception_ptr failure,
                                      std::string_view during) {
    const auto info = failure ? classify(failure) : failure_info{true, false, "closed"};
    const auto who = peer == 0 ? fmt::format("rank 0 (the rendezvous at {})", address_)
                               : fmt::format("rank {}", peer);
    if (info.closed)
        fail(errc::peer_lost, fmt::format("bootstrap: {} closed its connection {}", who, during));
    if (info.malformed)
        fail(errc::invalid_argument,
             fmt::format("bootstrap: {} sent a malformed frame {}: {}", who, during, info.what));
    fail(errc::peer_lost,
         fmt::format("bootstrap: the connection with {} failed {}: {}", who, during, info.what));
}

void env_bootstrap::impl::fail(errc code, const std::string& message) {
    if (config_.rank == 0 && !peers_.empty()) {
        // Tell every rank still connected why the job ends, so each reports the real cause
        // rather than a lost rank 0.
        wire::encoder abort(wire::frame_kind::abort);
        abort.u32(abort_code(code));
        abort.text(message.substr(0, wire::max_small_body / 2));
        auto bytes = std::make_shared<const std::vector<std::byte>>(std::move(abort).finish());
        std::vector<std::shared_ptr<outcome<int>>> writes;
        for (auto& peer : peers_)
            if (peer && peer->is_open()) writes.push_back(start(io_, write_frame(*peer, bytes)));
        run_until(io_, clock::now() + std::min<clock::duration>(config_.timeout, abort_grace), [&] {
            return std::all_of(writes.begin(), writes.end(),
                               [](auto& write) { return write->done; });
        });
    }
    close_all();
    failure_.emplace(code, message);
    throw error(code, message);
}

void env_bootstrap::impl::close_all() {
    asio::error_code ec;
    resolver_.cancel();
    retry_timer_.cancel();
    root_.close(ec);
    for (auto& peer : peers_)
        if (peer) peer->close(ec);
    drain();
}

// Runs the handlers that closing and cancelling made ready, so that no coroutine is left
// suspended on an operation of an object about to go away.
void env_bootstrap::impl::drain() {
    io_.restart();
    io_.poll();
}

env_bootstrap::env_bootstrap(env_config config) : env_bootstrap(std::move(config), nullptr) {}

env_bootstrap::env_bootstrap(env_config config,
                             std::function<void(std::uint16_t port)> on_listening)
    : impl_(std::make_unique<impl>(std::move(config), std::move(on_listening))) {}

env_bootstrap::~env_bootstrap() = default;

int env_bootstrap::rank() const noexcept {
    return impl_->config_.rank;
}
int env_bootstrap::size() const noexcept {
    return impl_->config_.size;
}
const std::string& env_bootstrap::job_id() const noexcept {
    return impl_->config_.job_id;
}
const std::string& env_bootstrap::node() const noexcept {
    return impl_->config_.node;
}
std::string env_bootstrap::reachable_address() const {
    asio::error_code ec;
    const auto& peers = impl_->peers_;
    const auto address =
        impl_->config_.rank == 0
            ? (peers.size() > 1 && peers[1] ? peers[1]->local_endpoint(ec) : ip::tcp::endpoint())
            : impl_->root_.local_endpoint(ec);
    if (ec || address.port() == 0) return {};
    return address.address().to_string();
}

std::vector<std::vector<std::byte>> env_bootstrap::all_gather(std::span<const std::byte> mine) {
    return impl_->all_gather(mine);
}

} // namespace tutti
