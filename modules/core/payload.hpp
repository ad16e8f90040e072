// How values travel. Contiguous ranges of trivially copyable elements go as
// raw bytes, read in place on the send side. Every other type goes through a
// Boost.Serialization binary archive: std::string, nested vectors, maps, and
// any user struct with a serialize member.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ranges>
#include <span>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <boost/archive/binary_iarchive.hpp>
#include <boost/archive/binary_oarchive.hpp>
#include <boost/serialization/map.hpp>
#include <boost/serialization/string.hpp>
#include <boost/serialization/utility.hpp>
#include <boost/serialization/vector.hpp>

#include "core/error.hpp"

namespace tutti {

// Data that can travel as its own bytes: what std::memcpy may copy.
template <class T>
concept trivially_copyable = std::is_trivially_copyable_v<T> && !std::is_pointer_v<T>;

// A contiguous range of trivially copyable elements (std::vector<int>,
// std::array, std::span): travels as bytes, no copy on the send side.
// std::string is deliberately not one: its length usually differs per rank,
// so it travels as a serialized value.
template <class R>
concept byte_range = std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
    trivially_copyable<std::ranges::range_value_t<R>> &&
    !std::is_same_v<std::remove_cvref_t<R>, std::string>;

// Anything else Boost.Serialization can write.
template <class T>
concept serializable = requires(boost::archive::binary_oarchive& out, T& value) {
    out << value;
};

template <byte_range R>
std::span<const std::byte> bytes_of(const R& range) {
    return std::as_bytes(std::span(std::ranges::data(range), std::ranges::size(range)));
}

template <byte_range R>
std::span<std::byte> writable_bytes_of(R& range) {
    return std::as_writable_bytes(std::span(std::ranges::data(range), std::ranges::size(range)));
}

template <class T>
std::vector<std::byte> serialize(const T& value) {
    std::ostringstream stream(std::ios::binary);
    try {
        boost::archive::binary_oarchive archive(stream, boost::archive::no_header);
        archive << value;
    } catch (const std::exception& e) {
        throw error(errc::serialization_failure,
                    std::string("cannot serialize payload: ") + e.what());
    }
    auto text = std::move(stream).str();
    auto* first = reinterpret_cast<const std::byte*>(text.data());
    return std::vector<std::byte>(first, first + text.size());
}

template <class T>
void deserialize(std::span<const std::byte> bytes, T& value) {
    std::istringstream stream(
        std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()), std::ios::binary);
    try {
        boost::archive::binary_iarchive archive(stream, boost::archive::no_header);
        archive >> value;
    } catch (const std::exception& e) {
        throw error(errc::serialization_failure,
                    std::string("cannot deserialize payload: ") + e.what());
    }
}

} // namespace tutti
