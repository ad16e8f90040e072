// The matching engine on its own: early and late messages, exact sizes,
// mismatches reported instead of waited on, failure of everything pending.
#include <cstring>
#include <thread>

#include "core/mailbox.hpp"
#include "core/scratch.hpp"
#include "core/shared_memory.hpp"
#include "support/harness.hpp"

using namespace tutti;

namespace {

message_header header(std::uint64_t generation, std::uint64_t step, int source, std::size_t bytes,
                      collective kind = collective::all_reduce,
                      std::string_view algorithm = "ring") {
    message_header h;
    h.key = {.communicator = 7, .generation = generation, .step = step, .source = source};
    h.kind = kind;
    h.algorithm = algorithm_id(algorithm);
    h.bytes = bytes;
    return h;
}

std::vector<std::byte> bytes(std::initializer_list<int> values) {
    std::vector<std::byte> out;
    for (int v : values)
        out.push_back(static_cast<std::byte>(v));
    return out;
}

errc code_of(const request& r) {
    asio::io_context context;
    errc code = errc::invalid_argument;
    bool failed = false;
    auto wait_for = [](request awaited) -> task<void> { co_await awaited->wait(); };
    spawn(context, wait_for(r), [&](std::exception_ptr e) {
        try {
            if (e) std::rethrow_exception(e);
        } catch (const tutti::error& x) {
            code = x.code();
            failed = true;
        }
    });
    context.run();
    REQUIRE(failed);
    return code;
}

} // namespace

TEST_CASE("a message that arrives before its receive is kept, then copied in") {
    mailbox box;
    auto data = bytes({1, 2, 3});
    box.deliver(header(1, 0, 2, 3), data);
    std::vector<std::byte> into(3);
    auto r = box.post(header(1, 0, 2, 3), into, false);
    CHECK(r->done());
    CHECK(into == data);
    CHECK(box.pending().empty());
}

TEST_CASE("a receive posted first gets the message straight into its buffer") {
    mailbox box;
    std::vector<std::byte> into(2);
    auto r = box.post(header(1, 4, 0, 2), into, false);
    CHECK_FALSE(r->done());
    CHECK(box.pending().size() == 1);
    box.deliver(header(1, 5, 0, 2), bytes({9, 9})); // another step: kept aside
    CHECK_FALSE(r->done());
    box.deliver(header(1, 4, 0, 2), bytes({5, 6}));
    CHECK(r->done());
    CHECK(into == bytes({5, 6}));
}

TEST_CASE("messages are matched on generation and source, not only step") {
    mailbox box;
    box.deliver(header(2, 0, 1, 1), bytes({22}));
    box.deliver(header(1, 0, 3, 1), bytes({13}));
    box.deliver(header(1, 0, 1, 1), bytes({11}));
    std::vector<std::byte> a(1), b(1), c(1);
    CHECK(box.post(header(1, 0, 1, 1), a, false)->done());
    CHECK(box.post(header(1, 0, 3, 1), b, false)->done());
    CHECK(box.post(header(2, 0, 1, 1), c, false)->done());
    CHECK(a == bytes({11}));
    CHECK(b == bytes({13}));
    CHECK(c == bytes({22}));
}

TEST_CASE("a receive of unknown size gets the whole payload") {
    mailbox box;
    auto r = box.post(header(1, 0, 0, 0), {}, true);
    box.deliver(header(1, 0, 0, 5), bytes({1, 2, 3, 4, 5}));
    REQUIRE(r->done());
    CHECK(r->take_payload() == bytes({1, 2, 3, 4, 5}));
}

TEST_CASE("a size mismatch fails the receive with message_size_mismatch") {
    mailbox box;
    std::vector<std::byte> into(4);
    auto r = box.post(header(1, 0, 0, 4), into, false);
    box.deliver(header(1, 0, 0, 3), bytes({1, 2, 3}));
    CHECK(code_of(r) == errc::message_size_mismatch);
}

