// Shared by the selection tests: environment variables set for one scope and
// restored after it (selection re-reads them), stderr captured for a scope,
// and signatures for a call.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include "support/harness.hpp"

namespace tutti::testing {

// Sets (or with nullopt unsets) variables until destroyed, then restores
// what was there; selection reads the environment again both times.
class scoped_env {
public:
    scoped_env(std::initializer_list<std::pair<std::string, std::optional<std::string>>> vars) {
        for (const auto& [name, value] : vars) {
            const char* old = std::getenv(name.c_str());
            saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
            set(name, value);
        }
        reload();
    }
    ~scoped_env() {
        for (const auto& [name, value] : saved_)
            set(name, value);
        reload();
    }
    scoped_env(const scoped_env&) = delete;
    scoped_env& operator=(const scoped_env&) = delete;

private:
    static void set(const std::string& name, const std::optional<std::string>& value) {
        if (value)
            ::setenv(name.c_str(), value->c_str(), 1);
        else
            ::unsetenv(name.c_str());
    }
    // A bad setting is the test's business: it throws at the first call.
    static void reload() {
        try {
            reload_selection();
        } catch (const tutti::error&) {
        }
    }
    std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// What the process writes on stderr while it lives.
class captured_stderr {
public:
    captured_stderr() {
        std::fflush(stderr);
        file_ = std::tmpfile();
        saved_ = ::dup(2);
        ::dup2(::fileno(file_), 2);
    }
    ~captured_stderr() {
        restore();
        std::fclose(file_);
    }
    std::string text() {
        restore();
        std::string out;
        std::rewind(file_);
        char buffer[4096];
        for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, file_)) > 0;)
            out.append(buffer, n);
        return out;
    }

private:
    void restore() {
        if (saved_ < 0) return;
        std::fflush(stderr);
        ::dup2(saved_, 2);
        ::close(saved_);
        saved_ = -1;
    }
    std::FILE* file_ = nullptr;
    int saved_ = -1;
};

inline bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

} // namespace tutti::testing
