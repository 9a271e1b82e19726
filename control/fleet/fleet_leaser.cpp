// SPDX-License-Identifier: Apache-2.0
#include "fleet_leaser.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <utility>

namespace sluice::fleet {

using Clock = std::chrono::steady_clock;

struct FleetLeaser::Account {
    sluice_fleet_credit* cell = nullptr;
    std::string dataplane;
    FleetQuota quota;
    std::string key;
    FleetBucketSpec spec;
    uint64_t policy_version = 0;
    LeaseState state = LeaseState::leasing;

    int64_t redis_held = 0;       // credit Redis granted that the cell still holds
    int64_t held_after_last = 0;  // what the cell held right after the last round
    uint64_t last_taken = 0;      // the cell's `taken` at the last round
    Clock::time_point last_success;
    Clock::time_point last_exchange;  // the last successful exchange: when the cell's credit was last re-granted
    bool idle_lease = false;          // the last attempt succeeded, asking for the idle lease (min_lease) only
    Clock::time_point last_topup;     // open fallback: local credit added up to here
    double topup_carry = 0;           // open fallback: the fraction of a unit not yet added

    uint64_t redis_granted_total = 0;
    uint64_t fallback_granted_total = 0;
    uint64_t exchanges = 0, failures = 0, fallbacks = 0;
    uint64_t last_lease = 0;
    uint64_t exchange_ns = 0;
    uint64_t idle_skips = 0;
};

namespace {

uint64_t load_taken(const sluice_fleet_credit* cell) { return __atomic_load_n(&cell->taken, __ATOMIC_RELAXED); }

double seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }

// Sets the cell's available credit to 0: revokes what it holds, or forgives
// an overdraft. Returns what it held before (negative: the overdraft).
int64_t zero_cell(sluice_fleet_credit* cell) {
    const int64_t avail = sluice_fleet_available(cell);
    if (avail != 0) sluice_fleet_grant(cell, -avail);
    return avail;
}

}  // namespace

std::string_view to_string(LeaseState state) {
    switch (state) {
        case LeaseState::leasing:
            return "leasing";
        case LeaseState::fallback:
            return "fallback";
    }
    return "unknown";
}

uint64_t FleetLeaser::min_lease(uint64_t rate_per_s, std::chrono::milliseconds lease_period) {
    const double per_period = static_cast<double>(rate_per_s) * seconds(lease_period) / 64.0;
    return std::max<uint64_t>(1, static_cast<uint64_t>(per_period));
}

FleetLeaser::FleetLeaser(FleetLeaserOptions options)
    : options_(std::move(options)), script_(options_.ttl_margin), client_(options_.redis) {}

FleetLeaser::~FleetLeaser() {
    stop();
    std::lock_guard lock(mu_);
    std::vector<Account*> all;
    for (auto& [key, account] : accounts_) all.push_back(account.get());
    close_accounts_locked(all);
    accounts_.clear();
}

void FleetLeaser::log(const std::string& line) const {
    if (options_.log) options_.log(line);
}

void FleetLeaser::set_quotas(uint64_t policy_version, std::vector<FleetQuota> quotas) {
    std::lock_guard lock(mu_);
    policy_version_ = policy_version;
    quotas_.clear();
    for (auto& quota : quotas) {
        if (quota.class_id >= SLUICE_MAX_CLASSES) {
            log("fleet class " + quota.class_name + ": class id " + std::to_string(quota.class_id) +
                " out of range; not leased");
            continue;
        }
        const FleetBucketSpec spec{.rate_per_s = static_cast<double>(quota.rate_per_s), .burst = quota.burst};
        if (auto valid = validate_fleet_bucket_spec(spec); !valid) {
            log("fleet class " + quota.class_name + ": " + valid.error().message + "; not leased");
            continue;
        }
        const uint32_t id = quota.class_id;
        quotas_[id] = std::move(quota);
    }
    reconcile_locked();
    request_round();
}