TEST_CASE("another collective for the same generation fails the receive at once") {
    mailbox box;
    std::vector<std::byte> into(1);
    auto r = box.post(header(1, 0, 0, 1, collective::all_reduce), into, false);
    box.deliver(header(1, 3, 0, 1, collective::broadcast, "binomial"), bytes({1}));
    CHECK(code_of(r) == errc::mismatched_collective);
    // And the other way round: the message came first.
    auto late = box.post(header(1, 9, 0, 1, collective::all_reduce), into, false);
    CHECK(code_of(late) == errc::mismatched_collective);
}

TEST_CASE("another algorithm for the same step fails the receive") {
    mailbox box;
    std::vector<std::byte> into(1);
    box.deliver(header(1, 0, 0, 1, collective::all_reduce, "ring"), bytes({1}));
    auto r = box.post(header(1, 0, 0, 1, collective::all_reduce, "rabenseifner"), into, false);
    CHECK(code_of(r) == errc::mismatched_collective);
}

TEST_CASE("take_arrived copies a message already here and leaves nothing behind") {
    mailbox box;
    std::vector<std::byte> into(3);
    CHECK_FALSE(box.take_arrived(header(1, 0, 2, 3), into)); // nothing yet, nothing posted
    CHECK(box.pending().empty());
    box.deliver(header(1, 1, 2, 3), bytes({7, 8, 9})); // another step
    CHECK_FALSE(box.take_arrived(header(1, 0, 2, 3), into));
    box.deliver(header(1, 0, 2, 3), bytes({4, 5, 6}));
    CHECK(box.take_arrived(header(1, 0, 2, 3), into));
    CHECK(into == bytes({4, 5, 6}));
    CHECK_FALSE(box.take_arrived(header(1, 0, 2, 3), into)); // taken once only
    // The other step's message is still there for its receive.
    auto r = box.post(header(1, 1, 2, 3), into, false);
    CHECK(r->done());
    CHECK(into == bytes({7, 8, 9}));
}

TEST_CASE("take_arrived throws the mismatch a posted receive would fail with") {
    auto code_thrown = [](auto&& call) {
        try {
            call();
        } catch (const tutti::error& e) {
            return e.code();
        }
        FAIL("no error thrown");
        return errc::invalid_argument;
    };
    mailbox box;
    std::vector<std::byte> into(4);
    box.deliver(header(1, 0, 0, 3), bytes({1, 2, 3}));
    CHECK(code_thrown([&] { box.take_arrived(header(1, 0, 0, 4), into); }) ==
          errc::message_size_mismatch);
    // The message that did not fit is gone, as for a posted receive.
    CHECK_FALSE(box.take_arrived(header(1, 0, 0, 4), into));
    box.deliver(header(2, 5, 0, 1, collective::broadcast, "binomial"), bytes({1}));
    CHECK(code_thrown([&] { box.take_arrived(header(2, 0, 0, 4), into); }) ==
          errc::mismatched_collective);
}

TEST_CASE("an awaited receive takes its message as it is delivered, and only its own") {
    mailbox box;
    std::vector<std::byte> into(3);
    const auto expected = header(1, 0, 2, 3);
    mailbox::awaited_receive here{.expected = expected, .into = into, .done = false, .failed = {}};
    box.await_here(&here);
    box.deliver(header(1, 1, 2, 3), bytes({7, 8, 9})); // another step: queued
    CHECK_FALSE(here.done);
    box.deliver(expected, bytes({4, 5, 6}));
    CHECK(here.done);
    CHECK_FALSE(here.failed);
    CHECK(into == bytes({4, 5, 6}));
    // Nothing of it was queued, and the mailbox no longer awaits anything:
    // a second message of the same key is queued for take_arrived.
    CHECK_FALSE(box.take_arrived(expected, into));
    box.deliver(expected, bytes({1, 1, 1}));
    CHECK(box.take_arrived(expected, into));
    CHECK(into == bytes({1, 1, 1}));
    auto r = box.post(header(1, 1, 2, 3), into, false);
    CHECK(r->done());
    CHECK(into == bytes({7, 8, 9}));
}

