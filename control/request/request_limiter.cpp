// SPDX-License-Identifier: Apache-2.0
#include "request_limiter.h"

#include <openssl/hmac.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <random>
#include <unordered_map>

#include "clock.h"
#include "rate_limits.h"
#include "sluice/fleet.h"
#include "sluice/window.h"

namespace sluice::request {

std::string_view to_string(Code code) { return code == Code::ok ? "ok" : "over_limit"; }

std::string_view to_string(Refusal refusal) {
    switch (refusal) {
        case Refusal::none:
            return "none";
        case Refusal::limit:
            return "limit";
        case Refusal::fleet:
            return "fleet";
        case Refusal::table_full:
            return "table_full";
        case Refusal::domain_ceiling:
            return "domain_ceiling";
    }
    return "unknown";
}

namespace {

// One counter's state: what the core keeps for the class's algorithm.
struct Counter {
    __u64 tat = 0;                    // gcra
    sluice_window_count count{};      // fixed_window, sliding_window
    std::unique_ptr<sluice_log> log;  // sliding_log
};

bool is_log(const RequestClass& cls) { return cls.limit.algorithm == SLUICE_ALGORITHM_SLIDING_LOG; }

// Whether the counters a class wrote under `before` mean the same under `after`.
bool same_counting(const RequestClass& before, const RequestClass& after) {
    if (before.domain != after.domain || before.name != after.name) return false;
    if (before.limit.algorithm != after.limit.algorithm) return false;
    if (before.keys.size() != after.keys.size()) return false;
    for (size_t i = 0; i < before.keys.size(); ++i)
        if (before.keys[i].key != after.keys[i].key || before.keys[i].value != after.keys[i].value) return false;
    if (before.limit.algorithm == SLUICE_ALGORITHM_GCRA) return true;  // a TAT is time: it carries
    if (before.limit.window.window_ns != after.limit.window.window_ns) return false;
    return !is_log(after) || before.limit.window.limit == after.limit.window.limit;  // a log is laid out by its limit
}

// A counter's key holds a value as it is up to this many bytes, and a
// longer one as a keyed hash: whatever a client sends, a counter holds at
// most this much of each value (README, "Request-level decisions").
constexpr size_t kValueBytesKept = 64;
constexpr size_t kValueHashBytes = 16;  // of HMAC-SHA256: collisions out of reach
// Counters a request that finds the table full looks at, per shard it
// touches, for idle ones to reclaim.
constexpr size_t kReclaimLook = 64;
using ValueHashKey = std::array<unsigned char, 32>;

ValueHashKey random_value_hash_key() {
    ValueHashKey key;
    std::random_device device;
    for (size_t i = 0; i < key.size(); i += sizeof(unsigned)) {
        const unsigned word = device();
        std::memcpy(key.data() + i, &word, std::min(sizeof(word), key.size() - i));
    }
    return key;
}

// One unfixed value of a counter's key, after the separator: '=' and the
// value, or '#' and its hash.
void append_counter_value(std::string& key, std::string_view value, const ValueHashKey& hash_key) {
    key += '\x1f';
    if (value.size() <= kValueBytesKept) {
        key += '=';
        key.append(value);
        return;
    }
    std::array<unsigned char, 32> mac{};
    unsigned int length = 0;
    HMAC(EVP_sha256(), hash_key.data(), static_cast<int>(hash_key.size()),
         reinterpret_cast<const unsigned char*>(value.data()), value.size(), mac.data(), &length);
    key += '#';
    key.append(reinterpret_cast<const char*>(mac.data()), kValueHashBytes);
}

// "k=v,k=v" over a descriptor's entries; a value longer than a counter keeps
// is cut, with its length.
std::string describe_entries(const Descriptor& descriptor) {
    std::string text;
    for (const DescriptorEntry& entry : descriptor) {
        if (!text.empty()) text += ',';
        text += entry.key + "=";
        if (entry.value.size() <= kValueBytesKept)
            text += entry.value;
        else
            text += entry.value.substr(0, kValueBytesKept - 16) + "...(" + std::to_string(entry.value.size()) + " bytes)";
    }
    return text;
}

}  // namespace

struct RequestLimiter::Impl {
    struct Version {
        uint64_t number = 0;
        std::vector<RequestClass> classes;
        std::vector<uint64_t> uids;  // per class: whose counters it reads
        std::vector<RequestDomain> domains;
        std::map<std::string, std::vector<size_t>, std::less<>> by_domain;  // class indices
    };

