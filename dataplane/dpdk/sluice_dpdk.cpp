// SPDX-License-Identifier: Apache-2.0
// sluice-dpdk: Sluice as a DPDK bump in the wire. Frames received on --rx are
// decided by the shared core (dpdk_dataplane.h) and those that pass are sent
// on --tx; the main lcore serves sluicectl and metrics through the same
// daemon as sluiced (Daemon::start_fixed), every worker lcore polls one RX
// queue of --rx and sends on the same-numbered TX queue of --tx.
//   sluice-dpdk [EAL args] -- --rx PORT --tx PORT [options]   (--help)
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "daemon.h"
#include "dpdk_dataplane.h"
#include "eal.h"
#include "logger.h"

namespace {

using sluice::LogLevel;

constexpr const char* kUsage = R"(usage: sluice-dpdk [EAL options] -- --rx PORT --tx PORT [OPTIONS]
Decides every frame received on --rx with the Sluice policy and sends those that pass on --tx
(--rx and --tx may be the same port: one-armed). The EAL's main lcore serves sluicectl and
metrics; every other lcore is a worker polling its own RX queue (more than one worker needs RSS).
PORT is a device name (net_ring0, 0000:03:00.0) or a DPDK port id.
  --rx PORT               port to receive from (required)
  --tx PORT               port to send passing frames on (required)
  --socket PATH           control socket (/run/sluice/sluice-dpdk.sock); sluicectl --socket PATH
  --state-dir DIR         policy versions (/var/lib/sluice-dpdk)
  --policy FILE           pushed at start and on SIGHUP when its content changed (none)
  --metrics ADDR          Prometheus endpoint, empty to disable (127.0.0.1:9465)
  --source-capacity N     entries of the source table all workers share (1048576)
  --mbufs N               mbufs in the packet pool, frames queued by shaping included (65535)
  --log-level LEVEL       debug, info, warn or error (info)
SIGTERM/SIGINT stop it; SIGHUP re-reads --policy.

Without a NIC (frames from in.pcap, passing ones to out.pcap; no hugepages):
  sluice-dpdk -l 0-1 --no-huge --no-pci --no-shconf -m 1024 \
      --vdev net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap -- --rx net_pcap0 --tx net_pcap0 \
      --socket /tmp/sluice-dpdk.sock --state-dir /tmp/sluice-dpdk --policy examples/policy.toml
On two NIC ports bound to vfio-pci, four workers, hugepages set up:
  sluice-dpdk -l 0-4 -a 0000:03:00.0 -a 0000:03:00.1 -- --rx 0000:03:00.0 --tx 0000:03:00.1 \
      --policy /etc/sluice/policy.toml
)";

struct Options {
    std::string rx, tx;
    sluice::DaemonConfig daemon;
    uint32_t mbufs = 65535;  // 2^n - 1 fills a mempool best
};

sluice::DaemonSignals g_signals;

int usage(const std::string& problem) {
    std::fprintf(stderr, "sluice-dpdk: %s\n%s", problem.c_str(), kUsage);
    return 2;
}

bool parse_u32(std::string_view text, uint32_t min, uint32_t* out) {
    uint32_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc{} || end != text.data() + text.size() || value < min) return false;
    *out = value;
    return true;
}

