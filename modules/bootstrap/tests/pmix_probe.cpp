// Run under mpirun: joins the job through join_job() (PMIx there), prints what
// it learned, and checks that all_gather hands every rank every blob, for
// empty, small and 1 MiB blobs. Exit status 0 only when everything agrees.
// `pmix-probe env` expects the environment bootstrap instead (under tuttirun).
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bootstrap/join.hpp"
#include "core/error.hpp"

namespace {

std::vector<std::byte> blob_for(int rank, int round, std::size_t length) {
    std::vector<std::byte> blob(length);
    for (std::size_t i = 0; i < length; ++i)
        blob[i] = static_cast<std::byte>((rank * 131 + round * 17 + static_cast<int>(i)) & 0xff);
    return blob;
}

std::vector<std::byte> text_blob(const std::string& text) {
    const auto* first = reinterpret_cast<const std::byte*>(text.data());
    return {first, first + text.size()};
}

} // namespace

int main(int argc, char** argv) {
    try {
        const auto boot = tutti::join_job();
        const int rank = boot->rank();
        const int size = boot->size();
        fmt::print("rank {} of {}: method {}, job {}, node {}\n", rank, size, boot->method(),
                   boot->job_id(), boot->node());
        const std::string expected = argc > 1 ? argv[1] : "pmix";
        if (boot->method() != expected)
            throw std::runtime_error(
                fmt::format("joined through {}, not {}", boot->method(), expected));

        // Everyone must agree on the job id.
        const auto ids = boot->all_gather(text_blob(boot->job_id()));
        for (int r = 0; r < size; ++r)
            if (ids[static_cast<std::size_t>(r)] != text_blob(boot->job_id()))
                throw std::runtime_error(fmt::format("rank {} has another job id", r));

        const std::vector<std::size_t> lengths{0, 1, 37, std::size_t{1} << 20};
        for (int round = 0; round < static_cast<int>(lengths.size()); ++round) {
            const auto length = lengths[static_cast<std::size_t>(round)];
            const auto all = boot->all_gather(blob_for(rank, round, length));
            if (static_cast<int>(all.size()) != size)
                throw std::runtime_error(fmt::format("round {}: {} blobs", round, all.size()));
            for (int r = 0; r < size; ++r)
                if (all[static_cast<std::size_t>(r)] != blob_for(r, round, length))
                    throw std::runtime_error(
                        fmt::format("round {}: blob of rank {} differs", round, r));
        }
        boot->barrier();
        fmt::print("rank {}: all_gather checks passed\n", rank);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "pmix probe failed: %s\n", e.what());
        return 1;
    }
}