    struct Shard {
        std::mutex mu;
        std::unordered_map<std::string, Counter> counters;
        size_t reclaim_bucket = 0;  // where the next look for idle counters starts
    };

    // One counter a query names, checked before anything is charged.
    struct Check {
        size_t cls = 0;  // index in the version
        std::string key;
        size_t shard = 0;
        uint64_t weight = 0;
        std::string values;  // "k=v,..." of the whole descriptor, for hot keys
        bool admitted = false;
        bool exists = false;
        Counter next;
        sluice_quota quota{};
    };

    explicit Impl(LimiterOptions o)
        : options(std::move(o)), shards(std::max<size_t>(1, options.shards)), value_hash_key(random_value_hash_key()) {
        if (!options.clock) options.clock = monotonic_ns;
        credits = std::make_unique<sluice_fleet_credit[]>(SLUICE_MAX_CLASSES);
        current = std::make_shared<Version>();
    }

    std::shared_ptr<const Version> snapshot() const {
        std::lock_guard lock(version_mu);
        return current;
    }

    // The class of `domain` a descriptor matches: same keys in order, its
    // fixed values; the most fixed values wins.
    static const size_t* match(const Version& v, const std::vector<size_t>& candidates, const Descriptor& d) {
        const size_t* best = nullptr;
        size_t best_fixed = 0;
        for (const size_t& index : candidates) {
            const RequestClass& cls = v.classes[index];
            if (cls.keys.size() != d.size()) continue;
            size_t fixed = 0;
            bool fits = true;
            for (size_t i = 0; i < d.size() && fits; ++i) {
                fits = cls.keys[i].key == d[i].key && (!cls.keys[i].value || *cls.keys[i].value == d[i].value);
                fixed += cls.keys[i].value ? 1 : 0;
            }
            if (fits && (!best || fixed > best_fixed)) {
                best = &index;
                best_fixed = fixed;
            }
        }
        return best;
    }

    // Steps a check's counter by its weight (0: only reads it) into check.next.
    static bool step(const RequestClass& cls, const Counter& counter, bool exists, uint64_t now, uint64_t weight,
                     Counter& next, sluice_quota& quota) {
        const RequestLimit& limit = cls.limit;
        switch (limit.algorithm) {
            case SLUICE_ALGORITHM_GCRA: {
                next.tat = counter.tat;
                return sluice_gcra_step(&limit.gcra, counter.tat, now, weight, &next.tat, &quota);
            }
            case SLUICE_ALGORITHM_SLIDING_LOG: {
                next.log = std::make_unique<sluice_log>();
                if (exists && counter.log)
                    *next.log = *counter.log;
                else
                    std::memset(next.log.get(), 0, sizeof(sluice_log));
                if (weight == 0) {  // a read: step a copy, report what was there
                    sluice_log copy = *next.log;
                    bool admits = sluice_log_step(&limit.window, &copy, now, &quota);
                    if (admits) quota.remaining = std::min<uint64_t>(quota.remaining + 1, limit.window.limit);
                    return true;
                }
                return sluice_log_step(&limit.window, next.log.get(), now, &quota);
            }
            default: {
                sluice_window_count in = exists ? counter.count : sluice_window_count{};
                next.count = in;
                return sluice_window_step(&limit.window, &in, now, weight, &next.count, &quota);
            }
        }
    }