void FleetLeaser::attach(const std::string& name, sluice_fleet_credit* cells) {
    std::lock_guard lock(mu_);
    auto& dataplane = dataplanes_[reinterpret_cast<uintptr_t>(cells)];
    if (dataplane.refs++ == 0) {
        dataplane.name = name;
        dataplane.cells = cells;
    }
    reconcile_locked();
    request_round();
}

void FleetLeaser::detach(sluice_fleet_credit* cells) {
    std::lock_guard lock(mu_);
    const auto it = dataplanes_.find(reinterpret_cast<uintptr_t>(cells));
    if (it == dataplanes_.end()) return;
    if (--it->second.refs > 0) return;
    dataplanes_.erase(it);
    reconcile_locked();
}

// Makes accounts_ = dataplanes_ x quotas_: closes accounts whose dataplane
// or quota is gone or whose key changed, then opens the missing ones.
void FleetLeaser::reconcile_locked() {
    std::vector<Account*> closing;
    std::vector<AccountKey> closing_keys;
    for (auto& [akey, account] : accounts_) {
        const auto quota = quotas_.find(akey.second);
        const bool keep = dataplanes_.contains(akey.first) && quota != quotas_.end() &&
                          fleet_bucket_key(options_.key_namespace, quota->second.class_name,
                                           quota->second.definition_hash) == account->key;
        if (!keep) {
            closing.push_back(account.get());
            closing_keys.push_back(akey);
        }
    }
    close_accounts_locked(closing);
    for (const auto& akey : closing_keys) accounts_.erase(akey);

    const auto now = options_.now ? options_.now() : Clock::now();
    for (const auto& [cells_id, dataplane] : dataplanes_) {
        for (const auto& [class_id, quota] : quotas_) {
            auto& slot = accounts_[{cells_id, class_id}];
            if (!slot) {
                slot = std::make_unique<Account>();
                Account& a = *slot;
                a.cell = &dataplane.cells[class_id];
                a.key = fleet_bucket_key(options_.key_namespace, quota.class_name, quota.definition_hash);
                a.last_success = now;
                // Leftover credit was not granted to this leaser: revoke it, return nothing.
                zero_cell(a.cell);
                a.last_taken = load_taken(a.cell);
            }
            Account& a = *slot;
            a.dataplane = dataplane.name;
            a.quota = quota;  // same key: fail_open and fallback rate may still have changed
            a.spec = FleetBucketSpec{.rate_per_s = static_cast<double>(quota.rate_per_s), .burst = quota.burst};
            a.policy_version = policy_version_;
        }
    }
}

// Closing: revoke what the cell holds, then one exchange asking for nothing
// and returning the Redis-granted part of it (less any overdraft, as debt).
// After an unreachable error the remaining accounts only revoke.
void FleetLeaser::close_accounts_locked(std::vector<Account*> accounts) {
    bool skip = false;
    for (Account* a : accounts) {
        const int64_t held = std::max<int64_t>(zero_cell(a->cell), 0);
        // Taken between the read and the revoke: already returned above, so charge it.
        const int64_t overdraft = std::min<int64_t>(sluice_fleet_available(a->cell), 0);
        if (overdraft != 0) sluice_fleet_grant(a->cell, -overdraft);
        const bool open_fallback = a->state == LeaseState::fallback && a->quota.fail_open;
        const int64_t returned = open_fallback ? 0 : std::min(held, a->redis_held) + overdraft;
        a->redis_held = 0;
        if (skip || returned == 0) continue;
        auto exchanged = script_.exchange(client_, a->key, a->spec, 0, returned);
        if (!exchanged) {
            ++a->failures;
            if (exchanged.error().code == ErrorCode::unreachable) skip = true;
        } else {
            ++a->exchanges;
        }
    }
}

void FleetLeaser::run_once() {
    std::lock_guard lock(mu_);
    round_locked();
}

