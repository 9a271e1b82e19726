// SPDX-License-Identifier: Apache-2.0
// sluice-bench: what Sluice costs, against doing nothing (XDP_DROP) and
// against nftables and iptables hashlimit, in one run. See bench/README.md.
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench_subcommands.h"
#include "command_line.h"

namespace {

using namespace sluice::bench;
using sluice::Status;

// A value out of range exits 1, as when the subcommands checked them.
constexpr int kBadValueExit = 1;

std::string text(uint64_t value) { return std::to_string(value); }
std::string text(const std::vector<uint64_t>& values) {
    std::string joined;
    for (const uint64_t value : values) joined += (joined.empty() ? "" : ",") + std::to_string(value);
    return joined;
}

// A power of two in min..max.
CLI::Validator power_of_two(uint64_t min, uint64_t max) {
    const std::string range = "[" + text(min) + " - " + text(max) + "]";
    return CLI::Validator(
        [min, max, range](std::string& input) -> std::string {
            uint64_t value = 0;
            if (CLI::detail::lexical_cast(input, value) && value >= min && value <= max && (value & (value - 1)) == 0)
                return {};
            return "Value " + input + " is not a power of two in " + range;
        },
        "power of two in " + range);
}

CLI::Validator at_least(uint64_t min) {
    return CLI::Validator(
        [min](std::string& input) -> std::string {
            uint64_t value = 0;
            if (CLI::detail::lexical_cast(input, value) && value >= min) return {};
            return "Value " + input + " is not a number >= " + text(min);
        },
        ">= " + text(min));
}

// One subcommand on the command line: its options start at a full run's
// values (which --help shows); with --smoke, those not given take the smaller
// values declared with them.
class Subcommand {
  public:
    using Measure = std::function<Status(Json& report)>;

    Subcommand(CLI::App& bench, const std::string& name, const std::string& description, CommonOptions& common,
               const std::string& json_help, Measure measure)
        : app_(bench.add_subcommand(name, description)), measure_(std::move(measure)) {
        app_->add_flag("--smoke", common.smoke,
                       "seconds instead of minutes, for the test suite (small sizes, short runs)");
        app_->add_option("--json", common.json_path, json_help)->type_name("PATH");
    }

    // --name TYPE, into `value`.
    template <class T>
    CLI::Option* option(const std::string& name, const std::string& type, T& value, const std::string& help) {
        return app_->add_option(name, value, help)->type_name(type)->capture_default_str();
    }
    template <class T>
    CLI::Option* option(const std::string& name, const std::string& type, T& value, T smoke, const std::string& help) {
        CLI::Option* added = option(name, type, value, help + " (--smoke: " + text(smoke) + ")");
        smoke_.push_back([added, &value, smoke] {
            if (added->count() == 0) value = smoke;
        });
        return added;
    }

    const std::string& name() const { return app_->get_name(); }
    bool chosen() const { return app_->parsed(); }
    Status measure(bool smoke, Json& report) const {
        if (smoke)
            for (const auto& take : smoke_) take();
        return measure_(report);
    }

  private:
    CLI::App* app_;
    Measure measure_;
    std::vector<std::function<void()>> smoke_;
};

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{
        "What Sluice costs, against doing nothing (XDP_DROP) and against nftables and iptables hashlimit,\n"
        "in one run (bench/README.md).",
        "sluice-bench"};
    // No --version; the command is checked after parsing, so that an unknown
    // one is named as such.
    sluice::prepare_command_line(app, "", "sluice-bench COMMAND [OPTIONS]");
    const std::string json_help = "also write the report as JSON to PATH";