    // Is this counter's state back to nothing admitted at `now`?
    // Drops the idle counters among the next kReclaimLook of `shard` (its
    // lock held), those of classes no longer in the policy too; never one
    // `checks` names.
    void reclaim(Shard& shard, const Version& v, const std::vector<Check>& checks, uint64_t now) {
        auto& map = shard.counters;
        const size_t buckets = map.bucket_count();
        std::vector<std::string> idle_keys;
        size_t looked = 0;
        // Empty buckets are looked at too, so a sparse shard stops as soon.
        for (size_t visited = 0; visited < std::min(buckets, 4 * kReclaimLook) && looked < kReclaimLook; visited++) {
            shard.reclaim_bucket = (shard.reclaim_bucket + 1) % buckets;
            for (auto it = map.begin(shard.reclaim_bucket); it != map.end(shard.reclaim_bucket); ++it, ++looked) {
                const bool live = std::any_of(checks.begin(), checks.end(),
                                              [&](const Check& c) { return c.key == it->first; });
                const uint64_t uid = std::stoull(it->first.substr(0, it->first.find('\x1f')));
                const RequestClass* owner = nullptr;
                for (size_t k = 0; k < v.uids.size() && !owner; ++k)
                    if (v.uids[k] == uid) owner = &v.classes[k];
                if (!live && (!owner || idle(*owner, it->second, now))) idle_keys.push_back(it->first);
            }
        }
        for (const std::string& key : idle_keys) map.erase(key);
        counter_count -= idle_keys.size();
    }

    static bool idle(const RequestClass& cls, const Counter& counter, uint64_t now) {
        Counter scratch;
        sluice_quota quota{};
        step(cls, counter, true, now, 0, scratch, quota);
        return quota.reset_ns == 0;
    }

    LimiterOptions options;
    std::vector<Shard> shards;
    const ValueHashKey value_hash_key;  // new each start, as the counters are
    std::unique_ptr<sluice_fleet_credit[]> credits;
    std::atomic<size_t> counter_count{0};

