// SPDX-License-Identifier: Apache-2.0
// The per-source bound under stress (issue #37): the decision core on the
// host, oversubscribed threads (8 to 16 on however many CPUs), a pause
// injected before every access to the shared table through the core's hook
// macros, tables of 16 to 1,024 entries with sources that churn them,
// sources whose tags collide, policy changes between every kind of limit
// (one decision per thread in flight on the replaced limit, as XDP has, or a
// burst of 32, as DPDK has), and a clock that crosses 2^45 ns. Time is a
// logical clock the decisions advance, which never runs more than a set lag
// ahead of a decision still under way, so the bound is exact: every window
// of every bucket is checked against burst + rate·T (a window algorithm:
// its limit per window), plus what README ("The source table") says each
// eviction, re-creation and policy change may add; 0 rounds over.
//
// SLUICE_TEST_SEED replays a run (printed on failure); SLUICE_STRESS_ROUNDS
// (default 24) and SLUICE_STRESS_DECISIONS (per round, default 60,000) make it
// longer: scripts/stress-source-table.sh.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

// ---- the hooks: a pause before every shared access, and every charge seen ---------------

struct sluice_source_ref;
struct sluice_source_look;

namespace sluice::test::source_stress_test {
void before_shared_access();
int observed_charge(const sluice_source_ref* src, const sluice_source_look* look);
int observed_charge_known(const sluice_source_ref* src, const sluice_source_look* look);
}  // namespace sluice::test::source_stress_test

#define SLUICE_LOAD64(ptr) \
    (::sluice::test::source_stress_test::before_shared_access(), __atomic_load_n((ptr), __ATOMIC_RELAXED))
#define SLUICE_STORE64(ptr, value)                                  \
    (::sluice::test::source_stress_test::before_shared_access(), \
     __atomic_store_n((ptr), (value), __ATOMIC_RELAXED))
#define SLUICE_CAS64(ptr, old, new)                                 \
    (::sluice::test::source_stress_test::before_shared_access(), \
     __sync_val_compare_and_swap((ptr), (old), (new)))
#define SLUICE_FULL_FENCE() \
    (::sluice::test::source_stress_test::before_shared_access(), __atomic_thread_fence(__ATOMIC_SEQ_CST))
#define SLUICE_SOURCE_CHARGE(src, look) ::sluice::test::source_stress_test::observed_charge((src), (look))
#define SLUICE_SOURCE_CHARGE_KNOWN(src, look) \
    ::sluice::test::source_stress_test::observed_charge_known((src), (look))

#include "compiled_policy.h"
#include "core_support.h"