    CommonOptions common;
    const std::string generator_help =
        "what sends the traffic: live (an XDP program under BPF_PROG_TEST_RUN with live frames), packet "
        "(sendmmsg on an AF_PACKET socket, for kernels that refuse live frames) or auto (live if a one-frame probe "
        "succeeds)";
    DecideOptions decide;
    Subcommand decide_command(app, "decide",
                              "ns per decision of sluice vs the XDP_DROP baseline under BPF_PROG_TEST_RUN", common,
                              json_help, [&](Json& report) { return run_decide(common, decide, report); });
    decide_command.option("--repeat", "N", decide.repeat, uint32_t{500'000}, "runs per BPF_PROG_TEST_RUN call")
        ->check(CLI::Range(uint32_t{1}, uint32_t{INT32_MAX}));
    decide_command.option("--rounds", "N", decide.rounds, uint64_t{3}, "rounds of every case")->check(at_least(1));
    decide_command
        .option("--sources", "N", decide.sources, uint32_t{1} << 12,
                "the many-sources case (the source is 10.0.0.0 + counter & (N-1))")
        ->check(power_of_two(2, 1u << 24));
    decide_command
        .option("--prefixes", "N", decide.prefixes, uint32_t{1} << 10,
                "prefixes per family of the large policy in the prefix table (next to 10)")
        ->check(CLI::Range(uint32_t{11}, uint32_t{SLUICE_PREFIX_CAPACITY_MAX}));

    VethOptions veth;
    Subcommand veth_command(
        app, "veth", "packets per second on a veth pair: sluice, XDP_DROP, nftables meter, iptables hashlimit", common,
        json_help + ", and a PNG plot next to it", [&](Json& report) { return run_veth(common, veth, report); });
    veth_command.option("--seconds", "S", veth.seconds, "per receiver (a --smoke run takes 0.3)")
        ->check(CLI::Range(uint64_t{1}, uint64_t{3600}));
    veth_command
        .option("--sources", "LIST", veth.sources, std::vector<uint64_t>{1, 4096},
                "source counts, comma-separated (hashlimit's table holds at most 2^20)")
        ->delimiter(',')
        ->check(power_of_two(1, 1u << 20));
    veth_command.option("--dist", "NAME", veth.dist, "how packets spread over the sources")
        ->check(CLI::IsMember({"uniform", "zipf"}));
    veth_command.option("--rate", "PPS", veth.rate, "packets per second per source (hashlimit's limit)")
        ->check(CLI::Range(uint64_t{1}, uint64_t{1'000'000}));
    veth_command.option("--burst", "N", veth.burst, "bucket depth in packets (hashlimit's limit)")
        ->check(CLI::Range(uint64_t{1}, uint64_t{10'000}));
    veth_command.option("--receivers", "LIST", veth.receivers, "the receivers to measure, comma-separated")
        ->delimiter(',')
        ->check(CLI::IsMember({"baseline", "sluice", "nftables", "iptables"}));
    veth_command.option("--generator", "NAME", veth.generator, generator_help)
        ->check(CLI::IsMember({"live", "packet", "auto"}));

    MemoryOptions memory;
    Subcommand memory_command(
        app, "memory", "bytes of the source table per source held while under 0.1% of new sources find their sets full",
        common, json_help, [&](Json& report) { return run_memory(common, memory, report); });
    memory_command.option("--capacity", "N", memory.capacity, uint32_t{1} << 14, "IPv4 table entries")
        ->check(power_of_two(1024, 1u << 24));
    memory_command.option("--capacity6", "N", memory.capacity6, uint32_t{1} << 12, "IPv6 table entries")
        ->check(power_of_two(1024, 1u << 24));

    FleetBenchOptions fleet;
    Subcommand fleet_command(
        app, "fleet",
        "fleet quotas: Redis round trips and ops/s for 1..N local nodes sharing one quota, admitted vs the bound, "
        "and EVALSHA exchanges per second one Redis takes (needs redis-server, not root)",
        common, json_help, [&](Json& report) { return run_fleet(common, fleet, report); });
    fleet_command.option("--seconds", "S", fleet.seconds, uint64_t{1}, "T, per node count")
        ->check(CLI::Range(uint64_t{1}, uint64_t{3600}));
    fleet_command.option("--rate", "N", fleet.rate, "the fleet quota, units per second")
        ->check(CLI::Range(uint64_t{1}, uint64_t{100'000'000}));
    fleet_command.option("--burst", "N", fleet.burst, "the quota's burst, units")
        ->check(CLI::Range(uint64_t{1}, uint64_t{1'000'000'000}));
    fleet_command.option("--period-ms", "MS", fleet.period_ms, "P, the lease period")
        ->check(CLI::Range(uint64_t{10}, uint64_t{10'000}));
    fleet_command.option("--nodes", "N", fleet.nodes, uint64_t{2}, "runs with 1, 2, .. N local nodes")
        ->check(CLI::Range(uint64_t{1}, uint64_t{16}));
    fleet_command.option("--offered", "PERCENT", fleet.offered_percent, "load offered in total, % of the rate")
        ->check(CLI::Range(uint64_t{1}, uint64_t{10'000}));
    fleet_command
        .option("--idle", "N", fleet.idle,
                "idle fleet quotas per node besides the busy one (no traffic offered; each its own key)")
        ->check(CLI::Range(uint64_t{0}, uint64_t{SLUICE_MAX_CLASSES - 2}));
    fleet_command
        .option("--threads", "LIST", fleet.threads, std::vector<uint64_t>{1, 4},
                "the capacity runs' concurrent clients, comma-separated")
        ->delimiter(',')
        ->check(CLI::Range(uint64_t{1}, uint64_t{256}));
    fleet_command.option("--capacity-ms", "MS", fleet.capacity_ms, uint64_t{300}, "per capacity run")
        ->check(CLI::Range(uint64_t{10}, uint64_t{600'000}));

    HttpBenchOptions http;
    Subcommand http_command(
        app, "http",
        "requests/s and latency through a real nginx, bare and with sluiced's auth_request snippet (wrk), "
        "sluiced's decisions/s and decision latency, and admitted per user vs GCRA's bound",
        common, json_help, [&](Json& report) { return run_http(common, http, report); });
    http_command.option("--seconds", "S", http.seconds, uint64_t{1}, "per wrk run (bare, then sluice)")
        ->check(CLI::Range(uint64_t{1}, uint64_t{3600}));
    http_command.option("--threads", "N", http.threads, "wrk threads")->check(CLI::Range(uint64_t{1}, uint64_t{64}));
    http_command.option("--connections", "N", http.connections, uint64_t{8}, "wrk connections")
        ->check(CLI::Range(uint64_t{1}, uint64_t{4096}));
    http_command.option("--users", "N", http.users, uint64_t{10}, "X-User values the requests go round")
        ->check(CLI::Range(uint64_t{1}, uint64_t{1'000'000}));
    http_command.option("--rate", "N", http.rate, "per-user GCRA rate, requests per second")
        ->check(CLI::Range(uint64_t{1}, uint64_t{1'000'000}));
    http_command.option("--burst", "N", http.burst, "per-user GCRA burst")
        ->check(CLI::Range(uint64_t{1}, uint64_t{1'000'000}));
    http_command.option("--nginx-workers", "N", http.nginx_workers, "nginx worker processes")
        ->check(CLI::Range(uint64_t{1}, uint64_t{64}));
    http_command.option("--nginx", "PATH", http.nginx, "the nginx binary");
    http_command.option("--wrk", "PATH", http.wrk, "the wrk binary");
    http_command.option("--sluiced", "PATH", http.sluiced, "the sluiced binary");
    http_command.option("--sluicectl", "PATH", http.sluicectl, "the sluicectl binary");
    http_command.option("--snippet", "PATH", http.snippet, "the nginx snippet (packaging/nginx-sluice.conf)");

    SoakOptions soak;
    Subcommand soak_command(app, "soak",
                            "sluiced for N minutes under alternating floods, pushes, rollbacks, scrapes and sluicectl "
                            "calls: RSS, open fds, pins and decisions at the start and the end",
                            common, json_help, [&](Json& report) { return run_soak(common, soak, report); });
    soak_command.option("--minutes", "N", soak.minutes, "how long it runs (a --smoke run takes 6 s)")
        ->check(CLI::Range(uint64_t{1}, uint64_t{10'080}));
    soak_command.option("--generator", "NAME", soak.generator, generator_help)
        ->check(CLI::IsMember({"live", "packet", "auto"}));
    soak_command.option("--sluiced", "PATH", soak.sluiced, "the sluiced binary");
    soak_command.option("--sluicectl", "PATH", soak.sluicectl, "the sluicectl binary");

    PushOptions push;
    Subcommand push_command(app, "push",
                            "ms per policy push of 10 .. 1M prefixes per family, and of a 10K-prefix change to the "
                            "largest: XdpDataplane::apply in process, and sluicectl policy push to sluiced end to end",
                            common, json_help, [&](Json& report) { return run_push(common, push, report); });
    push_command
        .option("--sizes", "LIST", push.sizes, std::vector<uint64_t>{10, 1000},
                "prefixes per family, comma-separated; the largest also gets the changes")
        ->delimiter(',')
        ->check(CLI::Range(uint64_t{1}, uint64_t{SLUICE_PREFIX_CAPACITY_MAX}));
    push_command
        .option("--change", "N", push.change, uint64_t{100},
                "prefixes changed per family and change, half removed and half added (0: no change steps)")
        ->check(CLI::Range(uint64_t{0}, uint64_t{SLUICE_PREFIX_CAPACITY_MAX}));
    push_command.option("--parts", "LIST", push.parts, "what to measure, comma-separated")
        ->delimiter(',')
        ->check(CLI::IsMember({"dataplane", "daemon"}));
    push_command.option("--sluiced", "PATH", push.sluiced, "the sluiced binary");
    push_command.option("--sluicectl", "PATH", push.sluicectl, "the sluicectl binary");

#ifdef SLUICE_BENCH_DPDK
    DpdkBenchOptions dpdk;
    Subcommand dpdk_command(app, "dpdk",
                            "Mpps on one lcore, sluice-dpdk's dataplane vs a pass-through loop on net_null", common,
                            json_help, [&](Json& report) { return run_dpdk(common, dpdk, report); });
    dpdk_command.option("--sources", "N", dpdk.sources, uint32_t{1} << 14, "the many-sources case")
        ->check(power_of_two(2, 1u << 24));
    dpdk_command.option("--rounds", "N", dpdk.rounds, uint32_t{1}, "rounds of every case")
        ->check(CLI::Range(uint32_t{1}, uint32_t{1000}));
    dpdk_command.option("--ms", "MS", dpdk.ms, uint64_t{100}, "per case and round")->check(at_least(1));
    dpdk_command.option("--size", "BYTES", dpdk.size, "frame bytes")->check(CLI::Range(uint32_t{60}, uint32_t{1514}));
#endif

    // After the subcommands, which would inherit it.
    app.footer(
        "`sluice-bench COMMAND --help` lists a command's options. Needs root. Prints figures; compare\n"
        "ratios within one run only.");
    if (const auto exit = sluice::parse_command_line(app, argc, argv, kBadValueExit)) return *exit;

    const std::vector<const Subcommand*> commands = {&decide_command, &veth_command, &memory_command, &fleet_command,
                                                     &http_command,   &soak_command, &push_command,
#ifdef SLUICE_BENCH_DPDK
                                                     &dpdk_command
#endif
    };
    const Subcommand* chosen = nullptr;
    std::string names;
    for (const Subcommand* command : commands) {
        if (command->chosen()) chosen = command;
        names += (names.empty() ? "" : ", ") + command->name();
    }
    if (chosen == nullptr) return sluice::usage_error("sluice-bench", "a command is required: " + names);
    const std::string& command = chosen->name();

    install_interrupt_handlers();
    Json report;
    report["subcommand"] = command;
    report["smoke"] = common.smoke;
    report["machine"] = machine_description();
    if (auto status = chosen->measure(common.smoke, report); !status) {
        std::fprintf(stderr, "sluice-bench %s: %s\n", command.c_str(), status.error().message.c_str());
        return 1;
    }
    if (!common.json_path.empty()) {
        if (auto status = write_json(common.json_path, report); !status) {
            std::fprintf(stderr, "sluice-bench: %s\n", status.error().message.c_str());
            return 1;
        }
        std::printf("\nwrote %s\n", common.json_path.c_str());
    }
    return 0;
}