void FleetLeaser::round_locked() {
    // After one `unreachable` error the rest of the round fails at once with
    // it, so a round waits on at most one timeout.
    std::optional<Error> unreachable;
    for (auto& [akey, account] : accounts_) {
        auto found = lease_one_locked(*account, unreachable ? &*unreachable : nullptr);
        if (found && !unreachable) unreachable = std::move(found);
    }
}

std::optional<Error> FleetLeaser::lease_one_locked(Account& a, const Error* skip_error) {
    const auto now = options_.now ? options_.now() : Clock::now();
    const int64_t avail = sluice_fleet_available(a.cell);
    const uint64_t taken = load_taken(a.cell);
    const auto spent = static_cast<double>(std::max<int64_t>(static_cast<int64_t>(taken - a.last_taken), 0));
    a.last_taken = taken;

    const auto floor_lease = static_cast<double>(min_lease(a.quota.rate_per_s, options_.lease_period));
    const bool exhausted = static_cast<double>(avail) < 0.1 * static_cast<double>(a.held_after_last);
    // An exhausted lease grows fourfold: from min_lease to a full period's
    // rate in three rounds (doubling took six, ~0.45 s of quota lost at every
    // start); what it does not spend goes back at the next round.
    double want = exhausted ? std::max(4 * spent, floor_lease) : 1.25 * spent + floor_lease;
    want = std::min(want, static_cast<double>(a.quota.burst));
    const auto request = static_cast<uint64_t>(std::ceil(want));
    // Open fallback holds only local credit: return nothing, revoke it on success.
    const bool open_fallback = a.state == LeaseState::fallback && a.quota.fail_open;

    // Idle: nothing spent since a successful exchange that asked only for
    // the idle lease (so the cell holds min_lease, not a busy round's
    // leftover), and asking for it again: skip, until idle_hold has passed
    // since that exchange. A skip is not a failure: unavailability counts
    // from the first failed exchange after it.
    const bool idle = spent == 0 && a.idle_lease && static_cast<double>(request) <= floor_lease &&
                      avail >= static_cast<int64_t>(request);
    if (!skip_error && idle && a.state == LeaseState::leasing && now - a.last_exchange < options_.idle_hold) {
        ++a.idle_skips;
        a.last_success = now;
        return std::nullopt;
    }
    a.last_lease = request;
    a.idle_lease = false;
    const int64_t returned = open_fallback ? 0 : avail < 0 ? avail : std::min(avail, a.redis_held);

    Error error;
    std::optional<Error> found_unreachable;
    if (skip_error) {
        error = *skip_error;
    } else {
        const auto sent = Clock::now();
        auto exchanged = script_.exchange(client_, a.key, a.spec, request, returned);
        if (exchanged) {
            a.exchange_ns += static_cast<uint64_t>(
                std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - sent).count());
            const auto granted = static_cast<int64_t>(exchanged.value().granted);
            const int64_t given_back = open_fallback ? std::max<int64_t>(avail, 0) : returned;
            sluice_fleet_grant(a.cell, granted - given_back);
            a.redis_held = std::max<int64_t>(sluice_fleet_available(a.cell), 0);
            a.held_after_last = a.redis_held;
            a.redis_granted_total += exchanged.value().granted;
            ++a.exchanges;
            a.last_success = now;
            a.last_exchange = now;
            a.idle_lease = static_cast<double>(request) <= floor_lease;
            if (a.state == LeaseState::fallback) {
                a.state = LeaseState::leasing;
                log("fleet class " + a.quota.class_name + " (" + a.key + ") on " + a.dataplane +
                    ": Redis reachable again: leasing");
            }
            return std::nullopt;
        }
        error = exchanged.error();
        if (error.code == ErrorCode::unreachable) found_unreachable = error;
    }

    ++a.failures;
    if (a.state == LeaseState::leasing && now - a.last_success >= options_.unavailable_after) {
        a.state = LeaseState::fallback;
        ++a.fallbacks;
        std::string line = "fleet class " + a.quota.class_name + " (" + a.key + ") on " + a.dataplane +
                           ": Redis unavailable (" + error.message + "); ";
        if (a.quota.fail_open) {
            // The Redis-granted credit stays in the cell as local credit: Redis counted it as granted.
            a.redis_held = 0;
            a.last_topup = now - options_.lease_period;
            a.topup_carry = 0;
            line += "fail-open at " + std::to_string(a.quota.fallback_rate_per_s) + "/s";
        } else {
            line +=
                "fail-closed: admitting only " + std::to_string(std::max<int64_t>(avail, 0)) + " units already leased";
        }
        log(line);
    }
    if (a.state == LeaseState::fallback && a.quota.fail_open) {
        const auto rate = static_cast<double>(a.quota.fallback_rate_per_s);
        const double due = rate * seconds(now - a.last_topup) + a.topup_carry;
        a.last_topup = now;
        const auto cap = static_cast<int64_t>(2 * rate * seconds(options_.lease_period));
        const int64_t room = std::max<int64_t>(cap - sluice_fleet_available(a.cell), 0);
        const auto whole = static_cast<int64_t>(due);
        const int64_t add = std::min(whole, room);
        a.topup_carry = add < whole ? 0 : due - static_cast<double>(whole);
        if (add > 0) {
            sluice_fleet_grant(a.cell, add);
            a.fallback_granted_total += static_cast<uint64_t>(add);
        }
        a.held_after_last = std::max<int64_t>(sluice_fleet_available(a.cell), 0);
    } else {
        // Closed (or not yet in fallback): keep what is held.
        a.redis_held = std::min(a.redis_held, std::max<int64_t>(sluice_fleet_available(a.cell), 0));
        a.held_after_last = a.redis_held;
    }
    return found_unreachable;
}

