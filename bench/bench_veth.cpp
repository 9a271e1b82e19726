// SPDX-License-Identifier: Apache-2.0
// sluice-bench veth: packets per second end to end on a veth pair, for four
// receivers in turn on the same traffic: Sluice (native XDP), the baseline
// (XDP_DROP), an nftables netdev-ingress per-source meter and iptables
// hashlimit, all at the same per-source rate and bucket depth. This file
// measures each receiver and reports (table, JSON, plot); the topology, the
// receivers and the generator are in the files bench_veth.h names.
//
// The live generator (ebpf/trafficgen.bpf.c) runs under BPF_PROG_TEST_RUN
// with BPF_F_TEST_XDP_LIVE_FRAMES and redirects every frame into the sending
// veth. The receiver runs on the same CPU, in the softirq that follows each
// batch of 64 frames: sender and receiver take turns, so no frame is lost to
// a receiver that was asleep, and the pps is what one CPU does for both.
// (With the receiver's NAPI in a thread on the other CPU, this VM lost up to
// 90% of the frames while that thread sat idle waiting to be woken.) The
// receiver's share is the CPU's softirq time (/proc/stat), per packet. The
// packet generator (sendmmsg() on an AF_PACKET socket, for kernels that
// refuse live frames; bench_veth_packet_generator.cpp) keeps both on one CPU
// too, the receiver's softirq included, but the receiver runs after every
// frame, and on skbs: its figures compare with each other, not with a live
// run's.
#include <bpf/bpf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "bench_subcommands.h"
#include "bench_veth.h"

namespace sluice::bench::veth {
namespace {

// ---- the receiving CPU --------------------------------------------------------

// One CPU's time from /proc/stat, in USER_HZ ticks: busy (not idle), and
// the part spent in softirq (where the receiving veth's NAPI poll runs).
struct CpuTicks {
    uint64_t total = 0;
    uint64_t softirq = 0;
};

Result<CpuTicks> cpu_ticks(int cpu) {
    std::ifstream stat("/proc/stat");
    const std::string prefix = "cpu" + std::to_string(cpu) + " ";
    for (std::string line; std::getline(stat, line);) {
        if (line.rfind(prefix, 0) != 0) continue;
        std::istringstream fields(line.substr(prefix.size()));
        // user nice system idle iowait irq softirq steal
        uint64_t v[8] = {};
        for (uint64_t& x : v) fields >> x;
        CpuTicks ticks;
        for (const uint64_t x : v) ticks.total += x;
        ticks.total -= v[3] + v[4];
        ticks.softirq = v[6];
        return ticks;
    }
    return Error{"/proc/stat has no line for CPU " + std::to_string(cpu)};
}

// ---- the run ------------------------------------------------------------------

// What an exact limiter would have admitted of `decided` packets spread over
// the sources by their shares, in `seconds`: per source min(its packets,
// burst + rate * seconds).
double admission_bound(const Distribution& dist, double decided, const Limit& limit, double seconds) {
    const double cap = static_cast<double>(limit.burst) + static_cast<double>(limit.rate) * seconds;
    double bound = 0;
    for (const double share : dist.shares) bound += std::min(decided * share, cap);
    return bound;
}

Status write_plot(const std::string& json_path, const Json& results, const std::vector<std::string>& receivers,
                  const std::vector<uint64_t>& sources, const std::string& generator) {
    if (auto status = require_tool("gnuplot"); !status) return status;
    std::filesystem::path png = json_path;
    png.replace_extension(".png");
    std::filesystem::path data = png;
    data.replace_extension(".dat");
    std::ofstream out(data);
    out << "# sources";
    for (const auto& r : receivers) out << " " << r;
    out << "\n";
    for (const uint64_t n : sources) {
        out << n;
        for (const auto& r : receivers) {
            double mpps = NAN;
            for (const auto& row : results)
                if (row["receiver"] == r && row["sources"] == n)
                    mpps = row["decided_per_cpu_second"].get<double>() / 1e6;
            out << " " << (std::isnan(mpps) ? std::string("NaN") : fixed(mpps, 4));
        }
        out << "\n";
    }
    out.close();
    std::ostringstream script;
    script << "set terminal pngcairo size 900,560 noenhanced; set output '" << png.string() << "';"
           << "set title 'sluice-bench veth: packets decided per CPU-second (sender and receiver on one CPU)';"
           << "set key title '" << generator << " generator';"
           << "set xlabel 'distinct sources'; set ylabel 'decided Mpps per CPU-second'; set logscale x 2; set grid;"
           << "set key outside right; set yrange [0:*]; set xrange [0.5:"
           << 2 * *std::max_element(sources.begin(), sources.end()) << "];"
           << "set xtics (";
    for (size_t i = 0; i < sources.size(); ++i)
        script << (i ? ", " : "") << "'" << count_label(sources[i]) << "' " << sources[i];
    script << ");"
           << "plot ";
    for (size_t i = 0; i < receivers.size(); ++i)
        script << (i ? ", " : "") << "'" << data.string() << "' using 1:" << i + 2 << " with linespoints lw 2 title '"
               << receivers[i] << "'";
    const std::string gp = png.string() + ".gp";
    {
        std::ofstream file(gp);
        file << script.str() << "\n";
    }
    auto status = run_command("gnuplot " + gp);
    std::remove(gp.c_str());
    std::remove(data.c_str());
    if (!status) return status;
    std::printf("wrote %s\n", png.c_str());
    return ok_status();
}

}  // namespace
}  // namespace sluice::bench::veth

