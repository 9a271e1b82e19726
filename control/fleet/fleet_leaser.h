// SPDX-License-Identifier: Apache-2.0
// The fleet leaser: moves credit between the fleet's Redis buckets
// (fleet_bucket.h) and this node's dataplane credit cells (sluice/fleet.h).
// The packet path only takes from a cell; the leaser is the only writer of
// its `granted`.
//
// An account is one (dataplane, fleet class) pair: a cell, a quota and the
// quota's Redis key. Every round (every P = lease_period, see start()) each
// account makes one exchange with its bucket: it returns what it did not
// spend of what Redis granted it and asks for what it expects to spend in
// the next round:
//   avail  = granted - taken in the cell; R = min(max(avail, 0), redis_held),
//            or avail itself when negative (overdraft, reported as debt)
//   spent  = taken now - taken at the last round
//   want   = exhausted (avail < 10% of what it held after the last round)
//              ? max(4 spent, min_lease) : 1.25 spent + min_lease,
//            capped at burst; min_lease = max(1, rate P / 64)
//   grant(cell, granted - R); redis_held = what the cell now holds.
// Credit is thus re-exchanged every round: an idle node holds min_lease, a
// busy node's want grows to what the bucket refills.
//
// Except idle accounts: one that spent nothing since a successful exchange
// that asked for min_lease only, still holds it and would ask for it again,
// skips its rounds until idle_hold (an option, 1 s) has passed since that
// exchange; then it exchanges (returns the min_lease, gets a fresh one). So
// an idle account costs Redis one exchange per idle_hold + up to one round,
// not one per round. Its first spent unit ends the skipping at the next round.
//
// The bound, per quota (per Redis key), over any interval of length T:
//   fleet-wide admitted <= burst + rate (T + H) + N min_lease + D
// where
//   H  the longest a busy account holds Redis-granted credit before spending
//      or returning it: one wait between rounds (<= P) plus one round's
//      duration (its exchanges; a round makes at most one exchange that
//      times out, see run_once), so H <= P + command_timeout + the round's
//      successful exchanges;
//   N min_lease  the idle accounts' credit (min_lease = rate P / 64 each, N
//      nodes), which may wait up to idle_hold + H before it is spent or
//      returned: at most that much was granted before the interval began;
//   D  overdraft not yet charged: units a node admitted, during an exchange,
//      out of the credit that exchange returned, when the bucket then had too
//      little to grant them back (the cell goes negative). They are returned
//      as debt (a negative return) at the account's next round, which the
//      bucket pays off before granting again, so every admitted unit is
//      charged and D is at most what the nodes admit during one exchange each.
// Beyond that:
//   - Redis unavailable, fail closed: nodes spend only the credit they held
//     when Redis became unreachable (granted by Redis, so inside the bound)
//     and get no new credit until Redis answers again.
//   - Redis unavailable, fail open: the node keeps what it held (Redis
//     counted it as granted) and adds local credit at fallback_rate, by the
//     time elapsed since its last top-up (fallback_rate P at the transition),
//     never filling the cell above 2 fallback_rate P. So over an interval T in
//     fallback a node admits at most fallback_rate (T + P) of local credit
//     plus what it held when it entered fallback, on top of the above.
//   - Redis restarted empty: a missing key reads as a full bucket, and the
//     script caps returns at burst, so the credit held from before the
//     restart adds at most one extra burst.
//   - Throughput: a node can get at most burst per round, so a single node
//     is capped at burst / P: burst should be >= rate P.
//
// Rounds start a random P/2 .. P after the previous one ended, so nodes'
// rounds do not stay in lockstep (a node that always exchanged just after a
// busy one would find the bucket empty every time).
//
// Thread safety: one mutex guards everything (accounts, dataplanes, the Redis
// client) and is held for a whole round, including its Redis calls. A round
// costs at most one command timeout (after an `unreachable` error the round
// skips the remaining exchanges) plus its successful exchanges, so
// set_quotas/attach/detach/status wait at most that long.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "compiled_policy.h"
#include "fleet_bucket.h"
#include "redis_client.h"
#include "sluice/fleet.h"

