// SPDX-License-Identifier: Apache-2.0
// sluice-bench decide: ns per decision of the real sluice program under
// BPF_PROG_TEST_RUN next to the baseline (XDP_DROP) program and the probe
// (parse, one hash-map lookup of the source, XDP_DROP: the floor any
// per-source limiter pays), on the same frames, in the same run, interleaved
// round by round so drift hits all alike; the figures that matter are the
// ratios. Split and lease are the accuracy of the class aggregate and global
// ceiling; the source level is the same table in both. Then each window
// algorithm (the other levels GCRA, lease mode): at the class aggregate,
// fixed and sliding window admit every packet, as the buckets do; the
// sliding log holds at most 32 a window, so under a benchmark's rate its row
// is the refusal at the class. Per source, the fixed window admits every
// packet; the sliding window's two counts share an entry's 45 bits, which
// holds at most 511 a millisecond, so a hot source's row is the refusal at
// the source and many sources' rows are admissions.
//
// Traffic: one hot source (IPv4, IPv6), and many sources (64K, 1M) through
// the benchmark-only switch of ebpf/bench_sources.h, which both programs
// apply identically, in an order with no pattern. Each many-sources program
// first runs 8 times per source, so (all but 0.03% of) the sources have
// state and the rounds measure the steady state: each packet from a random
// one of `sources` known sources.
//
// Refusals: the hot sources again, refused by a per-source limit of 1/s,
// held in the penalty box, and banned (one of 1024 bans, the default
// max_bans, covers each); the box and the ban must cost no more than the
// refusal. Beside them, what 1024 bans that cover nothing cost a packet
// admitted at every level: the lease row's program with them, against it.
//
// Classification: the hot sources again, under a policy of 10 and of
// --prefixes prefixes per family (realistic shapes, bench_prefixes.h), each
// hot source matched by one of them (192.0.2.0/24, 2001:db8::/48), so the
// trie walk is a real one; the ratio many/few is the cost of a large policy.
//
// The figure is the lowest round, not the median: this machine has phases
// in which every run of every program costs some 40 ns more (the kernel's own
// timer shows them too), and they come and go within a run. Noise only ever
// adds time, so the quietest round of millions of runs is the program's
// cost; the median and every round are in the JSON.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>

#include "bench_prefixes.h"
#include "labels.h"
#include "bench_subcommands.h"

