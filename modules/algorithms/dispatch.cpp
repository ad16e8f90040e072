#include "algorithms/dispatch.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "select/choose.hpp"

namespace tutti::detail {

call_context begin_call(const communicator& comm, collective kind, const call_options& options) {
    if (!comm.valid())
        throw error(errc::invalid_argument,
                    fmt::format("{} on an empty communicator (a split with undefined_color gives "
                                "one); it has no ranks to talk to",
                                to_string(kind)));
    const auto generation =
        comm.claim_generation(options.generation ? &*options.generation : nullptr);
    return call_context(comm, generation, kind, "call");
}

void check_root(const communicator& comm, collective kind, int root) {
    if (root < 0 || root >= comm.size())
        throw error(errc::invalid_root,
                    fmt::format("{}: root {} is out of range for a communicator of {} ranks",
                                to_string(kind), root, comm.size()));
}

template <class Args>
task<void> run_phase(const call_context& call, unsigned phase, const Args& args,
                     const call_signature& signature, std::string_view forced) {
    const auto& chosen = choose<Args>(signature, forced);
    co_await chosen.run(call.phase(phase, chosen.info.name), args);
}

template task<void> run_phase(const call_context&, unsigned, const barrier_args&,
                              const call_signature&, std::string_view);
template task<void> run_phase(const call_context&, unsigned, const broadcast_args&,
                              const call_signature&, std::string_view);
template task<void> run_phase(const call_context&, unsigned, const reduce_args&,
                              const call_signature&, std::string_view);
template task<void> run_phase(const call_context&, unsigned, const all_reduce_args&,
                              const call_signature&, std::string_view);
template task<void> run_phase(const call_context&, unsigned, const gather_args&,
                              const call_signature&, std::string_view);
template task<void> run_phase(const call_context&, unsigned, const scatter_args&,
                              const call_signature&, std::string_view);
template task<void> run_phase(const call_context&, unsigned, const all_gather_args&,
                              const call_signature&, std::string_view);
template task<void> run_phase(const call_context&, unsigned, const all_to_all_args&,
                              const call_signature&, std::string_view);
template task<void> run_phase(const call_context&, unsigned, const all_to_allv_args&,
                              const call_signature&, std::string_view);
template task<void> run_phase(const call_context&, unsigned, const reduce_scatter_args&,
                              const call_signature&, std::string_view);
template task<void> run_phase(const call_context&, unsigned, const scan_args&,
                              const call_signature&, std::string_view);
template task<void> run_phase(const call_context&, unsigned, const exscan_args&,
                              const call_signature&, std::string_view);

} // namespace tutti::detail
