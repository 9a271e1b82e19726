// SPDX-License-Identifier: Apache-2.0
// sluiced's logs: one logfmt line per event on stderr,
//   ts=2026-12-02T13:30:00.123Z level=info msg="attached" interface=sl0 mode=native
// so journald, `grep level=error` and log shippers all read them without a
// parser of their own. Thread-safe; lines below the configured level are dropped.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace sluice {

enum class LogLevel { debug, info, warn, error };

std::optional<LogLevel> parse_log_level(std::string_view name);
std::string_view log_level_name(LogLevel level);

void set_log_level(LogLevel level);

using LogField = std::pair<std::string_view, std::string>;

void log(LogLevel level, std::string_view message, std::initializer_list<LogField> fields = {});

// The logfmt form of one line without the trailing newline; exposed for tests.
std::string format_log_line(std::string_view timestamp, LogLevel level, std::string_view message,
                            std::initializer_list<LogField> fields);

}  // namespace sluice
