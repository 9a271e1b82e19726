// SPDX-License-Identifier: Apache-2.0
#include "bans.h"

#include <sys/stat.h>

#include <algorithm>
#include <bitset>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "durable_file.h"
#include "rate_limits.h"

namespace sluice {
namespace {

using json = nlohmann::json;

std::string class_text(const PassProtection& protection, uint32_t class_id) {
    const auto named = protection.class_names.find(class_id);
    return named != protection.class_names.end() ? "class \"" + named->second + "\""
                                                 : "class " + std::to_string(class_id);
}

// The length of the UTF-8 sequence `text` starts with at `at`, or 0 when it
// is not one (overlong, a surrogate, past U+10FFFF, or cut short).
size_t utf8_length(std::string_view text, size_t at, uint32_t& code_point) {
    const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
    const uint8_t lead = byte(at);
    size_t length = 0;
    uint32_t min = 0;
    if (lead < 0x80) {
        code_point = lead;
        return 1;
    } else if ((lead & 0xe0) == 0xc0) {
        length = 2, min = 0x80, code_point = lead & 0x1f;
    } else if ((lead & 0xf0) == 0xe0) {
        length = 3, min = 0x800, code_point = lead & 0x0f;
    } else if ((lead & 0xf8) == 0xf0) {
        length = 4, min = 0x10000, code_point = lead & 0x07;
    } else {
        return 0;
    }
    if (at + length > text.size()) return 0;
    for (size_t i = 1; i < length; i++) {
        if ((byte(at + i) & 0xc0) != 0x80) return 0;
        code_point = code_point << 6 | (byte(at + i) & 0x3f);
    }
    if (code_point < min || code_point > 0x10ffff || (code_point >= 0xd800 && code_point <= 0xdfff)) return 0;
    return length;
}

// What the dataplanes would refuse in `bans` (check_bans: more prefix
// lengths in a family than each packet may be probed for), before anything
// is stored.
Status dataplanes_take(const std::vector<Ban>& bans) {
    std::vector<DataplaneBan> set;
    set.reserve(bans.size());
    for (const Ban& ban : bans) set.push_back(DataplaneBan{ban.prefix, ban.until_unix_ns, ban.slot});
    return check_bans(set);
}

json ban_to_json(const Ban& ban) {
    return json{{"prefix", prefix_text(ban.prefix)},
                {"created_unix_ns", ban.created_unix_ns},
                {"until_unix_ns", ban.until_unix_ns},
                {"reason", ban.reason},
                {"uid", ban.uid},
                {"forced", ban.forced},
                {"slot", ban.slot},
                {"dropped_packets_before", ban.dropped_before.packets},
                {"dropped_bytes_before", ban.dropped_before.bytes}};
}

// One ban of the file; `where` ("<path>: ban 3") starts each error.
Result<Ban> ban_from_json(const json& entry, const std::string& where) {
    if (!entry.is_object()) return Error{where + ": expected an object"};
    const auto field = [&](const char* key) -> Result<const json*> {
        const auto found = entry.find(key);
        if (found == entry.end()) return Error{where + ": \"" + key + "\" is missing"};
        return &*found;
    };
    const auto number = [&](const char* key, uint64_t max) -> Result<uint64_t> {
        auto value = field(key);
        if (!value) return value.error();
        if (!value.value()->is_number_unsigned() || value.value()->get<uint64_t>() > max)
            return Error{where + ": \"" + key + "\" must be an integer in 0.." + std::to_string(max)};
        return value.value()->get<uint64_t>();
    };
    Ban ban;
    auto prefix = field("prefix");
    if (!prefix) return prefix.error();
    if (!prefix.value()->is_string()) return Error{where + ": \"prefix\" must be a string"};
    auto parsed = parse_ban_prefix(prefix.value()->get<std::string>());
    if (!parsed) return Error{where + ": " + parsed.error().message};
    ban.prefix = parsed.value();
    const std::string named = where + " (" + prefix_text(ban.prefix) + ")";

    auto created = number("created_unix_ns", UINT64_MAX);
    auto until = number("until_unix_ns", UINT64_MAX);
    auto uid = number("uid", UINT32_MAX);
    auto slot = number("slot", UINT64_MAX);
    auto packets = number("dropped_packets_before", UINT64_MAX);
    auto bytes = number("dropped_bytes_before", UINT64_MAX);
    for (const Result<uint64_t>* value : {&created, &until, &uid, &slot, &packets, &bytes})
        if (!*value) return value->error();
    if (slot.value() >= SLUICE_MAX_BANS)
        return Error{named + ": slot " + std::to_string(slot.value()) + " is not below " +
                     std::to_string(SLUICE_MAX_BANS)};
    ban.created_unix_ns = created.value();
    ban.until_unix_ns = until.value();
    ban.uid = static_cast<uint32_t>(uid.value());
    ban.slot = static_cast<uint32_t>(slot.value());
    ban.dropped_before = {packets.value(), bytes.value()};

    auto reason = field("reason");
    if (!reason) return reason.error();
    if (!reason.value()->is_string()) return Error{named + ": \"reason\" must be a string"};
    ban.reason = reason.value()->get<std::string>();
    if (auto checked = check_ban_reason(ban.reason); !checked) return Error{named + ": " + checked.error().message};
    auto forced = field("forced");
    if (!forced) return forced.error();
    if (!forced.value()->is_boolean()) return Error{named + ": \"forced\" must be true or false"};
    ban.forced = forced.value()->get<bool>();
    return ban;
}

}  // namespace

bool prefix_holds(const PolicyPrefix& outer, const PolicyPrefix& inner) {
    if (outer.family != inner.family || outer.length > inner.length) return false;
    PolicyPrefix cut = inner;
    cut.length = outer.length;
    return masked_prefix(cut).addr == masked_prefix(outer).addr;
}

PassProtection pass_protection(const CompiledPolicy& policy, const std::map<std::string, uint32_t>& class_ids) {
    PassProtection protection;
    for (const auto& [name, id] : class_ids) protection.class_names[id] = name;
    std::bitset<SLUICE_MAX_CLASSES> passes;
    for (const sluice_class_entry& cls : policy.classes)
        if (cls.action == SLUICE_ACTION_PASS && cls.class_id < SLUICE_MAX_CLASSES) passes.set(cls.class_id);
    const uint32_t default_class = policy.header.default_class_id;
    if (default_class < SLUICE_MAX_CLASSES && passes.test(default_class)) protection.default_pass_class = default_class;
    for (const PolicyPrefix& prefix : policy.prefixes) {
        const bool pass = prefix.class_id < SLUICE_MAX_CLASSES && passes.test(prefix.class_id);
        if (pass)
            protection.pass_prefixes.push_back(prefix);
        else if (protection.default_pass_class)
            protection.limited_prefixes.push_back(prefix);
    }
    return protection;
}

std::optional<std::string> pass_conflict(const PassProtection& protection, const PolicyPrefix& prefix) {
    const std::string banned = prefix_text(prefix);
    for (const PolicyPrefix& pass : protection.pass_prefixes) {
        if (!prefix_holds(pass, prefix) && !prefix_holds(prefix, pass)) continue;
        const std::string matched = prefix_text(pass);
        const std::string relation = matched == banned            ? "the same prefix"
                                     : prefix_holds(pass, prefix) ? "which holds " + banned
                                                                  : "which is inside " + banned;
        return class_text(protection, pass.class_id) + " (action pass) matches " + matched + ", " + relation;
    }
    if (!protection.default_pass_class) return std::nullopt;
    const bool limited = std::any_of(protection.limited_prefixes.begin(), protection.limited_prefixes.end(),
                                     [&](const PolicyPrefix& outer) { return prefix_holds(outer, prefix); });
    if (limited) return std::nullopt;
    return "the default " + class_text(protection, *protection.default_pass_class) +
           " (action pass) takes the addresses of " + banned + " that no other class matches";
}

Result<PolicyPrefix> parse_ban_prefix(std::string_view text) {
    auto parsed = parse_prefix(std::string(text), 0);
    if (!parsed) return Error{parsed.error().message, "prefix"};
    if (parsed.value().length == 0)
        return Error{"\"" + std::string(text) +
                         "\" is every address of its family; a ban is for a prefix (a class with action = \"drop\" "
                         "drops everything)",
                     "prefix"};
    return parsed;
}

Status check_ban_reason(std::string_view reason) {
    if (reason.size() > BanStore::kMaxReasonBytes)
        return Error{"reason is " + std::to_string(reason.size()) + " bytes; at most " +
                         std::to_string(BanStore::kMaxReasonBytes),
                     "reason"};
    for (size_t at = 0; at < reason.size();) {
        uint32_t code_point = 0;
        const size_t length = utf8_length(reason, at, code_point);
        if (length == 0) return Error{"reason is not UTF-8 (at byte " + std::to_string(at) + ")", "reason"};
        if (code_point < 0x20 || (code_point >= 0x7f && code_point <= 0x9f)) {
            char hex[8];
            std::snprintf(hex, sizeof(hex), "U+%04X", code_point);
            return Error{"reason has a control character (" + std::string(hex) + " at byte " + std::to_string(at) +
                             "); give it on one line, printable",
                         "reason"};
        }
        at += length;
    }
    return ok_status();
}

void BanDropBaseline::reset_all(const std::vector<sluice_counter>& counters) {
    for (uint32_t slot = 0; slot < SLUICE_MAX_BANS; slot++) reset_slot(slot, counters);
}

void BanDropBaseline::reset_slot(uint32_t slot, const std::vector<sluice_counter>& counters) {
    if (slot < baseline_.size()) baseline_[slot] = slot < counters.size() ? counters[slot] : sluice_counter{};
}

sluice_counter BanDropBaseline::since(uint32_t slot, const std::vector<sluice_counter>& counters) const {
    if (slot >= baseline_.size() || slot >= counters.size()) return {};
    const sluice_counter& now = counters[slot];
    const sluice_counter& then = baseline_[slot];
    return {now.packets > then.packets ? now.packets - then.packets : 0,
            now.bytes > then.bytes ? now.bytes - then.bytes : 0};
}

std::string BanStore::path() const { return dir_ + "/" + std::string(kFileName); }

Result<BanStore> BanStore::open(const std::string& state_dir, uint32_t max_bans, uint64_t now_unix_ns) {
    BanStore store(state_dir, max_bans);
    const std::string path = store.path();
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0 && errno == ENOENT) return store;
    auto text = read_file(path);
    if (!text) return text.error();
    const json root = json::parse(text.value(), nullptr, false);
    if (root.is_discarded()) return Error{path + ": not JSON (a damaged file? it holds the bans in force)"};
    if (!root.is_object() || !root.contains("bans") || !root["bans"].is_array())
        return Error{path + ": expected an object with a \"bans\" array"};
    std::vector<Ban> bans;
    std::bitset<SLUICE_MAX_BANS> slots;
    size_t index = 0;
    for (const json& entry : root["bans"]) {
        const std::string where = path + ": ban " + std::to_string(++index);
        auto ban = ban_from_json(entry, where);
        if (!ban) return ban.error();
        if (slots.test(ban.value().slot))
            return Error{where + " (" + prefix_text(ban.value().prefix) + "): slot " +
                         std::to_string(ban.value().slot) + " is another ban's too"};
        slots.set(ban.value().slot);
        bans.push_back(std::move(ban.value()));
    }
    std::sort(bans.begin(), bans.end(), [](const Ban& a, const Ban& b) { return prefix_less(a.prefix, b.prefix); });
    const auto twice = std::adjacent_find(bans.begin(), bans.end(),
                                          [](const Ban& a, const Ban& b) { return same_prefix(a.prefix, b.prefix); });
    if (twice != bans.end()) return Error{path + ": " + prefix_text(twice->prefix) + " is banned twice"};
    if (auto taken = dataplanes_take(bans); !taken) return Error{path + ": " + taken.error().message};
    std::erase_if(bans, [&](const Ban& ban) { return ban.until_unix_ns <= now_unix_ns; });
    store.bans_ = std::move(bans);
    return store;
}