namespace sluice::bench {
namespace {

constexpr uint32_t kFewPrefixes = 10;  // per family, the prefix table's small policy

struct Traffic {
    std::string name;
    bool ipv6;
    uint32_t sources;  // 1: one hot source; otherwise a power of two
};

struct DecideCase {
    const Traffic* traffic;
    std::string program;  // "baseline", "probe", "split", "lease", or a window algorithm's name
    int fd;
    uint32_t prefixes = 0;         // > 0: the prefix table's case, a policy with this many per family
    double call_ns = 0;            // the fixed cost of one BPF_PROG_TEST_RUN call
    std::vector<double> ns;        // one figure per round
    std::vector<uint32_t> kernel;  // the kernel's whole-ns figure, per round
    std::string refusal = {};      // not empty: the refusal table's case (kRefusals)
};

double lowest(const std::vector<double>& values) {
    return values.empty() ? NAN : *std::min_element(values.begin(), values.end());
}

double median(std::vector<double> values) {
    if (values.empty()) return NAN;
    std::sort(values.begin(), values.end());
    const size_t n = values.size();
    return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// The window algorithms at each level, each a program of its own.
struct WindowProgram {
    bool per_source;  // else the class aggregate
    WindowSettings window;

    std::string name() const {
        return algorithm_name(static_cast<uint8_t>(window.algorithm)) + (per_source ? " per source" : "");
    }
    // Does the level refuse the benchmark's packets, so that the row
    // measures a refusal?
    bool refuses(const Traffic& t) const {
        if (per_source) return window.algorithm == Algorithm::sliding_window && t.sources == 1;
        return window.algorithm == Algorithm::sliding_log;
    }
    std::string path(const Traffic& t) const {
        if (!refuses(t)) return "admitted";
        return per_source ? "refused at the source" : "refused at the class";
    }
};
const WindowProgram kWindowPrograms[] = {
    {false, {Algorithm::fixed_window, kWindowLimitMax, SLUICE_NANO, Unit::packets, kDefaultMaxFrameBytes}},
    {false, {Algorithm::sliding_window, kWindowLimitMax, SLUICE_NANO, Unit::packets, kDefaultMaxFrameBytes}},
    {false, {Algorithm::sliding_log, SLUICE_LOG_MAX, SLUICE_WINDOW_MIN_NS, Unit::packets, kDefaultMaxFrameBytes}},
    {true, {Algorithm::fixed_window, (1u << 28) - 1, SLUICE_NANO, Unit::packets, kDefaultMaxFrameBytes}},
    {true, {Algorithm::sliding_window, 511, SLUICE_WINDOW_MIN_NS, Unit::packets, kDefaultMaxFrameBytes}},
};

// The refusals a flooding hot source meets, each a program of its own: its
// per-source limit (1/s, burst 1) refuses it, or its class's penalty box
// holds it (over 2 within 1 s for an hour: in the box after its third
// packet, for longer than any run). Each row must cost no more than the
// first. Every frame of each is dropped, and counted under `reason`.
struct Refusal {
    std::string name;
    std::string key;  // the JSON's name for it
    uint8_t reason;
    uint32_t counted_class;  // where its drops are counted (bans: before classification, class 0)
    bool penalty;
    bool banned;
};
const Refusal kRefusals[] = {
    {"refused at the source", "refused", SLUICE_REASON_SOURCE, 1, false, false},
    {"in the penalty box", "penalised", SLUICE_REASON_PENALTY, 1, true, false},
    {"banned prefix", "banned", SLUICE_REASON_BAN, SLUICE_CLASS_UNCLASSIFIED, false, true},
};

// 1024 bans, the default max_bans, of /24s and /48s side by side: with
// `cover_hot_sources`, the hot sources' (192.0.2.0/24, 2001:db8::/48) among
// them; without, the next ones, so every packet probes and finds none. An
// hour long: longer than any run.
const char* const kPastBans = "admitted past 1024 bans";
std::vector<DataplaneBan> bench_bans(uint64_t now_ns, bool cover_hot_sources) {
    std::vector<DataplaneBan> bans;
    for (uint32_t i = 0; i < 1024; i++) {
        DataplaneBan ban{{}, now_ns + 3600 * SLUICE_NANO, i};
        ban.prefix.family = i % 2 ? SLUICE_FAMILY_IPV6 : SLUICE_FAMILY_IPV4;
        const uint32_t n = i / 2 + (cover_hot_sources ? 0 : 1);  // 0: the hot source's
        if (ban.prefix.family == SLUICE_FAMILY_IPV4) {
            ban.prefix.length = 24;
            ban.prefix.addr = {192, static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(2 + (n & 0xff))};
        } else {
            ban.prefix.length = 48;
            ban.prefix.addr = {0x20, 0x01, 0x0d, 0xb8, static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(n)};
        }
        bans.push_back(ban);
    }
    return bans;
}

Result<CompiledPolicy> refusing_policy(uint32_t cpus, const Refusal& refusal) {
    auto policy = single_class_policy(1, 1, Accuracy::lease, cpus);
    if (!policy || !refusal.penalty) return policy;
    sluice_class_entry& cls = policy.value().classes[0];
    auto penalty = compile_penalty(cls.per_source, 2, SLUICE_NANO, SLUICE_PENALTY_FOR_MAX_NS, "penalty");
    if (!penalty) return penalty.error();
    cls.penalty = penalty.value();
    return policy;
}

// Opens a dataplane with a table of `capacity` entries and applies `policy`.
Result<std::unique_ptr<XdpDataplane>> open_with(uint32_t capacity,
                                                const std::function<Result<CompiledPolicy>(uint32_t)>& policy,
                                                uint32_t prefix_capacity = SLUICE_PREFIX_CAPACITY_DEFAULT) {
    XdpOptions xdp_options;
    xdp_options.source_capacity = capacity;
    xdp_options.prefix_capacity = prefix_capacity;
    auto opened = XdpDataplane::open(xdp_options);
    if (!opened) return Error{"loading ebpf/sluice.bpf.c (root needed): " + opened.error().message};
    auto compiled = policy(opened.value()->possible_cpus());
    if (!compiled) return compiled.error();
    if (auto status = opened.value()->apply(compiled.value()); !status) return status.error();
    return std::move(opened.value());
}

}  // namespace

Status run_decide(const CommonOptions& /*run*/, const DecideOptions& options, Json& report) {
    const uint32_t repeat = options.repeat, sources = options.sources;
    const uint64_t rounds = options.rounds;

    const int cpu = pin_to_current_cpu();
    std::vector<Traffic> traffic = {{"hot source, IPv4", false, 1}, {"hot source, IPv6", true, 1}};
    if (sources > (1u << 16)) traffic.push_back({"many sources, IPv4", false, 1u << 16});
    traffic.push_back({"many sources, IPv4", false, sources});

    // One dataplane per accuracy mode and table size. Hot sources and 64K
    // run on the default table (2^20 entries); larger counts on tables with
    // two entries per source. The probe's hash map gets as many entries.
    std::map<std::pair<uint32_t, std::string>, std::unique_ptr<XdpDataplane>> dataplanes;
    std::vector<std::unique_ptr<BaselineProgram>> baselines;
    std::vector<std::unique_ptr<ProbeProgram>> probes;
    std::vector<std::unique_ptr<SpreadSluiceProgram>> spread;
    std::vector<DecideCase> cases;
    for (const auto& t : traffic) {
        const uint32_t mask = t.sources - 1;
        const uint32_t capacity = std::max<uint32_t>(XdpOptions{}.source_capacity, t.sources * 2);
        auto baseline = BaselineProgram::load(mask);
        if (!baseline) return baseline.error();
        cases.push_back({&t, "baseline", baseline.value()->fd(), 0, 0, {}, {}});
        baselines.push_back(std::move(baseline.value()));
        auto probe = ProbeProgram::load(mask, capacity);
        if (!probe) return probe.error();
        cases.push_back({&t, "probe", probe.value()->fd(), 0, 0, {}, {}});
        probes.push_back(std::move(probe.value()));
        // Every packet is admitted at every level (but the log's class): the full path, no drops.
        std::vector<std::pair<std::string, std::function<Result<CompiledPolicy>(uint32_t)>>> programs;
        for (const Accuracy accuracy : {Accuracy::split, Accuracy::lease})
            programs.emplace_back(accuracy == Accuracy::split ? "split" : "lease", [accuracy](uint32_t cpus) {
                return single_class_policy(100'000'000'000, 4'000'000'000, accuracy, cpus);
            });
        for (const WindowProgram& program : kWindowPrograms)
            programs.emplace_back(program.name(), [program](uint32_t cpus) {
                if (program.per_source) return per_source_window_policy(cpus, program.window);
                return single_class_policy(100'000'000'000, 4'000'000'000, Accuracy::lease, cpus, program.window);
            });
        for (const auto& [name, policy] : programs) {
            auto& dp = dataplanes[{capacity, name}];
            if (!dp) {
                auto opened = open_with(capacity, policy);
                if (!opened) return opened.error();
                dp = std::move(opened.value());
            }
            int fd = dp->program_fd();  // the production program, switch off
            if (mask != 0) {
                auto program = SpreadSluiceProgram::load(*dp, mask);
                if (!program) return program.error();
                fd = program.value()->fd();
                spread.push_back(std::move(program.value()));
            }
            cases.push_back({&t, name, fd, 0, 0, {}, {}});
        }
    }

    // Classification cost: the hot sources' lease program under a policy of
    // few and of many prefixes per family (bench_prefixes.h), all of the one
    // class, so the rest of the path is the lease row's. The lease row's
    // policy has none and skips the lookup.
    const uint32_t prefix_counts[] = {kFewPrefixes, options.prefixes};
    for (const uint32_t count : prefix_counts) {
        auto opened = open_with(
            XdpOptions{}.source_capacity,
            [count](uint32_t cpus) -> Result<CompiledPolicy> {
                auto policy = single_class_policy(100'000'000'000, 4'000'000'000, Accuracy::lease, cpus);
                if (!policy) return policy;
                for (const uint8_t family : {SLUICE_FAMILY_IPV4, SLUICE_FAMILY_IPV6}) {
                    auto generated = generated_prefixes(family, count, policy.value().header.default_class_id);
                    policy.value().prefixes.insert(policy.value().prefixes.end(), generated.begin(), generated.end());
                }
                sort_prefixes(policy.value().prefixes);
                mark_prefix_families(policy.value());
                return policy;
            },
            std::max<uint32_t>(count, SLUICE_PREFIX_CAPACITY_DEFAULT));
        if (!opened) return opened.error();
        const int fd = opened.value()->program_fd();
        dataplanes[{0, "lease, " + std::to_string(count) + " prefixes"}] = std::move(opened.value());
        for (size_t i = 0; i < 2; i++) cases.push_back({&traffic[i], "lease", fd, count, 0, {}, {}});
    }

    // The refusals, for the hot sources.
    std::map<std::string, XdpDataplane*> refusing;
    for (const Refusal& refusal : kRefusals) {
        auto opened = open_with(XdpOptions{}.source_capacity,
                                [&refusal](uint32_t cpus) { return refusing_policy(cpus, refusal); });
        if (!opened) return opened.error();
        const int fd = opened.value()->program_fd();
        if (refusal.banned)
            if (auto status = opened.value()->set_bans(bench_bans(opened.value()->now_ns(), true)); !status)
                return status.error();
        refusing[refusal.name] = opened.value().get();
        dataplanes[{0, refusal.name}] = std::move(opened.value());
        for (size_t i = 0; i < 2; i++) {
            cases.push_back({&traffic[i], refusal.name, fd, 0, 0, {}, {}, refusal.name});
        }
    }

    // What bans cost the packets they do not cover: the lease row again, past 1024 bans.
    {
        auto opened = open_with(XdpOptions{}.source_capacity, [](uint32_t cpus) {
            return single_class_policy(100'000'000'000, 4'000'000'000, Accuracy::lease, cpus);
        });
        if (!opened) return opened.error();
        if (auto status = opened.value()->set_bans(bench_bans(opened.value()->now_ns(), false)); !status)
            return status.error();
        const int fd = opened.value()->program_fd();
        dataplanes[{0, kPastBans}] = std::move(opened.value());
        // In the refusal table only, where it sits beside the lease row.
        for (size_t i = 0; i < 2; i++) cases.push_back({&traffic[i], kPastBans, fd, 0, 0, {}, {}, kPastBans});
    }

    // Warm up: every source inserted, caches and branch predictors primed.
    // Then the fixed cost of a call: the median of calls that run twice (with
    // repeat > 1 the kernel also switches the XDP dispatcher to the program
    // and back, which costs far more than a run).
    for (auto& c : cases) {
        uint32_t verdict = 0;
        const uint32_t warm_up = std::max<uint32_t>(c.traffic->sources * 8, 1000);
        auto ns = test_run_cpu_ns(c.fd, udp_frame(c.traffic->ipv6), warm_up, &verdict);
        if (!ns) return ns.error();
        bool drops = c.program == "baseline" || c.program == "probe" || (!c.refusal.empty() && c.refusal != kPastBans);
        for (const WindowProgram& program : kWindowPrograms)
            drops = drops || (c.program == program.name() && program.refuses(*c.traffic));
        const uint32_t expected = drops ? 1u /* XDP_DROP */ : 2u /* XDP_PASS */;
        if (verdict != expected)
            return Error{c.program + " on \"" + c.traffic->name + "\" returned XDP verdict " + std::to_string(verdict) +
                         ", expected " + std::to_string(expected)};
        std::vector<double> calls;
        for (int i = 0; i < 9; ++i) {
            auto once = test_run_cpu_ns(c.fd, udp_frame(c.traffic->ipv6), 2);
            if (!once) return once.error();
            calls.push_back(once.value());
        }
        c.call_ns = median(calls) - 2 * ns.value() / warm_up;
    }
    for (uint64_t round = 0; round < rounds; ++round) {
        for (auto& c : cases) {
            if (auto status = check_interrupted(); !status) return status;
            uint32_t kernel_ns = 0;
            auto ns = test_run_cpu_ns(c.fd, udp_frame(c.traffic->ipv6), repeat, nullptr, &kernel_ns);
            if (!ns) return ns.error();
            c.ns.push_back((ns.value() - c.call_ns) / static_cast<double>(repeat));
            c.kernel.push_back(kernel_ns);
        }
    }

    Table table{"decide: ns per decision under BPF_PROG_TEST_RUN (lowest of " + std::to_string(rounds) + " rounds of " +
                    std::to_string(repeat) + " runs), next to the baseline and the probe of the same run",
                {"traffic", "sources", "table entries", "baseline ns", "probe ns", "split ns", "lease ns",
                 "lease/baseline", "lease/probe", "split/probe", "lease - baseline ns"},
                {}};
    Json results = Json::array(), algorithm_results = Json::array();
    Table algorithm_table{"decide by each level's algorithm (the other levels gcra, lease mode), same run",
                          {"traffic", "sources", "level", "algorithm", "path", "ns", "/baseline", "- baseline ns",
                           "gcra lease - baseline ns"},
                          {}};
    for (const auto& t : traffic) {
        std::map<std::string, double> ns;
        Json row;
        row["traffic"] = t.name;
        row["sources"] = t.sources;
        const uint32_t capacity = std::max<uint32_t>(XdpOptions{}.source_capacity, t.sources * 2);
        row["source_capacity"] = capacity;
        for (const auto& c : cases) {
            if (c.traffic != &t || c.prefixes != 0 || !c.refusal.empty()) continue;
            ns[c.program] = lowest(c.ns);
            row[c.program + "_ns_per_decision"] = ns[c.program];
            row[c.program + "_ns_median"] = median(c.ns);
            row[c.program + "_ns_rounds"] = c.ns;
            row[c.program + "_kernel_ns_rounds"] = c.kernel;
            row[c.program + "_call_overhead_ns"] = c.call_ns;
        }
        row["split_ratio"] = ns["split"] / ns["baseline"];
        row["lease_ratio"] = ns["lease"] / ns["baseline"];
        row["split_to_probe"] = ns["split"] / ns["probe"];
        row["lease_to_probe"] = ns["lease"] / ns["probe"];
        row["lease_added_ns"] = ns["lease"] - ns["baseline"];
        row["algorithm"] = "gcra";
        results.push_back(row);
        for (const WindowProgram& program : kWindowPrograms) {
            const std::string name = program.name();
            const std::string level = program.per_source ? "per_source" : "aggregate";
            Json by_algorithm;
            by_algorithm["traffic"] = t.name;
            by_algorithm["sources"] = t.sources;
            by_algorithm["level"] = level;
            by_algorithm["algorithm"] = algorithm_name(static_cast<uint8_t>(program.window.algorithm));
            by_algorithm["path"] = program.path(t);
            by_algorithm["ns_per_decision"] = ns[name];
            by_algorithm["baseline_ns_per_decision"] = ns["baseline"];
            by_algorithm["ratio"] = ns[name] / ns["baseline"];
            by_algorithm["added_ns"] = ns[name] - ns["baseline"];
            by_algorithm["gcra_lease_added_ns"] = ns["lease"] - ns["baseline"];
            for (const auto& c : cases)
                if (c.traffic == &t && c.program == name) by_algorithm["ns_rounds"] = c.ns;
            algorithm_results.push_back(by_algorithm);
            algorithm_table.rows.push_back({t.name, count_label(t.sources), level, by_algorithm["algorithm"],
                                            by_algorithm["path"], fixed(ns[name], 1),
                                            fixed(ns[name] / ns["baseline"], 2), fixed(ns[name] - ns["baseline"], 1),
                                            fixed(ns["lease"] - ns["baseline"], 1)});
        }
        table.rows.push_back({t.name, count_label(t.sources), count_label(capacity), fixed(ns["baseline"], 1),
                              fixed(ns["probe"], 1), fixed(ns["split"], 1), fixed(ns["lease"], 1),
                              fixed(ns["lease"] / ns["baseline"], 2), fixed(ns["lease"] / ns["probe"], 2),
                              fixed(ns["split"] / ns["probe"], 2), fixed(ns["lease"] - ns["baseline"], 1)});
    }
    table.print();
    algorithm_table.print();

    // The prefix table: the same rounds, many prefixes over few.
    const std::string many = count_label(options.prefixes);
    Table prefix_table{
        "decide by the policy's prefixes per family (lease, hot source matched by a /24 or /48 of the "
        "policy), same run",
        {"traffic", "baseline ns", "no prefixes ns", std::to_string(kFewPrefixes) + " prefixes ns",
         many + " prefixes ns", many + "/" + std::to_string(kFewPrefixes),
         many + " - " + std::to_string(kFewPrefixes) + " ns"},
        {}};
    Json prefix_results = Json::array();
    for (size_t i = 0; i < 2; i++) {
        const Traffic& t = traffic[i];
        std::map<uint32_t, const DecideCase*> by_count;
        std::map<std::string, double> ns;
        for (const auto& c : cases) {
            if (c.traffic != &t || !c.refusal.empty()) continue;
            if (c.prefixes != 0)
                by_count[c.prefixes] = &c;
            else
                ns[c.program] = lowest(c.ns);
        }
        const double few = lowest(by_count[kFewPrefixes]->ns), lots = lowest(by_count[options.prefixes]->ns);
        Json row;
        row["traffic"] = t.name;
        row["sources"] = t.sources;
        row["table"] = "prefixes";
        row["algorithm"] = "gcra";
        row["accuracy"] = "lease";
        row["matched_prefix"] = t.ipv6 ? "2001:db8::/48" : "192.0.2.0/24";
        row["few_prefixes"] = kFewPrefixes;
        row["many_prefixes"] = options.prefixes;
        row["baseline_ns_per_decision"] = ns["baseline"];
        row["no_prefixes_ns_per_decision"] = ns["lease"];
        row["few_prefixes_ns_per_decision"] = few;
        row["many_prefixes_ns_per_decision"] = lots;
        row["few_prefixes_ns_rounds"] = by_count[kFewPrefixes]->ns;
        row["many_prefixes_ns_rounds"] = by_count[options.prefixes]->ns;
        row["many_to_few"] = lots / few;
        row["many_minus_few_ns"] = lots - few;
        prefix_results.push_back(row);
        prefix_table.rows.push_back({t.name, fixed(ns["baseline"], 1), fixed(ns["lease"], 1), fixed(few, 1),
                                     fixed(lots, 1), fixed(lots / few, 2), fixed(lots - few, 1)});
    }
    prefix_table.print();

    // The refusal table: each refusal's cost next to a plain one's, and a
    // check that every frame was refused for the row's reason.
    std::vector<std::string> refusal_columns = {"traffic", "baseline ns"};
    for (const Refusal& refusal : kRefusals) refusal_columns.push_back(refusal.name + " ns");
    for (size_t r = 1; r < std::size(kRefusals); r++)
        refusal_columns.push_back(kRefusals[r].name + " / " + kRefusals[0].name);
    refusal_columns.push_back("admitted ns");
    refusal_columns.push_back(std::string(kPastBans) + " ns");
    Table refusal_table{"decide when a hot source is refused (1/s per source), same run", refusal_columns, {}};
    Json refusal_results = Json::array();
    for (const Refusal& refusal : kRefusals) {
        auto counters = refusing[refusal.name]->counters();
        if (!counters) return counters.error();
        const uint64_t counted =
            counters.value()[sluice_counter_index(refusal.counted_class, SLUICE_VERDICT_DROP, refusal.reason)].packets;
        uint64_t run = 0;
        for (const auto& c : cases)
            if (c.refusal == refusal.name) run += rounds * repeat;
        if (counted < run)
            return Error{"decide: \"" + refusal.name + "\" counted " + std::to_string(counted) + " drops of reason " +
                         std::string(reason_label(refusal.reason)) + " for " + std::to_string(run) + " timed runs"};
    }
    for (size_t i = 0; i < 2; i++) {
        const Traffic& t = traffic[i];
        std::map<std::string, const DecideCase*> of;
        for (const auto& c : cases)
            if (c.traffic == &t && c.prefixes == 0 &&
                (!c.refusal.empty() || c.program == "baseline" || c.program == "lease"))
                of[c.program] = &c;
        const double baseline = lowest(of["baseline"]->ns), refused = lowest(of[kRefusals[0].name]->ns);
        Json row;
        row["traffic"] = t.name;
        row["sources"] = t.sources;
        row["table"] = "refusals";
        row["baseline_ns_per_decision"] = baseline;
        std::vector<std::string> cells = {t.name, fixed(baseline, 1)}, ratios;
        for (size_t r = 0; r < std::size(kRefusals); r++) {
            const Refusal& refusal = kRefusals[r];
            const double ns = lowest(of[refusal.name]->ns);
            row[refusal.key + "_ns_per_decision"] = ns;
            row[refusal.key + "_ns_rounds"] = of[refusal.name]->ns;
            cells.push_back(fixed(ns, 1));
            if (r == 0) continue;
            row[refusal.key + "_to_refused"] = ns / refused;
            ratios.push_back(fixed(ns / refused, 2));
        }
        cells.insert(cells.end(), ratios.begin(), ratios.end());
        const double admitted = lowest(of["lease"]->ns), past_bans = lowest(of[kPastBans]->ns);
        row["admitted_ns_per_decision"] = admitted;
        row["admitted_past_bans_ns_per_decision"] = past_bans;
        row["admitted_past_bans_ns_rounds"] = of[kPastBans]->ns;
        row["bans_cost_ns"] = past_bans - admitted;
        cells.push_back(fixed(admitted, 1));
        cells.push_back(fixed(past_bans, 1));
        refusal_results.push_back(row);
        refusal_table.rows.push_back(cells);
    }
    refusal_table.print();

    report["settings"] = {{"repeat", repeat},
                          {"rounds", rounds},
                          {"timing",
                           "(calling thread's CPU time per BPF_PROG_TEST_RUN call - the median of "
                           "two-run calls) / repeat; the kernel's whole-ns mean per round is kept as "
                           "*_kernel_ns_rounds"},
                          {"cpu", cpu},
                          {"frame_bytes", udp_frame(false).size()},
                          {"policy",
                           "one class; per source, aggregate and global all 1e11 pkt/s (every packet "
                           "admitted at the source, aggregate and global levels; no new-source budget); split/lease: "
                           "the aggregate's and global's accuracy"},
                          {"probe", "parse, one BPF hash-map lookup of the source (insert on a miss), XDP_DROP"}};
    report["settings"]["prefixes"] = {
        {"few", kFewPrefixes},
        {"many", options.prefixes},
        {"shapes",
         "per family, bench_prefixes.h: IPv4 /12../32 weighted to /24 (55%), IPv6 /29../64 weighted to "
         "/48 (50%); fixed seed; every prefix of the one class"}};
    for (const Json& row : algorithm_results) results.push_back(row);
    for (const Json& row : prefix_results) results.push_back(row);
    for (const Json& row : refusal_results) results.push_back(row);
    report["results"] = results;
    return ok_status();
}

}  // namespace sluice::bench
