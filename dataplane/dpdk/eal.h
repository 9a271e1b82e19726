// SPDX-License-Identifier: Apache-2.0
// RAII over the DPDK pieces sluice-dpdk, sluice-bench dpdk and the tests set
// up around the dataplane: the EAL, an mbuf pool, and started ethdev ports.
// Every error names the port (or pool) and the DPDK call that failed, with
// DPDK's own message.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "result.h"

struct rte_mempool;

namespace sluice {

// The EAL of this process. There is one per process, and DPDK cannot start it
// again after rte_eal_cleanup(): create it once, early, and keep it until
// every other DPDK object is gone.
class Eal {
  public:
    // args[0] is the program name; the EAL reads its own options up to "--".
    // The error holds the EAL's message (rte_strerror(rte_errno)).
    static Result<std::unique_ptr<Eal>> init(const std::vector<std::string>& args);
    ~Eal();  // rte_eal_cleanup, then removes the runtime directory if it is empty
    Eal(const Eal&) = delete;
    Eal& operator=(const Eal&) = delete;

    // How many of init's args the EAL consumed, args[0] and a "--" included.
    int args_consumed() const { return args_consumed_; }
    // The arguments after the EAL's (after "--"): the application's own.
    const std::vector<std::string>& application_args() const { return application_args_; }
    // The worker (non-main) lcores, in the EAL's order.
    std::vector<unsigned> worker_lcores() const;

  private:
    Eal(int args_consumed, std::vector<std::string> application_args)
        : args_consumed_(args_consumed), application_args_(std::move(application_args)) {}
    int args_consumed_;
    std::vector<std::string> application_args_;
};

// An rte_pktmbuf pool, freed on destruction (after every port using it).
class PacketPool {
  public:
    // count mbufs of data_room bytes of buffer each (headroom included; 0:
    // RTE_MBUF_DEFAULT_BUF_SIZE), with a per-lcore cache; socket -1: any.
    static Result<std::unique_ptr<PacketPool>> create(const std::string& name, uint32_t count, uint16_t data_room = 0,
                                                      int socket = -1);
    ~PacketPool();
    PacketPool(const PacketPool&) = delete;
    PacketPool& operator=(const PacketPool&) = delete;

    rte_mempool* get() const { return pool_; }
    const std::string& name() const { return name_; }

  private:
    PacketPool(rte_mempool* pool, std::string name) : pool_(pool), name_(std::move(name)) {}
    rte_mempool* pool_;
    std::string name_;
};

struct PortOptions {
    uint16_t rx_descriptors = 1024;  // per queue, clamped to what the device accepts
    uint16_t tx_descriptors = 1024;
    bool promiscuous = true;  // a bump in the wire sees frames not addressed to it
};

// A configured and started ethdev port; stopped and closed on destruction.
class StartedPort {
  public:
    // Takes over a started port.
    StartedPort(uint16_t port, std::string name) : port_(port), name_(std::move(name)) {}
    ~StartedPort();
    StartedPort(const StartedPort&) = delete;
    StartedPort& operator=(const StartedPort&) = delete;

    uint16_t id() const { return port_; }
    const std::string& name() const { return name_; }

  private:
    uint16_t port_;
    std::string name_;
};

// Configures `port` with rx_queues and tx_queues (RSS over IP, TCP and UDP
// when there is more than one RX queue, so each worker sees whole sources; an
// error when the device has no RSS), sets up every queue with mbufs from
// `pool`, starts it and turns promiscuous mode on where the device supports
// it. The port is stopped and closed when the returned object goes.
Result<std::unique_ptr<StartedPort>> configure_port(uint16_t port, uint16_t rx_queues, uint16_t tx_queues,
                                                    rte_mempool* pool, const PortOptions& options = {});

// A port by device name ("net_ring0", "0000:03:00.0") or by id ("0").
Result<uint16_t> port_by_name(const std::string& name);
// The device name of a port ("port N" when it has none).
std::string port_name(uint16_t port);

// DPDK's message for an error number (rte_strerror; negative or positive).
std::string dpdk_error(int error);

}  // namespace sluice
