// How a process learns its place in a job: its rank, the job's size and
// identity, and a way to exchange small blobs with every other rank (addresses,
// process ids, segment names) before any transport exists. Implementations:
// PMIx (when started by mpirun or srun) and environment variables with a TCP
// rendezvous (tuttirun, or by hand). Every wait has a timeout whose error
// names the ranks that never arrived.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tutti {

class bootstrap {
public:
    virtual ~bootstrap() = default;

    virtual int rank() const noexcept = 0;
    virtual int size() const noexcept = 0;
    // Unique per job run, the same on every rank: names shared segments.
    virtual const std::string& job_id() const noexcept = 0;
    // Which node this rank is on: the host name, or TUTTI_NODE when set.
    virtual const std::string& node() const noexcept = 0;
    // "pmix" or "env", for logs and tutti-info.
    virtual std::string_view method() const noexcept = 0;
    // The address (no port) at which other ranks can reach this one, as the
    // bootstrap saw it; "" when it cannot tell. Transports listen there.
    virtual std::string reachable_address() const { return {}; }

    // Collective over every rank of the job: each contributes a blob, each
    // gets every blob in rank order. Throws tutti::error (errc::timeout)
    // naming the ranks that did not arrive in time.
    virtual std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> mine) = 0;

    void barrier() { (void)all_gather({}); }
};

} // namespace tutti
