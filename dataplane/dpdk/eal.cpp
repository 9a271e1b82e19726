// SPDX-License-Identifier: Apache-2.0
#include "eal.h"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>

namespace sluice {
namespace {

std::string port_call_error(uint16_t port, const std::string& call, int ret) {
    return "port " + port_name(port) + " (" + std::to_string(port) + "): " + call + ": " + dpdk_error(ret);
}

}  // namespace

std::string dpdk_error(int error) { return rte_strerror(error < 0 ? -error : error); }

Result<std::unique_ptr<Eal>> Eal::init(const std::vector<std::string>& args) {
    if (args.empty()) return Error{"EAL arguments: the program name (args[0]) is missing"};
    // rte_eal_init reorders and rewrites argv: give it copies, kept for the
    // life of the process in case it holds on to any. It runs once.
    static bool started = false;
    static std::vector<std::string> storage;
    if (started) return Error{"EAL init: the EAL was already started in this process (it starts once)"};
    started = true;
    storage = args;
    std::vector<char*> argv;
    for (auto& arg : storage) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const int consumed = rte_eal_init(static_cast<int>(args.size()), argv.data());
    if (consumed < 0) return Error{"EAL init: " + std::string(rte_strerror(rte_errno))};
    // argv[consumed] is where "--" was (the EAL puts the program name there):
    // the application's arguments follow it.
    std::vector<std::string> application;
    for (size_t i = static_cast<size_t>(consumed) + 1; i < args.size(); ++i) application.emplace_back(argv[i]);
    return std::unique_ptr<Eal>(new Eal(std::min(consumed + 1, static_cast<int>(args.size())), std::move(application)));
}

Eal::~Eal() {
    const std::filesystem::path runtime_dir = rte_eal_get_runtime_dir();
    rte_eal_cleanup();
    // With --no-shconf the EAL still makes its runtime directory, empty but
    // for telemetry sockets it unlinks only at exit: leave nothing behind.
    // Directories with anything else stay (shared config, other processes).
    std::error_code ignored;
    for (const auto& entry : std::filesystem::directory_iterator(runtime_dir, ignored))
        if (entry.path().filename().string().rfind("dpdk_telemetry", 0) == 0) std::filesystem::remove(entry, ignored);
    std::filesystem::remove(runtime_dir, ignored);
    std::filesystem::remove(runtime_dir.parent_path(), ignored);
}

std::vector<unsigned> Eal::worker_lcores() const {
    std::vector<unsigned> lcores;
    unsigned lcore = 0;
    RTE_LCORE_FOREACH_WORKER(lcore) { lcores.push_back(lcore); }
    return lcores;
}

Result<std::unique_ptr<PacketPool>> PacketPool::create(const std::string& name, uint32_t count, uint16_t data_room,
                                                       int socket) {
    if (count < 64)
        return Error{"mbuf pool " + name + ": " + std::to_string(count) + " mbufs is too few (64 at least)"};
    // The per-lcore cache must hold no more than count / 1.5 (and 512) mbufs.
    const unsigned cache = std::min<uint32_t>(RTE_MEMPOOL_CACHE_MAX_SIZE, count * 2 / 3);
    rte_mempool* pool = rte_pktmbuf_pool_create(name.c_str(), count, cache, 0,
                                                data_room != 0 ? data_room : RTE_MBUF_DEFAULT_BUF_SIZE, socket);
    if (pool == nullptr)
        return Error{"mbuf pool " + name + " (" + std::to_string(count) +
                     " mbufs): rte_pktmbuf_pool_create: " + rte_strerror(rte_errno)};
    return std::unique_ptr<PacketPool>(new PacketPool(pool, name));
}

PacketPool::~PacketPool() { rte_mempool_free(pool_); }

StartedPort::~StartedPort() {
    // Errors here have no one to go to: the process is tearing the port down.
    (void)rte_eth_dev_stop(port_);
    (void)rte_eth_dev_close(port_);
}

Result<std::unique_ptr<StartedPort>> configure_port(uint16_t port, uint16_t rx_queues, uint16_t tx_queues,
                                                    rte_mempool* pool, const PortOptions& options) {
    if (!rte_eth_dev_is_valid_port(port)) return Error{"port " + std::to_string(port) + " does not exist"};
    if (rx_queues == 0 || tx_queues == 0) return Error{"port " + port_name(port) + ": needs an RX and a TX queue"};
    rte_eth_dev_info info{};
    if (int ret = rte_eth_dev_info_get(port, &info); ret != 0)
        return Error{port_call_error(port, "rte_eth_dev_info_get", ret)};
    if (rx_queues > info.max_rx_queues || tx_queues > info.max_tx_queues)
        return Error{"port " + port_name(port) + ": " + std::to_string(rx_queues) + " RX and " +
                     std::to_string(tx_queues) + " TX queues asked for (one per worker), the device has " +
                     std::to_string(info.max_rx_queues) + " and " + std::to_string(info.max_tx_queues) +
                     ": run fewer workers"};

    rte_eth_conf conf{};
    if (rx_queues > 1) {
        // Each worker must see whole flows; RSS spreads them by hash.
        const uint64_t hash = (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP | RTE_ETH_RSS_TCP) & info.flow_type_rss_offloads;
        if (hash == 0)
            return Error{"port " + port_name(port) + ": " + std::to_string(rx_queues) +
                         " workers need RSS to spread frames over their RX queues, and the device has no RSS "
                         "(it has " +
                         std::to_string(info.max_rx_queues) + " RX queues): run one worker"};
        conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
        conf.rx_adv_conf.rss_conf.rss_key = nullptr;  // the device's default key
        conf.rx_adv_conf.rss_conf.rss_hf = hash;
    }
    if (int ret = rte_eth_dev_configure(port, rx_queues, tx_queues, &conf); ret != 0)
        return Error{port_call_error(port, "rte_eth_dev_configure", ret)};
    // From here on an error stops and closes the port again.
    auto started = std::make_unique<StartedPort>(port, port_name(port));

    uint16_t rx_descriptors = options.rx_descriptors, tx_descriptors = options.tx_descriptors;
    if (int ret = rte_eth_dev_adjust_nb_rx_tx_desc(port, &rx_descriptors, &tx_descriptors); ret != 0)
        return Error{port_call_error(port, "rte_eth_dev_adjust_nb_rx_tx_desc", ret)};
    const int socket = rte_eth_dev_socket_id(port);
    const unsigned queue_socket = socket < 0 ? static_cast<unsigned>(SOCKET_ID_ANY) : static_cast<unsigned>(socket);
    for (uint16_t queue = 0; queue < rx_queues; ++queue) {
        rte_eth_rxconf rxconf = info.default_rxconf;
        if (int ret = rte_eth_rx_queue_setup(port, queue, rx_descriptors, queue_socket, &rxconf, pool); ret != 0)
            return Error{port_call_error(port, "rte_eth_rx_queue_setup (queue " + std::to_string(queue) + ")", ret)};
    }
    for (uint16_t queue = 0; queue < tx_queues; ++queue) {
        rte_eth_txconf txconf = info.default_txconf;
        if (int ret = rte_eth_tx_queue_setup(port, queue, tx_descriptors, queue_socket, &txconf); ret != 0)
            return Error{port_call_error(port, "rte_eth_tx_queue_setup (queue " + std::to_string(queue) + ")", ret)};
    }
    if (int ret = rte_eth_dev_start(port); ret != 0) return Error{port_call_error(port, "rte_eth_dev_start", ret)};
    if (options.promiscuous) {
        if (int ret = rte_eth_promiscuous_enable(port); ret != 0 && ret != -ENOTSUP)
            return Error{port_call_error(port, "rte_eth_promiscuous_enable", ret)};
    }
    return started;
}

Result<uint16_t> port_by_name(const std::string& name) {
    uint16_t port = 0;
    if (rte_eth_dev_get_port_by_name(name.c_str(), &port) == 0) return port;
    unsigned id = 0;
    const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), id);
    if (error == std::errc{} && end == name.data() + name.size() && id <= UINT16_MAX &&
        rte_eth_dev_is_valid_port(static_cast<uint16_t>(id)))
        return static_cast<uint16_t>(id);
    std::string known;
    RTE_ETH_FOREACH_DEV(port) { known += (known.empty() ? "" : ", ") + std::to_string(port) + " " + port_name(port); }
    return Error{"no DPDK port \"" + name +
                 "\" (ports: " + (known.empty() ? "none; check the EAL's -a/--vdev" : known) + ")"};
}

std::string port_name(uint16_t port) {
    char name[RTE_ETH_NAME_MAX_LEN] = {};
    if (rte_eth_dev_get_name_by_port(port, name) != 0) return "port " + std::to_string(port);
    return name;
}

}  // namespace sluice
