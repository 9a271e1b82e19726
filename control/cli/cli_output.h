// SPDX-License-Identifier: Apache-2.0
// sluicectl's human output: aligned tables and one-line summaries built from
// the daemon's result objects (control_protocol.h, the spec of each verb).
// Pure functions of their input. A field the daemon left out or sent with
// another type prints as "-" rather than failing, so a newer or older daemon
// still gets readable output; --json shows the result exactly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_args.h"
#include "clock.h"  // utc_time
#include "result.h"

namespace sluice::cli {

// Rates at a glance: "0", "0.4", "950", "1.2k", "34k", "3.4M", "120G".
std::string human_rate(double per_second);
// The two largest units: "12s", "5m 3s", "2h 5m", "3d 4h".
std::string human_duration(double seconds);

// Columns separated by two spaces, each as wide as its widest cell; trailing
// blanks trimmed.
class Table {
  public:
    enum class Align { left, right };

    // `align` may be shorter than `headers`: the rest align left.
    explicit Table(std::vector<std::string> headers, std::vector<Align> align = {});
    void add_row(std::vector<std::string> cells);
    // One line per row, header first, each ending in '\n'.
    std::vector<std::string> lines() const;
    std::string render() const;

  private:
    std::vector<std::string> headers_;
    std::vector<Align> align_;
    std::vector<std::vector<std::string>> rows_;
};

std::string format_status(const nlohmann::json& result);
std::string format_attach(const nlohmann::json& result);
std::string format_detach(const nlohmann::json& result);
// policy push and policy rollback.
std::string format_push(const nlohmann::json& result, bool dry_run);
// The policy text itself, so `policy show > file` round-trips; an error when
// the result carries no text.
Result<std::string> format_policy_show(const nlohmann::json& result, bool source);
std::string format_history(const nlohmann::json& result);
std::string format_diff(const nlohmann::json& result);
// Per interface: decision cost, then pass and drop rates by class with the
// drop rate split by reason.
std::string format_stats(const nlohmann::json& result);
// The most-dropped sources, ranked, under a line with the total drop rate.
std::string format_top(const nlohmann::json& result);
// ban: what was banned until when (and, for a re-ban, what was kept).
std::string format_ban(const nlohmann::json& result);
std::string format_unban(const nlohmann::json& result);
// The bans in force: prefix, expiry, time left, reason, who, forced, drops.
std::string format_bans(const nlohmann::json& result);

// The human output for `invocation`'s command.
Result<std::string> format_result(const Invocation& invocation, const nlohmann::json& result);

}  // namespace sluice::cli
