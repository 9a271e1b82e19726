// SPDX-License-Identifier: Apache-2.0
// One policy version in the form the dataplanes load: the slot header, the
// class entries and the classification prefixes. The TOML loader produces
// it; validate() checks what the dataplane relies on, so a bad policy is
// refused before anything is written.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "request_classes.h"
#include "result.h"
#include "sluice/abi.h"

namespace sluice {

struct PolicyPrefix {
    uint8_t family = SLUICE_FAMILY_IPV4;  // SLUICE_FAMILY_*
    uint8_t length = 0;                   // prefix length in bits
    std::array<uint8_t, 16> addr{};       // network order; bits past `length` must be zero
    uint32_t class_id = 0;
};

// A class's fleet quota (its `fleet` table): one limit shared by every node
// that runs the class, held in Redis (control/fleet/). The dataplane only
// sees the class entry's `fleet` and `fleet_unit`, and spends the credit
// its node leased.
struct FleetQuota {
    uint32_t class_id = 0;
    std::string class_name;
    uint64_t rate_per_s = 0;  // units per second, across the fleet
    uint64_t burst = 0;       // units
    uint8_t unit = SLUICE_UNIT_PACKETS;
    bool fail_open = false;            // on_unavailable = "open"; "closed" otherwise
    uint64_t fallback_rate_per_s = 0;  // open only: this node's share while Redis cannot be reached
    // Hex SHA-256 prefix of what the shared bucket means (rate, burst,
    // unit): part of its Redis key, so nodes that disagree on the quota
    // never share, or fight over, one bucket.
    std::string definition_hash;
};

// What the shared bucket of a fleet quota means, as text:
// "rate=<r>;burst=<b>;unit=<packets|bytes|tcp_syn>". The failure policy and
// the fallback rate are not in it: they are this node's behaviour, not the
// bucket's.
std::string fleet_definition(uint64_t rate_per_s, uint64_t burst, uint8_t unit);
// The first 16 hex digits of the SHA-256 of fleet_definition().
std::string fleet_definition_hash(uint64_t rate_per_s, uint64_t burst, uint8_t unit);

struct CompiledPolicy {
    sluice_policy_header header{};
    std::vector<sluice_class_entry> classes;
    std::vector<PolicyPrefix> prefixes;
    std::vector<FleetQuota> fleet;  // by class id, for the classes with a fleet quota
    // Request-level decisions (request_classes.h): the packet dataplanes
    // ignore these; control/request/ decides with them.
    std::vector<RequestClass> requests;  // ids 1..N in file order
    std::vector<RequestDomain> request_domains;

