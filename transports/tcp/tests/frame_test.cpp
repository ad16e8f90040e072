// The TCP frame header: what is written reads back, and every malformed
// header is refused with a message naming the fault.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "core/error.hpp"
#include "transports/tcp/frame.hpp"

using namespace tutti;
using namespace tutti::tcp;

namespace {

const frame_limits limits{.max_payload = std::uint64_t{1} << 20, .job_size = 5};

frame_header sample() {
    frame_header h;
    h.kind = frame_kind::data;
    h.message.key = {.communicator = 7, .generation = 3, .step = 2, .source = 4};
    h.message.kind = collective::all_reduce;
    h.message.algorithm = algorithm_id("ring");
    h.message.bytes = 4096;
    return h;
}

void check_same(const frame_header& a, const frame_header& b) {
    CHECK(a.kind == b.kind);
    CHECK(a.message.key == b.message.key);
    CHECK(a.message.kind == b.message.kind);
    CHECK(a.message.algorithm == b.message.algorithm);
    CHECK(a.message.bytes == b.message.bytes);
}

} // namespace

TEST_CASE("tcp frame: headers read back whatever their fields") {
    const std::uint64_t big = std::numeric_limits<std::uint64_t>::max();
    const std::vector<std::uint64_t> values{0, 1, 0xFF, 0x0102030405060708, big - 1, big};
    const std::vector<frame_kind> kinds{
        frame_kind::data,    frame_kind::hello,   frame_kind::challenge, frame_kind::proof,
        frame_kind::welcome, frame_kind::goodbye, frame_kind::lost};
    std::vector<collective> collectives(all_collectives.begin(), all_collectives.end());
    collectives.push_back(collective::split);
    int checked = 0;
    for (auto kind : kinds)
        for (auto c : collectives)
            for (auto v : values)
                for (std::int32_t source : {0, 1, 4}) {
                    frame_header h;
                    h.kind = kind;
                    h.message.key = {
                        .communicator = v, .generation = ~v, .step = v ^ 0x55, .source = source};
                    h.message.kind = c;
                    h.message.algorithm = static_cast<std::uint32_t>(v * 2654435761u);
                    h.message.bytes = kind == frame_kind::data ? (v % (limits.max_payload + 1))
                                                               : v % (max_control_payload + 1);
                    const auto bytes = encode_frame_header(h);
                    check_same(decode_frame_header(bytes, limits), h);
                    ++checked;
                }
    CHECK(checked == 7 * 13 * 6 * 3);
}

TEST_CASE("tcp frame: the encoding is little-endian and fixed") {
    const auto bytes = encode_frame_header(sample());
    CHECK(bytes.size() == frame_header_size);
    CHECK(bytes[0] == std::byte{0x74});
    CHECK(bytes[3] == std::byte{0x74});
    CHECK(bytes[4] == std::byte{frame_version});
    CHECK(bytes[6] == std::byte{1});
    CHECK(bytes[8] == std::byte{7});
    CHECK(bytes[32] == std::byte{4});
    CHECK(bytes[41] == std::byte{0x10}); // 4096
}

TEST_CASE("tcp frame: a truncated or overlong header is refused") {
    const auto bytes = encode_frame_header(sample());
    for (std::size_t n = 0; n < frame_header_size; ++n)
        CHECK_THROWS_WITH_AS(decode_frame_header(std::span(bytes).first(n), limits),
                             doctest::Contains("truncated"), error);
    std::vector<std::byte> longer(bytes.begin(), bytes.end());
    longer.push_back(std::byte{0});
    CHECK_THROWS_WITH_AS(decode_frame_header(longer, limits),
                         doctest::Contains("where a header has exactly 48"), error);
}

TEST_CASE("tcp frame: each malformed field is named") {
    const auto good = encode_frame_header(sample());
    auto expect = [](frame_header_bytes bytes, const char* what) {
        try {
            (void)decode_frame_header(bytes, limits);
            FAIL("accepted a malformed header: ", what);
        } catch (const error& e) {
            CHECK(e.code() == errc::invalid_argument);
            CHECK_MESSAGE(std::string(e.what()).find(what) != std::string::npos, e.what());
        }
    };

    auto bad = good;
    bad[0] = std::byte{'G'};
    expect(bad, "bad magic number");

    bad = good;
    bad[4] = std::byte{2};
    expect(bad, "unknown version 2");
    bad = good;
    bad[5] = std::byte{1};
    expect(bad, "unknown version 257");

    bad = good;
    bad[6] = std::byte{0};
    expect(bad, "unknown frame kind 0");
    bad[6] = std::byte{8};
    expect(bad, "unknown frame kind 8");
    bad[6] = std::byte{255};
    expect(bad, "unknown frame kind 255");

    bad = good;
    bad[7] = std::byte{static_cast<std::uint8_t>(collective::split) + 1};
    expect(bad, "collective kind 13 out of range");
    bad[7] = std::byte{255};
    expect(bad, "collective kind 255 out of range");

    auto h = sample();
    h.message.key.source = 5;
    expect(encode_frame_header(h), "source rank 5 outside the job of 5 ranks");
    h.message.key.source = -1;
    expect(encode_frame_header(h), "source rank -1 outside the job of 5 ranks");
    h.message.key.source = std::numeric_limits<std::int32_t>::min();
    expect(encode_frame_header(h), "outside the job");

    h = sample();
    h.message.bytes = limits.max_payload;
    CHECK_NOTHROW(decode_frame_header(encode_frame_header(h), limits));
    h.message.bytes = limits.max_payload + 1;
    expect(encode_frame_header(h), "claims a payload of 1048577 bytes, more than the 1048576");
    h.message.bytes = std::numeric_limits<std::uint64_t>::max();
    expect(encode_frame_header(h), "more than the");

    // A handshake frame may never be large, whatever the data limit.
    h = sample();
    h.kind = frame_kind::proof;
    h.message.bytes = max_control_payload + 1;
    expect(encode_frame_header(h), "a proof frame claims a payload of 257 bytes");
}

TEST_CASE("tcp frame: the default data limit is 1 GiB and the job size must be set") {
    frame_limits defaults;
    CHECK(defaults.max_payload == std::uint64_t{1} << 30);
    CHECK_THROWS_WITH_AS(decode_frame_header(encode_frame_header(sample()), defaults),
                         doctest::Contains("job size 0"), error);
    defaults.job_size = 5;
    auto h = sample();
    h.message.bytes = std::uint64_t{1} << 30;
    CHECK_NOTHROW(decode_frame_header(encode_frame_header(h), defaults));
    h.message.bytes += 1;
    CHECK_THROWS_AS(decode_frame_header(encode_frame_header(h), defaults), error);
}
