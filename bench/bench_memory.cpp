// SPDX-License-Identifier: Apache-2.0
// sluice-bench memory: bytes per tracked source at 1M sources, from the
// source tables' real sizes. A dataplane with both source tables sized for
// the sources runs a lease-mode policy (so a source has state in both the
// per-CPU and the shared table); the spreading instance of the program then
// sends 8 packets per source, and the figures are read back from the
// kernel: bpf_map_info (key and value size, entries) and the memlock the
// kernel charges for the map (/proc/self/fdinfo), which includes its
// per-element overhead. Preallocated tables charge all entries at creation,
// so the memlock per entry is the cost of a tracked source.
#include <bpf/bpf.h>

#include "bench_subcommands.h"

namespace sluice::bench {
namespace {

const char* map_type_name(uint32_t type) {
    switch (type) {
        case BPF_MAP_TYPE_HASH:
            return "HASH";
        case BPF_MAP_TYPE_PERCPU_HASH:
            return "PERCPU_HASH";
        case BPF_MAP_TYPE_LRU_HASH:
            return "LRU_HASH";
        case BPF_MAP_TYPE_LRU_PERCPU_HASH:
            return "LRU_PERCPU_HASH";
        default:
            return "other";
    }
}

bool per_cpu(uint32_t type) { return type == BPF_MAP_TYPE_PERCPU_HASH || type == BPF_MAP_TYPE_LRU_PERCPU_HASH; }

}  // namespace

Status run_memory(const Options& options, Json& report) {
    auto sources_opt = options.number("sources", options.smoke ? 1u << 14 : 1u << 20);
    if (!sources_opt) return sources_opt.error();
    const uint64_t sources = sources_opt.value();
    if (sources < 2 || sources > (1u << 24) || (sources & (sources - 1)) != 0)
        return Error{"--sources must be a power of two in 2..16777216", "sources"};
    pin_to_current_cpu();

    XdpOptions xdp_options;
    xdp_options.source_capacity = static_cast<uint32_t>(sources);
    auto dp = XdpDataplane::open(xdp_options);
    if (!dp) return Error{"loading ebpf/sluice.bpf.c (root needed): " + dp.error().message};
    const uint32_t cpus = dp.value()->possible_cpus();
    auto policy = single_class_policy(1000, 1000, Accuracy::lease, cpus);
    if (!policy) return policy.error();
    if (auto status = dp.value()->apply(policy.value()); !status) return status.error();
    auto spread = SpreadSluiceProgram::load(*dp.value(), static_cast<uint32_t>(sources - 1));
    if (!spread) return spread.error();
    // Sources come in a random order: 8 packets per source leave all but
    // 0.03% of them with state.
    auto ns = test_run_cpu_ns(spread.value()->fd(), udp_frame(false), static_cast<uint32_t>(sources * 8));
    if (!ns) return ns.error();
    auto counts = dp.value()->source_counts();
    if (!counts) return counts.error();

    Table table{"memory: source state at " + count_label(sources) + " sources (" + std::to_string(cpus) +
                    " possible CPUs), from bpf_map_info and the kernel's memlock charge",
                {"table", "type", "key B", "value B", "entries", "max entries", "memlock B", "data B/source",
                 "kernel B/source", "per-CPU B/source", "B/source"},
                {}};
    Json tables = Json::array();
    uint64_t total_per_source = 0, total_per_cpu = 0, total_data = 0;
    for (const auto& [name, entries] : {std::pair<std::string, size_t>{"sluice_src_cpu", counts.value().first},
                                        {"sluice_src_shr", counts.value().second}}) {
        auto fd = program_map_fd(dp.value()->program_fd(), name);
        if (!fd) return fd.error();
        auto info = map_info(fd.value().get());
        if (!info) return info.error();
        auto memlock = map_memlock(fd.value().get());
        if (!memlock) return memlock.error();
        const auto& i = info.value();
        // Per-CPU values sit one per possible CPU, each rounded up to 8 bytes.
        const uint64_t per_cpu_value = per_cpu(i.type) ? (i.value_size + 7) / 8 * 8 : 0;
        const uint64_t data = i.key_size + (per_cpu(i.type) ? per_cpu_value * cpus : i.value_size);
        const uint64_t per_source = memlock.value() / i.max_entries;
        total_per_source += per_source;
        total_per_cpu += per_cpu_value;
        total_data += data;
        tables.push_back({{"map", name},
                          {"type", map_type_name(i.type)},
                          {"key_size", i.key_size},
                          {"value_size", i.value_size},
                          {"per_cpu", per_cpu(i.type)},
                          {"max_entries", i.max_entries},
                          {"entries", entries},
                          {"memlock_bytes", memlock.value()},
                          {"data_bytes_per_source", data},
                          {"kernel_overhead_bytes_per_source", per_source - std::min(per_source, data)},
                          {"per_cpu_bytes_per_source", per_cpu_value},
                          {"bytes_per_source", per_source}});
        table.rows.push_back({name, map_type_name(i.type), std::to_string(i.key_size), std::to_string(i.value_size),
                              std::to_string(entries), std::to_string(i.max_entries), std::to_string(memlock.value()),
                              std::to_string(data), std::to_string(per_source - std::min(per_source, data)),
                              std::to_string(per_cpu_value), std::to_string(per_source)});
    }
    table.rows.push_back({"total", "", "", "", "", "", "", std::to_string(total_data), "",
                          std::to_string(total_per_cpu), std::to_string(total_per_source)});
    table.print();
    const double mib = static_cast<double>(total_per_source) * static_cast<double>(sources) / (1024.0 * 1024.0);
    std::printf("\n%s sources cost %s MiB: %llu B each, of which %llu B per CPU (x%u CPUs)\n",
                count_label(sources).c_str(), fixed(mib, 1).c_str(), static_cast<unsigned long long>(total_per_source),
                static_cast<unsigned long long>(total_per_cpu), cpus);

    report["settings"] = {{"sources", sources},
                          {"policy", "one class, per-source limit in lease mode (state in both tables)"},
                          {"fill_cpu_ns_per_packet", ns.value() / static_cast<double>(sources * 8)}};
    report["results"] = {{"tables", tables},
                         {"bytes_per_source", total_per_source},
                         {"per_cpu_bytes_per_source", total_per_cpu},
                         {"data_bytes_per_source", total_data},
                         {"cpus", cpus},
                         {"total_mib", mib}};
    return ok_status();
}

}  // namespace sluice::bench
