// The table, the CSV and JSON files, and the progress line (see report.hpp).
#include "report.hpp"

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tutti_bench {

namespace {

// CSV fields never hold commas or quotes except in a skip reason, which is
// not written to CSV; quote anyway so a label with a comma stays one field.
std::string csv_field(const std::string& text) {
    if (text.find_first_of(",\"\n") == std::string::npos) return text;
    std::string quoted = "\"";
    for (char c : text) {
        if (c == '"') quoted += '"';
        quoted += c;
    }
    return quoted + "\"";
}

nlohmann::json to_json(const row& r) {
    return {{"implementation", r.implementation},
            {"label", r.label},
            {"transport", r.transport},
            {"collective", r.collective},
            {"algorithm", r.algorithm},
            {"chosen", r.chosen},
            {"ranks", r.ranks},
            {"bytes", r.bytes},
            {"iterations", r.iterations},
            {"warmup", r.warmup},
            {"buffers", r.buffers},
            {"avg_us", r.avg_us},
            {"min_us", r.min_us},
            {"max_us", r.max_us},
            {"algbw_GBps", r.algbw_gbps},
            {"iteration_us", r.iteration_us},
            {"valid", r.valid}};
}

std::string utc_now() {
    const std::time_t now = std::time(nullptr);
    std::tm parts{};
    gmtime_r(&now, &parts);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
    return text;
}

void write_file(const std::string& path, const std::string& contents) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + path);
    out << contents;
    out.close();
    if (!out) throw std::runtime_error("cannot write " + path);
}

} // namespace

report::report(const settings& s, run_info info) : settings_(s), info_(std::move(info)) {}

void report::write_csv() const {
    if (settings_.csv.empty()) return;
    std::string text;
    for (std::size_t i = 0; i < std::size(csv_columns); ++i)
        text += std::string(i ? "," : "") + csv_columns[i];
    text += '\n';
    for (const auto& r : rows_)
        text += fmt::format(
            "{},{},{},{},{},{},{},{},{},{},{},{:.4f},{:.4f},{:.4f},{:.6f},{:.4f},{}\n",
            csv_field(r.implementation), csv_field(r.label), csv_field(r.transport), r.collective,
            csv_field(r.algorithm), csv_field(r.chosen), r.ranks, r.bytes, r.iterations, r.warmup,
            r.buffers, r.avg_us, r.min_us, r.max_us, r.algbw_gbps, r.iteration_us, r.valid);
    write_file(settings_.csv, text);
}

void report::begin() {
    write_csv();
    if (!settings_.json.empty()) write_file(settings_.json, "");
    fmt::print(
        "# {}: {}{}{}{} over {}, {} ranks ({}); latency in µs: per-rank mean over the timed "
        "calls,\n# average/min/max over ranks; algbw = bytes / max; iter = the slowest rank's wall "
        "time per\n# timed iteration (the benchmark's barrier, the call, the loop)\n",
        info_.tool, info_.implementation,
        info_.form.empty() ? "" : fmt::format(", {} form", info_.form),
        settings_.op == reduction::sum ? "" : ", reductions composing affine maps (--op compose)",
        settings_.misalign ? fmt::format(", receive buffers {} bytes into a page (--misalign)",
                                         *settings_.misalign)
                           : "",
        info_.transport, info_.ranks, info_.launch);
    fmt::print("{:<15}{:<22}{:>10}{:>7}{:>12}{:>12}{:>12}{:>10}{:>10}{:>7}\n", "collective",
               "algorithm", "bytes", "iters", "avg_us", "min_us", "max_us", "GB/s", "iter_us",
               "valid");
    std::fflush(stdout);
}

void report::add(const row& r) {
    const std::string algorithm =
        r.chosen.empty() || r.chosen == r.algorithm ? r.algorithm : r.algorithm + ":" + r.chosen;
    fmt::print("{:<15}{:<22}{:>10}{:>7}{:>12.2f}{:>12.2f}{:>12.2f}{:>10.3f}{:>10.2f}{:>7}\n",
               r.collective, algorithm, human_bytes(r.bytes), r.iterations, r.avg_us, r.min_us,
               r.max_us, r.algbw_gbps, r.iteration_us, r.valid);
    std::fflush(stdout);
    rows_.push_back(r);
    write_csv();
}

void report::skip(const std::string& collective, std::size_t bytes, const std::string& reason) {
    fmt::print("{:<15}{:<22}{:>10}  skipped: {}\n", collective, "", human_bytes(bytes), reason);
    std::fflush(stdout);
    skipped_.push_back(fmt::format("{} {}: {}", collective, human_bytes(bytes), reason));
}

void report::finish() {
    if (!settings_.json.empty()) {
        nlohmann::json doc;
        doc["tool"] = info_.tool;
        doc["implementation"] = info_.implementation;
        doc["label"] = !settings_.label.empty() ? settings_.label
                       : !info_.label.empty()   ? info_.label
                                                : info_.implementation;
        if (!info_.form.empty()) doc["form"] = info_.form;
        doc["transport"] = info_.transport;
        doc["launch"] = info_.launch;
        doc["ranks"] = info_.ranks;
        doc["finished"] = utc_now();
        doc["command"] = info_.command;
        doc["settings"] = {{"sizes", settings_.sizes},
                           {"max_iterations", settings_.max_iterations},
                           {"min_iterations", settings_.min_iterations},
                           {"budget_bytes", settings_.budget},
                           {"warmup", settings_.warmup},
                           {"time_limit_s", settings_.time_limit},
                           {"buffers", settings_.buffers},
                           {"rewrite", settings_.rewrite},
                           {"pool_limit_bytes", settings_.pool_limit},
                           {"validate", settings_.validate},
                           {"root", settings_.root},
                           {"op", settings_.given.op},
                           // null: the buffers where the allocator put them
                           {"misalign", settings_.misalign ? nlohmann::json(*settings_.misalign)
                                                           : nlohmann::json()}};
        doc["results"] = nlohmann::json::array();
        for (const auto& r : rows_)
            doc["results"].push_back(to_json(r));
        doc["skipped"] = skipped_;
        write_file(settings_.json, doc.dump(2) + "\n");
    }
}

progress::progress(const settings& s, std::size_t steps)
    : enabled_(!s.quiet && (s.progress || isatty(STDERR_FILENO))), terminal_(isatty(STDERR_FILENO)),
      steps_(steps) {}

void progress::step(const std::string& what) {
    if (!enabled_) return;
    ++current_;
    const double elapsed = std::chrono::duration<double>(clock_type::now() - start_).count();
    const std::string line =
        fmt::format("[{}/{}] {} ({:.0f} s elapsed)", current_, steps_, what, elapsed);
    if (terminal_)
        fmt::print(stderr, "\r\033[K{}", line);
    else
        fmt::print(stderr, "{}\n", line);
    std::fflush(stderr);
}

void progress::done() {
    if (!enabled_) return;
    const double elapsed = std::chrono::duration<double>(clock_type::now() - start_).count();
    if (terminal_)
        fmt::print(stderr, "\r\033[Kdone: {} steps in {:.1f} s\n", steps_, elapsed);
    else
        fmt::print(stderr, "done: {} steps in {:.1f} s\n", steps_, elapsed);
    std::fflush(stderr);
}

} // namespace tutti_bench