    // The class entry with this id, or nullptr.
    const sluice_class_entry* find_class(uint32_t class_id) const;
};

// Address bits of a family: 32 or 128.
inline unsigned family_bits(uint8_t family) { return family == SLUICE_FAMILY_IPV4 ? 32 : 128; }

// No bit set past the prefix's length. Inline: validate() runs it on every prefix.
inline bool host_bits_clear(const PolicyPrefix& p) {
    const unsigned full = p.length / 8;
    if (p.length % 8 && (p.addr[full] & (0xffu >> (p.length % 8)))) return false;
    for (unsigned byte = full + (p.length % 8 ? 1 : 0); byte < p.addr.size(); byte++)
        if (p.addr[byte]) return false;
    return true;
}
// The prefix with every bit past its length cleared.
PolicyPrefix masked_prefix(PolicyPrefix p);
// "192.0.2.0/24", "2001:db8::/32".
std::string prefix_text(const PolicyPrefix& p);

// The order CompiledPolicy::prefixes is kept in (the loader sorts them,
// validate() checks it): family, then address, then length. Sorted, a
// duplicate is a neighbour and two versions' prefixes diff in one pass.
// Inline: sorts and merges of millions of prefixes call it ~20 times each.
inline bool prefix_less(const PolicyPrefix& a, const PolicyPrefix& b) {
    if (a.family != b.family) return a.family < b.family;
    // Two big-endian halves rather than memcmp.
    const auto half = [](const PolicyPrefix& p, size_t at) {
        uint64_t word;
        std::memcpy(&word, p.addr.data() + at, sizeof(word));
        return __builtin_bswap64(word);
    };
    if (const uint64_t x = half(a, 0), y = half(b, 0); x != y) return x < y;
    if (const uint64_t x = half(a, 8), y = half(b, 8); x != y) return x < y;
    return a.length < b.length;
}
inline bool same_prefix(const PolicyPrefix& a, const PolicyPrefix& b) { return !prefix_less(a, b) && !prefix_less(b, a); }
void sort_prefixes(std::vector<PolicyPrefix>& prefixes);

// What turns a table holding `from` into one holding `to` (both sorted by
// prefix_less, without duplicates): `removed` are in `from` only; `written`
// are in `to` only or there with another class.
struct PrefixChanges {
    std::vector<PolicyPrefix> removed;
    std::vector<PolicyPrefix> written;
};
PrefixChanges prefix_changes(const std::vector<PolicyPrefix>& from, const std::vector<PolicyPrefix>& to);

struct PrefixCounts {
    uint64_t v4 = 0;
    uint64_t v6 = 0;
};
PrefixCounts count_prefixes(const std::vector<PolicyPrefix>& prefixes);

// Refuses a policy with more prefixes of one family than `capacity` (per
// family, what the dataplane's tables hold), giving both numbers and naming
// `setting`, the knob that sizes them.
Status check_prefix_capacity(const CompiledPolicy& policy, uint64_t capacity, std::string_view setting);

// The shortest max_delay a shaped class may have (the policy file counts in ms).
inline constexpr uint64_t kMinShapeDelayNs = 1'000'000;

// Version > 0; prefixes sorted by prefix_less; non_ip/malformed verdicts pass or drop (never would_drop:
// unparsed frames have no class in shadow); class ids unique and in 1..SLUICE_MAX_CLASSES-1; the default
// class and every prefix's class exist; prefixes valid, unique and with no
// bits set past their length; enums in range; a per-source burst within
// SLUICE_DEBT_MAX_NS, or a per-source fixed or sliding window that fits a
// source-table entry (sluice_entry_window_fits; a gcra one has no window set,
// and sliding_log is refused); a new-source budget only with a per-source limit; a
// shaped class has a queue of 1..SLUICE_SHAPE_QUEUE_MAX, a max delay of
// 1 ms..SLUICE_SHAPE_MAX_DELAY_NS, a gcra aggregate limit and action limit;
// shadow is 0 or 1, and never with a shape queue.
// A class's fleet is 0 or 1, its fleet_unit a unit, and fleet = 1 only with
// action limit; every FleetQuota names such a class (once, with its unit and
// a class name), and every such class has one: a rate of 1..SLUICE_RATE_MAX,
// a burst of 1..SLUICE_BURST_MAX, a fallback rate of 1..rate when fail_open
// and 0 otherwise, and the definition_hash of its rate, burst and unit.
// The class aggregate's algorithm is in range; a gcra one has an
// aggregate_window of zeros apart from its generation; a window one has its
// aggregate enabled, a window of SLUICE_WINDOW_MIN_NS..SLUICE_WINDOW_MAX_NS,
// a limit of 1..kWindowLimitMax (rate_limits.h), index_bits = count_bits = 64
// (its state is kept in full), and, for sliding_log, a limit of at most
// SLUICE_LOG_MAX in a unit other than bytes.
// The request classes and domains pass validate_requests().
Status validate(const CompiledPolicy& policy);

// Request-level limits and names (request_classes.h), shared by the loader
// and validate_requests().
inline constexpr size_t kMaxRequestKeys = 8;                             // keys of one descriptor
inline constexpr size_t kMaxRequestKeyLength = 63;                       // a descriptor key
inline constexpr size_t kMaxRequestValueBytes = 256;                     // a fixed value, a domain's anonymous value
inline constexpr size_t kMaxRequestDomainLength = 128;                   // a domain's name
inline constexpr std::string_view kRemoteAddressKey = "remote_address";  // from the connection, never a header

// As a [[class]] name: 1-63 characters of a-z 0-9 _ -, starting with a letter.
bool valid_request_class_name(std::string_view name);
// 1..128 characters of printable ASCII without spaces or quotes.
bool valid_request_domain(std::string_view name);
// 1..63 characters of a-z 0-9 _ - .
bool valid_descriptor_key(std::string_view key);
// 1..256 bytes, none a control character (below 0x20, or 0x7f).
bool valid_descriptor_value(std::string_view value);
// An HTTP token (RFC 9110 section 5.6.2), as a header field name is.
bool valid_http_token(std::string_view name);
// What a request class's limit holds at most: its burst (gcra) or its limit
// per window; a request that costs more could never pass.
uint64_t request_capacity(const RequestLimit& limit);
// Whether a descriptor could match both classes with equally many fixed
// values, so neither wins: the same domain, the same keys in the same order,
// as many fixed values, and no key on which both fix different values.
bool request_classes_could_tie(const RequestClass& a, const RequestClass& b);

// Request classes: at most SLUICE_MAX_CLASSES-1, ids unique in
// 1..SLUICE_MAX_CLASSES-1, names valid and unique, a valid domain, 0..8 valid
// keys without duplicates, fixed values valid; a gcra limit with rate
// 1..SLUICE_RATE_MAX, burst 1..SLUICE_BURST_MAX, its gcra compiled (unit
// packets, tolerance of one request..SLUICE_DEBT_MAX_NS) and no window; a
// window limit kept in full as a class aggregate's (sliding_log: a limit of
// at most SLUICE_LOG_MAX and cost = max_cost = 1) with no gcra;
// 1 <= cost <= max_cost <= request_capacity(); a fleet only when every key
// is fixed, with a rate, burst, fallback rate and definition_hash
// (unit packets) as a packet class's, and a burst of at least max_cost; no
// two classes that could tie. Request domains: names valid and unique;
// headers map unique valid descriptor keys (never remote_address) to HTTP
// tokens; signed keys are among them, once each; anonymous is a valid value;
// cost_header is empty or an HTTP token.
Status validate_requests(const CompiledPolicy& policy);

// Sets the header's has_prefixes_v4/v6 from the prefixes (validate checks them).
void mark_prefix_families(CompiledPolicy& policy);

// A class whose counts a new version starts from fresh state, at one level:
// - its aggregate (SLUICE_LEVEL_CLASS) counts by window now, and counted by
//   another algorithm, window or unit before (or, for sliding_log, under
//   another limit: its log is laid out by the limit);
// - its per_source limit (SLUICE_LEVEL_SOURCE) changed algorithm (gcra, or a
//   window algorithm, to another), or, counting by window, changed its
//   window, unit or count width (the bits its limit needs in an entry).
// before/after are the level's window limits (all zero but for the
// generation under gcra).
struct CountRestart {
    uint32_t class_id = 0;
    uint8_t level = SLUICE_LEVEL_CLASS;  // enum sluice_level: SLUICE_LEVEL_CLASS or SLUICE_LEVEL_SOURCE
    sluice_window_limit before{}, after{};
    uint8_t unit_before = 0, unit_after = 0;  // enum sluice_unit
};

// "class 3: aggregate algorithm fixed_window -> sliding_window: its count
// starts from fresh state", "class 3: per_source algorithm gcra ->
// fixed_window: its sources' counts start from fresh state", for the
// dataplane's log.
std::string describe(const CountRestart& restart);

// Before `next` replaces the version whose class entries are `running`:
//  - a class whose per-source limit changes gets the next generation (0..3,
//    wrapping). GCRA to GCRA: with what its sources' debts convert with (see
//    sluice_source_limit); an unchanged one keeps its generation and
//    conversion. A change of algorithm, or of a window algorithm's window,
//    unit or count width, restarts its sources' counts: previous_fresh = 1,
//    nothing to convert. A window algorithm whose limit alone changes
//    within the same count width keeps its generation: the counts carry on;
//  - a class aggregate keeps its window generation while it keeps its
//    algorithm, window and unit (a changed limit alone keeps the counts: they
//    still mean units in that window; except sliding_log, whose log is laid
//    out by its limit); otherwise, or for a new class, it gets
//    (uint32_t)next.header.version, which no stale state carries since
//    versions only grow. A gcra class that stays gcra keeps its generation.
// Returns the counts that restart (a new class, or a level that limited
// nothing before, is not among them: it had none).
std::vector<CountRestart> carry_previous_limits(const std::vector<sluice_class_entry>& running, CompiledPolicy& next);

// Parses "192.0.2.0/24" or "2001:db8::/32" into a prefix of `class_id`.
Result<PolicyPrefix> parse_prefix(const std::string& cidr, uint32_t class_id);

}  // namespace sluice
