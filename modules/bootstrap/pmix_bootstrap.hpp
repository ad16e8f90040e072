// The bootstrap for jobs started by a PMIx launcher (Open MPI's mpirun, srun,
// prterun): rank, size and job come from the PMIx server, and all_gather is a
// put, a fence that collects the data, and a get per rank.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "bootstrap/bootstrap.hpp"

namespace tutti {

class pmix_bootstrap final : public bootstrap {
public:
    // PMIx_Init; throws tutti::error when there is no PMIx server to talk to.
    // fence_timeout bounds each all_gather (rounded up to whole seconds, as
    // PMIx counts them; servers that ignore PMIX_TIMEOUT wait for ever).
    explicit pmix_bootstrap(std::chrono::milliseconds fence_timeout = std::chrono::seconds(30));
    ~pmix_bootstrap() override; // PMIx_Finalize

    pmix_bootstrap(const pmix_bootstrap&) = delete;
    pmix_bootstrap& operator=(const pmix_bootstrap&) = delete;

    int rank() const noexcept override { return rank_; }
    int size() const noexcept override { return size_; }
    const std::string& job_id() const noexcept override { return job_id_; }
    const std::string& node() const noexcept override { return node_; }
    std::string_view method() const noexcept override { return "pmix"; }
    const std::string& pmix_namespace() const noexcept { return namespace_; }

    std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> mine) override;

private:
    std::string namespace_;
    int rank_ = 0;
    int size_ = 0;
    std::string job_id_;
    std::string node_;
    std::chrono::milliseconds fence_timeout_;
    std::uint64_t round_ = 0;
};

} // namespace tutti
