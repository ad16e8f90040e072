#include "output.hpp"

namespace tuttirun {

std::string line_prefixer::feed(std::string_view data) {
    std::string out;
    while (!data.empty()) {
        const auto newline = data.find('\n');
        if (newline == std::string_view::npos) {
            pending_.append(data);
            if (pending_.size() >= max_pending) out += finish();
            break;
        }
        out += tag_;
        out += pending_;
        out.append(data.substr(0, newline + 1));
        pending_.clear();
        data.remove_prefix(newline + 1);
    }
    return out;
}

std::string line_prefixer::finish() {
    if (pending_.empty()) return {};
    std::string out = tag_ + pending_ + '\n';
    pending_.clear();
    return out;
}

} // namespace tuttirun
