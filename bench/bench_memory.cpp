// SPDX-License-Identifier: Apache-2.0
// sluice-bench memory: bytes of the source table per source it holds, at the
// fullest the table gets while fewer than 0.1% of new sources find both of
// their sets full. The table is one BPF array of 64-byte sets, 8 bytes an
// entry, whatever the number of CPUs; what is measured is how full it can
// get before its sets overflow.
//
// A dataplane on a test clock that stands still, so every source stays in
// debt: one class, 1 packet per second per source with a burst of 1, and
// on_table_full = closed, so a source that finds both of its sets in debt
// is refused and counted (nothing is evicted). IPv4 sources come from the
// spreading instance of the program (a random order, ebpf/bench_sources.h);
// IPv6 sources (one per /64) from frames built here, on a smaller table. The
// table is filled in steps of 1/64 of its entries; after each step the
// program's own stats say how many new sources got an entry and how many
// found their sets full, and a scan of the table how many it holds.
#include <bpf/bpf.h>

#include <cstring>

#include "bench_subcommands.h"
#include "common/packet_builder.h"

namespace sluice::bench {
namespace {

constexpr double kFullSetLimit = 0.001;
// Where the test clock stands.
constexpr uint64_t kNow = 1'000'000'000'000;

struct Step {
    uint64_t offered = 0;      // packets sent so far
    uint64_t new_sources = 0;  // sources that had no entry: inserted + refused for a full set
    uint64_t full_sets = 0;
    uint64_t held = 0;  // entries in debt
};

struct Fill {
    std::string family;
    uint64_t capacity = 0, table_bytes = 0, memlock = 0;
    std::vector<Step> steps;
    Step best;  // the last step under kFullSetLimit
};

double full_fraction(const Step& s) {
    return s.new_sources ? static_cast<double>(s.full_sets) / static_cast<double>(s.new_sources) : 0.0;
}

// What the class aggregate's state takes per class, by algorithm: the bytes
// its algorithm uses, and what the dataplane's maps hold for every class
// whatever the algorithm (a CPU's bucket per possible CPU, and one shared
// bucket with the window state beside it). A source takes one 8-byte entry
// whatever its level counts with: GCRA's TAT, or a fixed or sliding
// window's counts in the same word.
struct ClassState {
    std::string algorithm;
    uint64_t used = 0;
};

Result<uint64_t> map_value_size(int prog_fd, const std::string& name) {
    auto fd = program_map_fd(prog_fd, name);
    if (!fd) return fd.error();
    bpf_map_info info{};
    uint32_t length = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd.value().get(), &info, &length) != 0)
        return Error{"reading map " + name + "'s info: " + std::strerror(errno)};
    return uint64_t{info.value_size};
}

std::vector<ClassState> class_states(uint32_t cpus) {
    // Every window algorithm also has the lock, its generation and the refusal hint.
    const uint64_t window_common = sizeof(bpf_spin_lock) + sizeof(__u32) + 2 * sizeof(__u64);
    return {{"gcra", cpus * sizeof(sluice_cpu_bucket) + offsetof(sluice_shared_bucket, window)},
            {"fixed_window", window_common + sizeof(__u64) * 2},  // window number, count
            {"sliding_window", window_common + sizeof(sluice_window_count)},
            {"sliding_log", window_common + sizeof(sluice_log)}};
}

Result<CompiledPolicy> memory_policy(uint32_t cpus) {
    auto policy = single_class_policy(1, 1, Accuracy::lease, cpus);
    if (!policy) return policy.error();
    policy.value().classes[0].on_table_full = SLUICE_TABLE_FULL_CLOSED;
    return policy;
}

// Fills a table of `capacity` entries; send(n) offers n more packets, each
// from a source not seen before (or, rarely, one seen before: it is refused
// as in debt and counts for nothing).
template <class Send>
Result<Fill> fill(const std::string& family, XdpDataplane& dp, uint64_t capacity, Send&& send) {
    Fill out;
    out.family = family;
    out.capacity = capacity;
    out.table_bytes = static_cast<uint64_t>(dp.source_sets()) * sizeof(sluice_source_set);
    auto fd = program_map_fd(dp.program_fd(), "sluice_sources");
    if (!fd) return fd.error();
    auto memlock = map_memlock(fd.value().get());
    if (!memlock) return memlock.error();
    out.memlock = memlock.value();

    const uint64_t step = std::max<uint64_t>(capacity / 64, 1);
    Step at;
    for (uint64_t i = 1; i <= 64; i++) {
        if (auto status = check_interrupted(); !status) return status.error();
        if (auto sent = send(step); !sent) return sent.error();
        at.offered += step;
        auto stats = dp.stats();
        if (!stats) return stats.error();
        auto usage = dp.source_table();
        if (!usage) return usage.error();
        at.full_sets = stats.value()[SLUICE_STAT_SOURCE_TABLE_FULL];
        at.new_sources = stats.value()[SLUICE_STAT_SOURCE_INSERTS] + at.full_sets;
        at.held = usage.value().in_debt;
        out.steps.push_back(at);
        if (full_fraction(at) < kFullSetLimit) out.best = at;
        if (full_fraction(at) > 10 * kFullSetLimit) break;  // well past the point
    }
    return out;
}