// The application's arguments (after "--"). Returns an exit code when the
// process should stop here (usage error: 2, --help: 0), -1 to go on.
int parse_options(const std::vector<std::string>& args, Options& options) {
    options.daemon.socket = "/run/sluice/sluice-dpdk.sock";
    options.daemon.state_dir = "/var/lib/sluice-dpdk";
    // Not sluiced's 9464: both may run on one host.
    options.daemon.metrics_address = "127.0.0.1:9465";
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& arg = args[i];
        if (arg == "-h" || arg == "--help") {
            std::fputs(kUsage, stdout);
            return 0;
        }
        if (arg == "--version") {
            std::printf("sluice-dpdk %s\n", SLUICE_VERSION);
            return 0;
        }
        if (i + 1 >= args.size()) return usage("unknown or incomplete argument \"" + arg + "\"");
        const std::string& value = args[++i];
        if (arg == "--rx") {
            options.rx = value;
        } else if (arg == "--tx") {
            options.tx = value;
        } else if (arg == "--socket") {
            options.daemon.socket = value;
        } else if (arg == "--state-dir") {
            options.daemon.state_dir = value;
        } else if (arg == "--policy") {
            options.daemon.policy_file = value;
        } else if (arg == "--metrics") {
            options.daemon.metrics_address = value;
        } else if (arg == "--source-capacity") {
            constexpr uint32_t kMin = SLUICE_SOURCE_SETS_MIN * SLUICE_SET_WAYS;
            constexpr uint64_t kMax = uint64_t{SLUICE_SOURCE_SETS_MAX} * SLUICE_SET_WAYS;
            if (!parse_u32(value, kMin, &options.daemon.source_capacity) || options.daemon.source_capacity > kMax)
                return usage("--source-capacity \"" + value + "\" is not a number of entries in " +
                             std::to_string(kMin) + ".." + std::to_string(kMax));
        } else if (arg == "--mbufs") {
            if (!parse_u32(value, 1024, &options.mbufs))
                return usage("--mbufs \"" + value + "\" is not a number >= 1024");
        } else if (arg == "--log-level") {
            const auto level = sluice::parse_log_level(value);
            if (!level) return usage("--log-level \"" + value + "\" is not one of debug, info, warn, error");
            options.daemon.log_level = *level;
        } else {
            return usage("unknown argument \"" + arg + "\"");
        }
    }
    if (options.rx.empty() || options.tx.empty()) return usage("--rx and --tx are required (after \"--\")");
    return -1;
}

// What each worker lcore runs.
struct WorkerLaunch {
    sluice::Worker* worker = nullptr;
    const std::atomic<bool>* stop = nullptr;
};

int run_worker(void* arg) {
    auto* launch = static_cast<WorkerLaunch*>(arg);
    return launch->worker->run(*launch->stop);
}

// The launched workers: asked to stop and waited for when this goes, before
// the daemon (which owns their dataplane) and the ports.
class LaunchedWorkers {
  public:
    explicit LaunchedWorkers(size_t count) : launches_(count) {}
    ~LaunchedWorkers() {
        stop_.store(true);
        for (const unsigned lcore : lcores_) {
            if (const int code = rte_eal_wait_lcore(lcore); code != 0)
                sluice::log(LogLevel::error, "worker stopped on an error",
                            {{"lcore", std::to_string(lcore)}, {"code", std::to_string(code)}});
        }
    }
    LaunchedWorkers(const LaunchedWorkers&) = delete;
    LaunchedWorkers& operator=(const LaunchedWorkers&) = delete;

    sluice::Status launch(size_t index, sluice::Worker* worker, unsigned lcore) {
        launches_[index] = {worker, &stop_};
        if (int ret = rte_eal_remote_launch(run_worker, &launches_[index], lcore); ret != 0)
            return sluice::Error{"lcore " + std::to_string(lcore) +
                                 ": rte_eal_remote_launch: " + sluice::dpdk_error(ret)};
        lcores_.push_back(lcore);
        return sluice::ok_status();
    }

  private:
    std::atomic<bool> stop_{false};
    std::vector<WorkerLaunch> launches_;  // sized up front: lcores hold pointers into it
    std::vector<unsigned> lcores_;
};

int fail(std::string_view message, const sluice::Error& error) {
    sluice::log(LogLevel::error, message, {{"error", error.message}});
    return 1;
}