    mutable std::mutex version_mu;
    std::shared_ptr<const Version> current;
    uint64_t next_uid = 1;
};

RequestLimiter::RequestLimiter(LimiterOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
RequestLimiter::~RequestLimiter() = default;

void RequestLimiter::apply(uint64_t version, const std::vector<RequestClass>& classes,
                           const std::vector<RequestDomain>& domains) {
    auto next = std::make_shared<Impl::Version>();
    next->number = version;
    next->classes = classes;
    next->domains = domains;
    std::shared_ptr<const Impl::Version> before = impl_->snapshot();
    std::lock_guard lock(impl_->version_mu);
    for (size_t i = 0; i < classes.size(); ++i) {
        const RequestClass& cls = classes[i];
        uint64_t uid = 0;
        for (size_t j = 0; j < before->classes.size() && !uid; ++j) {
            const RequestClass& old = before->classes[j];
            if (old.domain != cls.domain || old.name != cls.name) continue;
            if (same_counting(old, cls)) {
                uid = before->uids[j];
            } else if (impl_->options.log) {
                impl_->options.log("request class \"" + cls.name + "\" (domain \"" + cls.domain +
                                   "\"): " + algorithm_name(old.limit.algorithm) + " -> " +
                                   algorithm_name(cls.limit.algorithm) + ": its counters start from fresh state");
            }
        }
        next->uids.push_back(uid ? uid : impl_->next_uid++);
        next->by_domain[cls.domain].push_back(i);
    }
    impl_->current = std::move(next);
}

std::vector<Descriptor> RequestLimiter::descriptors_for(std::string_view domain,
                                                        const std::map<std::string, std::string>& entries) const {
    std::shared_ptr<const Impl::Version> v = impl_->snapshot();
    std::vector<Descriptor> out;
    auto it = v->by_domain.find(domain);
    if (it == v->by_domain.end()) return out;
    for (size_t index : it->second) {
        const RequestClass& cls = v->classes[index];
        Descriptor d;
        bool complete = true;
        for (const RequestKey& key : cls.keys) {
            auto found = entries.find(key.key);
            if (found == entries.end() || (key.value && *key.value != found->second)) {
                complete = false;
                break;
            }
            d.push_back({key.key, found->second});
        }
        if (complete && std::find(out.begin(), out.end(), d) == out.end()) out.push_back(std::move(d));
    }
    return out;
}

Result<Answer> RequestLimiter::decide(const Query& query) {
    Impl& im = *impl_;
    std::shared_ptr<const Impl::Version> v = im.snapshot();
    Answer answer;
    answer.policy_version = v->number;
    answer.pinned = v;
    answer.statuses.resize(query.descriptors.size());

    static const std::vector<size_t> kNone;
    auto domain = v->by_domain.find(query.domain);
    const std::vector<size_t>& candidates = domain == v->by_domain.end() ? kNone : domain->second;

    std::vector<Impl::Check> checks;
    std::vector<size_t> check_of(query.descriptors.size(), SIZE_MAX);
    for (size_t i = 0; i < query.descriptors.size(); ++i) {
        const Descriptor& d = query.descriptors[i];
        const size_t* index = Impl::match(*v, candidates, d);
        if (!index) continue;
        const RequestClass& cls = v->classes[*index];
        uint64_t named =
            i < query.descriptor_hits.size() && query.descriptor_hits[i] ? query.descriptor_hits[i] : query.hits;
        uint64_t weight = named ? named : cls.cost;
        if (weight > cls.max_cost)
            return Error{"descriptor " + std::to_string(i + 1) + " (" + describe_entries(d) + "): weight " +
                             std::to_string(weight) + " is above request_class \"" + cls.name +
                             "\".max_cost = " + std::to_string(cls.max_cost),
                         "max_cost", ErrorCode::invalid};
        std::string key = std::to_string(v->uids[*index]);
        for (size_t k = 0; k < d.size(); ++k)
            if (!cls.keys[k].value) append_counter_value(key, d[k].value, im.value_hash_key);
        auto same = std::find_if(checks.begin(), checks.end(), [&](const Impl::Check& c) { return c.key == key; });
        if (same != checks.end()) {  // named twice: charged once, at the larger weight
            same->weight = std::max(same->weight, weight);
            check_of[i] = static_cast<size_t>(same - checks.begin());
            continue;
        }
        Impl::Check check;
        check.cls = *index;
        check.shard = std::hash<std::string>{}(key) % im.shards.size();
        check.key = std::move(key);
        check.weight = weight;
        check.values = describe_entries(d);
        check_of[i] = checks.size();
        checks.push_back(std::move(check));
    }

    // Lock every shard the query touches, in ascending order.
    std::vector<size_t> order;
    for (const Impl::Check& c : checks) order.push_back(c.shard);
    std::sort(order.begin(), order.end());
    order.erase(std::unique(order.begin(), order.end()), order.end());
    std::vector<std::unique_lock<std::mutex>> locks;
    locks.reserve(order.size());
    for (size_t shard : order) locks.emplace_back(im.shards[shard].mu);

    uint64_t now = im.options.clock();
    bool refused = false, shadow_refused = false, retry_known = true;
    uint64_t retry_after = 0;
    size_t fresh = 0;
    for (Impl::Check& c : checks) {
        const RequestClass& cls = v->classes[c.cls];
        auto& map = im.shards[c.shard].counters;
        auto found = map.find(c.key);
        c.exists = found != map.end();
        static const Counter kEmpty;
        c.admitted = Impl::step(cls, c.exists ? found->second : kEmpty, c.exists, now, c.weight, c.next, c.quota);
        fresh += c.exists ? 0 : 1;
        if (c.admitted) continue;
        if (cls.shadow) {
            shadow_refused = true;
            continue;
        }
        if (!refused) {
            answer.refused_by = &cls;
            answer.refused_key = c.values;
        }
        refused = true;
        answer.refusal = Refusal::limit;
        if (c.quota.retry_after_ns == SLUICE_NEVER)
            retry_known = false;
        else
            retry_after = std::max<uint64_t>(retry_after, c.quota.retry_after_ns);
    }

    // Room for the counters this query would create: idle ones the shards'
    // bounded looks find make it; else the classes that need one decide.
    if (!refused && fresh && im.counter_count.load() + fresh > im.options.max_counters) {
        for (size_t shard : order) im.reclaim(im.shards[shard], *v, checks, now);
        if (im.counter_count.load() + fresh > im.options.max_counters) {
            const bool open = std::all_of(checks.begin(), checks.end(), [&](const Impl::Check& c) {
                return c.exists || v->classes[c.cls].open_when_table_full;
            });
            if (open) {
                answer.uncounted = true;
            } else {
                refused = true;
                retry_known = false;
                answer.refusal = Refusal::table_full;
            }
        }
    }

    // Fleet credit, after every local level admitted.
    std::vector<const Impl::Check*> taken;
    if (!refused) {
        for (const Impl::Check& c : checks) {
            const RequestClass& cls = v->classes[c.cls];
            if (!cls.fleet || !c.admitted || cls.shadow) continue;
            if (sluice_fleet_take(&im.credits[cls.id], c.weight)) {
                taken.push_back(&c);
                continue;
            }
            for (const Impl::Check* t : taken) sluice_fleet_refund(&im.credits[v->classes[t->cls].id], t->weight);
            taken.clear();
            refused = true;
            retry_known = false;
            answer.refusal = Refusal::fleet;
            answer.refused_by = &cls;
            answer.refused_key = c.values;
            break;
        }
    }

    if (!refused) {
        for (Impl::Check& c : checks) {
            if (!c.admitted) continue;  // a class in shadow that would refuse: charges nothing
            if (!c.exists && answer.uncounted) continue;
            auto& map = im.shards[c.shard].counters;
            Counter& counter = map[c.key];
            if (!c.exists) ++im.counter_count;
            counter = std::move(c.next);
        }
    } else {
        // Nothing was charged: what an admitting counter reports is its state as it is.
        for (Impl::Check& c : checks) {
            if (!c.admitted) continue;
            auto& map = im.shards[c.shard].counters;
            auto found = map.find(c.key);
            Counter scratch;
            static const Counter kEmpty;
            Impl::step(v->classes[c.cls], found != map.end() ? found->second : kEmpty, found != map.end(), now, 0,
                       scratch, c.quota);
        }
    }
    locks.clear();

    for (size_t i = 0; i < query.descriptors.size(); ++i) {
        if (check_of[i] == SIZE_MAX) continue;
        const Impl::Check& c = checks[check_of[i]];
        const RequestClass& cls = v->classes[c.cls];
        LimitAnswer limit;
        limit.cls = &cls;
        if (cls.limit.algorithm == SLUICE_ALGORITHM_GCRA) {
            limit.quota = cls.limit.burst;
            limit.window_ns = cls.limit.gcra.tolerance_ns;
        } else {
            limit.quota = cls.limit.window.limit;
            limit.window_ns = cls.limit.window.window_ns;
        }
        limit.remaining = c.quota.remaining;
        limit.reset_ns = c.quota.reset_ns;
        limit.retry_after_ns = c.admitted ? 0 : c.quota.retry_after_ns;
        answer.statuses[i].limit = limit;
        answer.statuses[i].code = c.admitted || cls.shadow ? Code::ok : Code::over_limit;
        if (refused && answer.refusal == Refusal::fleet && answer.refused_by == &cls)
            answer.statuses[i].code = Code::over_limit;
    }
    if (refused) {
        answer.overall = Code::over_limit;
        if (retry_known && answer.refusal == Refusal::limit) answer.retry_after_ns = retry_after;
    } else {
        answer.shadowed = shadow_refused;
    }
    return answer;
}

std::optional<RequestDomain> RequestLimiter::domain(std::string_view name) const {
    std::shared_ptr<const Impl::Version> v = impl_->snapshot();
    for (const RequestDomain& d : v->domains)
        if (d.name == name) return d;
    return std::nullopt;
}

uint64_t RequestLimiter::version() const { return impl_->snapshot()->number; }

sluice_fleet_credit* RequestLimiter::fleet_credits() { return impl_->credits.get(); }

size_t RequestLimiter::counters() const { return impl_->counter_count.load(); }

size_t RequestLimiter::sweep() {
    Impl& im = *impl_;
    std::shared_ptr<const Impl::Version> v = im.snapshot();
    std::unordered_map<uint64_t, const RequestClass*> owners;
    for (size_t k = 0; k < v->uids.size(); ++k) owners[v->uids[k]] = &v->classes[k];
    size_t dropped = 0;
    for (Impl::Shard& shard : im.shards) {
        std::lock_guard lock(shard.mu);
        uint64_t now = im.options.clock();
        for (auto it = shard.counters.begin(); it != shard.counters.end();) {
            auto owner = owners.find(std::stoull(it->first.substr(0, it->first.find('\x1f'))));
            if (owner == owners.end() || Impl::idle(*owner->second, it->second, now)) {
                it = shard.counters.erase(it);
                --im.counter_count;
                ++dropped;
            } else {
                ++it;
            }
        }
    }
    return dropped;
}

}  // namespace sluice::request
