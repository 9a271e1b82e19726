// SPDX-License-Identifier: Apache-2.0
#include "logger.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "printable.h"

namespace sluice {
namespace {

constexpr std::pair<LogLevel, std::string_view> kLevelNames[] = {
    {LogLevel::debug, "debug"}, {LogLevel::info, "info"}, {LogLevel::warn, "warn"}, {LogLevel::error, "error"}};

std::atomic<LogLevel> g_level{LogLevel::info};
std::mutex g_write_mutex;

// logfmt: bare when the value has no space, quote or '=' and nothing to
// escape; else double-quoted, with what printable_line escapes and \".
void append_value(std::string& out, std::string_view value) {
    const std::string escaped = printable_line(value);
    if (!value.empty() && escaped == value && value.find_first_of(" \"=") == std::string_view::npos) {
        out += value;
        return;
    }
    out += '"';
    for (const char c : escaped) {
        if (c == '"') out += '\\';
        out += c;
    }
    out += '"';
}

std::string utc_timestamp() {
    const auto now = std::chrono::system_clock::now();
    const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
    const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char text[40];
    const size_t n = std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &utc);
    std::snprintf(text + n, sizeof(text) - n, ".%03dZ", static_cast<int>(millis));
    return text;
}

}  // namespace

std::optional<LogLevel> parse_log_level(std::string_view name) {
    for (const auto& [level, known] : kLevelNames) {
        if (known == name) return level;
    }
    return std::nullopt;
}

std::string_view log_level_name(LogLevel level) {
    for (const auto& [known, name] : kLevelNames) {
        if (known == level) return name;
    }
    return "error";
}

void set_log_level(LogLevel level) { g_level.store(level, std::memory_order_relaxed); }

std::string format_log_line(std::string_view timestamp, LogLevel level, std::string_view message,
                            std::initializer_list<LogField> fields) {
    std::string line = "ts=";
    line += timestamp;
    line += " level=";
    line += log_level_name(level);
    line += " msg=";
    append_value(line, message);
    for (const auto& [key, value] : fields) {
        line += ' ';
        line += key;
        line += '=';
        append_value(line, value);
    }
    return line;
}

void log(LogLevel level, std::string_view message, std::initializer_list<LogField> fields) {
    if (level < g_level.load(std::memory_order_relaxed)) return;
    std::string line = format_log_line(utc_timestamp(), level, message, fields);
    line += '\n';
    // One write per line so lines from different threads never interleave.
    std::lock_guard lock(g_write_mutex);
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
}

}  // namespace sluice