Status BanStore::store(std::vector<Ban> bans) {
    json list = json::array();
    for (const Ban& ban : bans) list.push_back(ban_to_json(ban));
    const std::string text = json{{"bans", std::move(list)}}.dump(2) + "\n";
    if (auto written = write_file_durably(dir_, kFileName, text); !written)
        return Error{
            "the bans could not be stored, so nothing changed: " + written.error().message, {}, ErrorCode::internal};
    bans_ = std::move(bans);
    return ok_status();
}

uint32_t BanStore::lowest_free_slot() const {
    std::bitset<SLUICE_MAX_BANS> used;
    for (const Ban& ban : bans_) used.set(ban.slot);
    for (uint32_t slot = 0; slot < SLUICE_MAX_BANS; slot++)
        if (!used.test(slot)) return slot;
    return SLUICE_MAX_BANS;  // unreachable while max_bans <= SLUICE_MAX_BANS: ban() refuses first
}

Result<BanOutcome> BanStore::ban(const BanRequest& request, uint64_t now_unix_ns, const PassProtection& protection) {
    const std::string banned = prefix_text(request.prefix);
    if (!host_bits_clear(request.prefix)) return Error{banned + ": host bits set past the prefix length", "prefix"};
    if (request.for_ns < kMinBanNs || request.for_ns > kMaxBanNs)
        return Error{"a ban lasts " + format_duration(kMinBanNs) + ".." + format_duration(kMaxBanNs) + ", not " +
                         format_duration(request.for_ns),
                     "for"};
    if (auto reason = check_ban_reason(request.reason); !reason) return reason.error();

    BanOutcome outcome;
    if (auto conflict = pass_conflict(protection, request.prefix)) {
        if (!request.force) {
            refused_protected_++;
            return Error{banned + " is protected by the running policy: " + *conflict +
                             ". A ban is checked before classification, so it would drop that traffic; "
                             "--force bans it all the same",
                         "prefix"};
        }
        outcome.overridden = *conflict;
    }

    std::vector<Ban> next = bans_;
    const auto at = std::lower_bound(next.begin(), next.end(), request.prefix,
                                     [](const Ban& ban, const PolicyPrefix& p) { return prefix_less(ban.prefix, p); });
    outcome.rebanned = at != next.end() && same_prefix(at->prefix, request.prefix);
    if (!outcome.rebanned && next.size() >= max_bans_) {
        refused_at_cap_++;
        return Error{"cannot ban " + banned + ": " + std::to_string(next.size()) +
                         (next.size() == 1 ? " ban is" : " bans are") +
                         " in force, as many as max_bans allows (sluiced.toml, or sluice-dpdk --max-bans; 1.." +
                         std::to_string(SLUICE_MAX_BANS) + "); unban one or raise max_bans",
                     "max_bans"};
    }
    Ban ban;
    if (outcome.rebanned) {
        ban = *at;
    } else {
        ban.prefix = request.prefix;
        ban.prefix.class_id = 0;
        ban.created_unix_ns = now_unix_ns;
        ban.slot = lowest_free_slot();
    }
    ban.until_unix_ns = now_unix_ns + request.for_ns;
    ban.reason = request.reason;
    ban.uid = request.uid;
    ban.forced = request.force;
    if (outcome.rebanned) {
        *at = ban;
    } else {
        next.insert(at, ban);
        if (auto taken = dataplanes_take(next); !taken)
            return Error{"cannot ban " + banned + ": " + taken.error().message, "prefix"};
    }
    if (auto stored = store(std::move(next)); !stored) return stored.error();
    outcome.ban = std::move(ban);
    return outcome;
}

