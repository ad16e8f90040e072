// The bootstrap of the ranks of one node inside a job that spans nodes, so
// that a transport written for one node (shared memory) can be set up by
// those ranks alone while the other nodes do the same. Its all_gather runs
// over the parent's all_gather, which is collective over the whole job: every
// rank of every node calls the parent once per node exchange, and a node that
// needs fewer exchanges than another keeps answering through leave() until
// every rank of the job has left. So nodes need not agree on how many
// exchanges their setup makes, and a node whose setup failed does not leave
// the others waiting.
#pragma once

#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"

namespace tutti {

class node_bootstrap final : public bootstrap {
public:
    // members: the parent's ranks on this node, ascending, this rank among
    // them; they become ranks 0..members.size()-1 here. job_id names this
    // node's part of the job (shared-memory segments), distinct per node.
    // Throws tutti::error (errc::invalid_argument) for members that do not
    // fit the parent.
    node_bootstrap(bootstrap& parent, std::vector<int> members, std::string job_id);
    ~node_bootstrap() override = default;

    node_bootstrap(const node_bootstrap&) = delete;
    node_bootstrap& operator=(const node_bootstrap&) = delete;

    int rank() const noexcept override { return rank_; }
    int size() const noexcept override { return static_cast<int>(members_.size()); }
    const std::string& job_id() const noexcept override { return job_id_; }
    const std::string& node() const noexcept override { return parent_.node(); }
    std::string_view method() const noexcept override { return parent_.method(); }
    std::string reachable_address() const override { return parent_.reachable_address(); }

    // Collective over this node's ranks, made of one parent all_gather that
    // every rank of the job joins (through all_gather or leave()). A node
    // peer that left already is an error (errc::invalid_argument): the
    // node's ranks must make the same exchanges.
    std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> mine) override;

    // Takes part in the parent's exchanges until every rank of the job has
    // left. Every rank of the parent calls it exactly once, after its last
    // all_gather here, also when its setup failed; the parent's timeout bounds
    // each round. No all_gather is allowed afterwards.
    void leave();

    // The parent's rank of each rank here.
    const std::vector<int>& members() const noexcept { return members_; }

private:
    bootstrap& parent_;
    std::vector<int> members_;
    std::string job_id_;
    int rank_ = 0;
    bool left_ = false;
};

} // namespace tutti
