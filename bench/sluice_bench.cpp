// SPDX-License-Identifier: Apache-2.0
// sluice-bench: what Sluice costs, against doing nothing (XDP_DROP) and
// against nftables and iptables hashlimit, in one run. See bench/README.md.
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>

#include "bench_subcommands.h"

namespace {

using namespace sluice::bench;
using sluice::Status;

constexpr const char* kUsage = R"(usage: sluice-bench COMMAND [--smoke] [--json PATH] [OPTIONS]
  decide   ns per decision of sluice vs the XDP_DROP baseline under BPF_PROG_TEST_RUN
           --repeat N (runs per call, 2000000)  --rounds N (21)  --sources N (many-sources case, 1048576)
  veth     packets per second on a veth pair: sluice, XDP_DROP, nftables meter, iptables hashlimit
           --seconds S (5)  --sources LIST (1,65536,1048576)  --dist uniform|zipf (uniform)
           --rate PPS (per source, 1000)  --burst N (2000)  --receivers LIST (baseline,sluice,nftables,iptables)
  memory   bytes of the source table per source it holds while fewer than 0.1% of new sources
           find their sets full
           --capacity N (IPv4 table entries, 1048576)  --capacity6 N (IPv6 table entries, 65536)
  dpdk     Mpps on one lcore, sluice-dpdk's dataplane vs a pass-through loop on net_null (DPDK builds)
           --sources N (many-sources case, 1048576)  --rounds N (5)  --ms MS (per case and round, 1000)
           --size BYTES (frame, 64)
  --smoke  seconds instead of minutes, for the test suite (small sizes, short runs)
  --json   also write the report as JSON to PATH (veth: and a PNG plot next to it)
Needs root. Prints figures; compare ratios within one run only.
)";

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
        std::fputs(kUsage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const std::string command = argv[1];
    Status (*run)(const Options&, Json&) = command == "decide"   ? run_decide
                                           : command == "veth"   ? run_veth
                                           : command == "memory" ? run_memory
#ifdef SLUICE_BENCH_DPDK
                                           : command == "dpdk" ? run_dpdk
#endif
                                                               : nullptr;
    if (!run) {
        std::fprintf(stderr, "sluice-bench: unknown command \"%s\"\n%s", command.c_str(), kUsage);
        return 2;
    }
    const std::map<std::string, std::set<std::string>> known = {
        {"decide", {"repeat", "rounds", "sources"}},
        {"veth", {"seconds", "sources", "dist", "rate", "burst", "receivers"}},
        {"memory", {"capacity", "capacity6"}},
        {"dpdk", {"sources", "rounds", "ms", "size"}}};
    Options options;
    for (int i = 2; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--smoke") {
            options.smoke = true;
        } else if (arg.rfind("--", 0) == 0 && i + 1 < argc) {
            const std::string value = argv[++i];
            if (arg == "--json") {
                options.json_path = value;
            } else if (known.at(command).count(arg.substr(2))) {
                options.values[arg.substr(2)] = value;
            } else {
                std::fprintf(stderr, "sluice-bench %s: unknown option %s\n%s", command.c_str(), arg.c_str(), kUsage);
                return 2;
            }
        } else {
            std::fprintf(stderr, "sluice-bench: %s: expected --smoke or --NAME VALUE\n%s", arg.c_str(), kUsage);
            return 2;
        }
    }

    install_interrupt_handlers();
    Json report;
    report["subcommand"] = command;
    report["smoke"] = options.smoke;
    report["machine"] = machine_description();
    if (auto status = run(options, report); !status) {
        std::fprintf(stderr, "sluice-bench %s: %s\n", command.c_str(), status.error().message.c_str());
        return 1;
    }
    if (!options.json_path.empty()) {
        if (auto status = write_json(options.json_path, report); !status) {
            std::fprintf(stderr, "sluice-bench: %s\n", status.error().message.c_str());
            return 1;
        }
        std::printf("\nwrote %s\n", options.json_path.c_str());
    }
    return 0;
}