TEST_CASE("an awaited receive keeps the mismatch a posted receive would fail with") {
    auto code_of_failure = [](const std::exception_ptr& e) {
        try {
            std::rethrow_exception(e);
        } catch (const tutti::error& x) {
            return x.code();
        }
        return errc::invalid_argument;
    };
    mailbox box;
    std::vector<std::byte> into(4);
    const auto expected = header(1, 0, 0, 4);
    mailbox::awaited_receive wrong_size{
        .expected = expected, .into = into, .done = false, .failed = {}};
    box.await_here(&wrong_size);
    box.deliver(header(1, 0, 0, 3), bytes({1, 2, 3}));
    REQUIRE(wrong_size.done);
    REQUIRE(wrong_size.failed);
    CHECK(code_of_failure(wrong_size.failed) == errc::message_size_mismatch);
    CHECK_FALSE(box.take_arrived(expected, into)); // used up, as for a posted receive

    // Another collective in the same call: reported, and left for its own receive.
    const auto theirs = header(2, 5, 0, 1, collective::broadcast, "binomial");
    const auto ours = header(2, 0, 0, 4);
    mailbox::awaited_receive other_collective{
        .expected = ours, .into = into, .done = false, .failed = {}};
    box.await_here(&other_collective);
    box.deliver(theirs, bytes({9}));
    REQUIRE(other_collective.done);
    CHECK(code_of_failure(other_collective.failed) == errc::mismatched_collective);
    std::vector<std::byte> one(1);
    CHECK(box.take_arrived(theirs, one));
    CHECK(one == bytes({9}));
}

TEST_CASE("fail() fails every pending and later receive but keeps queued messages") {
    mailbox box;
    std::vector<std::byte> into(1);
    auto waiting = box.post(header(1, 0, 0, 1), into, false);
    box.deliver(header(2, 0, 0, 1), bytes({42}));
    box.fail(std::make_exception_ptr(tutti::error(errc::peer_lost, "rank 0 failed")));
    CHECK(code_of(waiting) == errc::peer_lost);
    CHECK(code_of(box.post(header(3, 0, 0, 1), into, false)) == errc::peer_lost);
    auto queued = box.post(header(2, 0, 0, 1), into, false);
    CHECK(queued->done());
    CHECK(into == bytes({42}));
}

TEST_CASE("a withdrawn receive fails, leaves the list, and its message is kept, not written") {
    mailbox box;
    std::vector<std::byte> into(2, std::byte{0});
    auto first = box.post(header(1, 0, 2, 2), into, false);
    auto second = box.post(header(1, 1, 2, 2), into, false);
    REQUIRE(box.pending().size() == 2);
    CHECK(box.withdraw(second));
    CHECK(second->done());
    CHECK(box.pending().size() == 1);
    CHECK_FALSE(box.withdraw(second)); // no longer posted
    // Its message arrives after all: kept for a receive, not copied.
    box.deliver(header(1, 1, 2, 2), bytes({4, 5}));
    CHECK(into == bytes({0, 0}));
    // A receive that got its message cannot be withdrawn.
    box.deliver(header(1, 0, 2, 2), bytes({1, 2}));
    CHECK(first->done());
    CHECK(into == bytes({1, 2}));
    CHECK_FALSE(box.withdraw(first));
    CHECK(box.pending().empty());
}