namespace sluice::bench {

Status run_veth(const CommonOptions& common, const VethOptions& options, Json& report) {
    for (const char* tool : {"ip", "ethtool", "nft", "iptables", "iptables-save"})
        if (auto status = veth::require_tool(tool); !status) return status;
    // A smoke run only has to produce figures: 0.3 s per receiver.
    const double seconds = common.smoke ? 0.3 : static_cast<double>(options.seconds);
    const veth::Limit limit{options.rate, options.burst};
    const std::vector<uint64_t>& source_list = options.sources;
    const std::string& dist_name = options.dist;
    const std::vector<std::string>& receivers = options.receivers;
    // The last CPU: the first one takes most of the machine's other work.
    const int cpu = static_cast<int>(std::thread::hardware_concurrency()) - 1;
    const double tick_ns = 1e9 / static_cast<double>(sysconf(_SC_CLK_TCK));

    auto topology = veth::create_topology();
    if (!topology) return topology.error();
    auto generator = veth::choose_generator(options.generator, topology.value());
    if (!generator) return generator.error();
    const std::string& generator_name = generator.value();
    const veth::Netns& tx = *topology.value().tx;
    const veth::Link& tx_link = topology.value().tx_link;
    const veth::Link& rx_link = topology.value().rx_link;

    // BPF run-time statistics, on only while this fd is open.
    UniqueFd stats_fd(bpf_enable_stats(BPF_STATS_RUN_TIME));
    if (!stats_fd.valid()) return Error{std::string("enabling BPF run-time statistics: ") + std::strerror(errno)};

    Json results = Json::array();
    Table table{"veth: " + dist_name + " traffic from N sources (" + generator_name + " generator), " +
                    fixed(seconds, 1) + " s per receiver; limit " + std::to_string(limit.rate) +
                    " pkt/s per source, bucket " + std::to_string(limit.burst) +
                    " packets; ratios to the baseline (XDP_DROP) of the same traffic",
                {"sources", "receiver", "offered Mpps", "decided Mpps", "decided Mpps/CPU-s", "vs base", "admitted pps",
                 "bound pps", "admitted/bound", "rx ns/pkt", "rx/base", "BPF ns/pkt"},
                {}};
    for (const uint64_t n : source_list) {
        veth::Distribution dist{dist_name, static_cast<uint32_t>(n), {}};
        auto gen = veth::create_generator(generator_name, tx_link, rx_link, dist);
        if (!gen) return gen.error();
        double base_decided = NAN, base_cpu = NAN, base_both = NAN, base_per_cpu_second = NAN;
        for (const auto& name : receivers) {
            if (auto status = check_interrupted(); !status) return status;
            auto receiver = veth::create_receiver(name, topology.value(), limit, static_cast<uint32_t>(n));
            if (!receiver) return Error{name + " receiver: " + receiver.error().message};
            auto before = receiver.value()->read();
            if (!before) return before.error();
            auto ticks_before = veth::cpu_ticks(cpu);
            if (!ticks_before) return ticks_before.error();
            auto sent = gen.value()->send(tx, cpu, seconds);
            if (!sent) return sent.error();
            // Frames left to ksoftirqd, if any, are decided by now.
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            auto ticks_after = veth::cpu_ticks(cpu);
            if (!ticks_after) return ticks_after.error();
            auto after = receiver.value()->read();
            if (!after) return after.error();
            const double softirq_ns =
                static_cast<double>(ticks_after.value().softirq - ticks_before.value().softirq) * tick_ns;
            const double busy_ns =
                static_cast<double>(ticks_after.value().total - ticks_before.value().total) * tick_ns;
            const double elapsed = sent.value().seconds;
            const double offered = static_cast<double>(sent.value().frames);
            const double decided = static_cast<double>(after.value().decided - before.value().decided);
            const double admitted = static_cast<double>(after.value().admitted - before.value().admitted);
            const double bound = veth::admission_bound(dist, decided, limit, elapsed);
            const uint64_t runs = after.value().bpf_runs - before.value().bpf_runs;
            const double bpf_ns =
                runs ? static_cast<double>(after.value().bpf_run_ns - before.value().bpf_run_ns) / runs : NAN;
            const double cpu_per_packet = decided > 0 ? softirq_ns / decided : NAN;
            const double both_per_packet = decided > 0 ? sent.value().cpu_ns / decided : NAN;
            // Packets decided per second of CPU the run actually got: the
            // comparable figure on a machine whose other tenants take a
            // varying share of the CPU (wall-clock pps is in the JSON).
            const double per_cpu_second = decided / (sent.value().cpu_ns / 1e9);
            if (name == "baseline") {
                base_per_cpu_second = per_cpu_second;
                base_decided = decided;
                base_cpu = cpu_per_packet;
                base_both = both_per_packet;
            }
            Json row;
            row["receiver"] = name;
            row["sources"] = n;
            row["distribution"] = dist_name;
            row["generator"] = generator_name;
            row["distinct_sources_drawn"] = dist.shares.size();
            row["seconds"] = elapsed;
            row["offered_pps"] = offered / elapsed;
            row["decided_pps"] = decided / elapsed;
            row["decided_per_cpu_second"] = per_cpu_second;
            row["decided_per_cpu_second_to_baseline"] = per_cpu_second / base_per_cpu_second;
            row["lost_before_receiver_pps"] = (offered - decided) / elapsed;
            row["admitted_pps"] = admitted / elapsed;
            row["admission_bound_pps"] = bound / elapsed;
            row["admitted_to_bound"] = bound > 0 ? admitted / bound : NAN;
            row["rx_softirq_ns_per_packet"] = cpu_per_packet;
            row["sender_and_receiver_cpu_ns_per_packet"] = both_per_packet;
            row["sender_and_receiver_cpu_to_baseline"] = both_per_packet / base_both;
            row["softirq_share_of_busy_cpu"] = busy_ns > 0 ? softirq_ns / busy_ns : NAN;
            row["bpf_ns_per_packet"] = bpf_ns;
            row["decided_to_baseline"] = decided / base_decided;
            row["cpu_to_baseline"] = cpu_per_packet / base_cpu;
            results.push_back(row);
            table.rows.push_back({count_label(n), name, fixed(offered / elapsed / 1e6, 3),
                                  fixed(decided / elapsed / 1e6, 3), fixed(per_cpu_second / 1e6, 3),
                                  fixed(per_cpu_second / base_per_cpu_second, 2), fixed(admitted / elapsed, 0),
                                  fixed(bound / elapsed, 0), fixed(bound > 0 ? admitted / bound : NAN, 3),
                                  fixed(cpu_per_packet, 0), fixed(cpu_per_packet / base_cpu, 2), fixed(bpf_ns, 1)});
            std::fprintf(stderr, "veth: %s sources, %s done\n", count_label(n).c_str(), name.c_str());
        }
    }
    table.print();

    report["settings"] = {
        {"seconds_per_receiver", seconds},
        {"generator", generator_name},
        {"distribution", dist_name},
        {"sources", source_list},
        {"rate_pps_per_source", limit.rate},
        {"bucket_packets", limit.burst},
        {"nftables", "netdev ingress, dynamic set, limit rate over <rate>/second burst <bucket> packets"},
        {"iptables", "raw PREROUTING, hashlimit srcip above <rate>/sec burst <bucket>"},
        {"sluice", "native XDP, one class, per-source GCRA limit; aggregate and global open (lease mode)"},
        {"cpu", cpu},
        {"frame_bytes", 60},
        {"receiver_cpu_measure",
         "softirq time of the CPU (/proc/stat, tick-sampled) per decided packet: the "
         "receiving veth's NAPI poll, the XDP program or the stack up to the verdict and "
         "beyond for admitted packets"}};
    report["results"] = results;
    if (!common.json_path.empty())
        if (auto status = veth::write_plot(common.json_path, results, receivers, source_list, generator_name); !status)
            return status;
    return ok_status();
}

}  // namespace sluice::bench
