// Precompiled once per program that lists it as cpp_pch (meson.build): the
// library's headers, Asio and Boost.Serialization take some 5 s of each
// translation unit's 9-15 s to parse, in each of a hundred files, twice in
// CI (the normal and the sanitizer build). Sources still include what they
// use; this header only makes the parse of those includes free.
// doctest stays out: a test's main defines DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
// before including it, which must be the first inclusion to take effect.
#pragma once

#include "tutti.hpp"