// What arrives before its receive waits in a private scratch block (a
// transport's own, queued as it is, or the mailbox's copy), which goes back
// to this thread's scratch cache once its payload is copied out: the next
// early message reuses the pages, unzeroed, and no shared region is made.
// On a thread of its own: the scratch cache is per thread.
TEST_CASE("early messages wait in private scratch blocks that come back for the next") {
    std::thread([] {
        mailbox box;
        constexpr std::size_t n = 1 << 20;
        const auto regions = shared_usage().regions;
        const std::byte* pages = nullptr;
        {
            scratch_block staged(n, scratch_memory::private_only);
            pages = staged.data();
            for (std::size_t i = 0; i < n; ++i)
                staged.data()[i] = static_cast<std::byte>(i * 13 + 1);
            box.deliver(header(1, 0, 3, n), std::move(staged));
        }
        CHECK(scratch_cache().blocks == 0); // still the message's
        std::vector<std::byte> into(n);
        REQUIRE(box.post(header(1, 0, 3, n), into, false)->done());
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < n; ++i)
            wrong += into[i] != static_cast<std::byte>(i * 13 + 1);
        CHECK(wrong == 0);
        CHECK(scratch_cache().blocks == 1);

        // A smaller message takes the same pages back, unzeroed.
        {
            scratch_block again(n / 2, scratch_memory::private_only);
            CHECK(again.data() == pages);
            CHECK(again.data()[5] == static_cast<std::byte>(5 * 13 + 1));
            CHECK(scratch_cache().blocks == 0);
            // Copied straight into a receive that waited: the block stays
            // its transport's, and comes back when that lets it go.
            std::vector<std::byte> waiting(n / 2);
            auto r = box.post(header(1, 1, 3, n / 2), waiting, false);
            box.deliver(header(1, 1, 3, n / 2), std::move(again));
            CHECK(r->done());
            CHECK(waiting[5] == static_cast<std::byte>(5 * 13 + 1));
        }
        CHECK(scratch_cache().blocks == 1);

        // An early payload the mailbox copies takes that block too, and gives
        // it back once read.
        std::vector<std::byte> payload(n / 2, std::byte{7});
        box.deliver(header(1, 2, 3, payload.size()), payload);
        CHECK(scratch_cache().blocks == 0);
        std::vector<std::byte> to(payload.size());
        REQUIRE(box.post(header(1, 2, 3, to.size()), to, false)->done());
        CHECK(to == payload);
        CHECK(scratch_cache().blocks == 1);
        CHECK(shared_usage().regions == regions);

        // A staged block smaller than its message is refused, not overrun.
        scratch_block short_block(100, scratch_memory::private_only);
        CHECK_THROWS_AS(box.deliver(header(1, 3, 3, 1000), std::move(short_block)), tutti::error);
    }).join();
}

// A transport that receives a message itself writes it where landing() says
// and ends it with land(): into the claimed receive, into a staged block
// queued for a receive to come, or (a receive of any size) a copy handed over.
TEST_CASE("landing and land: claimed, staged for later, and any-size receives") {
    mailbox box;
    const std::size_t n = 1000;
    auto fill_with = [](std::span<std::byte> into, int seed) {
        for (std::size_t i = 0; i < into.size(); ++i)
            into[i] = static_cast<std::byte>(i * 7 + seed);
    };
    auto filled = [&](int seed) {
        std::vector<std::byte> v(n);
        fill_with(v, seed);
        return v;
    };

    // Claimed: written straight into the receive's buffer.
    std::vector<std::byte> posted(n);
    auto r = box.post(header(1, 0, 3, n), posted, false);
    auto claimed = box.claim(header(1, 0, 3, n));
    REQUIRE(claimed);
    std::optional<scratch_block> staging;
    auto into = mailbox::landing(claimed, n, staging);
    CHECK(into.data() == posted.data());
    CHECK_FALSE(staging);
    fill_with(into, 1);
    box.land(header(1, 0, 3, n), claimed, staging);
    CHECK(r->done());
    CHECK(posted == filled(1));

    // Nobody waits: staged, queued, and copied in when the receive comes.
    std::optional<mailbox::claimed_receive> none = box.claim(header(1, 1, 3, n));
    CHECK_FALSE(none);
    std::optional<scratch_block> early;
    fill_with(mailbox::landing(none, n, early), 2);
    REQUIRE(early);
    box.land(header(1, 1, 3, n), none, early);
    std::vector<std::byte> later(n);
    REQUIRE(box.post(header(1, 1, 3, n), later, false)->done());
    CHECK(later == filled(2));

    // A receive of any size gets a copy of exactly the message's bytes.
    auto any = box.post(header(1, 2, 3, n), {}, true);
    auto taken = box.claim(header(1, 2, 3, n));
    REQUIRE(taken);
    std::optional<scratch_block> any_staging;
    fill_with(mailbox::landing(taken, n, any_staging), 3);
    REQUIRE(any_staging);
    box.land(header(1, 2, 3, n), taken, any_staging);
    REQUIRE(any->done());
    CHECK(any->take_payload() == filled(3));
}
