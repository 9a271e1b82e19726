// SPDX-License-Identifier: Apache-2.0
// Labels of verdicts, drop reasons and parse statuses for metrics, the CLI and
// logs, expanded from the lists in abi.h and parse.h so they cannot drift
// from the counter indices the dataplane writes.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "sluice/abi.h"
#include "sluice/parse.h"

namespace sluice {

#define SLUICE_LABEL(id, label, help) label,
inline constexpr std::array<std::string_view, SLUICE_VERDICT_COUNT> kVerdictLabels{SLUICE_VERDICT_LIST(SLUICE_LABEL)};
inline constexpr std::array<std::string_view, SLUICE_REASON_COUNT> kReasonLabels{SLUICE_REASON_LIST(SLUICE_LABEL)};
inline constexpr std::array<std::string_view, SLUICE_STAT_COUNT> kStatLabels{SLUICE_STAT_LIST(SLUICE_LABEL)};
inline constexpr std::array<std::string_view, SLUICE_PARSE_STATUS_COUNT> kParseStatusLabels{
    SLUICE_PARSE_STATUS_LIST(SLUICE_LABEL)};
#undef SLUICE_LABEL

template <size_t N>
constexpr std::string_view label_of(const std::array<std::string_view, N>& labels, uint32_t index) {
    return index < N ? labels[index] : std::string_view("unknown");
}

constexpr std::string_view verdict_label(uint32_t verdict) { return label_of(kVerdictLabels, verdict); }
constexpr std::string_view reason_label(uint32_t reason) { return label_of(kReasonLabels, reason); }
constexpr std::string_view stat_label(uint32_t stat) { return label_of(kStatLabels, stat); }
constexpr std::string_view parse_status_label(uint32_t status) { return label_of(kParseStatusLabels, status); }

}  // namespace sluice
