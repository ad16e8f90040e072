// The tutti module: `import tutti;` gives the whole public API. The headers
// are the source of truth; this unit includes them in the global module
// fragment and exports their public names, so the module and header builds
// cannot drift apart in behaviour.
module;

#include "tutti.hpp"

export module tutti;

export namespace tutti {
// runtime and errors
using tutti::errc;
using tutti::error;
using tutti::spawn;
using tutti::task;
using tutti::to_string;
using tutti::wait;
// jobs of several processes
using tutti::bootstrap;
using tutti::job;
using tutti::job_options;
using tutti::join_job;
// buffers the other ranks of a node can map (large messages: one copy)
using tutti::allocate_shared;
using tutti::copy_bytes;
using tutti::deallocate_shared;
using tutti::find_shared_region;
using tutti::shared_allocator;
using tutti::shared_memory_usage;
using tutti::shared_region_ref;
using tutti::shared_usage;
using tutti::shared_vector;
} // namespace tutti
// how a job reaches each peer: shared memory on its node, TCP elsewhere
export namespace tutti::routed {
using tutti::routed::choice;
using tutti::routed::route;
using tutti::routed::routing_table;
using tutti::routed::to_string;
} // namespace tutti::routed
export namespace tutti {
// communicators and generations
using tutti::call_options;
using tutti::communicator;
using tutti::generation;
using tutti::root;
using tutti::undefined_color;
using tutti::use;
// collectives
using tutti::all_collectives;
using tutti::all_gather;
using tutti::all_reduce;
using tutti::all_to_all;
using tutti::all_to_allv;
using tutti::barrier;
using tutti::broadcast;
using tutti::collective;
using tutti::exscan;
using tutti::gather;
using tutti::reduce;
using tutti::reduce_scatter;
using tutti::scan;
using tutti::scatter;
// reduction operations
using tutti::bit_and;
using tutti::bit_or;
using tutti::bit_xor;
using tutti::commutativity;
using tutti::logical_and;
using tutti::logical_or;
using tutti::logical_xor;
using tutti::make_op;
using tutti::max;
using tutti::min;
using tutti::prod;
using tutti::reduction_op;
using tutti::sum;
using tutti::user_op;
// payloads
using tutti::byte_range;
using tutti::serializable;
using tutti::trivially_copyable;
// writing and registering algorithms
using tutti::algorithm;
using tutti::algorithm_function;
using tutti::algorithm_info;
using tutti::algorithm_kind;
using tutti::algorithms;
using tutti::call_context;
using tutti::call_signature;
using tutti::catalog;
using tutti::check;
using tutti::choose;
using tutti::parameter;
using tutti::register_algorithm;
using tutti::request;
using tutti::restriction;
using tutti::run_collective;
using tutti::send_awaited;
using tutti::receive_use;
using tutti::signature_of;
using tutti::transport;
using tutti::wait_all;
// selection: restrictions, decision trees, overrides, explanations
using tutti::algorithm_choice;
using tutti::all_gather_args;
using tutti::all_reduce_args;
using tutti::all_restriction_kinds;
using tutti::all_to_all_args;
using tutti::all_to_allv_args;
using tutti::barrier_args;
using tutti::broadcast_args;
using tutti::builtin_tree_text;
using tutti::composition_tree;
using tutti::decision_tree;
using tutti::explain;
using tutti::exscan_args;
using tutti::fallback;
using tutti::fallback_mode;
using tutti::flat_choice;
using tutti::gather_args;
using tutti::holds;
using tutti::is_flag;
using tutti::pure_tree;
using tutti::reduce_args;
using tutti::reduce_scatter_args;
using tutti::reload_selection;
using tutti::restriction_from_string;
using tutti::restriction_kind;
using tutti::scan_args;
using tutti::scatter_args;
using tutti::select_algorithm;
using tutti::selection_debug;
using tutti::selection_explanation;
using tutti::selection_request;
using tutti::tree_role;
using tutti::tree_transports;
// hierarchies: the HPX arity tree and trees from colours
using tutti::arity_options;
using tutti::default_max_representative_bytes;
using tutti::hierarchy;
using tutti::hierarchy_options;
using tutti::make_arity_hierarchy;
using tutti::make_hierarchy;
} // namespace tutti

// Found by argument-dependent lookup from Asio's templates as they are
// instantiated in a user's translation unit; clang discards global-module
// declarations the module does not name, so it must be named here.
export namespace asio::error {
using asio::error::make_error_code;
} // namespace asio::error

export namespace tutti::shm {
using tutti::shm::counters;
using tutti::shm::options;
} // namespace tutti::shm

export namespace tutti::detail {
using tutti::detail::classify_site;
using tutti::detail::get_top_level_groups;
using tutti::detail::rank_groups;
using tutti::detail::site_class;
} // namespace tutti::detail

// the machine: hwloc discovery, localities, the machine tree
export namespace tutti::topology {
using tutti::topology::cache;
using tutti::topology::colours_of;
using tutti::topology::default_levels;
using tutti::topology::describe;
using tutti::topology::discover;
using tutti::topology::exchange;
using tutti::topology::from_xml;
using tutti::topology::here;
using tutti::topology::level;
using tutti::topology::locality;
using tutti::topology::machine;
using tutti::topology::machine_levels;
using tutti::topology::make_machine_hierarchy;
using tutti::topology::node_name;
using tutti::topology::place;
using tutti::topology::placement;
using tutti::topology::pu_place;
using tutti::topology::synthetic;
using tutti::topology::to_string;
using tutti::topology::tree_colours;
} // namespace tutti::topology

export namespace tutti::inproc {
using tutti::inproc::run;
using tutti::inproc::run_threads;
using tutti::inproc::world;
} // namespace tutti::inproc