namespace sluice::test::source_stress_test {
namespace {

__extension__ typedef unsigned __int128 uint128;

// ---- per thread: the pause, and what its charges did ---------------------------------------

// What can start a source's bucket over (README, "Exactness").
enum class BreakKind {
    eviction,    // another source took its entry
    recreation,  // it took a free entry again
    // A decision still on a replaced limit wrote over what the limit
    // replacing it wrote, which that one then reads as the limit before's.
    overwrite,
};

struct Break {
    uint64_t time;  // the decision's now
    uint32_t set;   // where the entry was
    uint64_t tag;   // in place
    BreakKind kind;
};

struct ThreadState {
    std::mt19937_64 rng;
    uint32_t pause_per_mille = 0;  // how often an access is preceded by a yield or a spin
    uint64_t now = 0;              // the decision under way's
    std::vector<Break> breaks;
};
thread_local ThreadState* current = nullptr;

}  // namespace

void before_shared_access() {
    ThreadState* state = current;
    if (state == nullptr || state->pause_per_mille == 0) return;
    const uint64_t draw = state->rng();
    if (draw % 1000 >= state->pause_per_mille) return;
    if ((draw >> 10) & 1) {
        std::this_thread::yield();
    } else {
        for (uint64_t spin = (draw >> 11) % 200; spin > 0; spin--) __asm__ __volatile__("" ::: "memory");
    }
}

// A charge on a replaced limit over what the limit replacing it wrote.
void note_overwrite(ThreadState* state, const sluice_source_ref* src, const sluice_source_look* look, uint32_t set) {
    if (sluice_entry_generation(look->seen) == ((src->limit->generation + 1) & 3))
        state->breaks.push_back({state->now, set, src->tag, BreakKind::overwrite});
}

// What each charge did to the table beside charging: an eviction erases a
// source's debt, and a re-creation or an overwrite may start it over (the
// bound's breaks).
int observed_charge(const sluice_source_ref* src, const sluice_source_look* look) {
    const int charged = sluice_source_charge(src, look);
    ThreadState* state = current;
    if (state == nullptr || look->index >= SLUICE_SOURCE_CANDIDATES) return charged;
    const uint32_t set = look->index < SLUICE_SET_WAYS ? src->home_index : src->second_index;
    if (!look->found) {
        // An eviction counts when attempted: a creator that backs out empties the entry it took.
        if (look->evicts && (look->seen & SLUICE_ENTRY_TAG_MASK))
            state->breaks.push_back({state->now, set, look->seen & SLUICE_ENTRY_TAG_MASK, BreakKind::eviction});
        if (charged) state->breaks.push_back({state->now, src->home_index, src->tag, BreakKind::recreation});
    } else if (charged) {
        note_overwrite(state, src, look, set);
    }
    return charged;
}

int observed_charge_known(const sluice_source_ref* src, const sluice_source_look* look) {
    const int charged = sluice_source_charge_known(src, look);
    ThreadState* state = current;
    if (state != nullptr && charged)
        note_overwrite(state, src, look, look->index < SLUICE_SET_WAYS ? src->home_index : src->second_index);
    return charged;
}

namespace {

// ---- a round's scenario ---------------------------------------------------------------------

constexpr uint64_t kStepNs = 1000;  // each decision moves the clock 1 us

enum class Kind { gcra, fixed_window, sliding_window };

const char* kind_name(Kind kind) {
    return kind == Kind::gcra ? "gcra" : kind == Kind::fixed_window ? "fixed_window" : "sliding_window";
}

struct Regime {
    Kind kind = Kind::gcra;
    uint64_t rate = 0, burst = 0;          // gcra
    uint64_t limit = 0, window_ns = 0;     // windows
    sluice_source_limit compiled{};
    std::string describe() const {
        return kind == Kind::gcra ? "gcra " + std::to_string(rate) + "/s burst " + std::to_string(burst)
                                  : std::string(kind_name(kind)) + " " + std::to_string(limit) + " per " +
                                        std::to_string(window_ns / 1000) + " us";
    }
};

struct Source {
    sluice_source_key key{};
    uint32_t home = 0, second = 0;
    uint64_t tag = 0;
    size_t bucket = 0;  // sources of one tag and set pair share one
};

struct Scenario {
    uint64_t seed = 0;
    unsigned threads = 0;
    uint32_t sets = 0;
    size_t hot = 0, churn = 0, colliders = 0;
    uint32_t batch = 1;          // decisions a thread keeps its limit for (1 XDP, 32 DPDK)
    uint64_t lag_ns = 0;         // how far the clock may run ahead of a decision under way
    uint32_t pause_per_mille = 0;
    uint64_t decisions = 0;
    uint64_t start_ns = 0;
    std::vector<Regime> regimes;  // in force one after the other, each an equal share of the round
    std::string describe() const {
        std::string text = "seed " + std::to_string(seed) + ": " + std::to_string(threads) + " threads, " +
                           std::to_string(sets * SLUICE_SET_WAYS) + " entries, " + std::to_string(hot) +
                           " hot sources (" + std::to_string(colliders) + " sharing a tag and sets), " +
                           std::to_string(churn) + " churning, batch " + std::to_string(batch) + ", lag " +
                           std::to_string(lag_ns) + " ns, pauses " + std::to_string(pause_per_mille) +
                           "/1000, limits:";
        for (const Regime& regime : regimes) text += " [" + regime.describe() + "]";
        return text;
    }
};

// Kinds of limit in the order of a de Bruijn sequence: nine changes in a
// row make every ordered pair of kinds once (gcra -> gcra included).
constexpr Kind kKindCycle[] = {Kind::gcra,           Kind::gcra,           Kind::fixed_window,
                               Kind::gcra,           Kind::sliding_window, Kind::fixed_window,
                               Kind::fixed_window,   Kind::sliding_window, Kind::sliding_window};

Regime draw_regime(std::mt19937_64& rng, uint64_t hot_offer_rate, Kind kind) {
    Regime regime;
    regime.kind = kind;
    // Offered three to ten times what the limit admits.
    const uint64_t rate = std::max<uint64_t>(1000, hot_offer_rate / (3 + rng() % 8));
    if (regime.kind == Kind::gcra) {
        regime.rate = rate;
        regime.burst = 1 + rng() % 64;
        auto compiled = compile_source_limit({regime.rate, regime.burst, Unit::packets}, 1518, "stress");
        EXPECT_TRUE(compiled.ok()) << (compiled.ok() ? "" : compiled.error().message);
        if (compiled.ok()) regime.compiled = compiled.value();
    } else {
        regime.window_ns = std::vector<uint64_t>{1'000'000, 2'000'000, 5'000'000}[rng() % 3];
        regime.limit = std::max<uint64_t>(1, rate * regime.window_ns / SLUICE_NANO);
        WindowSettings settings;
        settings.algorithm = regime.kind == Kind::fixed_window ? Algorithm::fixed_window : Algorithm::sliding_window;
        settings.limit = regime.limit;
        settings.window_ns = regime.window_ns;
        settings.unit = Unit::packets;
        settings.max_frame_bytes = 1518;
        auto compiled = compile_source_window(settings, "stress");
        EXPECT_TRUE(compiled.ok()) << (compiled.ok() ? "" : compiled.error().message);
        if (compiled.ok()) regime.compiled = compiled.value();
    }
    return regime;
}

// Generations and conversions as the control plane sets them, change by change.
void carry_generations(std::vector<Regime>& regimes) {
    std::vector<sluice_class_entry> running;
    for (size_t i = 0; i < regimes.size(); i++) {
        CompiledPolicy next;
        next.header.version = i + 1;
        sluice_class_entry cls{};
        cls.class_id = 1;
        cls.per_source = regimes[i].compiled;
        next.classes.push_back(cls);
        (void)carry_previous_limits(running, next);
        regimes[i].compiled = next.classes[0].per_source;
        running = next.classes;
    }
}

// `kind_cursor`: where in kKindCycle the round's first limit is; left at
// its last, so the next round's changes go on round the cycle.
Scenario draw_scenario(uint64_t seed, uint64_t decisions, size_t& kind_cursor) {
    std::mt19937_64 rng(seed);
    Scenario s;
    s.seed = seed;
    s.threads = std::vector<unsigned>{8, 12, 16}[rng() % 3];
    s.sets = std::vector<uint32_t>{2, 8, 32, 128}[rng() % 4];
    s.hot = 2 + rng() % 7;
    s.colliders = rng() % 3 == 0 ? 0 : 1 + rng() % 2;
    s.churn = rng() % 2 ? 0 : s.sets * SLUICE_SET_WAYS * (1 + rng() % 4);
    s.batch = rng() % 2 ? 1 : 32;
    s.lag_ns = std::vector<uint64_t>{kStepNs, 4 * kStepNs, 20 * kStepNs}[rng() % 3];
    s.pause_per_mille = std::vector<uint32_t>{0, 20, 200}[rng() % 3];
    s.decisions = decisions;
    // Half a round before a multiple of 2^45 ns: every round crosses the wrap.
    s.start_ns = ((rng() % 64) + 1) * (1ULL << 45) - decisions * kStepNs / 2;
    // Hot sources share ~80% of the decisions.
    const uint64_t hot_offer_rate = SLUICE_NANO / kStepNs * 8 / 10 / (s.hot + s.colliders);
    const size_t changes = rng() % 8;
    for (size_t i = 0; i <= changes; i++) {
        if (i > 0) kind_cursor = (kind_cursor + 1) % std::size(kKindCycle);
        s.regimes.push_back(draw_regime(rng, hot_offer_rate, kKindCycle[kind_cursor]));
    }
    carry_generations(s.regimes);
    return s;
}

// ---- sources: real keys through the keyed hash, colliders searched for -------------------------

Source source_of(const sluice_source_key& key, const sluice_hash_key& hash_key, uint32_t sets) {
    const uint64_t hash = sluice_source_hash(&key, &hash_key);
    Source source;
    source.key = key;
    source.home = sluice_source_home(hash, sets - 1);
    source.second = sluice_source_second(hash, sets - 1);
    source.tag = sluice_source_tag(hash);
    return source;
}

sluice_source_key ipv4_key(uint32_t address) {
    sluice_source_key key{};
    key.class_id = 1;
    key.family = SLUICE_FAMILY_IPV4;
    std::memcpy(key.addr, &address, sizeof(address));
    return key;
}

// A source of `of`'s tag that has one of its sets as its own home (half of
// them `of`'s second): a collision as the table meets it, searched for among
// real addresses.
Source collider_of(const Source& of, const sluice_hash_key& hash_key, uint32_t sets, std::mt19937_64& rng) {
    const uint32_t wanted_home = rng() % 2 ? of.home : of.second;
    for (uint64_t tries = 0; tries < (1ULL << 32); tries++) {
        const Source candidate = source_of(ipv4_key(static_cast<uint32_t>(rng())), hash_key, sets);
        if (candidate.tag == of.tag && candidate.home == wanted_home &&
            std::memcmp(candidate.key.addr, of.key.addr, sizeof(of.key.addr)) != 0)
            return candidate;
    }
    ADD_FAILURE() << "no collider found";
    return of;
}

// Buckets: sources of one tag whose set pairs meet share one (and by the
// pairing, meeting pairs are equal pairs: checked here too).
void assign_buckets(std::vector<Source>& sources, size_t& buckets) {
    std::map<std::pair<uint64_t, uint32_t>, size_t> by_tag_and_set;
    buckets = 0;
    for (Source& source : sources) {
        auto home = by_tag_and_set.find({source.tag, source.home});
        auto second = by_tag_and_set.find({source.tag, source.second});
        if (home != by_tag_and_set.end() || second != by_tag_and_set.end()) {
            const size_t bucket = (home != by_tag_and_set.end() ? home : second)->second;
            EXPECT_TRUE(home != by_tag_and_set.end() && second != by_tag_and_set.end() && home->second == second->second)
                << "two sources of one tag share one set but not the other";
            source.bucket = bucket;
        } else {
            source.bucket = buckets++;
        }
        by_tag_and_set[{source.tag, source.home}] = source.bucket;
        by_tag_and_set[{source.tag, source.second}] = source.bucket;
    }
}

// ---- the logical clock ------------------------------------------------------------------------

// Each decision moves it on by kStepNs once it ends, but never further than
// lag_ns (at least kStepNs) past the now of a decision still under way: the
// ending thread waits for that one. So decisions see the clocks of CPUs that
// agree within a skew, and no decision outlasts its moment.
class LogicalClock {
  public:
    LogicalClock(uint64_t start, uint64_t lag, unsigned threads) : now_(start), lag_(lag), active_(threads) {
        for (auto& slot : active_) slot.store(kIdle);
    }
    // The now of a decision that starts: published before it is read, so an
    // advance either sees it or is seen by it.
    uint64_t begin(unsigned thread) {
        active_[thread].store(now_.load());
        return now_.load();
    }
    void leave(unsigned thread) { active_[thread].store(kIdle); }
    void end(unsigned thread) {
        leave(thread);
        for (;;) {
            uint64_t floor = kIdle;
            for (const auto& slot : active_) floor = std::min(floor, slot.load());
            uint64_t now = now_.load();
            if (floor != kIdle && now + kStepNs > floor + lag_) {
                std::this_thread::yield();
                continue;
            }
            if (now_.compare_exchange_weak(now, now + kStepNs)) return;
        }
    }