Result<Ban> BanStore::unban(const PolicyPrefix& prefix) {
    const auto found =
        std::find_if(bans_.begin(), bans_.end(), [&](const Ban& ban) { return same_prefix(ban.prefix, prefix); });
    if (found == bans_.end()) {
        std::string held;
        for (const Ban& ban : bans_)
            if (prefix_holds(ban.prefix, prefix) || prefix_holds(prefix, ban.prefix))
                held += (held.empty() ? "" : ", ") + prefix_text(ban.prefix);
        return Error{prefix_text(prefix) + " is not banned" +
                         (held.empty() ? std::string() : " (banned and overlapping it: " + held + ")"),
                     "prefix"};
    }
    const Ban lifted = *found;
    std::vector<Ban> next = bans_;
    next.erase(next.begin() + (found - bans_.begin()));
    if (auto stored = store(std::move(next)); !stored) return stored.error();
    return lifted;
}

Result<std::vector<Ban>> BanStore::expire(uint64_t now_unix_ns) {
    std::vector<Ban> ended, next;
    for (const Ban& ban : bans_) (ban.until_unix_ns <= now_unix_ns ? ended : next).push_back(ban);
    if (ended.empty()) return ended;
    if (auto stored = store(std::move(next)); !stored) return stored.error();
    return ended;
}

