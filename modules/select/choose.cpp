#include "select/choose.hpp"

namespace tutti {

template <class Args>
const algorithm<Args>& choose(const call_signature& call, const selection_request& request,
                              selection_explanation* why) {
    return catalog::typed<Args>(select_algorithm(call, request, why));
}

template <class Args>
const algorithm<Args>& choose(const call_signature& call, std::string_view forced) {
    return choose<Args>(call, selection_request{.forced = forced, .sub_call = true});
}

template const algorithm<barrier_args>& choose(const call_signature&, const selection_request&,
                                               selection_explanation*);
template const algorithm<barrier_args>& choose(const call_signature&, std::string_view);
template const algorithm<broadcast_args>& choose(const call_signature&, const selection_request&,
                                                 selection_explanation*);
template const algorithm<broadcast_args>& choose(const call_signature&, std::string_view);
template const algorithm<reduce_args>& choose(const call_signature&, const selection_request&,
                                              selection_explanation*);
template const algorithm<reduce_args>& choose(const call_signature&, std::string_view);
template const algorithm<all_reduce_args>& choose(const call_signature&, const selection_request&,
                                                  selection_explanation*);
template const algorithm<all_reduce_args>& choose(const call_signature&, std::string_view);
template const algorithm<gather_args>& choose(const call_signature&, const selection_request&,
                                              selection_explanation*);
template const algorithm<gather_args>& choose(const call_signature&, std::string_view);
template const algorithm<scatter_args>& choose(const call_signature&, const selection_request&,
                                               selection_explanation*);
template const algorithm<scatter_args>& choose(const call_signature&, std::string_view);
template const algorithm<all_gather_args>& choose(const call_signature&, const selection_request&,
                                                  selection_explanation*);
template const algorithm<all_gather_args>& choose(const call_signature&, std::string_view);
template const algorithm<all_to_all_args>& choose(const call_signature&, const selection_request&,
                                                  selection_explanation*);
template const algorithm<all_to_all_args>& choose(const call_signature&, std::string_view);
template const algorithm<all_to_allv_args>& choose(const call_signature&, const selection_request&,
                                                   selection_explanation*);
template const algorithm<all_to_allv_args>& choose(const call_signature&, std::string_view);
template const algorithm<reduce_scatter_args>&
choose(const call_signature&, const selection_request&, selection_explanation*);
template const algorithm<reduce_scatter_args>& choose(const call_signature&, std::string_view);
template const algorithm<scan_args>& choose(const call_signature&, const selection_request&,
                                            selection_explanation*);
template const algorithm<scan_args>& choose(const call_signature&, std::string_view);
template const algorithm<exscan_args>& choose(const call_signature&, const selection_request&,
                                              selection_explanation*);
template const algorithm<exscan_args>& choose(const call_signature&, std::string_view);

} // namespace tutti
