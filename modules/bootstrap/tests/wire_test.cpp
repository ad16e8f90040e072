// The rendezvous frames: what is written reads back, and every malformed
// frame is an error rather than a crash or a huge allocation.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/wire.hpp"
#include "core/error.hpp"

namespace wire = tutti::bootstrap_wire;

namespace {

wire::header_bytes header_of(const std::vector<std::byte>& frame) {
    wire::header_bytes header{};
    std::memcpy(header.data(), frame.data(), wire::header_size);
    return header;
}

std::span<const std::byte> body_of(const std::vector<std::byte>& frame) {
    return std::span(frame).subspan(wire::header_size);
}

} // namespace

TEST_CASE("wire: a frame reads back field by field") {
    const std::vector<std::byte> blob{std::byte{1}, std::byte{2}, std::byte{255}};
    wire::encoder out(wire::frame_kind::contribution);
    out.u64(0x0102030405060708);
    out.i32(-7);
    out.u32(42);
    out.text("job");
    out.blob(blob);
    out.blob({});
    const auto frame = std::move(out).finish();

    const auto header = wire::decode_header(header_of(frame), 4);
    CHECK(header.kind == wire::frame_kind::contribution);
    CHECK(header.length == frame.size() - wire::header_size);
    wire::decoder in(body_of(frame));
    CHECK(in.u64() == 0x0102030405060708);
    CHECK(in.i32() == -7);
    CHECK(in.u32() == 42);
    CHECK(in.text(16) == "job");
    const auto read_blob = in.blob(16);
    CHECK(std::vector<std::byte>(read_blob.begin(), read_blob.end()) == blob);
    CHECK(in.blob(16).empty());
    CHECK_NOTHROW(in.finish());
}

TEST_CASE("wire: headers with a wrong magic, an unknown kind or an oversized length are refused") {
    const auto good = wire::encode_header(wire::frame_kind::hello, 10);
    CHECK(wire::decode_header(good, 2).length == 10);

    auto bad_magic = good;
    bad_magic[0] = std::byte{'G'};
    CHECK_THROWS_WITH_AS(wire::decode_header(bad_magic, 2), doctest::Contains("bad magic number"),
                         tutti::error);

    auto bad_kind = good;
    bad_kind[4] = std::byte{99};
    CHECK_THROWS_WITH_AS(wire::decode_header(bad_kind, 2),
                         doctest::Contains("unknown frame kind 99"), tutti::error);
    bad_kind[4] = std::byte{0};
    CHECK_THROWS_AS(wire::decode_header(bad_kind, 2), tutti::error);

    const auto huge_hello = wire::encode_header(wire::frame_kind::hello, wire::max_small_body + 1);
    CHECK_THROWS_WITH_AS(wire::decode_header(huge_hello, 2), doctest::Contains("more than the"),
                         tutti::error);
    const auto big_blob =
        wire::encode_header(wire::frame_kind::contribution, wire::max_blob + wire::max_small_body);
    CHECK_NOTHROW(wire::decode_header(big_blob, 2));
    const auto too_big_blob = wire::encode_header(wire::frame_kind::contribution,
                                                  wire::max_blob + wire::max_small_body + 1);
    CHECK_THROWS_AS(wire::decode_header(too_big_blob, 2), tutti::error);
    // A result carries every rank's blob, so its bound grows with the job.
    const auto result = wire::encode_header(wire::frame_kind::result, 3 * wire::max_blob);
    CHECK_THROWS_AS(wire::decode_header(result, 2), tutti::error);
    CHECK_NOTHROW(wire::decode_header(result, 3));
}

TEST_CASE("wire: bodies that run short, overflow a bound or have bytes left over are refused") {
    wire::encoder out(wire::frame_kind::hello);
    out.u32(1);
    out.text("0123456789");
    const auto frame = std::move(out).finish();

    wire::decoder too_long(body_of(frame));
    too_long.u32();
    CHECK_THROWS_WITH_AS(too_long.text(5), doctest::Contains("a text of 10 bytes"), tutti::error);

    wire::decoder left_over(body_of(frame));
    left_over.u32();
    CHECK_THROWS_WITH_AS(left_over.finish(), doctest::Contains("unexpected bytes"), tutti::error);

    wire::decoder short_body(body_of(frame).first(6));
    short_body.u32();
    CHECK_THROWS_WITH_AS(short_body.u64(), doctest::Contains("only 2 remain"), tutti::error);

    // A length field claiming far more than is there.
    wire::encoder lying(wire::frame_kind::hello);
    lying.u64(std::uint64_t{1} << 62);
    const auto lie = std::move(lying).finish();
    wire::decoder liar(body_of(lie));
    CHECK_THROWS_AS(liar.blob(std::uint64_t{1} << 63), tutti::error);
}