Status BanStore::add_drops(const std::map<uint32_t, sluice_counter>& dropped_by_slot) {
    std::vector<Ban> next = bans_;
    bool changed = false;
    for (Ban& ban : next) {
        const auto found = dropped_by_slot.find(ban.slot);
        if (found == dropped_by_slot.end() || (found->second.packets == 0 && found->second.bytes == 0)) continue;
        ban.dropped_before.packets += found->second.packets;
        ban.dropped_before.bytes += found->second.bytes;
        changed = true;
    }
    return changed ? store(std::move(next)) : ok_status();
}

const Ban* BanStore::covering(uint8_t family, const uint8_t* addr, uint64_t now_unix_ns) const {
    PolicyPrefix host;
    host.family = family;
    host.length = static_cast<uint8_t>(family_bits(family));
    std::memcpy(host.addr.data(), addr, family == SLUICE_FAMILY_IPV4 ? 4 : 16);
    const Ban* best = nullptr;
    for (const Ban& ban : bans_)
        if (ban.until_unix_ns > now_unix_ns && prefix_holds(ban.prefix, host) &&
            (!best || ban.prefix.length > best->prefix.length))
            best = &ban;
    return best;
}

std::vector<DataplaneBan> BanStore::dataplane_bans(uint64_t now_unix_ns, uint64_t dataplane_now_ns) const {
    std::vector<DataplaneBan> bans;
    for (const Ban& ban : bans_) {
        if (ban.until_unix_ns <= now_unix_ns) continue;
        const uint64_t left = ban.until_unix_ns - now_unix_ns;
        // Saturating: a dataplane clock near its top must not wrap the end into the past.
        const uint64_t until = dataplane_now_ns > UINT64_MAX - left ? UINT64_MAX : dataplane_now_ns + left;
        bans.push_back(DataplaneBan{ban.prefix, until, ban.slot});
    }
    return bans;
}

size_t BanStore::active(uint64_t now_unix_ns) const {
    return static_cast<size_t>(
        std::count_if(bans_.begin(), bans_.end(), [&](const Ban& ban) { return ban.until_unix_ns > now_unix_ns; }));
}

}  // namespace sluice
