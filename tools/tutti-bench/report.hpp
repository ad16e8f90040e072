// What tutti-bench and the MPI reference print and write, shared so that
// their files have the same columns: a table on stdout and a CSV file as rows
// complete, a JSON file at the end, and a progress line on stderr.
// Only rank 0 makes a report.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "method.hpp"

namespace tutti_bench {

// The CSV columns, in order (the JSON rows use the same keys).
inline constexpr const char* csv_columns[] = {
    "implementation", "label",  "transport",  "collective",   "algorithm", "chosen",
    "ranks",          "bytes",  "iterations", "warmup",       "buffers",   "avg_us",
    "min_us",         "max_us", "algbw_GBps", "iteration_us", "valid"};

// Describes the run for the JSON file's head.
struct run_info {
    std::string tool;
    std::string implementation;
    std::string transport;
    std::string launch;
    int ranks = 0;
    std::vector<std::string> command;
    // The series' name where --label gives none (tutti-shared, say); empty:
    // the implementation's.
    std::string label = {};
    // How the calls are made, where the program offers a choice (tutti-bench
    // --form); empty where it does not.
    std::string form = {};
};

class report {
public:
    report(const settings& s, run_info info);

    // Creates the files asked for (so a path that cannot be written is known
    // before the sweep; throws std::runtime_error naming it), then prints
    // the table's header.
    void begin();
    // Prints the row, keeps it for the JSON file and rewrites the CSV file,
    // so the rows so far survive a run that is killed (a timeout).
    void add(const row& r);
    // A collective and size that did not run (the algorithm does not apply).
    void skip(const std::string& collective, std::size_t bytes, const std::string& reason);
    // Writes the JSON file that was asked for. These three throw
    // std::runtime_error naming a file that cannot be written.
    void finish();

    const std::vector<row>& rows() const noexcept { return rows_; }

private:
    void write_csv() const;

    const settings& settings_;
    run_info info_;
    std::vector<row> rows_;
    std::vector<std::string> skipped_;
};

// "[3/24] all_reduce 1 MiB" on stderr while a sweep runs: rewritten in place
// on a terminal, one line per step otherwise (when asked for with
// --progress); nothing with --quiet.
class progress {
public:
    progress(const settings& s, std::size_t steps);
    void step(const std::string& what);
    void done();

private:
    bool enabled_ = false;
    bool terminal_ = false;
    std::size_t steps_ = 0;
    std::size_t current_ = 0;
    clock_type::time_point start_ = clock_type::now();
};

} // namespace tutti_bench
