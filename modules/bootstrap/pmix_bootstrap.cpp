#include "bootstrap/pmix_bootstrap.hpp"

#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <pmix.h>

#include "core/asio.hpp"
#include "core/error.hpp"

#include <asio/ip/host_name.hpp>

namespace tutti {

namespace {

void check(pmix_status_t status, std::string_view what) {
    if (status != PMIX_SUCCESS)
        throw error(
            status == PMIX_ERR_TIMEOUT ? errc::timeout : errc::peer_lost,
            fmt::format("bootstrap (pmix): {} failed: {}", what, PMIx_Error_string(status)));
}

pmix_proc_t proc_of(const std::string& nspace, pmix_rank_t rank) {
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, nspace.c_str(), rank);
    return proc;
}

// Namespaces look like "1234567890" or "prterun-host-4242@1"; the job id names
// files and shared memory segments, so only a safe alphabet survives.
std::string sanitise(std::string_view nspace) {
    std::string id;
    for (const char c : nspace) {
        const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                          (c >= '0' && c <= '9') || c == '.' || c == '-';
        id += safe ? c : '_';
    }
    return id;
}

// Owns a value PMIx_Get allocated.
struct value_deleter {
    void operator()(pmix_value_t* value) const { PMIX_VALUE_RELEASE(value); }
};
using value_ptr = std::unique_ptr<pmix_value_t, value_deleter>;

value_ptr get(const pmix_proc_t& proc, const char* key, pmix_info_t* info, std::size_t ninfo,
              std::string_view what) {
    pmix_value_t* value = nullptr;
    check(PMIx_Get(&proc, key, info, ninfo, &value), what);
    if (value == nullptr)
        throw error(errc::peer_lost, fmt::format("bootstrap (pmix): {} returned nothing", what));
    return value_ptr(value);
}

// A pmix_info_t list that releases what PMIx_Info_load copied into it.
class info_list {
public:
    explicit info_list(std::size_t count) : infos_(count) {
        for (auto& info : infos_)
            PMIX_INFO_CONSTRUCT(&info);
    }
    ~info_list() {
        for (auto& info : infos_)
            PMIX_INFO_DESTRUCT(&info);
    }
    info_list(const info_list&) = delete;
    info_list& operator=(const info_list&) = delete;

    void load(std::size_t i, const char* key, const void* data, pmix_data_type_t type) {
        check(PMIx_Info_load(&infos_[i], key, data, type), fmt::format("loading {}", key));
    }
    pmix_info_t* data() { return infos_.data(); }
    std::size_t size() const { return infos_.size(); }

private:
    std::vector<pmix_info_t> infos_;
};

} // namespace

pmix_bootstrap::pmix_bootstrap(std::chrono::milliseconds fence_timeout)
    : fence_timeout_(fence_timeout) {
    if (fence_timeout.count() <= 0)
        throw error(errc::invalid_argument,
                    fmt::format("bootstrap (pmix): timeout of {} ms; it must be positive",
                                fence_timeout.count()));
    pmix_proc_t self;
    const auto status = PMIx_Init(&self, nullptr, 0);
    if (status != PMIX_SUCCESS)
        throw error(errc::invalid_argument,
                    fmt::format("bootstrap (pmix): PMIx_Init failed: {} (PMIX_RANK is set, but "
                                "no PMIx server answers; was the program started by mpirun or "
                                "srun?)",
                                PMIx_Error_string(status)));
    try {
        namespace_ = std::string(self.nspace, strnlen(self.nspace, PMIX_MAX_NSLEN));
        rank_ = static_cast<int>(self.rank);
        const auto size = get(proc_of(namespace_, PMIX_RANK_WILDCARD), PMIX_JOB_SIZE, nullptr, 0,
                              "PMIx_Get(PMIX_JOB_SIZE)");
        if (size->type != PMIX_UINT32 || size->data.uint32 < 1 ||
            size->data.uint32 > static_cast<std::uint32_t>(std::numeric_limits<int>::max()))
            throw error(errc::invalid_argument,
                        "bootstrap (pmix): PMIX_JOB_SIZE is not a positive 32-bit count");
        size_ = static_cast<int>(size->data.uint32);
        if (rank_ < 0 || rank_ >= size_)
            throw error(
                errc::invalid_argument,
                fmt::format("bootstrap (pmix): rank {} outside the job of {}", rank_, size_));
        job_id_ = sanitise(namespace_);
        const char* node = std::getenv("TUTTI_NODE");
        node_ = node != nullptr && *node != '\0' ? node : asio::ip::host_name();
    } catch (...) {
        PMIx_Finalize(nullptr, 0);
        throw;
    }
}

pmix_bootstrap::~pmix_bootstrap() {
    PMIx_Finalize(nullptr, 0);
}

std::vector<std::vector<std::byte>> pmix_bootstrap::all_gather(std::span<const std::byte> mine) {
    ++round_;
    const auto key = fmt::format("tutti.{}", round_);
    const auto during = fmt::format("all_gather round {}", round_);

    // A leading byte keeps the byte object non-empty: PMIx treats an empty one
    // inconsistently across versions.
    std::vector<char> bytes(mine.size() + 1);
    bytes[0] = 't';
    if (!mine.empty()) std::memcpy(bytes.data() + 1, mine.data(), mine.size());
    pmix_value_t value;
    value.type = PMIX_BYTE_OBJECT;
    value.data.bo.bytes = bytes.data();
    value.data.bo.size = bytes.size();
    check(PMIx_Put(PMIX_GLOBAL, key.c_str(), &value), fmt::format("PMIx_Put for {}", during));
    check(PMIx_Commit(), fmt::format("PMIx_Commit for {}", during));

    const bool collect = true;
    const int seconds = static_cast<int>((fence_timeout_.count() + 999) / 1000);
    info_list fence_info(2);
    fence_info.load(0, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    fence_info.load(1, PMIX_TIMEOUT, &seconds, PMIX_INT);
    const auto everyone = proc_of(namespace_, PMIX_RANK_WILDCARD);
    check(PMIx_Fence(&everyone, 1, fence_info.data(), fence_info.size()),
          fmt::format("PMIx_Fence for {} (timeout {} s)", during, seconds));

    info_list get_info(1);
    get_info.load(0, PMIX_TIMEOUT, &seconds, PMIX_INT);
    std::vector<std::vector<std::byte>> blobs;
    blobs.reserve(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) {
        const auto what = fmt::format("PMIx_Get of rank {}'s blob for {}", r, during);
        const auto blob = get(proc_of(namespace_, static_cast<pmix_rank_t>(r)), key.c_str(),
                              get_info.data(), get_info.size(), what);
        if (blob->type != PMIX_BYTE_OBJECT || blob->data.bo.size < 1 ||
            blob->data.bo.bytes == nullptr)
            throw error(errc::invalid_argument,
                        fmt::format("bootstrap (pmix): {} is not a tutti blob", what));
        const auto* first = reinterpret_cast<const std::byte*>(blob->data.bo.bytes) + 1;
        blobs.emplace_back(first, first + blob->data.bo.size - 1);
    }
    return blobs;
}

} // namespace tutti
