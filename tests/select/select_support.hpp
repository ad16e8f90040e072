// Shared by the selection tests: environment variables set for one scope and
// restored after it (selection re-reads them), stderr captured for a scope,
// and the signature of the calls the algorithm sweeps make.
#pragma once

#include <cctype>
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

// The signature of the calls matrix_test and allocation_test make: blocks of
// n 64-bit integers; a reduce_scatter gives rank j j % 2 + 1 elements, or n
// each with equal_shares; all_to_allv's counts differ between ranks.
inline call_signature signature_for(collective kind, int p, bool hierarchy, std::size_t n,
                                    bool equal_shares = false) {
    call_signature s{.kind = kind, .comm_size = p, .bytes = n * 8, .has_hierarchy = hierarchy};
    if (kind == collective::reduce || kind == collective::all_reduce ||
        kind == collective::reduce_scatter || kind == collective::scan ||
        kind == collective::exscan) {
        s.has_op = true;
        s.count = kind == collective::reduce_scatter
                      ? (equal_shares ? n * static_cast<std::size_t>(p)
                                      : static_cast<std::size_t>(p + p / 2))
                      : n;
        s.equal_counts = kind != collective::reduce_scatter || p == 1 || equal_shares;
    }
    if (kind == collective::all_to_allv) s.equal_counts = false;
    return s;
}

// The variable that forces an algorithm: TUTTI_<COLLECTIVE>_ALGORITHM for a
// pure one, _COMPOSITION for a composition.
inline std::string override_variable(collective kind, const algorithm_info& info) {
    std::string name = "TUTTI_";
    for (char c : to_string(kind))
        name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return name + (info.form != algorithm_kind::pure ? "_COMPOSITION" : "_ALGORITHM");
}

// A wrong result, thrown so that the rank's failure ends its in-process world.
inline void expect(bool ok, const char* what) {
    if (!ok) throw tutti::error(errc::invalid_argument, std::string("wrong result: ") + what);
}

inline bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

} // namespace tutti::testing
