// The tutti module: `import tutti;` gives the whole public API. The headers
// are the source of truth; this unit includes them in the global module
// fragment and exports their public names, so the module and header builds
// cannot drift apart in behaviour.
module;

#include "tutti.hpp"

export module tutti;

export namespace tutti {
// runtime and errors
using tutti::task;
using tutti::wait;
using tutti::error;
using tutti::errc;
using tutti::to_string;
// jobs of several processes
using tutti::job;
using tutti::job_options;
using tutti::bootstrap;
using tutti::join_job;
// communicators and generations
using tutti::communicator;
using tutti::undefined_color;
using tutti::generation;
using tutti::root;
using tutti::use;
using tutti::call_options;
// collectives
using tutti::collective;
using tutti::all_collectives;
using tutti::barrier;
using tutti::broadcast;
using tutti::reduce;
using tutti::all_reduce;
using tutti::gather;
using tutti::scatter;
using tutti::all_gather;
using tutti::all_to_all;
using tutti::all_to_allv;
using tutti::reduce_scatter;
using tutti::scan;
using tutti::exscan;
// reduction operations
using tutti::commutativity;
using tutti::make_op;
using tutti::user_op;
using tutti::reduction_op;
using tutti::sum;
using tutti::prod;
using tutti::min;
using tutti::max;
using tutti::bit_and;
using tutti::bit_or;
using tutti::bit_xor;
using tutti::logical_and;
using tutti::logical_or;
using tutti::logical_xor;
// payloads
using tutti::trivially_copyable;
using tutti::byte_range;
using tutti::serializable;
// writing and registering algorithms
using tutti::call_context;
using tutti::request;
using tutti::wait_all;
using tutti::transport;
using tutti::algorithm;
using tutti::algorithm_info;
using tutti::algorithm_kind;
using tutti::algorithm_function;
using tutti::parameter;
using tutti::catalog;
using tutti::algorithms;
using tutti::register_algorithm;
using tutti::restriction;
using tutti::call_signature;
using tutti::check;
using tutti::choose;
using tutti::run_collective;
using tutti::signature_of;
using tutti::default_preference;
using tutti::barrier_args;
using tutti::broadcast_args;
using tutti::reduce_args;
using tutti::all_reduce_args;
using tutti::gather_args;
using tutti::scatter_args;
using tutti::all_gather_args;
using tutti::all_to_all_args;
using tutti::all_to_allv_args;
using tutti::reduce_scatter_args;
using tutti::scan_args;
using tutti::exscan_args;
} // namespace tutti

// Found by argument-dependent lookup from Asio's templates as they are
// instantiated in a user's translation unit; clang discards global-module
// declarations the module does not name, so it must be named here.
export namespace asio::error {
using asio::error::make_error_code;
} // namespace asio::error

export namespace tutti::shm {
using tutti::shm::options;
using tutti::shm::counters;
} // namespace tutti::shm

export namespace tutti::inproc {
using tutti::inproc::run;
using tutti::inproc::run_threads;
using tutti::inproc::world;
} // namespace tutti::inproc