Json fill_json(const Fill& f) {
    Json steps = Json::array();
    for (const Step& s : f.steps)
        steps.push_back({{"offered", s.offered},
                         {"new_sources", s.new_sources},
                         {"full_set_decisions", s.full_sets},
                         {"full_set_fraction", full_fraction(s)},
                         {"held", s.held},
                         {"bytes_per_held_source", s.held ? static_cast<double>(f.table_bytes) / s.held : NAN}});
    return {{"family", f.family},
            {"capacity_entries", f.capacity},
            {"table_bytes", f.table_bytes},
            {"memlock_bytes", f.memlock},
            {"held_at_limit", f.best.held},
            {"load_at_limit", static_cast<double>(f.best.held) / static_cast<double>(f.capacity)},
            {"full_set_fraction_at_limit", full_fraction(f.best)},
            {"bytes_per_source", f.best.held ? static_cast<double>(f.table_bytes) / f.best.held : NAN},
            {"steps", steps}};
}

}  // namespace

Status run_memory(const CommonOptions& /*run*/, const MemoryOptions& options, Json& report) {
    const uint64_t capacity = options.capacity, capacity6 = options.capacity6;
    pin_to_current_cpu();

    std::vector<Fill> fills;
    uint32_t cpus = 0;
    uint64_t class_reserved = 0;  // bytes of class aggregate state per class in the maps
    {
        XdpOptions xdp_options;
        xdp_options.test_clock = true;
        xdp_options.source_capacity = static_cast<uint32_t>(capacity);
        auto dp = XdpDataplane::open(xdp_options);
        if (!dp) return Error{"loading ebpf/sluice.bpf.c (root needed): " + dp.error().message};
        cpus = dp.value()->possible_cpus();
        dp.value()->set_test_clock(kNow);
        auto policy = memory_policy(cpus);
        if (!policy) return policy.error();
        if (auto status = dp.value()->apply(policy.value()); !status) return status.error();
        // 16M addresses for at most 1M sources: few repeats.
        auto spread = SpreadSluiceProgram::load(*dp.value(), (1u << 24) - 1, kNow);
        if (!spread) return spread.error();
        const int fd = spread.value()->fd();
        auto shared_size = map_value_size(dp.value()->program_fd(), "sluice_cls_shr");
        if (!shared_size) return shared_size.error();
        auto cpu_size = map_value_size(dp.value()->program_fd(), "sluice_cls_cpu");
        if (!cpu_size) return cpu_size.error();
        class_reserved = shared_size.value() + cpus * cpu_size.value();
        auto filled = fill("IPv4", *dp.value(), capacity, [&](uint64_t n) -> Status {
            auto ns = test_run_cpu_ns(fd, udp_frame(false), static_cast<uint32_t>(n));
            if (!ns) return ns.error();
            return ok_status();
        });
        if (!filled) return filled.error();
        fills.push_back(filled.value());
    }
    {
        XdpOptions xdp_options;
        xdp_options.test_clock = true;
        xdp_options.source_capacity = static_cast<uint32_t>(capacity6);
        auto dp = XdpDataplane::open(xdp_options);
        if (!dp) return Error{"loading ebpf/sluice.bpf.c (root needed): " + dp.error().message};
        dp.value()->set_test_clock(kNow);
        auto policy = memory_policy(cpus);
        if (!policy) return policy.error();
        if (auto status = dp.value()->apply(policy.value()); !status) return status.error();
        uint64_t next = 0;
        auto filled = fill("IPv6", *dp.value(), capacity6, [&](uint64_t n) -> Status {
            for (uint64_t i = 0; i < n; i++, next++) {
                // 2001:db8:<32-bit counter>::1, one /64 each.
                char address[64];
                std::snprintf(address, sizeof(address), "2001:db8:%x:%x::1", static_cast<unsigned>(next >> 16),
                              static_cast<unsigned>(next & 0xffff));
                const auto frame =
                    test::PacketBuilder().eth().ipv6(address, "2001:db8:ffff::1").udp(1000, 53).payload(18).build();
                auto ns = test_run_cpu_ns(dp.value()->program_fd(), frame, 1);
                if (!ns) return ns.error();
            }
            return ok_status();
        });
        if (!filled) return filled.error();
        fills.push_back(filled.value());
    }

    Table table{"memory: the source table (" + std::to_string(cpus) +
                    " possible CPUs), filled with sources in debt until " + fixed(100 * kFullSetLimit, 1) +
                    "% of new sources find both of their sets full",
                {"sources", "entries", "table B", "memlock B", "held", "load", "full-set decisions", "B/source"},
                {}};
    Json results = Json::array();
    for (const Fill& f : fills) {
        results.push_back(fill_json(f));
        table.rows.push_back({f.family, count_label(f.capacity), std::to_string(f.table_bytes),
                              std::to_string(f.memlock), std::to_string(f.best.held),
                              fixed(static_cast<double>(f.best.held) / static_cast<double>(f.capacity), 3),
                              fixed(100 * full_fraction(f.best), 3) + "%",
                              fixed(static_cast<double>(f.table_bytes) / static_cast<double>(f.best.held), 1)});
    }
    table.print();

    Table states{
        "memory: the class aggregate's state per class, by algorithm (per source: one 8 B entry under every "
        "per-source algorithm)",
        {"algorithm", "used B", "reserved B"},
        {}};
    for (const ClassState& state : class_states(cpus)) {
        results.push_back({{"algorithm", state.algorithm},
                           {"class_state_bytes", state.used},
                           {"class_state_reserved_bytes", class_reserved},
                           {"per_source_entry_bytes", sizeof(__u64)}});
        states.rows.push_back({state.algorithm, std::to_string(state.used), std::to_string(class_reserved)});
    }
    states.print();

    report["settings"] = {{"capacity", capacity},
                          {"capacity6", capacity6},
                          {"full_set_limit", kFullSetLimit},
                          {"policy",
                           "one class, per source 1/s burst 1, on_table_full = closed; the test clock stands "
                           "still, so every source stays in debt"}};
    report["results"] = results;
    return ok_status();
}

}  // namespace sluice::bench
