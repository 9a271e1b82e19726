// SPDX-License-Identifier: Apache-2.0
#include "dpdk_fixture.h"

#include <rte_eth_ring.h>
#include <rte_lcore.h>

#include <atomic>
#include <cstring>

namespace sluice::test {

DpdkEnvironment& dpdk_environment() {
    static DpdkEnvironment environment;
    return environment;
}

rte_mbuf* make_mbuf(const Bytes& frame) {
    rte_mbuf* m = rte_pktmbuf_alloc(dpdk_environment().pool);
    if (m == nullptr) return nullptr;
    char* data = rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size()));
    if (data == nullptr) {
        rte_pktmbuf_free(m);
        return nullptr;
    }
    std::memcpy(data, frame.data(), frame.size());
    return m;
}

Bytes mbuf_bytes(const rte_mbuf* m) {
    Bytes out(m->pkt_len);
    const void* data = rte_pktmbuf_read(m, 0, m->pkt_len, out.data());
    if (data != out.data()) std::memcpy(out.data(), data, m->pkt_len);
    return out;
}

std::unique_ptr<RingPort> RingPort::open(uint16_t queues) {
    static std::atomic<unsigned> opened{0};
    const unsigned n = opened++;
    std::unique_ptr<RingPort> port(new RingPort());
    for (uint16_t q = 0; q < queues; q++) {
        const std::string rx = "trx" + std::to_string(n) + "_" + std::to_string(q);
        const std::string tx = "ttx" + std::to_string(n) + "_" + std::to_string(q);
        port->rx_.push_back(rte_ring_create(rx.c_str(), 4096, static_cast<int>(rte_socket_id()), 0));
        port->tx_.push_back(rte_ring_create(tx.c_str(), 4096, static_cast<int>(rte_socket_id()), 0));
        if (port->rx_.back() == nullptr || port->tx_.back() == nullptr) return nullptr;
    }
    const std::string name = "net_ringtest" + std::to_string(n);
    const int id = rte_eth_from_rings(name.c_str(), port->rx_.data(), queues, port->tx_.data(), queues,
                                      static_cast<unsigned>(rte_socket_id()));
    if (id < 0) return nullptr;
    port->port_ = static_cast<uint16_t>(id);
    rte_eth_conf conf{};
    if (rte_eth_dev_configure(port->port_, queues, queues, &conf) != 0) return nullptr;
    for (uint16_t q = 0; q < queues; q++) {
        if (rte_eth_rx_queue_setup(port->port_, q, 1024, rte_socket_id(), nullptr, dpdk_environment().pool) != 0 ||
            rte_eth_tx_queue_setup(port->port_, q, 1024, rte_socket_id(), nullptr) != 0)
            return nullptr;
    }
    if (rte_eth_dev_start(port->port_) != 0) return nullptr;
    port->started_ = true;
    return port;
}

RingPort::~RingPort() {
    for (uint16_t q = 0; q < tx_.size(); q++) drain_sent(q);
    for (rte_ring* ring : rx_) {
        void* m;
        while (ring != nullptr && rte_ring_dequeue(ring, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
    }
    if (started_) {
        (void)rte_eth_dev_stop(port_);
        (void)rte_eth_dev_close(port_);
    }
    for (rte_ring* ring : rx_) rte_ring_free(ring);
    for (rte_ring* ring : tx_) rte_ring_free(ring);
}

unsigned RingPort::inject(const Bytes& frame, unsigned copies, uint16_t queue) {
    unsigned done = 0;
    for (; done < copies; done++) {
        rte_mbuf* m = make_mbuf(frame);
        if (m == nullptr) break;
        if (rte_ring_enqueue(rx_.at(queue), m) != 0) {
            rte_pktmbuf_free(m);
            break;
        }
    }
    return done;
}

unsigned RingPort::inject_again(rte_mbuf* const* frames, unsigned n, uint16_t queue) {
    unsigned done = 0;
    for (; done < n; done++) {
        rte_mbuf_refcnt_update(frames[done], 1);
        if (rte_ring_enqueue(rx_.at(queue), frames[done]) != 0) {
            rte_mbuf_refcnt_update(frames[done], -1);
            break;
        }
    }
    return done;
}

std::vector<Bytes> RingPort::sent(uint16_t queue) {
    std::vector<Bytes> out;
    void* m;
    while (rte_ring_dequeue(tx_.at(queue), &m) == 0) {
        out.push_back(mbuf_bytes(static_cast<rte_mbuf*>(m)));
        rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
    }
    return out;
}

unsigned RingPort::drain_sent(uint16_t queue) {
    unsigned n = 0;
    void* m;
    while (tx_.at(queue) != nullptr && rte_ring_dequeue(tx_.at(queue), &m) == 0) {
        rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
        n++;
    }
    return n;
}

}  // namespace sluice::test