namespace sluice::fleet {

enum class LeaseState : uint8_t { leasing, fallback };
std::string_view to_string(LeaseState state);  // "leasing" / "fallback"

struct FleetLeaserOptions {
    RedisOptions redis;                                // servers, timeouts, auth
    std::string key_namespace = "sluice";              // fleet_bucket_key's ns
    std::chrono::milliseconds lease_period{100};       // P
    std::chrono::milliseconds unavailable_after{300};  // no successful exchange for this long -> fallback
    std::chrono::milliseconds ttl_margin{1000};        // FleetBucketScript's
    // An idle account (nothing spent since its last exchange, which asked for
    // min_lease only, and min_lease still held) skips its rounds' exchanges
    // for this long after that exchange. 0: every account exchanges every round.
    std::chrono::milliseconds idle_hold{1000};
    std::function<void(const std::string&)> log;  // one line per state transition (may be empty)
    // The clock idle_hold and unavailable_after are measured on (empty:
    // steady_clock), so a test can step it past a bound instead of sleeping.
    std::function<std::chrono::steady_clock::time_point()> now;
};

// One (dataplane, fleet class) account.
struct FleetClassStatus {
    std::string dataplane;  // the name given to attach()
    uint32_t class_id = 0;
    std::string class_name;
    std::string key;              // its Redis key
    uint64_t policy_version = 0;  // the version whose quota it leases for
    LeaseState state = LeaseState::leasing;
    bool fail_open = false;
    int64_t credit_available = 0;         // granted - taken in the dataplane now
    uint64_t redis_granted_total = 0;     // units Redis granted to this account
    uint64_t fallback_granted_total = 0;  // units granted locally in open fallback
    uint64_t exchanges = 0;               // successful exchanges
    uint64_t failures = 0;                // failed (or skipped) exchanges
    uint64_t fallbacks = 0;               // transitions leasing -> fallback
    uint64_t last_lease = 0;              // units asked for in the last exchange
    uint64_t exchange_ns = 0;             // time spent in successful exchanges (round trips included)
    uint64_t idle_skips = 0;              // rounds skipped as idle (see FleetLeaserOptions::idle_hold)
};

class FleetLeaser {
  public:
    explicit FleetLeaser(FleetLeaserOptions options);
    // stop(), then returns every unspent lease to Redis (best effort) and revokes local credit.
    ~FleetLeaser();
    FleetLeaser(const FleetLeaser&) = delete;
    FleetLeaser& operator=(const FleetLeaser&) = delete;

    // The quotas of the policy version now running (replaces the previous
    // set). A class whose quota changed definition_hash (or name) gets a new
    // account, i.e. a new key; a class no longer present has its account
    // closed: unspent credit returned and revoked. Quotas with a class id
    // out of range or a rate/burst the bucket refuses are left out (logged).
    void set_quotas(uint64_t policy_version, std::vector<FleetQuota> quotas);
    // A dataplane's credit cells (SLUICE_MAX_CLASSES of them, valid until
    // detach returns). Reference-counted by `cells`: two attaches of the same
    // cells are one dataplane (the first name stays). A new account starts
    // its cell at 0: leftover credit (e.g. a pinned map after a daemon
    // restart) is revoked, not returned, since Redis never granted it to us.
    void attach(const std::string& name, sluice_fleet_credit* cells);
    // Drops one reference; the last one closes its accounts (returns unspent
    // credit, revokes the rest) before returning. Unknown cells: no-op.
    void detach(sluice_fleet_credit* cells);

    void start();  // the lease thread: run_once() every P/2 .. P
    void stop();   // joins it; idempotent
    // One lease round over every account (tests call it without start()).
    // After an exchange fails as `unreachable`, the remaining accounts of the
    // round count a failure with that error without calling Redis.
    void run_once();
    std::vector<FleetClassStatus> status() const;

    // Units an idle account asks for per round: max(1, rate P / 64).
    static uint64_t min_lease(uint64_t rate_per_s, std::chrono::milliseconds lease_period);

  private:
    struct Account;
    struct Dataplane {
        std::string name;
        sluice_fleet_credit* cells = nullptr;
        uint32_t refs = 0;
    };
    using AccountKey = std::pair<uintptr_t, uint32_t>;  // (cells, class id)

    void reconcile_locked();
    void close_accounts_locked(std::vector<Account*> accounts);
    void round_locked();
    // One account's round; skip_error: fail with it without calling Redis.
    // Returns the error when the exchange failed as unreachable.
    std::optional<Error> lease_one_locked(Account& account, const Error* skip_error);
    void log(const std::string& line) const;
    // A new account starts with no credit: its first lease should not wait a whole period.
    void request_round();
    void thread_main();

    FleetLeaserOptions options_;
    FleetBucketScript script_;

    mutable std::mutex mu_;  // everything below, and the Redis client
    RedisClient client_;
    uint64_t policy_version_ = 0;
    std::map<uint32_t, FleetQuota> quotas_;  // by class id
    std::map<uintptr_t, Dataplane> dataplanes_;
    std::map<AccountKey, std::unique_ptr<Account>> accounts_;

    std::mutex thread_mu_;  // stop_, round_requested_ and the thread
    std::condition_variable wake_;
    bool stop_ = false;
    bool round_requested_ = false;  // set_quotas or attach made accounts: lease now
    std::thread thread_;
};

}  // namespace sluice::fleet