int run(int argc, char** argv) {
    std::vector<std::string> all(argv, argv + argc);
    // --help must not need an EAL (which may fail here for want of hugepages).
    size_t separator = all.size();
    for (size_t i = 1; i < all.size(); ++i) {
        if (all[i] == "--") {
            separator = i;
            break;
        }
        if (all[i] == "-h" || all[i] == "--help") {
            std::fputs(kUsage, stdout);
            return 0;
        }
    }
    Options options;
    const std::vector<std::string> own(all.begin() + static_cast<long>(std::min(separator + 1, all.size())), all.end());
    if (const int code = parse_options(own, options); code >= 0) return code;
    sluice::set_log_level(options.daemon.log_level);

    auto eal = sluice::Eal::init(std::vector<std::string>(all.begin(), all.begin() + static_cast<long>(separator)));
    if (!eal) return fail("cannot start the EAL", eal.error());
    const std::vector<unsigned> lcores = eal.value()->worker_lcores();
    if (lcores.empty())
        return fail("no workers", sluice::Error{"the EAL has no worker lcore: give it two lcores at least (-l 0-1); "
                                                "the main one serves the control socket"});
    const auto workers = static_cast<uint16_t>(lcores.size());

    auto rx = sluice::port_by_name(options.rx);
    if (!rx) return fail("bad --rx", rx.error());
    auto tx = sluice::port_by_name(options.tx);
    if (!tx) return fail("bad --tx", tx.error());
    const int socket = rte_eth_dev_socket_id(rx.value());
    auto pool = sluice::PacketPool::create("sluice_mbufs", options.mbufs, 0, socket);
    if (!pool) return fail("cannot allocate mbufs", pool.error());
    // A worker per RX queue of --rx and per TX queue of --tx; --tx's own RX
    // queue is never polled (frames flow one way), so it needs no RSS.
    std::vector<std::unique_ptr<sluice::StartedPort>> ports;
    for (const auto& [port, rx_queues] : {std::pair{rx.value(), workers}, std::pair{tx.value(), uint16_t{1}}}) {
        if (!ports.empty() && port == ports.front()->id()) break;  // one-armed: configured once
        auto started = sluice::configure_port(port, rx_queues, workers, pool.value()->get());
        if (!started) return fail("cannot start port", started.error());
        sluice::log(LogLevel::info, "port started",
                    {{"port", started.value()->name()},
                     {"id", std::to_string(port)},
                     {"rx_queues", std::to_string(rx_queues)},
                     {"tx_queues", std::to_string(workers)}});
        ports.push_back(std::move(started.value()));
    }

    sluice::DpdkOptions dp_options;
    dp_options.workers = workers;
    dp_options.source_capacity = options.daemon.source_capacity;
    dp_options.socket_id = socket;
    auto dataplane = sluice::DpdkDataplane::create(dp_options);
    if (!dataplane) return fail("cannot create the dataplane", dataplane.error());
    // The daemon owns the dataplane; the workers are reached through this.
    sluice::DpdkDataplane* dp = dataplane.value().get();
    std::vector<sluice::FixedPort> fixed;
    fixed.push_back({sluice::port_name(rx.value()), std::move(dataplane.value())});
    auto daemon = sluice::Daemon::start_fixed(options.daemon, std::move(fixed), workers);
    if (!daemon) return fail("cannot start", daemon.error());

    LaunchedWorkers launched(workers);
    for (uint16_t i = 0; i < workers; ++i) {
        dp->worker(i).set_ports({rx.value(), i}, {tx.value(), i});
        if (auto status = launched.launch(i, &dp->worker(i), lcores[i]); !status)
            return fail("cannot start a worker", status.error());
    }
    sluice::log(LogLevel::info, "forwarding",
                {{"rx", sluice::port_name(rx.value())},
                 {"tx", sluice::port_name(tx.value())},
                 {"workers", std::to_string(workers)},
                 {"socket", options.daemon.socket}});
    if (auto status = daemon.value()->run(g_signals); !status) return fail("stopped on an error", status.error());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    sluice::install_signal_handlers(g_signals);
    // Teardown runs in reverse inside run(): workers, daemon (and dataplane),
    // ports, pool, EAL.
    return run(argc, argv);
}
