// SPDX-License-Identifier: Apache-2.0
#include "rate_limits.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>

#include "sluice/source_table.h"
#include "sluice/window.h"

namespace sluice {
namespace {

std::string unit_name(Unit unit) {
    switch (unit) {
        case Unit::bytes:
            return "bytes";
        case Unit::tcp_syn:
            return "TCP SYNs";
        default:
            return "packets";
    }
}

Error field_error(std::string_view field, std::string_view setting, const std::string& what) {
    return Error{std::string(field) + ": " + what, std::string(setting)};
}

std::string quote(std::string_view text) { return "\"" + std::string(text) + "\""; }

// ceil(a / b) for b > 0 without overflow.
uint64_t div_ceil(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

// In bytes, the largest frame is what a burst or a window limit must hold.
Status check_max_frame(Unit unit, uint32_t max_frame_bytes, std::string_view field) {
    if (unit == Unit::bytes && (max_frame_bytes == 0 || max_frame_bytes > SLUICE_COST_MAX))
        return field_error(field, "max_frame_bytes",
                           "largest frame " + std::to_string(max_frame_bytes) + " bytes is outside 1.." +
                               std::to_string(SLUICE_COST_MAX));
    return ok_status();
}

// `setting` (burst, limit) holds less than one packet can cost.
Error below_largest_cost(std::string_view field, const std::string& setting, uint64_t value, Unit unit,
                         uint64_t max_cost) {
    const std::string name = unit_name(unit);
    return field_error(field, setting,
                       setting + " " + std::to_string(value) + " " + name +
                           " is below the largest cost one packet is charged (" + std::to_string(max_cost) + " " +
                           name + "), so such packets could never pass; raise " + setting + " to at least " +
                           std::to_string(max_cost));
}

}  // namespace

uint64_t max_cost_units(Unit unit, uint32_t max_frame_bytes) { return unit == Unit::bytes ? max_frame_bytes : 1; }

Result<sluice_limit> compile_limit(const HumanLimit& limit, uint64_t max_cost, std::string_view field) {
    const std::string unit = unit_name(limit.unit);
    if (limit.rate_per_s == 0)
        return field_error(field, "rate",
                           "rate is 0; it must be at least 1 " + unit +
                               " per second "
                               "(use action = \"drop\" to refuse everything)");
    if (limit.rate_per_s > SLUICE_RATE_MAX)
        return field_error(field, "rate",
                           "rate " + std::to_string(limit.rate_per_s) + " exceeds the maximum of " +
                               std::to_string(SLUICE_RATE_MAX) + " " + unit + " per second");
    if (limit.burst == 0) return field_error(field, "burst", "burst is 0; it must be at least 1 " + unit);
    if (limit.burst > SLUICE_BURST_MAX)
        return field_error(field, "burst",
                           "burst " + std::to_string(limit.burst) + " exceeds the maximum of " +
                               std::to_string(SLUICE_BURST_MAX) + " " + unit);
    if (limit.burst < max_cost) return below_largest_cost(field, "burst", limit.burst, limit.unit, max_cost);

    sluice_limit out{};
    out.rate_per_s = limit.rate_per_s;
    out.burst_nano = limit.burst * SLUICE_NANO;
    out.fill_ns = div_ceil(out.burst_nano, out.rate_per_s);
    return out;
}

Result<sluice_level_limit> compile_level(const LevelSettings& settings, std::string_view field) {
    const std::string unit = unit_name(settings.limit.unit);
    if (settings.cpus == 0) return field_error(field, "cpus", "CPU count is 0");
    if (auto frame = check_max_frame(settings.limit.unit, settings.max_frame_bytes, field); !frame)
        return frame.error();

    const uint64_t max_cost = max_cost_units(settings.limit.unit, settings.max_frame_bytes);
    auto full = compile_limit(settings.limit, max_cost, field);
    if (!full) return full.error();

    sluice_level_limit out{};
    out.full = full.value();
    out.enabled = 1;
    out.unit = static_cast<uint8_t>(settings.limit.unit);
    out.accuracy = static_cast<uint8_t>(settings.accuracy);

    if (settings.accuracy == Accuracy::split) {
        // Each CPU gets the floor of its share: split never admits more than
        // the whole limit, and says so when a share would be unusable.
        const uint64_t n = settings.cpus;
        HumanLimit share = settings.limit;
        share.rate_per_s /= n;
        share.burst /= n;
        if (share.rate_per_s == 0)
            return field_error(field, "rate",
                               "split accuracy gives each of " + std::to_string(n) + " CPUs a rate of " +
                                   std::to_string(settings.limit.rate_per_s) + "/" + std::to_string(n) + " = 0 " +
                                   unit + " per second; raise rate to at least " + std::to_string(n) +
                                   " or use accuracy = \"lease\"");
        if (share.burst < max_cost)
            return field_error(field, "burst",
                               "split accuracy gives each of " + std::to_string(n) + " CPUs a burst of " +
                                   std::to_string(share.burst) + " " + unit + ", below the largest cost (" +
                                   std::to_string(max_cost) + "); raise burst to at least " +
                                   std::to_string(max_cost * n) + " or use accuracy = \"lease\"");
        auto compiled = compile_limit(share, max_cost, field);
        if (!compiled) return compiled.error();
        out.share = compiled.value();
        return out;
    }

    if (settings.lease_ttl_ns == 0 || settings.lease_ttl_ns > kMaxLeaseTtlNs)
        return field_error(field, "lease_ttl",
                           "lease lifetime " + std::to_string(settings.lease_ttl_ns) + " ns is outside 1.." +
                               std::to_string(kMaxLeaseTtlNs));
    uint64_t lease_nano = settings.lease * SLUICE_NANO;
    if (settings.lease == 0) {
        lease_nano = out.full.burst_nano / (kLeaseBurstDivisor * settings.cpus);
        if (lease_nano < max_cost * SLUICE_NANO) lease_nano = max_cost * SLUICE_NANO;
    } else if (settings.lease < max_cost || settings.lease > settings.limit.burst) {
        return field_error(field, "lease",
                           "lease " + std::to_string(settings.lease) + " " + unit + " is outside " +
                               std::to_string(max_cost) + ".." + std::to_string(settings.limit.burst) +
                               " (largest cost .. burst)");
    }
    out.lease_nano = lease_nano;
    out.lease_ttl_ns = settings.lease_ttl_ns;
    out.min_cost_nano = (settings.limit.unit == Unit::bytes ? kMinFrameBytes : 1) * SLUICE_NANO;
    return out;
}

Result<sluice_source_limit> compile_source_limit(const HumanLimit& limit, uint32_t max_frame_bytes,
                                                 std::string_view field) {
    if (auto frame = check_max_frame(limit.unit, max_frame_bytes, field); !frame) return frame.error();
    const uint64_t max_cost = max_cost_units(limit.unit, max_frame_bytes);
    if (auto checked = compile_limit(limit, max_cost, field); !checked) return checked.error();

    // 10^9 / rate ns per unit as 32.32 fixed point, the fraction rounded up,
    // so a cost in ns is never less than the exact one.
    __extension__ typedef unsigned __int128 uint128;
    sluice_source_limit out{};
    sluice_gcra_limit& gcra = out.current;
    out.enabled = 1;
    gcra.unit = static_cast<uint8_t>(limit.unit);
    gcra.interval_ns = SLUICE_NANO / limit.rate_per_s;
    const uint64_t remainder = SLUICE_NANO % limit.rate_per_s;
    const uint128 fraction = ((static_cast<uint128>(remainder) << 32) + limit.rate_per_s - 1) / limit.rate_per_s;
    if (fraction >> 32) {
        gcra.interval_ns++;
    } else {
        gcra.interval_frac = static_cast<uint32_t>(fraction);
    }
    // A full bucket admits `burst` packets back to back. In byte mode each
    // frame's cost is rounded up on its own, by less than 2 ns where a byte
    // is not a whole number of ns: the burst gets that back for as many
    // frames as it can hold, or a burst of N frames would hold N - 1.
    const uint64_t one = sluice_source_cost_ns(&gcra, 1, 1);
    auto tolerance_of = [&](uint64_t burst) -> uint128 {
        if (limit.unit != Unit::bytes) return static_cast<uint128>(burst) * one;
        uint128 ns = static_cast<uint128>(burst) * gcra.interval_ns +
                     ((static_cast<uint128>(burst) * gcra.interval_frac + 0xffffffffu) >> 32);
        if (gcra.interval_frac != 0) ns += 2 * (burst / kMinFrameBytes);
        return ns;
    };
    const uint128 tolerance = tolerance_of(limit.burst);
    if (tolerance > SLUICE_DEBT_MAX_NS) {
        // The largest burst that fits, found by bisection: the byte-mode
        // rounding slack makes the formula awkward to invert exactly.
        uint64_t fits = 0, too_big = limit.burst;
        while (too_big - fits > 1) {
            const uint64_t mid = fits + (too_big - fits) / 2;
            (tolerance_of(mid) <= SLUICE_DEBT_MAX_NS ? fits : too_big) = mid;
        }
        const uint64_t seconds = static_cast<uint64_t>((tolerance + SLUICE_NANO - 1) / SLUICE_NANO);
        return field_error(field, "burst",
                           "burst " + std::to_string(limit.burst) + " " + unit_name(limit.unit) + " at " +
                               std::to_string(limit.rate_per_s) + "/s takes " + std::to_string(seconds) +
                               " s to refill; a source's bucket may take at most " +
                               std::to_string(SLUICE_DEBT_MAX_NS / SLUICE_NANO) + " s (lower burst to at most " +
                               std::to_string(fits) + " or raise rate)");
    }
    gcra.tolerance_ns = static_cast<uint64_t>(tolerance);
    return out;
}

namespace {

// What every window limit needs, at any level: a window of 1ms..1d and a
// limit of 1..kWindowLimitMax.
Status check_window_span(const WindowSettings& settings, std::string_view field) {
    const std::string unit = unit_name(settings.unit);
    if (settings.window_ns < SLUICE_WINDOW_MIN_NS || settings.window_ns > SLUICE_WINDOW_MAX_NS)
        return field_error(field, "window",
                           "window " + format_duration(settings.window_ns) + " is outside " +
                               format_duration(SLUICE_WINDOW_MIN_NS) + ".." + format_duration(SLUICE_WINDOW_MAX_NS));
    if (settings.limit == 0)
        return field_error(field, "limit",
                           "limit is 0; it must be at least 1 " + unit +
                               " per window "
                               "(use action = \"drop\" to refuse everything)");
    if (settings.limit > kWindowLimitMax)
        return field_error(field, "limit",
                           "limit " + std::to_string(settings.limit) + " exceeds the maximum of " +
                               std::to_string(kWindowLimitMax) + " " + unit + " per window (2^47 - 1)");
    return ok_status();
}

// In bytes, a largest frame must be chargeable and fit in the limit, as it
// must in a burst.
Status check_window_cost(const WindowSettings& settings, std::string_view field) {
    if (auto frame = check_max_frame(settings.unit, settings.max_frame_bytes, field); !frame) return frame;
    const uint64_t max_cost = max_cost_units(settings.unit, settings.max_frame_bytes);
    if (settings.limit < max_cost) return below_largest_cost(field, "limit", settings.limit, settings.unit, max_cost);
    return ok_status();
}

Error not_a_window(std::string_view field, Algorithm algorithm) {
    return field_error(
        field, "algorithm",
        "algorithm " + quote(algorithm_name(static_cast<uint8_t>(algorithm))) + " does not count by window");
}

}  // namespace

Result<WindowLevel> compile_window_level(const WindowSettings& settings, std::string_view field) {
    if (settings.algorithm == Algorithm::gcra ||
        static_cast<uint8_t>(settings.algorithm) >= static_cast<uint8_t>(SLUICE_ALGORITHM_COUNT))
        return not_a_window(field, settings.algorithm);
    if (auto span = check_window_span(settings, field); !span) return span.error();
    if (settings.algorithm == Algorithm::sliding_log) {
        // The log keeps one time per admission, so it counts admissions only.
        if (settings.unit == Unit::bytes)
            return field_error(field, "unit",
                               "sliding_log counts admissions (unit \"packets\" or \"tcp_syn\"), not bytes; use "
                               "fixed_window or sliding_window for a limit in bytes");
        if (settings.limit > SLUICE_LOG_MAX)
            return field_error(field, "limit",
                               "limit " + std::to_string(settings.limit) +
                                   " is more than a sliding_log holds: the log keeps one time per admission, at "
                                   "most " +
                                   std::to_string(SLUICE_LOG_MAX) +
                                   " per class; use sliding_window (approximate) or fixed_window for larger limits");
    }
    if (auto cost = check_window_cost(settings, field); !cost) return cost.error();

    WindowLevel out;
    out.level.enabled = 1;
    out.level.unit = static_cast<uint8_t>(settings.unit);
    out.window.window_ns = settings.window_ns;
    out.window.limit = settings.limit;
    out.window.algorithm = static_cast<uint8_t>(settings.algorithm);
    // The class aggregate's state is one struct under its bucket's lock, not
    // a packed word: nothing wraps, nothing is narrowed.
    out.window.index_bits = 64;
    out.window.count_bits = 64;
    return out;
}

namespace {

// A per-source window limit as an entry keeps it (window.h, "in a
// source-table entry"): window numbers come back in full, and the counts take
// the fewest bits that hold the limit.
sluice_window_limit entry_window(Algorithm algorithm, uint64_t limit, uint64_t window_ns) {
    sluice_window_limit out{};
    out.window_ns = window_ns;
    out.limit = limit;
    out.algorithm = static_cast<uint8_t>(algorithm);
    out.index_bits = 64;
    out.count_bits = static_cast<uint8_t>(std::bit_width(limit));
    return out;
}

// The windows an entry can time for `w`'s counts, by the formula of
// sluice_entry_window_fits (which stays the judge): rounded window ends more
// than half a window apart, busy at most SLUICE_DEBT_MAX_NS ahead.
struct EntryWindows {
    uint64_t shortest_ns = 1, longest_ns = 0;  // none
};
EntryWindows entry_windows(const sluice_window_limit& w) {
    const uint32_t bits = sluice_entry_count_bits(&w);
    if (bits > 40) return {};
    const uint64_t windows = w.algorithm == SLUICE_ALGORITHM_SLIDING_WINDOW ? 2 : 1;
    return {std::max<uint64_t>(SLUICE_WINDOW_MIN_NS, 2ULL << bits), (SLUICE_DEBT_MAX_NS - (1ULL << bits)) / windows};
}

// The largest limit (2^C - 1) whose counts fit an entry in a window of
// `window_ns`, or with 0 in the shortest window that holds them; 0 if none.
uint64_t largest_entry_limit(Algorithm algorithm, uint64_t window_ns) {
    uint64_t largest = 0;
    for (uint32_t bits = 1; bits < 64; bits++) {
        sluice_window_limit w = entry_window(algorithm, (1ULL << bits) - 1, window_ns);
        if (window_ns == 0) w.window_ns = entry_windows(w).shortest_ns;
        if (sluice_entry_window_fits(&w)) largest = w.limit;
    }
    return largest;
}

// Durations as the policy can write them: the shortest at least `ns` (whole
// ms, whole s from 1s on), the longest at most `ns` (whole s).
std::string writable_at_least(uint64_t ns) {
    const uint64_t grain = ns > SLUICE_NANO ? SLUICE_NANO : 1'000'000;
    return format_duration(div_ceil(ns, grain) * grain);
}
std::string writable_at_most(uint64_t ns) {
    constexpr uint64_t kMinute = 60 * SLUICE_NANO;
    return format_duration(ns / SLUICE_NANO * SLUICE_NANO) + " (about " + std::to_string(ns / kMinute) + "m)";
}

}  // namespace

Result<sluice_source_limit> compile_source_window(const WindowSettings& settings, std::string_view field) {
    if (settings.algorithm == Algorithm::sliding_log)
        return field_error(field, "algorithm",
                           "sliding_log keeps each admission's time, and a per-source entry is one 64-bit word; use "
                           "sliding_window per source (approximate, see README \"Choosing an algorithm\"), or "
                           "sliding_log on a class's aggregate");
    if (settings.algorithm != Algorithm::fixed_window && settings.algorithm != Algorithm::sliding_window)
        return not_a_window(field, settings.algorithm);
    if (auto span = check_window_span(settings, field); !span) return span.error();
    if (auto cost = check_window_cost(settings, field); !cost) return cost.error();

    const bool sliding = settings.algorithm == Algorithm::sliding_window;
    const std::string what = algorithm_name(static_cast<uint8_t>(settings.algorithm)) + " with limit " +
                             std::to_string(settings.limit) + " per source";
    const std::string shared =
        sliding ? "both counts share the entry's 45-bit time field" : "the count shares the entry's 45-bit time field";
    sluice_source_limit out{};
    out.enabled = 1;
    out.current.unit = static_cast<uint8_t>(settings.unit);
    out.window = entry_window(settings.algorithm, settings.limit, settings.window_ns);
    const EntryWindows fits = entry_windows(out.window);
    if (const uint64_t largest = largest_entry_limit(settings.algorithm, 0); settings.limit > largest)
        return field_error(field, "limit",
                           what + " does not fit a source-table entry at any window: " + shared + ", at most " +
                               std::to_string(largest) + " per window; lower limit" +
                               (sliding ? " or use fixed_window" : ""));
    if (settings.window_ns < fits.shortest_ns)
        return field_error(field, "limit",
                           what + " needs window >= " + writable_at_least(fits.shortest_ns) + ": " + shared +
                               "; lower limit to at most " +
                               std::to_string(largest_entry_limit(settings.algorithm, settings.window_ns)) +
                               " for window " + format_duration(settings.window_ns) + ", lengthen window" +
                               (sliding ? " or use fixed_window" : ""));
    if (settings.window_ns > fits.longest_ns) {
        std::string instead;
        if (sliding)
            instead =
                ", or use fixed_window, which allows up to " +
                writable_at_most(entry_windows(entry_window(Algorithm::fixed_window, settings.limit, 0)).longest_ns);
        return field_error(field, "window",
                           "window " + format_duration(settings.window_ns) +
                               " is longer than a source-table entry can time: " + what + " allows at most " +
                               writable_at_most(fits.longest_ns) + "; shorten window" + instead);
    }
    // The dataplane's own test, which the bounds above only explain.
    if (!sluice_entry_window_fits(&out.window))
        return field_error(
            field, "window",
            what + " and window " + format_duration(settings.window_ns) + " do not fit a source-table entry");
    return out;
}

std::string algorithm_name(uint8_t algorithm) {
    switch (algorithm) {
        case SLUICE_ALGORITHM_GCRA:
            return "gcra";
        case SLUICE_ALGORITHM_FIXED_WINDOW:
            return "fixed_window";
        case SLUICE_ALGORITHM_SLIDING_WINDOW:
            return "sliding_window";
        case SLUICE_ALGORITHM_SLIDING_LOG:
            return "sliding_log";
        default:
            return "algorithm_" + std::to_string(algorithm);
    }
}

std::string format_duration(uint64_t ns) {
    static constexpr struct {
        uint64_t ns;
        const char* suffix;
    } kSpans[] = {{86'400 * SLUICE_NANO, "d"},
                  {3'600 * SLUICE_NANO, "h"},
                  {60 * SLUICE_NANO, "m"},
                  {SLUICE_NANO, "s"},
                  {1'000'000, "ms"}};
    for (const auto& [span, suffix] : kSpans)
        if (ns != 0 && ns % span == 0) return std::to_string(ns / span) + suffix;
    return std::to_string(ns) + "ns";
}

Result<uint64_t> parse_duration(std::string_view text, uint64_t min_ns, uint64_t max_ns) {
    static constexpr struct {
        std::string_view suffix;
        uint64_t ns;
    } kUnits[] = {{"ms", 1'000'000},
                  {"s", SLUICE_NANO},
                  {"m", 60 * SLUICE_NANO},
                  {"h", 3'600 * SLUICE_NANO},
                  {"d", 86'400 * SLUICE_NANO}};
    const size_t digits = std::min(text.find_first_not_of("0123456789"), text.size());
    const std::string_view suffix = text.substr(digits);
    const auto unit =
        std::find_if(std::begin(kUnits), std::end(kUnits), [&](const auto& u) { return u.suffix == suffix; });
    if (digits == 0 || unit == std::end(kUnits))
        return Error{"expected " + std::string(kDurationExample) + " (an integer followed by ms, s, m, h or d), got " +
                     quote(text)};
    // More than 12 digits is past a day in any unit; the cap keeps stoull in range.
    const uint64_t count = digits > 12 ? UINT64_MAX : std::stoull(std::string(text.substr(0, digits)));
    const uint64_t ns = count > max_ns / unit->ns ? UINT64_MAX : count * unit->ns;
    if (ns < min_ns || ns > max_ns)
        return Error{quote(text) + " is outside " + format_duration(min_ns) + ".." + format_duration(max_ns)};
    return ns;
}

std::string describe_window(const sluice_window_limit& window, uint8_t unit) {
    return std::to_string(window.limit) + " " + unit_name(static_cast<Unit>(unit)) + " per " +
           format_duration(window.window_ns);
}

Result<sluice_penalty> compile_penalty(const sluice_source_limit& per_source, uint64_t over, uint64_t within_ns,
                                       uint64_t for_ns, std::string_view field) {
    __extension__ typedef unsigned __int128 uint128;
    if (!per_source.enabled || per_source.window.algorithm != SLUICE_ALGORITHM_GCRA)
        return field_error(field, "penalty", "needs a per_source limit of algorithm \"gcra\"");
    if (over < 2) return field_error(field, "over", "over " + std::to_string(over) + " must be at least 2");
    if (for_ns < SLUICE_PENALTY_FOR_MIN_NS || for_ns > SLUICE_PENALTY_FOR_MAX_NS)
        return field_error(field, "for",
                           "for = " + quote(format_duration(for_ns)) + " is outside " +
                               format_duration(SLUICE_PENALTY_FOR_MIN_NS) + ".." +
                               format_duration(SLUICE_PENALTY_FOR_MAX_NS));
    const sluice_gcra_limit& source = per_source.current;
    if (source.tolerance_ns + SLUICE_PENALTY_MARGIN_NS + for_ns > SLUICE_DEBT_MAX_NS)
        return field_error(field, "for",
                           "for = " + quote(format_duration(for_ns)) + " plus the per-source burst (" +
                               format_duration(source.tolerance_ns) + " of its rate) exceeds the " +
                               std::to_string(SLUICE_DEBT_MAX_NS / SLUICE_NANO) +
                               " s a source-table entry can hold; shorten one of them");
    const uint128 interval = (static_cast<uint128>(source.interval_ns) << 32) + source.interval_frac;
    const uint128 meter_interval = interval / (over - 1);
    sluice_penalty out{};
    out.for_ns = for_ns;
    out.meter.enabled = 1;
    out.meter.current.unit = source.unit;
    out.meter.current.interval_ns = static_cast<uint64_t>(meter_interval >> 32);
    out.meter.current.interval_frac = static_cast<uint32_t>(meter_interval);
    out.meter.current.tolerance_ns = within_ns;
    const uint64_t one = sluice_gcra_units_ns(&out.meter.current, 1);
    if (meter_interval == 0)
        return field_error(field, "over",
                           "over " + std::to_string(over) + " times this per-source rate is too fast to meter; lower over");
    if (within_ns < one)
        return field_error(field, "within",
                           "within = " + quote(format_duration(within_ns)) +
                               " is shorter than one refused unit at (over - 1) times the per-source rate; make it "
                               "at least " +
                               quote(format_duration(div_ceil(one, SLUICE_NANO / 1000) * (SLUICE_NANO / 1000))));
    return out;
}

sluice_shape_drain compile_shape_drain(const sluice_level_limit& aggregate, uint32_t workers) {
    const uint64_t rate = aggregate.accuracy == SLUICE_ACCURACY_LEASE
                              ? aggregate.full.rate_per_s / std::max<uint32_t>(workers, 1)
                              : aggregate.share.rate_per_s;
    sluice_shape_drain out{};
    out.rate_per_s = std::max<uint64_t>(rate, 1);
    out.inverse = UINT64_MAX / out.rate_per_s;
    return out;
}

double lease_excess_fraction(const sluice_level_limit& level, uint32_t cpus) {
    if (level.accuracy != SLUICE_ACCURACY_LEASE || level.full.burst_nano == 0) return 0.0;
    return static_cast<double>(level.lease_nano) * cpus / static_cast<double>(level.full.burst_nano);
}

}  // namespace sluice
