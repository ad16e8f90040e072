// The one place that includes Asio. Asio 1.22 does not detect clang's
// coroutine support, so it is switched on here before the first include;
// every tutti file reaches Asio through this header so the settings agree.
#pragma once

#ifndef ASIO_HAS_CO_AWAIT
#define ASIO_HAS_CO_AWAIT 1
#endif
#ifndef ASIO_HAS_STD_COROUTINE
#define ASIO_HAS_STD_COROUTINE 1
#endif

#include <coroutine>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/dispatch.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
