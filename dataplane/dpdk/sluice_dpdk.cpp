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

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "command_line.h"
#include "daemon.h"
#include "dpdk_dataplane.h"
#include "eal.h"
#include "logger.h"

namespace {

using sluice::LogLevel;

constexpr const char* kDescription =
    R"(Decides every frame received on --rx with the Sluice policy and sends those that pass on --tx
(--rx and --tx may be the same port: one-armed). The EAL's main lcore serves sluicectl and
metrics; every other lcore is a worker polling its own RX queue (more than one worker needs RSS).)";

constexpr const char* kExamples = R"(SIGTERM/SIGINT stop it; SIGHUP re-reads --policy.

Without a NIC (frames from in.pcap, passing ones to out.pcap; no hugepages):
  sluice-dpdk -l 0-1 --no-huge --no-pci --no-shconf -m 1024 \
      --vdev net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap -- --rx net_pcap0 --tx net_pcap0 \
      --socket /tmp/sluice-dpdk.sock --state-dir /tmp/sluice-dpdk --policy examples/policy.toml
On two NIC ports bound to vfio-pci, four workers, hugepages set up:
  sluice-dpdk -l 0-4 -a 0000:03:00.0 -a 0000:03:00.1 -- --rx 0000:03:00.0 --tx 0000:03:00.1 \
      --policy /etc/sluice/policy.toml)";

struct Options {
    std::string rx, tx;
    std::string fleet_file;  // a [fleet] table, as sluiced.toml's
    sluice::DaemonConfig daemon;
    uint32_t mbufs = 65535;  // 2^n - 1 fills a mempool best
};

sluice::DaemonSignals g_signals;

// The application's options (those after "--"), into `options`.
void declare_options(CLI::App& app, Options& options) {
    options.daemon.socket = "/run/sluice/sluice-dpdk.sock";
    options.daemon.state_dir = "/var/lib/sluice-dpdk";
    // Not sluiced's 9464: both may run on one host.
    options.daemon.metrics_address = "127.0.0.1:9465";
    app.add_option("--rx", options.rx, "port to receive from: device name (net_ring0, 0000:03:00.0) or id")
        ->type_name("PORT")
        ->required();
    app.add_option("--tx", options.tx, "port to send passing frames on (may be --rx's)")->type_name("PORT")->required();
    app.add_option("--socket", options.daemon.socket, "control socket, for sluicectl --socket PATH")
        ->type_name("PATH")
        ->capture_default_str();
    app.add_option("--state-dir", options.daemon.state_dir, "where policy versions are kept")
        ->type_name("DIR")
        ->capture_default_str();
    app.add_option("--policy", options.daemon.policy_file,
                   "pushed at start, and on SIGHUP if it changed (default: none)")
        ->type_name("FILE");
    app.add_option("--metrics", options.daemon.metrics_address, "Prometheus endpoint; empty serves none")
        ->type_name("ADDR")
        ->capture_default_str();
    app.add_option("--source-capacity", options.daemon.source_capacity, "entries of the source table all workers share")
        ->type_name("N")
        ->check(CLI::Range(SLUICE_SOURCE_CAPACITY_MIN, SLUICE_SOURCE_CAPACITY_MAX))
        ->capture_default_str();
    app.add_option("--prefix-capacity", options.daemon.prefix_capacity,
                   "prefixes a policy may have per address family; a policy with more is refused")
        ->type_name("N")
        ->check(CLI::Range(1u, SLUICE_PREFIX_CAPACITY_MAX))
        ->capture_default_str();
    app.add_option("--max-bans", options.daemon.max_bans, "timed bans in force at once (sluicectl ban)")
        ->type_name("N")
        ->check(CLI::Range(1u, SLUICE_MAX_BANS))
        ->capture_default_str();
    app.add_option("--mbufs", options.mbufs, "mbufs in the packet pool, frames queued by shaping included")
        ->type_name("N")
        ->check(CLI::Range(uint32_t{1024}, UINT32_MAX))
        ->capture_default_str();
    app.add_option("--fleet", options.fleet_file,
                   "a TOML file with a [fleet] table (sluiced.toml's keys): lease fleet quotas from that Redis")
        ->type_name("FILE");
    sluice::add_log_level_option(app, options.daemon.log_level, "what is logged")
        ->default_str(std::string(sluice::log_level_name(options.daemon.log_level)));
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
    LaunchedWorkers(size_t count, uint16_t tx_port) : launches_(count), tx_port_(tx_port) {}
    ~LaunchedWorkers() {
        stop_.store(true);
        for (const unsigned lcore : lcores_) {
            if (const int code = rte_eal_wait_lcore(lcore); code != 0)
                sluice::log(LogLevel::error, "worker stopped on an error",
                            {{"lcore", std::to_string(lcore)}, {"code", std::to_string(code)}});
        }
        if (lcores_.empty()) return;
        // Says the dataplane is idle before the daemon frees it; only the
        // workers send on --tx, so its count is what they forwarded.
        rte_eth_stats stats{};
        const std::string sent = rte_eth_stats_get(tx_port_, &stats) == 0 ? std::to_string(stats.opackets) : "unknown";
        sluice::log(LogLevel::info, "workers stopped", {{"workers", std::to_string(lcores_.size())}, {"sent", sent}});
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
    uint16_t tx_port_;
};

int fail(std::string_view message, const sluice::Error& error) {
    sluice::log(LogLevel::error, message, {{"error", error.message}});
    return 1;
}

int run(int argc, char** argv) {
    CLI::App app{kDescription, "sluice-dpdk"};
    sluice::prepare_command_line(app, SLUICE_VERSION, "sluice-dpdk [EAL options] -- --rx PORT --tx PORT [OPTIONS]");
    app.footer(kExamples);
    Options options;
    declare_options(app, options);

    std::vector<std::string> all(argv, argv + argc);
    // --help (and the man page's --help-man) must not need an EAL (which may fail here for want of hugepages).
    size_t separator = all.size();
    for (size_t i = 1; i < all.size(); ++i) {
        if (all[i] == "--") {
            separator = i;
            break;
        }
        if (all[i] == "-h" || all[i] == "--help") {
            std::fputs(app.help().c_str(), stdout);
            return 0;
        }
        if (all[i] == sluice::kManPageFlag) return sluice::parse_command_line(app, {all[i]}).value_or(0);
    }
    if (separator == all.size()) return sluice::usage_error("sluice-dpdk", "--rx and --tx are required (after \"--\")");
    if (const auto exit = sluice::parse_command_line(app, {all.begin() + static_cast<long>(separator) + 1, all.end()}))
        return *exit;
    sluice::set_log_level(options.daemon.log_level);
    if (!options.fleet_file.empty()) {
        auto fleet = sluice::load_fleet_config(options.fleet_file);
        if (!fleet) return fail("cannot use --fleet", fleet.error());
        options.daemon.fleet = std::move(fleet.value());
    }

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
    dp_options.prefix_capacity = options.daemon.prefix_capacity;
    dp_options.socket_id = socket;
    auto dataplane = sluice::DpdkDataplane::create(dp_options);
    if (!dataplane) return fail("cannot create the dataplane", dataplane.error());
    // The daemon owns the dataplane; the workers are reached through this.
    sluice::DpdkDataplane* dp = dataplane.value().get();
    std::vector<sluice::FixedPort> fixed;
    fixed.push_back({sluice::port_name(rx.value()), std::move(dataplane.value())});
    auto daemon = sluice::Daemon::start_fixed(options.daemon, std::move(fixed), workers);
    if (!daemon) return fail("cannot start", daemon.error());

    LaunchedWorkers launched(workers, tx.value());
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