  private:
    static constexpr uint64_t kIdle = ~0ULL;
    std::atomic<uint64_t> now_;
    const uint64_t lag_;
    std::vector<std::atomic<uint64_t>> active_;
};

// ---- a round ------------------------------------------------------------------------------------

struct Admission {
    uint64_t time;
    uint32_t regime;
    bool in_flight;  // decided on a limit the policy had already replaced
};

struct Outcome {
    uint64_t decisions = 0, admitted = 0, in_flight = 0, evictions = 0, recreations = 0, overwrites = 0, contended = 0;
    uint64_t checked_windows = 0;
    double closest = -1e18;  // the most any window admitted over its bound, in packets (<= 0: within)
    std::vector<std::string> over;  // what went past its bound
};

// Which regime is in force at `now`.
uint32_t regime_at(const Scenario& s, uint64_t now) {
    const uint64_t span = s.decisions * kStepNs;
    const uint64_t into = now - s.start_ns;
    return static_cast<uint32_t>(std::min<uint64_t>(s.regimes.size() - 1, into * s.regimes.size() / span));
}

uint64_t regime_start(const Scenario& s, uint32_t regime) {
    const uint64_t span = s.decisions * kStepNs;
    return s.start_ns + (span * regime + s.regimes.size() - 1) / s.regimes.size();
}

// The extra packets a break gives its bucket under `regime`: a window's
// limit; under GCRA an eviction's erased debt (a burst at most), or for a
// re-creation or an overwrite what a writer's clock ahead of the others by
// up to the lag gives (README, "Exactness").
uint64_t break_allowance(const Regime& regime, const Break& b, uint64_t lag_ns) {
    if (regime.kind != Kind::gcra) return regime.limit;
    if (b.kind == BreakKind::eviction) return regime.burst;
    return static_cast<uint64_t>((static_cast<uint128>(regime.rate) * lag_ns + SLUICE_NANO - 1) / SLUICE_NANO) + 1;
}

// GCRA: every window [t_i, t_j] of the admissions (sorted) holds at most
// burst + rate·(t_j - t_i) + the breaks from t_i - lag on. Linear: the worst
// start for each end is a running minimum (core_support.h's, with breaks).
std::string check_gcra(const Regime& regime, const std::vector<uint64_t>& times, const std::vector<Break>& breaks,
                       uint64_t lag_ns, uint64_t& windows, double& closest) {
    __extension__ typedef __int128 int128;
    const int128 nano = SLUICE_NANO;
    auto extra_until = [&](uint64_t t, size_t& cursor, int128& sum) {  // breaks with time <= t
        while (cursor < breaks.size() && breaks[cursor].time <= t)
            sum += static_cast<int128>(break_allowance(regime, breaks[cursor++], lag_ns)) * nano;
        return sum;
    };
    size_t end_cursor = 0, start_cursor = 0;
    int128 end_sum = 0, start_sum = 0, best_start = static_cast<int128>(1) << 120;
    int128 worst = -(static_cast<int128>(1) << 120);
    size_t worst_end = 0;
    for (size_t j = 0; j < times.size(); j++) {
        const int128 start =
            static_cast<int128>(j) * nano - static_cast<int128>(regime.rate) * times[j] -
            extra_until(times[j] >= lag_ns + 1 ? times[j] - lag_ns - 1 : 0, start_cursor, start_sum);
        best_start = std::min(best_start, start);
        const int128 end = static_cast<int128>(j + 1) * nano - static_cast<int128>(regime.rate) * times[j] -
                           extra_until(times[j], end_cursor, end_sum);
        const int128 excess = end - best_start - static_cast<int128>(regime.burst) * nano;
        if (excess > worst) worst = excess, worst_end = j;
        windows++;
    }
    if (!times.empty()) closest = std::max(closest, static_cast<double>(worst) / 1e9);
    if (worst <= 0) return "";
    return std::to_string(static_cast<double>(worst) / 1e9) + " packets over burst + rate*T in the window ending at " +
           std::to_string(times[worst_end]) + " ns";
}

// A window: each aligned window holds at most its limit, plus the breaks
// from lag before its start, plus those decided within lag of its end
// (counted, with a clock behind, in the next window's counts).
std::string check_window(const Regime& regime, const std::vector<uint64_t>& times, const std::vector<Break>& breaks,
                         uint64_t lag_ns, uint64_t& windows, double& closest) {
    std::map<uint64_t, uint64_t> counts, allowance;
    for (uint64_t t : times) {
        counts[t / regime.window_ns]++;
        if (lag_ns && t % regime.window_ns >= regime.window_ns - std::min(lag_ns, regime.window_ns))
            allowance[t / regime.window_ns]++;
    }
    for (const Break& b : breaks) {
        allowance[b.time / regime.window_ns] += regime.limit;
        allowance[(b.time + lag_ns) / regime.window_ns] += regime.limit;
    }
    for (const auto& [window, count] : counts) {
        windows++;
        closest = std::max(closest, static_cast<double>(count) - static_cast<double>(regime.limit + allowance[window]));
        if (count > regime.limit + allowance[window])
            return std::to_string(count) + " admitted in window " + std::to_string(window) + " against its limit " +
                   std::to_string(regime.limit) + " (+" + std::to_string(allowance[window]) + " for breaks)";
    }
    return "";
}

Outcome run_round(const Scenario& s, const sluice_hash_key& hash_key) {
    std::mt19937_64 rng(s.seed ^ 0x5eed);
    std::vector<sluice_source_set> table(s.sets);
    std::vector<Source> sources;
    for (size_t i = 0; i < s.hot; i++)
        sources.push_back(source_of(ipv4_key(static_cast<uint32_t>(rng())), hash_key, s.sets));
    for (size_t i = 0; i < s.colliders; i++) sources.push_back(collider_of(sources[i % s.hot], hash_key, s.sets, rng));
    const size_t offered_hot = sources.size();
    for (size_t i = 0; i < s.churn; i++)
        sources.push_back(source_of(ipv4_key(static_cast<uint32_t>(rng())), hash_key, s.sets));
    size_t buckets = 0;
    assign_buckets(sources, buckets);

    LogicalClock clock(s.start_ns, s.lag_ns, s.threads);
    const uint64_t end_ns = s.start_ns + s.decisions * kStepNs;
    std::vector<std::vector<std::vector<Admission>>> admitted(s.threads,
                                                              std::vector<std::vector<Admission>>(buckets));
    std::vector<std::vector<Break>> breaks(s.threads);
    std::vector<Outcome> counts(s.threads);
    std::atomic<bool> go{false};
    std::vector<std::thread> workers;
    for (unsigned w = 0; w < s.threads; w++) {
        workers.emplace_back([&, w] {
            ThreadState state;
            state.rng.seed(s.seed * 1000 + w);
            state.pause_per_mille = s.pause_per_mille;
            current = &state;
            while (!go.load()) std::this_thread::yield();
            uint32_t regime = 0, kept = s.batch;
            for (;;) {
                const uint64_t now = clock.begin(w);
                if (now >= end_ns) {
                    clock.leave(w);
                    break;
                }
                // A thread takes the policy in force at the start of each
                // batch, and is never two behind: the control plane waits
                // for every CPU to leave a policy slot before reusing it.
                if (kept >= s.batch || regime + 1 < regime_at(s, now)) regime = regime_at(s, now), kept = 0;
                kept++;
                state.now = now;
                const uint64_t draw = state.rng();
                const size_t index = s.churn == 0 || draw % 10 < 8 ? draw % offered_hot
                                                                   : offered_hot + (draw >> 8) % s.churn;
                const Source& source = sources[index];
                sluice_levels levels{};
                levels.source.limit = &s.regimes[regime].compiled;
                levels.source.home_index = source.home;
                levels.source.second_index = source.second;
                levels.source.home = &table[source.home];
                levels.source.second = &table[source.second];
                levels.source.tag = source.tag;
                levels.source.on_table_full = SLUICE_TABLE_FULL_EVICT;
                const sluice_decision d = sluice_decide(&levels, 64, 0, now);
                counts[w].decisions++;
                counts[w].contended += d.table == SLUICE_TABLE_CONTENDED;
                if (d.verdict == SLUICE_VERDICT_PASS) {
                    // On a replaced limit: by its batch, or by a now within the lag of the change.
                    const bool in_flight = regime != regime_at(s, now) ||
                                           (regime + 1 < s.regimes.size() &&
                                            now + s.lag_ns >= regime_start(s, regime + 1));
                    admitted[w][source.bucket].push_back({now, regime, in_flight});
                }
                clock.end(w);
            }
            breaks[w] = std::move(state.breaks);
            current = nullptr;
        });
    }
    go = true;
    for (auto& worker : workers) worker.join();

    Outcome outcome;
    for (const Outcome& c : counts) outcome.decisions += c.decisions, outcome.contended += c.contended;
    // Breaks by bucket: an entry of a tag in a set is the bucket's of that tag whose pair holds the set.
    std::map<std::pair<uint64_t, uint32_t>, size_t> bucket_of;
    for (const Source& source : sources) {
        bucket_of[{source.tag, source.home}] = source.bucket;
        bucket_of[{source.tag, source.second}] = source.bucket;
    }
    std::vector<std::vector<Break>> bucket_breaks(buckets);
    for (const auto& list : breaks)
        for (const Break& b : list) {
            const auto found = bucket_of.find({b.tag, b.set});
            if (found == bucket_of.end()) continue;  // a tag no source has: cannot happen, and costs nothing
            bucket_breaks[found->second].push_back(b);
            (b.kind == BreakKind::eviction     ? outcome.evictions
             : b.kind == BreakKind::recreation ? outcome.recreations
                                               : outcome.overwrites)++;
        }
    for (size_t bucket = 0; bucket < buckets; bucket++) {
        auto& list = bucket_breaks[bucket];
        std::sort(list.begin(), list.end(), [](const Break& a, const Break& b) { return a.time < b.time; });
        // The bucket's first creation is its burst, not a break.
        const auto first = std::find_if(list.begin(), list.end(), [](const Break& b) { return b.kind == BreakKind::recreation; });
        if (first != list.end()) list.erase(first);
        for (uint32_t r = 0; r < s.regimes.size(); r++) {
            std::vector<uint64_t> times;
            for (const auto& per_thread : admitted)
                for (const Admission& a : per_thread[bucket]) {
                    if (a.regime != r) continue;
                    outcome.admitted++;
                    // A decision in flight on a replaced limit adds at most its one packet.
                    if (a.in_flight) {
                        outcome.in_flight++;
                        continue;
                    }
                    times.push_back(a.time);
                }
            std::sort(times.begin(), times.end());
            // Each limit is judged from its own start: what the one before
            // left converts (never to more room than a full bucket) or
            // starts fresh, which its burst already allows.
            std::vector<Break> from_start;
            for (const Break& b : list)
                if (b.time + s.lag_ns >= regime_start(s, r)) from_start.push_back(b);
            const Regime& regime = s.regimes[r];
            const std::string over = regime.kind == Kind::gcra
                                         ? check_gcra(regime, times, from_start, s.lag_ns, outcome.checked_windows, outcome.closest)
                                         : check_window(regime, times, from_start, s.lag_ns, outcome.checked_windows, outcome.closest);
            if (!over.empty())
                outcome.over.push_back("bucket " + std::to_string(bucket) + " under limit " + std::to_string(r) + " (" +
                                       regime.describe() + "): " + over);
        }
    }
    // No bucket ever holds two confirmed entries.
    for (const Source& source : sources) {
        int entries = 0;
        for (const uint32_t set : {source.home, source.second})
            for (const uint64_t word : table[set].entry)
                entries += word && !(word & SLUICE_ENTRY_PENDING) && (word & SLUICE_ENTRY_TAG_MASK) == source.tag;
        if (entries > 1) outcome.over.push_back("a source of tag " + std::to_string(source.tag) + " has " +
                                                std::to_string(entries) + " entries");
    }
    return outcome;
}

uint64_t env_or(const char* name, uint64_t fallback) {
    const char* value = std::getenv(name);
    return value && *value ? std::strtoull(value, nullptr, 0) : fallback;
}

TEST(SourceStress, EveryBucketStaysWithinItsBoundUnderChurnCollisionsAndPolicyChanges) {
    const uint64_t seed = env_or("SLUICE_TEST_SEED", std::random_device{}());
    const uint64_t rounds = env_or("SLUICE_STRESS_ROUNDS", 24);
    const uint64_t decisions = env_or("SLUICE_STRESS_DECISIONS", 60'000);
    SCOPED_TRACE("SLUICE_TEST_SEED=" + std::to_string(seed));
    std::mt19937_64 keys(seed);
    sluice_hash_key hash_key{};
    for (auto& word : hash_key.word) word = keys();

    Outcome total;
    uint64_t over_rounds = 0, changes = 0;
    size_t kind_cursor = 0;
    std::map<std::string, uint64_t> pairs;  // consecutive kinds of limit seen
    for (uint64_t round = 0; round < rounds; round++) {
        const Scenario scenario = draw_scenario(seed + round, decisions, kind_cursor);
        const Outcome outcome = run_round(scenario, hash_key);
        for (size_t i = 1; i < scenario.regimes.size(); i++, changes++)
            pairs[std::string(kind_name(scenario.regimes[i - 1].kind)) + " -> " + kind_name(scenario.regimes[i].kind)]++;
        total.decisions += outcome.decisions;
        total.admitted += outcome.admitted;
        total.in_flight += outcome.in_flight;
        total.evictions += outcome.evictions;
        total.recreations += outcome.recreations;
        total.overwrites += outcome.overwrites;
        total.contended += outcome.contended;
        total.checked_windows += outcome.checked_windows;
        total.closest = std::max(total.closest, outcome.closest);
        std::cout << "[ round    ] " << round << ": " << outcome.decisions << " decisions, " << outcome.admitted
                  << " admitted, " << outcome.evictions << " evictions; closest window " << outcome.closest
                  << " packets from its bound; " << scenario.describe() << "\n";
        if (!outcome.over.empty()) {
            over_rounds++;
            ADD_FAILURE() << "round " << round << ", " << scenario.describe() << ":\n  " << outcome.over.front()
                          << (outcome.over.size() > 1 ? "\n  (and " + std::to_string(outcome.over.size() - 1) + " more)"
                                                      : "");
        }
    }
    std::cout << "[ stress   ] seed " << seed << ": " << rounds << " rounds, " << total.decisions << " decisions, "
              << total.admitted << " admitted (" << total.in_flight << " in flight on a replaced limit), "
              << total.evictions << " evictions, " << total.recreations << " re-creations, " << total.overwrites << " overwrites on a replaced limit, " << total.contended
              << " contended; " << total.checked_windows << " windows checked (closest " << total.closest
              << " packets from its bound), " << changes << " policy changes (";
    for (const auto& [pair, count] : pairs) std::cout << pair << " " << count << "; ";
    std::cout << "), " << over_rounds << " rounds over\n";
    EXPECT_EQ(over_rounds, 0u);
    if (changes >= std::size(kKindCycle)) {
        EXPECT_EQ(pairs.size(), 9u) << "every ordered pair of kinds of limit";
    }
}

}  // namespace
}  // namespace sluice::test::source_stress_test
