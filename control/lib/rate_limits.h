// SPDX-License-Identifier: Apache-2.0
// Human limits (rate per second, burst, unit) turned into the shared core's
// precomputed form. This is the only place that divides: it validates against
// the maxima in abi.h and precomputes fill times, split shares and lease
// sizes, so the fast path can trust what it gets.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "result.h"
#include "sluice/abi.h"

namespace sluice {

// tcp_syn: only TCP SYNs without ACK (connection attempts) cost 1; other
// packets pass the level uncharged.
enum class Unit : uint8_t { packets = SLUICE_UNIT_PACKETS, bytes = SLUICE_UNIT_BYTES, tcp_syn = SLUICE_UNIT_TCP_SYN };
enum class Accuracy : uint8_t { split = SLUICE_ACCURACY_SPLIT, lease = SLUICE_ACCURACY_LEASE };
// How the class aggregate counts: gcra is the token bucket (rate, burst); the
// window algorithms admit `limit` units per window (sluice/window.h).
enum class Algorithm : uint8_t {
    gcra = SLUICE_ALGORITHM_GCRA,
    fixed_window = SLUICE_ALGORITHM_FIXED_WINDOW,
    sliding_window = SLUICE_ALGORITHM_SLIDING_WINDOW,
    sliding_log = SLUICE_ALGORITHM_SLIDING_LOG,
};

// Largest frame charged in byte mode unless the policy says otherwise: a
// jumbo frame with two VLAN tags.
inline constexpr uint32_t kDefaultMaxFrameBytes = 9216;
// A CPU's unspent lease goes back to the shared bucket after this long.
inline constexpr uint64_t kDefaultLeaseTtlNs = 10'000'000;  // 10 ms
inline constexpr uint64_t kMaxLeaseTtlNs = 1'000'000'000;   // 1 s
// The smallest frame that reaches a bucket (Ethernet + IPv4 header; software
// paths such as veth do not pad to 60): a refused lease waits until the
// shared bucket could pay one of these (one packet in packet mode).
inline constexpr uint32_t kMinFrameBytes = 34;
// Default lease size: the N CPUs together may hold at most burst/8 in leases.
inline constexpr uint64_t kLeaseBurstDivisor = 8;

// The largest window limit: the sliding window weighs counts in 2^-16 steps,
// so limit << 16 and the estimate beside it must stay below 2^64 (abi.h).
inline constexpr uint64_t kWindowLimitMax = (1ULL << 47) - 1;

struct HumanLimit {
    uint64_t rate_per_s = 0;  // units (packets or bytes) per second
    uint64_t burst = 0;       // units
    Unit unit = Unit::packets;
};

struct LevelSettings {
    HumanLimit limit;
    Accuracy accuracy = Accuracy::lease;
    uint32_t cpus = 1;                                 // possible CPUs (N)
    uint32_t max_frame_bytes = kDefaultMaxFrameBytes;  // largest cost in byte mode
    uint64_t lease = 0;                                // units per lease; 0 picks the default
    uint64_t lease_ttl_ns = kDefaultLeaseTtlNs;
};

// The largest cost one packet can be charged at this level, in units.
uint64_t max_cost_units(Unit unit, uint32_t max_frame_bytes);

// Validate and precompute one bucket. `field` names the setting in errors,
// e.g. "class \"web\".per_source".
Result<sluice_limit> compile_limit(const HumanLimit& limit, uint64_t max_cost, std::string_view field);

// Validate and precompute one bucket level (the class's new-source budget,
// its aggregate, or the global ceiling).
Result<sluice_level_limit> compile_level(const LevelSettings& settings, std::string_view field);

// A window algorithm's limit, as the policy says it.
struct WindowSettings {
    Algorithm algorithm = Algorithm::fixed_window;
    uint64_t limit = 0;      // units per window
    uint64_t window_ns = 0;  // SLUICE_WINDOW_MIN_NS..SLUICE_WINDOW_MAX_NS
    Unit unit = Unit::packets;
    uint32_t max_frame_bytes = kDefaultMaxFrameBytes;  // largest cost in byte mode
};

// A class aggregate that counts by window: `level` only says enabled and
// unit (its rates stay 0), `window` is the class entry's aggregate_window.
struct WindowLevel {
    sluice_level_limit level{};
    sluice_window_limit window{};
};

// Validate and precompute a class aggregate of a window algorithm. Its state
// is kept in full under the shared bucket's lock (index_bits = count_bits =
// 64); generation is left 0 for carry_previous_limits to set. Errors name
// `field` and, in Error::setting, the policy key (limit, window, unit,
// max_frame_bytes, algorithm).
Result<WindowLevel> compile_window_level(const WindowSettings& settings, std::string_view field);

// "gcra", "fixed_window", "sliding_window", "sliding_log" (the policy's
// spelling); "algorithm_<n>" for a value out of range.
std::string algorithm_name(uint8_t algorithm);

// A duration as the policy writes it: in the largest of d, h, m, s, ms that
// divides it ("90s", "500ms"); "<n>ns" when none does.
std::string format_duration(uint64_t ns);

// How parse_duration's errors describe what it takes.
inline constexpr std::string_view kDurationExample = "a duration such as \"1s\", \"10m\" or \"500ms\"";

// A duration as the policy and sluicectl write it ("500ms", "1s", "10m",
// "2h", "1d": digits and one unit) in ns, within min_ns..max_ns; the error
// says what was expected, or the range.
Result<uint64_t> parse_duration(std::string_view text, uint64_t min_ns, uint64_t max_ns);

// "100 packets per 1s", "5 TCP SYNs per 500ms": a window limit in words.
std::string describe_window(const sluice_window_limit& window, uint8_t unit);

// Validate and precompute the per-source level (GCRA; exact across CPUs, so
// it takes no accuracy). Its whole burst must fit in SLUICE_DEBT_MAX_NS.
Result<sluice_source_limit> compile_source_limit(const HumanLimit& limit, uint32_t max_frame_bytes,
                                                 std::string_view field);

// Validate and precompute a per-source level of a window algorithm
// (fixed_window or sliding_window; a sliding_log is refused: an entry is one
// word, with no room for a log). Its counts live in the source-table entry's
// 45-bit time field, so the limit must fit there (sluice_entry_window_fits):
// refusals name the setting (limit, window, unit, max_frame_bytes,
// algorithm) and the limit or window that would fit. `current` holds only the
// unit; generation and previous_fresh are left for carry_previous_limits.
Result<sluice_source_limit> compile_source_window(const WindowSettings& settings, std::string_view field);

// A class's penalty box (struct sluice_penalty): a source whose refused units
// run above (over - 1) x its per-source rate for longer than `within_ns` is
// refused for `for_ns`. `per_source` is the class's compiled gcra limit; the
// meter's cost per unit is the source's divided by over - 1, rounded down
// (so a source sending exactly `over` times its limit is never penalised).
// Errors name the setting (over, within, for).
Result<sluice_penalty> compile_penalty(const sluice_source_limit& per_source, uint64_t over, uint64_t within_ns,
                                       uint64_t for_ns, std::string_view field);

// The rate one worker's shaping queue of a class drains at, for predicting a
// queued frame's wait (sluice/shape.h): the worker's split share of the class
// aggregate, or in lease mode the aggregate's rate over `workers`; at least 1.
// Its reciprocal is computed here so that the prediction needs no division.
sluice_shape_drain compile_shape_drain(const sluice_level_limit& aggregate, uint32_t workers);

// Lease mode: the most a level can admit above burst + rate*T is N*L. This is
// that excess as a fraction of burst, for reports.
double lease_excess_fraction(const sluice_level_limit& level, uint32_t cpus);

}  // namespace sluice
