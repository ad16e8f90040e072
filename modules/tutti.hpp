// The whole public API in one header, for builds that do not use modules.
// `import tutti;` (modules/tutti.cppm) exports exactly what this includes.
#pragma once

#include "algorithms/args.hpp"
#include "algorithms/catalog.hpp"
#include "algorithms/collectives.hpp"
#include "algorithms/dispatch.hpp"
#include "algorithms/restriction.hpp"
#include "core/call_context.hpp"
#include "core/collective.hpp"
#include "core/communicator.hpp"
#include "core/error.hpp"
#include "core/generation.hpp"
#include "core/payload.hpp"
#include "core/reduction.hpp"
#include "core/request.hpp"
#include "core/task.hpp"
#include "core/transport.hpp"
#include "core/wait.hpp"
#include "select/choose.hpp"
#include "transports/inproc/inproc.hpp"
