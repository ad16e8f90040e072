// tutti-info's parts, as functions the tests call: the catalog, the
// transports, the topology summary and a selection's explanation, each as
// text for people or as JSON for programs.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tutti.hpp"

namespace tutti::info {

// A call described on the command line, for --explain.
struct call_description {
    std::string collective;
    int ranks = 2;
    std::uint64_t bytes = 8;
    bool bytes_given = false;    // --bytes on the command line, refused where calls carry no size
    std::uint64_t count = 0;     // elements; 0: bytes / 8 (8-byte elements)
    int ranks_per_node = 0;      // 0: every rank on one node
    unsigned line_ns = 0;        // a line there and back between the cores; 0: unknown
    unsigned readv_percent = 0;  // process_vm_readv against the cells; 0: unknown
    unsigned ranks_per_core = 0; // ranks each core runs; 0: unknown
    int nodes = 0;
    std::string op = "sum"; // sum, prod, min, max, user, noncommutative
    bool in_place = false;
    std::string transport = "shm";
    bool single_copy = false;
    // The transport judged its single copy slow; a shm call also is where
    // readv_percent exceeds the shm transport's rule, as a shm job judges.
    bool slow_single_copy = false;
    bool hierarchy = false;
    bool interleaved_nodes = false; // ranks of a node not consecutive
    bool unequal_counts = false;
    std::string algorithm; // as tutti::use(name)
    bool sub_call = false; // as a composition's sub-call
};

// The signature selection sees for the described call; throws tutti::error
// (invalid_argument) for an unknown collective, operation or transport.
call_signature signature_of(const call_description& d);

// CPU nanoseconds per choice for this call, averaged over `iterations`: what
// a dispatch pays on every call to pick its algorithm (the environment's
// settings, the decision cache or the tree walk, the typed lookup). With
// `walk` the calls alternate between two signatures, so none is served by
// the decision cache of the call before.
double selection_cost_ns(const call_signature& call, const selection_request& request,
                         int iterations, bool walk);

nlohmann::json to_json(const selection_explanation& why);
// A transport's capabilities, the same keys wherever tutti-info prints them.
nlohmann::json capabilities_json(const transport_capabilities& c);
nlohmann::json catalog_json();
std::string catalog_text();
nlohmann::json transports_json();
std::string transports_text();
nlohmann::json topology_json();
std::string topology_text();

} // namespace tutti::info
