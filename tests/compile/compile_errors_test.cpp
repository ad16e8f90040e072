// Mistakes a user makes in code that tutti must reject at compile time with
// an error that names the mistake, not a page of template instantiations.
// Each case compiles a small file with the very command that builds one of
// the suite's tests (from compile_commands.json), once with the mistake and
// once without: the second compile shows that the first fails because of the
// mistake, and not because the command is wrong.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

struct compiled {
    int status = -1;
    std::string output;
};

// The command and folder that compile a test of the suite which includes
// tutti.hpp, as the build recorded them.
struct recorded_command {
    std::string directory;
    std::vector<std::string> words;
};

recorded_command command_of_a_suite_test() {
    const char* path = std::getenv("TUTTI_COMPILE_COMMANDS");
    REQUIRE_MESSAGE(path != nullptr, "TUTTI_COMPILE_COMMANDS must name compile_commands.json");
    std::ifstream in(path);
    REQUIRE_MESSAGE(in.good(), "cannot read " << path);
    const auto all = nlohmann::json::parse(in);
    for (const auto& entry : all) {
        const auto file = entry.at("file").get<std::string>();
        if (!file.ends_with("tests/core/call_object_test.cpp")) continue;
        recorded_command c{entry.at("directory").get<std::string>(), {}};
        std::istringstream words(entry.at("command").get<std::string>());
        for (std::string w; words >> w;) {
            // Meson writes no quotes for these flags; with quotes, splitting
            // at spaces would be wrong.
            REQUIRE_MESSAGE(w.find_first_of("'\"") == std::string::npos,
                            "a quoted word in the recorded command: " << w);
            c.words.push_back(w);
        }
        return c;
    }
    FAIL("compile_commands.json has no command for tests/core/call_object_test.cpp");
    return {};
}

// Compiles `source` (syntax only) with the recorded command and extra flags.
compiled compile(const std::string& source, const std::string& extra_flags) {
    static const recorded_command recorded = command_of_a_suite_test();
    auto file = std::filesystem::temp_directory_path() /
                ("tutti-compile-error-" + std::to_string(getpid()) + ".cpp");
    {
        std::ofstream out(file);
        out << source;
    }
    std::string command = "cd '" + recorded.directory + "' &&";
    const auto& w = recorded.words;
    for (std::size_t i = 0; i < w.size(); ++i) {
        // Keep the flags; drop the outputs, the dependency file and the source.
        if (w[i] == "-o" || w[i] == "-MQ" || w[i] == "-MF" || w[i] == "-c") {
            ++i;
            continue;
        }
        if (w[i] == "-MD" || w[i] == "-fcolor-diagnostics") continue;
        command += " " + w[i];
    }
    command +=
        " -fsyntax-only -fno-color-diagnostics " + extra_flags + " '" + file.string() + "' 2>&1";
    compiled c;
    FILE* pipe = popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    char buffer[4096];
    while (std::fgets(buffer, sizeof buffer, pipe))
        c.output += buffer;
    const int raw = pclose(pipe);
    c.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128;
    std::filesystem::remove(file);
    return c;
}

// Compiles `source` with -DMISTAKE and without: the first must fail with
// one error, which says `message`; the second must compile.
void check_rejected(const std::string& source, const std::string& message) {
    const auto wrong = compile(source, "-DMISTAKE");
    CAPTURE(wrong.output);
    CHECK(wrong.status != 0);
    CHECK(wrong.output.find(message) != std::string::npos);
    // That error alone: no cascade of others before or after it.
    std::size_t errors = 0;
    for (auto at = wrong.output.find(" error: "); at != std::string::npos;
         at = wrong.output.find(" error: ", at + 1))
        ++errors;
    CHECK(errors == 1);
    const auto right = compile(source, "");
    CAPTURE(right.output);
    CHECK(right.status == 0);
}

} // namespace

TEST_CASE("a tutti::task that co_awaits an asio::awaitable is rejected, saying what to do") {
    check_rejected(R"(
#include "tutti.hpp"
asio::awaitable<int> asio_work() { co_return 1; }
tutti::task<int> tutti_work() { co_return 2; }
asio::awaitable<int> from_asio() { co_return co_await asio_work(); }
tutti::task<int> from_tutti() {
#ifdef MISTAKE
    co_return co_await asio_work();
#else
    co_return co_await tutti_work();
#endif
}
)",
                   "tutti: a tutti::task cannot co_await an asio::awaitable");
}