std::vector<FleetClassStatus> FleetLeaser::status() const {
    std::lock_guard lock(mu_);
    std::vector<FleetClassStatus> out;
    out.reserve(accounts_.size());
    for (const auto& [akey, a] : accounts_) {
        out.push_back(FleetClassStatus{.dataplane = a->dataplane,
                                       .class_id = a->quota.class_id,
                                       .class_name = a->quota.class_name,
                                       .key = a->key,
                                       .policy_version = a->policy_version,
                                       .state = a->state,
                                       .fail_open = a->quota.fail_open,
                                       .credit_available = sluice_fleet_available(a->cell),
                                       .redis_granted_total = a->redis_granted_total,
                                       .fallback_granted_total = a->fallback_granted_total,
                                       .exchanges = a->exchanges,
                                       .failures = a->failures,
                                       .fallbacks = a->fallbacks,
                                       .last_lease = a->last_lease,
                                       .exchange_ns = a->exchange_ns,
                                       .idle_skips = a->idle_skips});
    }
    return out;
}

void FleetLeaser::start() {
    std::lock_guard lock(thread_mu_);
    if (thread_.joinable()) return;
    stop_ = false;
    thread_ = std::thread([this] { thread_main(); });
}

void FleetLeaser::stop() {
    {
        std::lock_guard lock(thread_mu_);
        stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void FleetLeaser::request_round() {
    {
        std::lock_guard lock(thread_mu_);
        round_requested_ = true;
    }
    wake_.notify_all();
}

void FleetLeaser::thread_main() {
    std::mt19937_64 random{std::random_device{}()};
    const auto period = options_.lease_period;
    std::uniform_int_distribution<int64_t> wait_us(std::chrono::microseconds(period).count() / 2,
                                                   std::chrono::microseconds(period).count());
    std::unique_lock lock(thread_mu_);
    while (!stop_) {
        round_requested_ = false;
        lock.unlock();
        run_once();
        lock.lock();
        wake_.wait_for(lock, std::chrono::microseconds(wait_us(random)), [this] { return stop_ || round_requested_; });
    }
}

}  // namespace sluice::fleet
