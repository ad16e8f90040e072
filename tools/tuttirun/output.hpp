// Turns the bytes a rank writes into whole lines tagged with its rank, so that
// lines of different ranks never mix mid-line when they share one terminal.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tuttirun {

class line_prefixer {
public:
    // A partial line longer than this is passed on (as a line of its own)
    // rather than held without bound; its rest is tagged again.
    static constexpr std::size_t max_pending = 64 * 1024;

    explicit line_prefixer(std::string tag) : tag_(std::move(tag)) {}

    // The complete lines in pending + data, each tagged and ending in '\n';
    // keeps an incomplete last line for later.
    std::string feed(std::string_view data);

    // At end of stream: the incomplete last line, tagged and with a '\n'
    // added, or nothing.
    std::string finish();

private:
    std::string tag_;
    std::string pending_;
};

} // namespace tuttirun
