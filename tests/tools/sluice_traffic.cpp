// SPDX-License-Identifier: Apache-2.0
// sluice-traffic: sends paced UDP flows out of one interface and counts what
// arrives on another, per flow and per source. End-to-end tests and the live
// demo run it inside a network namespace holding both ends of a veth pair:
// the frames counted on rx-dev are exactly those the XDP program there
// passed, because packet taps run after XDP.
//
//   sluice-traffic --tx-dev sl1 --rx-dev sl0 --duration 5 --json -
//       --flow polite:10.1.0.1:500 --flow flood:10.3.0.0/22:40000
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "control/lib/result.h"
#include "control/lib/unique_fd.h"
#include "tests/tools/traffic_flows.h"

namespace sluice::traffic {
namespace {

constexpr int kExitRuntimeError = 1;
constexpr int kExitUsageError = 2;
constexpr int64_t kNsPerSecond = 1'000'000'000;
// Frames in flight when sending stops still get counted.
constexpr int64_t kDrainNs = 200'000'000;
constexpr size_t kSendBatch = 64;
constexpr size_t kReceiveBatch = 64;
// Enough of a frame to read its source address.
constexpr size_t kReceiveSnapBytes = 128;
// Large enough to absorb a scheduling hiccup of the receiving thread at
// 100k pps (each queued frame costs about 1 KiB of buffer accounting).
constexpr int kReceiveBufferBytes = 64 << 20;
// The sender sleeps at least this long when nothing is due, so a fast flow
// is paced in small batches rather than one wakeup per frame.
constexpr int64_t kMinSleepNs = 100'000;

constexpr const char* kUsage =
    "usage: sluice-traffic --tx-dev IFNAME --rx-dev IFNAME --duration SECONDS --flow NAME:SRC:PPS...\n"
    "                      [--json PATH|-] [--live-file PATH] [--frame-bytes N] [--dst ADDRESS]... [--count N]\n"
    "  --flow NAME:SRC:PPS  SRC is one address or a prefix (10.3.0.0/22, 2001:db8:3::/120) whose\n"
    "                       addresses are cycled round-robin; PPS is the flow's total rate\n"
    "  --json PATH|-        where the JSON report goes (default: stdout)\n"
    "  --live-file PATH     rewritten every second with a table of offered and passed rates\n"
    "  --frame-bytes N      Ethernet frame length without FCS (default 64)\n"
    "  --dst ADDRESS        destination for IPv4 or IPv6 flows (default 10.255.0.1, fd00::1)\n"
    "  --tx-cpu N           run the sender on CPU N; on veth the receive side's XDP then runs\n"
    "                       there too, which makes per-CPU (split) limits reproducible\n"
    "  --count N            each flow sends exactly N frames, none skipped (a flow that falls\n"
    "                       behind sends them late); the run ends when all have, or at --duration\n";

int64_t monotonic_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t{ts.tv_sec} * kNsPerSecond + ts.tv_nsec;
}

void sleep_until_ns(int64_t deadline_ns) {
    timespec ts{};
    ts.tv_sec = deadline_ns / kNsPerSecond;
    ts.tv_nsec = deadline_ns % kNsPerSecond;
    // EINTR only shortens the sleep: every caller re-reads the clock.
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
}

std::string errno_text(int error) { return std::strerror(error); }

struct Options {
    std::string tx_dev;
    std::string rx_dev;
    double duration_s = 0;
    std::vector<FlowSpec> flows;
    std::string json_path = "-";
    std::string live_file;
    size_t frame_bytes = 64;
    std::optional<int> tx_cpu;
    std::optional<uint64_t> count;  // frames per flow; nullopt: as many as the rate and duration make
    Address dst_v4 = *parse_address("10.255.0.1");
    Address dst_v6 = *parse_address("fd00::1");
};

// Returns the options, a usage error, or nothing when --help was asked.
Result<std::optional<Options>> parse_options(int argc, char** argv) {
    Options options;
    bool duration_given = false;
    bool dst_v4_given = false;
    bool dst_v6_given = false;
    bool frame_bytes_given = false;
    for (int i = 1; i < argc; i++) {
        const std::string option = argv[i];
        if (option == "-h" || option == "--help") return std::optional<Options>{};
        if (i + 1 >= argc) return Error{option + " needs a value (or unknown option)"};
        const std::string value = argv[++i];
        const std::string quoted = option + " \"" + value + "\"";
        if (option == "--tx-dev") {
            options.tx_dev = value;
        } else if (option == "--rx-dev") {
            options.rx_dev = value;
        } else if (option == "--duration") {
            char* end = nullptr;
            options.duration_s = std::strtod(value.c_str(), &end);
            if (value.empty() || *end != '\0' || !std::isfinite(options.duration_s) || options.duration_s <= 0 ||
                options.duration_s > 86400)
                return Error{quoted + ": expected seconds, above 0 and at most 86400"};
            duration_given = true;
        } else if (option == "--flow") {
            auto flow = parse_flow(value);
            if (!flow) return Error{quoted + ": " + flow.error().message};
            options.flows.push_back(flow.value());
        } else if (option == "--json") {
            options.json_path = value;
        } else if (option == "--live-file") {
            options.live_file = value;
        } else if (option == "--frame-bytes") {
            char* end = nullptr;
            errno = 0;
            const unsigned long bytes = std::strtoul(value.c_str(), &end, 10);
            if (value.empty() || *end != '\0' || errno != 0 || value[0] == '-' || bytes > 65535)
                return Error{quoted + ": expected a frame length in bytes"};
            options.frame_bytes = bytes;
            frame_bytes_given = true;
        } else if (option == "--tx-cpu") {
            char* end = nullptr;
            errno = 0;
            const unsigned long cpu = std::strtoul(value.c_str(), &end, 10);
            if (value.empty() || *end != '\0' || errno != 0 || value[0] == '-' || cpu >= CPU_SETSIZE)
                return Error{quoted + ": expected a CPU number"};
            options.tx_cpu = static_cast<int>(cpu);
        } else if (option == "--count") {
            char* end = nullptr;
            errno = 0;
            const unsigned long long count = std::strtoull(value.c_str(), &end, 10);
            if (value.empty() || *end != '\0' || errno != 0 || value[0] == '-' || count == 0)
                return Error{quoted + ": expected a number of frames, at least 1"};
            options.count = count;
        } else if (option == "--dst") {
            const auto address = parse_address(value);
            if (!address) return Error{quoted + ": bad address \"" + value + "\""};
            bool& given = address->family == Family::V4 ? dst_v4_given : dst_v6_given;
            if (given) return Error{quoted + ": a destination for this address family was already given"};
            given = true;
            (address->family == Family::V4 ? options.dst_v4 : options.dst_v6) = *address;
        } else {
            return Error{"unknown option \"" + option + "\""};
        }
    }
    if (options.tx_dev.empty()) return Error{"--tx-dev is required"};
    if (options.rx_dev.empty()) return Error{"--rx-dev is required"};
    if (!duration_given) return Error{"--duration is required"};
    if (options.flows.empty()) return Error{"at least one --flow is required"};
    for (size_t a = 0; a < options.flows.size(); a++) {
        const FlowSpec& flow = options.flows[a];
        const size_t needed = header_bytes(flow.sources.first.family);
        if (options.frame_bytes < needed)
            return Error{"--frame-bytes \"" + std::to_string(options.frame_bytes) + "\": flow \"" + flow.name +
                         "\" needs at least " + std::to_string(needed) + " bytes" +
                         (frame_bytes_given ? "" : " (the default is 64)")};
        for (size_t b = 0; b < a; b++) {
            const FlowSpec& other = options.flows[b];
            if (flow.name == other.name)
                return Error{"--flow \"" + flow.text + "\": another flow is already named \"" + flow.name + "\""};
            if (flow.sources.overlaps(other.sources))
                return Error{"--flow \"" + flow.text + "\": sources overlap those of flow \"" + other.text +
                             "\", so arrivals could not be attributed"};
        }
    }
    return std::optional<Options>{std::move(options)};
}

struct Interface {
    std::string name;
    int index = 0;
    uint8_t mac[6] = {};
    int mtu = 0;
};

Result<Interface> query_interface(const std::string& name, const std::string& option) {
    const std::string what = option + " \"" + name + "\"";
    if (name.size() >= IFNAMSIZ) return Error{what + ": interface name too long"};
    Interface interface;
    interface.name = name;
    interface.index = static_cast<int>(if_nametoindex(name.c_str()));
    if (interface.index == 0) return Error{what + ": " + errno_text(errno)};
    UniqueFd fd(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return Error{what + ": socket: " + errno_text(errno)};
    ifreq request{};
    std::memcpy(request.ifr_name, name.c_str(), name.size());
    if (ioctl(fd.get(), SIOCGIFHWADDR, &request) != 0) return Error{what + ": reading MAC: " + errno_text(errno)};
    if (request.ifr_hwaddr.sa_family != ARPHRD_ETHER) return Error{what + ": not an Ethernet interface"};
    std::memcpy(interface.mac, request.ifr_hwaddr.sa_data, 6);
    if (ioctl(fd.get(), SIOCGIFMTU, &request) != 0) return Error{what + ": reading MTU: " + errno_text(errno)};
    interface.mtu = request.ifr_mtu;
    return interface;
}

// One flow: its frames, where its sender is in its schedule, and its counts.
// Counters are written by one thread and read by others, hence relaxed atomics.
struct Flow {
    FlowSpec spec;
    FrameTemplate frame;
    std::unique_ptr<std::atomic<uint64_t>[]> sent_per_source;
    std::unique_ptr<std::atomic<uint64_t>[]> received_per_source;
    std::atomic<uint64_t> sent{0};
    std::atomic<uint64_t> received{0};
    std::atomic<uint64_t> skipped{0};  // frames the sender fell too far behind to send
    // CLOCK_REALTIME (ns) of the receive batches holding the flow's first and
    // last frames (0: none): when a ban or an unban took effect, to the ms.
    std::atomic<int64_t> first_received_unix_ns{0};
    std::atomic<int64_t> last_received_unix_ns{0};
    // Sender thread only.
    uint64_t scheduled = 0;    // frames sent or skipped so far
    uint64_t next_source = 0;  // index of the source the next frame comes from
};
using Flows = std::vector<std::unique_ptr<Flow>>;

Result<UniqueFd> open_send_socket(const Interface& tx) {
    // Protocol 0: this socket never receives.
    UniqueFd fd(socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return Error{"AF_PACKET socket: " + errno_text(errno) + " (needs CAP_NET_RAW)"};
    const int one = 1;
    // The frames need no queueing discipline, and skipping it is cheaper.
    if (setsockopt(fd.get(), SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one)) != 0)
        return Error{"PACKET_QDISC_BYPASS: " + errno_text(errno)};
    sockaddr_ll address{};
    address.sll_family = AF_PACKET;
    address.sll_ifindex = tx.index;
    if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0)
        return Error{"--tx-dev \"" + tx.name + "\": bind: " + errno_text(errno)};
    return fd;
}

Result<UniqueFd> open_receive_socket(const Interface& rx) {
    // Bound below before it hears anything, so no frame of another interface
    // is ever queued.
    UniqueFd fd(socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return Error{"AF_PACKET socket: " + errno_text(errno) + " (needs CAP_NET_RAW)"};
    const int buffer = kReceiveBufferBytes;
    if (setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUFFORCE, &buffer, sizeof(buffer)) != 0)
        return Error{"SO_RCVBUFFORCE: " + errno_text(errno) + " (needs CAP_NET_ADMIN)"};
    const int one = 1;
    // The frames rx-dev sends (ICMP errors about ours, for one) are not arrivals.
    if (setsockopt(fd.get(), SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)) != 0)
        return Error{"PACKET_IGNORE_OUTGOING: " + errno_text(errno)};
    sockaddr_ll address{};
    address.sll_family = AF_PACKET;
    address.sll_protocol = htons(ETH_P_ALL);
    address.sll_ifindex = rx.index;
    if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0)
        return Error{"--rx-dev \"" + rx.name + "\": bind: " + errno_text(errno)};
    return fd;
}

// Frames the kernel dropped because the receive socket's buffer was full.
// PACKET_STATISTICS resets on every read, so the reads are summed.
class ReceiverDrops {
  public:
    explicit ReceiverDrops(int fd) : fd_(fd) {}
    Result<uint64_t> total() {
        tpacket_stats stats{};
        socklen_t length = sizeof(stats);
        if (getsockopt(fd_, SOL_PACKET, PACKET_STATISTICS, &stats, &length) != 0)
            return Error{"PACKET_STATISTICS: " + errno_text(errno)};
        total_ += stats.tp_drops;
        return total_;
    }

  private:
    int fd_;
    uint64_t total_ = 0;
};

struct SendOutcome {
    Status status = ok_status();
    uint64_t busy = 0;     // sendmmsg calls refused for lack of room (ENOBUFS)
    int64_t ended_ns = 0;  // when sending stopped (a --count run: before the deadline)
};

// Sends every flow at its rate until end_ns or stop. Frame k of a flow is
// due k/pps seconds after start_ns; due frames of all flows are interleaved
// round-robin into batches. A flow more than ~10 ms behind skips frames
// rather than bursting later; with `frames_per_flow`, it skips none (so
// exactly that many go out) and the run ends once every flow has sent them.
SendOutcome send_paced(int fd, const Interface& tx, Flows& flows, int64_t start_ns, int64_t end_ns,
                       std::optional<uint64_t> frames_per_flow, const std::atomic<bool>& stop) {
    SendOutcome outcome;
    size_t frame_bytes = 0;
    for (const auto& flow : flows) frame_bytes = std::max(frame_bytes, flow->frame.bytes.size());
    std::vector<uint8_t> storage(kSendBatch * frame_bytes);
    mmsghdr messages[kSendBatch] = {};
    iovec vectors[kSendBatch] = {};
    size_t flow_of_message[kSendBatch] = {};
    sockaddr_ll destination_v4{};
    destination_v4.sll_family = AF_PACKET;
    destination_v4.sll_ifindex = tx.index;
    destination_v4.sll_protocol = htons(ETH_P_IP);
    destination_v4.sll_halen = 6;
    sockaddr_ll destination_v6 = destination_v4;
    destination_v6.sll_protocol = htons(ETH_P_IPV6);

    std::vector<uint64_t> owed(flows.size());
    std::vector<uint64_t> in_batch(flows.size());
    size_t first_flow = 0;  // rotates so a full batch favours no flow
    const auto all_sent = [&] {
        return frames_per_flow && std::all_of(flows.begin(), flows.end(),
                                              [&](const auto& flow) { return flow->scheduled >= *frames_per_flow; });
    };
    while (!stop.load(std::memory_order_relaxed) && !all_sent()) {
        const int64_t now = monotonic_ns();
        if (now >= end_ns) break;
        const double elapsed_s = static_cast<double>(now - start_ns) / kNsPerSecond;
        uint64_t total_owed = 0;
        for (size_t f = 0; f < flows.size(); f++) {
            Flow& flow = *flows[f];
            auto due = static_cast<uint64_t>(elapsed_s * flow.spec.pps) + 1;
            if (frames_per_flow) due = std::min(due, *frames_per_flow);
            const auto max_owed = std::max<uint64_t>(8, static_cast<uint64_t>(flow.spec.pps / 100));
            owed[f] = due > flow.scheduled ? due - flow.scheduled : 0;
            if (owed[f] > max_owed && frames_per_flow) {
                owed[f] = max_owed;  // the rest go out late, in the passes that follow
            } else if (owed[f] > max_owed) {
                flow.skipped.fetch_add(owed[f] - max_owed, std::memory_order_relaxed);
                flow.scheduled += owed[f] - max_owed;
                owed[f] = max_owed;
            }
            total_owed += owed[f];
            in_batch[f] = 0;
        }

        size_t count = 0;
        for (bool added = true; added && count < kSendBatch;) {
            added = false;
            for (size_t step = 0; step < flows.size() && count < kSendBatch; step++) {
                const size_t f = (first_flow + step) % flows.size();
                if (in_batch[f] == owed[f]) continue;
                const Flow& flow = *flows[f];
                uint8_t* frame = storage.data() + count * frame_bytes;
                std::memcpy(frame, flow.frame.bytes.data(), flow.frame.bytes.size());
                const uint64_t source = (flow.next_source + in_batch[f]) % flow.spec.sources.count;
                flow.frame.write_source(frame, flow.spec.sources.at(source));
                vectors[count] = {frame, flow.frame.bytes.size()};
                messages[count].msg_hdr = {};
                messages[count].msg_hdr.msg_iov = &vectors[count];
                messages[count].msg_hdr.msg_iovlen = 1;
                messages[count].msg_hdr.msg_name = flow.frame.family == Family::V4 ? &destination_v4 : &destination_v6;
                messages[count].msg_hdr.msg_namelen = sizeof(sockaddr_ll);
                flow_of_message[count] = f;
                in_batch[f]++;
                count++;
                added = true;
            }
        }
        first_flow = (first_flow + 1) % flows.size();

        if (count > 0) {
            const int accepted = sendmmsg(fd, messages, static_cast<unsigned>(count), 0);
            if (accepted < 0) {
                if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR) {
                    outcome.status = Error{"sending on --tx-dev \"" + tx.name + "\": " + errno_text(errno)};
                    return outcome;
                }
                // The peer's queue is full: the frames stay owed and go out
                // on a later pass (or are skipped if that is too late).
                outcome.busy++;
                sleep_until_ns(monotonic_ns() + kMinSleepNs);
                continue;
            }
            for (int m = 0; m < accepted; m++) {
                Flow& flow = *flows[flow_of_message[m]];
                flow.sent_per_source[flow.next_source].fetch_add(1, std::memory_order_relaxed);
                flow.next_source = (flow.next_source + 1) % flow.spec.sources.count;
                flow.scheduled++;
                flow.sent.fetch_add(1, std::memory_order_relaxed);
            }
            if (static_cast<size_t>(accepted) < count) outcome.busy++;
            if (total_owed > count) continue;  // more is due already
        }
        if (all_sent()) break;

        int64_t wake_ns = end_ns;
        for (const auto& flow : flows) {
            if (frames_per_flow && flow->scheduled >= *frames_per_flow) continue;  // done
            const auto due_ns =
                start_ns + static_cast<int64_t>(static_cast<double>(flow->scheduled) / flow->spec.pps * kNsPerSecond);
            wake_ns = std::min(wake_ns, due_ns);
        }
        sleep_until_ns(std::min(end_ns, std::max(wake_ns, monotonic_ns() + kMinSleepNs)));
    }
    outcome.ended_ns = monotonic_ns();
    return outcome;
}

// Counts frames arriving on rx-dev by flow and source until stop.
Status count_arrivals(int fd, const std::string& rx_name, Flows& flows, const std::atomic<bool>& stop) {
    std::vector<uint8_t> storage(kReceiveBatch * kReceiveSnapBytes);
    mmsghdr messages[kReceiveBatch] = {};
    iovec vectors[kReceiveBatch] = {};
    sockaddr_ll senders[kReceiveBatch] = {};
    for (size_t m = 0; m < kReceiveBatch; m++) vectors[m] = {storage.data() + m * kReceiveSnapBytes, kReceiveSnapBytes};

    while (!stop.load(std::memory_order_relaxed)) {
        pollfd readable{fd, POLLIN, 0};
        const int ready = poll(&readable, 1, 50);
        if (ready < 0) {
            if (errno == EINTR) continue;
            return Error{"poll on --rx-dev \"" + rx_name + "\": " + errno_text(errno)};
        }
        if (ready == 0) continue;
        for (size_t m = 0; m < kReceiveBatch; m++) {
            messages[m].msg_hdr = {};
            messages[m].msg_hdr.msg_iov = &vectors[m];
            messages[m].msg_hdr.msg_iovlen = 1;
            messages[m].msg_hdr.msg_name = &senders[m];
            messages[m].msg_hdr.msg_namelen = sizeof(sockaddr_ll);
        }
        const int received = recvmmsg(fd, messages, kReceiveBatch, MSG_DONTWAIT, nullptr);
        if (received < 0) {
            if (errno == EAGAIN || errno == EINTR) continue;
            return Error{"receiving on --rx-dev \"" + rx_name + "\": " + errno_text(errno)};
        }
        timespec batch_time{};
        clock_gettime(CLOCK_REALTIME, &batch_time);
        const int64_t batch_unix_ns = int64_t{batch_time.tv_sec} * kNsPerSecond + batch_time.tv_nsec;
        for (int m = 0; m < received; m++) {
            if (senders[m].sll_pkttype == PACKET_OUTGOING) continue;
            const auto source = source_of_frame(static_cast<const uint8_t*>(vectors[m].iov_base), messages[m].msg_len);
            if (!source) continue;
            for (auto& flow : flows) {
                const auto index = flow->spec.sources.index_of(source->family, source->address);
                if (!index) continue;
                flow->received_per_source[*index].fetch_add(1, std::memory_order_relaxed);
                flow->received.fetch_add(1, std::memory_order_relaxed);
                int64_t unset = 0;
                flow->first_received_unix_ns.compare_exchange_strong(unset, batch_unix_ns, std::memory_order_relaxed);
                flow->last_received_unix_ns.store(batch_unix_ns, std::memory_order_relaxed);
                break;
            }
        }
    }
    return ok_status();
}

Status write_file_atomically(const std::string& path, const std::string& content) {
    const std::string temporary = path + ".tmp";
    {
        std::ofstream out(temporary, std::ios::trunc);
        if (!out) return Error{"cannot write \"" + temporary + "\": " + errno_text(errno)};
        out << content;
        out.flush();
        if (!out) return Error{"writing \"" + temporary + "\": " + errno_text(errno)};
    }
    if (std::rename(temporary.c_str(), path.c_str()) != 0)
        return Error{"renaming \"" + temporary + "\" to \"" + path + "\": " + errno_text(errno)};
    return ok_status();
}

// Fails now rather than after the run if `path` cannot be written.
Status check_writable(const std::string& path, const std::string& option) {
    const std::string temporary = path + ".tmp";
    std::ofstream probe(temporary, std::ios::trunc);
    if (!probe) return Error{option + " \"" + path + "\": cannot write \"" + temporary + "\": " + errno_text(errno)};
    probe.close();
    if (std::remove(temporary.c_str()) != 0)
        return Error{option + " \"" + path + "\": removing \"" + temporary + "\": " + errno_text(errno)};
    return ok_status();
}

std::string format_fixed(double value, int decimals) {
    char text[64];
    std::snprintf(text, sizeof(text), "%.*f", decimals, value);
    return text;
}

// The live table: per flow, offered and passed rates over the last interval
// while running, and over the whole run once finished.
class LiveTable {
  public:
    LiveTable(const Flows& flows, int64_t start_ns, double duration_s)
        : flows_(flows),
          start_ns_(start_ns),
          duration_s_(duration_s),
          last_ns_(start_ns),
          last_sent_(flows.size()),
          last_received_(flows.size()) {}

    std::string running(int64_t now_ns, uint64_t receiver_drops) {
        const double interval_s = static_cast<double>(now_ns - last_ns_) / kNsPerSecond;
        char header[160];
        std::snprintf(header, sizeof(header),
                      "traffic running: %.0f s of %g s; rates over the last second; counter missed %llu frames\n",
                      static_cast<double>(now_ns - start_ns_) / kNsPerSecond, duration_s_,
                      static_cast<unsigned long long>(receiver_drops));
        std::vector<Rates> rates;
        for (size_t f = 0; f < flows_.size(); f++) {
            const uint64_t sent = flows_[f]->sent.load(std::memory_order_relaxed);
            const uint64_t received = flows_[f]->received.load(std::memory_order_relaxed);
            rates.push_back(per_second(sent - last_sent_[f], received - last_received_[f], interval_s));
            last_sent_[f] = sent;
            last_received_[f] = received;
        }
        last_ns_ = now_ns;
        return render(header, rates);
    }

    std::string finished(double sent_for_s, uint64_t receiver_drops) const {
        char header[160];
        std::snprintf(header, sizeof(header),
                      "traffic finished: sent for %.1f s; average rates; counter missed %llu frames\n", sent_for_s,
                      static_cast<unsigned long long>(receiver_drops));
        std::vector<Rates> rates;
        for (const auto& flow : flows_)
            rates.push_back(per_second(flow->sent.load(), flow->received.load(), sent_for_s));
        return render(header, rates);
    }

  private:
    struct Rates {
        double offered;
        double passed;
    };

    static Rates per_second(uint64_t sent, uint64_t received, double seconds) {
        seconds = std::max(seconds, 1e-9);
        return {static_cast<double>(sent) / seconds, static_cast<double>(received) / seconds};
    }

    std::string render(const char* header, const std::vector<Rates>& rates) const {
        std::ostringstream out;
        out << header;
        char line[256];
        std::snprintf(line, sizeof(line), "%-12s %8s %12s %12s %12s %7s\n", "flow", "sources", "offered pps",
                      "passed pps", "dropped pps", "pass %");
        out << line;
        for (size_t f = 0; f < flows_.size(); f++) {
            const auto [offered, passed] = rates[f];
            // Frames in flight at a snapshot are counted in the next one, so a
            // second can show a few more passed than offered.
            const double dropped = std::max(0.0, offered - passed);
            const std::string pass_percent =
                offered > 0 ? format_fixed(std::min(100.0, 100.0 * passed / offered), 1) : "-";
            std::snprintf(line, sizeof(line), "%-12s %8llu %12.0f %12.0f %12.0f %7s\n", flows_[f]->spec.name.c_str(),
                          static_cast<unsigned long long>(flows_[f]->spec.sources.count), offered, passed, dropped,
                          pass_percent.c_str());
            out << line;
        }
        return out.str();
    }

    const Flows& flows_;
    int64_t start_ns_;
    double duration_s_;
    int64_t last_ns_;
    std::vector<uint64_t> last_sent_;
    std::vector<uint64_t> last_received_;
};

// The JSON report. per_source is written by hand: a flow may have 2^20
// sources, and a JSON object for each would take ~400 MB.
std::string report_json(const Flows& flows, double duration_s, uint64_t receiver_drops, uint64_t send_busy,
                        bool interrupted) {
    nlohmann::ordered_json head;
    head["duration_s"] = std::round(duration_s * 1e6) / 1e6;
    head["receiver_drops"] = receiver_drops;
    head["send_busy"] = send_busy;
    head["interrupted"] = interrupted;
    std::string text = head.dump();
    text.pop_back();  // the closing brace: "flows" follows
    text += ",\"flows\":[";
    for (size_t f = 0; f < flows.size(); f++) {
        const Flow& flow = *flows[f];
        nlohmann::ordered_json entry;
        entry["name"] = flow.spec.name;
        entry["src"] = flow.spec.source_text;
        entry["sources"] = flow.spec.sources.count;
        entry["offered_pps"] = flow.spec.pps;
        const uint64_t sent = flow.sent.load();
        entry["achieved_pps"] = duration_s > 0 ? std::round(static_cast<double>(sent) / duration_s * 10) / 10 : 0.0;
        entry["sent"] = sent;
        entry["skipped"] = flow.skipped.load();
        entry["received"] = flow.received.load();
        entry["first_received_unix_ns"] = flow.first_received_unix_ns.load();
        entry["last_received_unix_ns"] = flow.last_received_unix_ns.load();
        std::string flow_text = entry.dump();
        flow_text.pop_back();
        text += (f == 0 ? "" : ",") + flow_text + ",\"per_source\":[";
        for (uint64_t s = 0; s < flow.spec.sources.count; s++) {
            // Formatted addresses hold only hex digits, '.' and ':': nothing to escape.
            text += (s == 0 ? "{\"src\":\"" : ",{\"src\":\"") + format_address(flow.spec.sources.at(s)) +
                    "\",\"sent\":" + std::to_string(flow.sent_per_source[s].load()) +
                    ",\"received\":" + std::to_string(flow.received_per_source[s].load()) + "}";
        }
        text += "]}";
    }
    text += "]}\n";
    return text;
}

int run(const Options& options) {
    const auto fail = [](const std::string& message) {
        std::fprintf(stderr, "sluice-traffic: %s\n", message.c_str());
        return kExitRuntimeError;
    };
    auto tx = query_interface(options.tx_dev, "--tx-dev");
    if (!tx) return fail(tx.error().message);
    auto rx = query_interface(options.rx_dev, "--rx-dev");
    if (!rx) return fail(rx.error().message);
    const size_t largest_frame = static_cast<size_t>(tx.value().mtu) + kEthernetHeaderBytes;
    if (options.frame_bytes > largest_frame)
        return fail("--frame-bytes \"" + std::to_string(options.frame_bytes) +
                    "\": above the largest frame --tx-dev \"" + options.tx_dev + "\" sends (" +
                    std::to_string(largest_frame) + " bytes, MTU " + std::to_string(tx.value().mtu) + ")");

    if (options.json_path != "-") {
        if (auto writable = check_writable(options.json_path, "--json"); !writable)
            return fail(writable.error().message);
    }
    if (!options.live_file.empty()) {
        if (auto writable = check_writable(options.live_file, "--live-file"); !writable)
            return fail(writable.error().message);
    }

    if (options.tx_cpu) {
        cpu_set_t allowed;
        if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
            return fail("sched_getaffinity: " + errno_text(errno));
        if (!CPU_ISSET(*options.tx_cpu, &allowed))
            return fail("--tx-cpu \"" + std::to_string(*options.tx_cpu) + "\": this process may not run on CPU " +
                        std::to_string(*options.tx_cpu) + " (" + std::to_string(CPU_COUNT(&allowed)) +
                        " CPUs allowed)");
    }

    Flows flows;
    for (size_t f = 0; f < options.flows.size(); f++) {
        auto flow = std::make_unique<Flow>();
        flow->spec = options.flows[f];
        const Family family = flow->spec.sources.first.family;
        flow->frame = build_frame_template(family, rx.value().mac, tx.value().mac,
                                           family == Family::V4 ? options.dst_v4 : options.dst_v6,
                                           static_cast<uint16_t>(40000 + f), options.frame_bytes);
        flow->sent_per_source = std::make_unique<std::atomic<uint64_t>[]>(flow->spec.sources.count);
        flow->received_per_source = std::make_unique<std::atomic<uint64_t>[]>(flow->spec.sources.count);
        flows.push_back(std::move(flow));
    }

    auto receive_socket = open_receive_socket(rx.value());
    if (!receive_socket) return fail(receive_socket.error().message);
    auto send_socket = open_send_socket(tx.value());
    if (!send_socket) return fail(send_socket.error().message);
    ReceiverDrops receiver_drops(receive_socket.value().get());

    // SIGINT and SIGTERM end the run early; the threads never see them, and
    // the main thread takes them synchronously with sigtimedwait.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    if (int error = pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr); error != 0)
        return fail("blocking signals: " + errno_text(error));

    std::atomic<bool> stop_receiving{false};
    Status receive_status = ok_status();
    std::thread receiver(
        [&] { receive_status = count_arrivals(receive_socket.value().get(), options.rx_dev, flows, stop_receiving); });

    const int64_t start_ns = monotonic_ns();
    const int64_t end_ns = start_ns + static_cast<int64_t>(options.duration_s * kNsPerSecond);
    std::atomic<bool> stop_sending{false};
    std::atomic<bool> sender_done{false};
    SendOutcome send_outcome;
    std::thread sender([&] {
        if (options.tx_cpu) {
            cpu_set_t cpus;
            CPU_ZERO(&cpus);
            CPU_SET(*options.tx_cpu, &cpus);
            if (int error = pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus); error != 0) {
                send_outcome.status =
                    Error{"--tx-cpu \"" + std::to_string(*options.tx_cpu) + "\": " + errno_text(error)};
                sender_done = true;
                return;
            }
        }
        send_outcome =
            send_paced(send_socket.value().get(), tx.value(), flows, start_ns, end_ns, options.count, stop_sending);
        sender_done = true;
    });

    std::string runtime_error;
    LiveTable live_table(flows, start_ns, options.duration_s);
    bool live_warned = false;
    // finished_after_s: the run is over and lasted that long.
    const auto update_live_file = [&](std::optional<double> finished_after_s) {
        if (options.live_file.empty()) return;
        auto drops = receiver_drops.total();
        if (!drops) {
            runtime_error = drops.error().message;
            return;
        }
        const auto written = write_file_atomically(
            options.live_file, finished_after_s ? live_table.finished(*finished_after_s, drops.value())
                                                : live_table.running(monotonic_ns(), drops.value()));
        if (!written && !live_warned) {
            // The live view is for people watching; the counts still matter.
            std::fprintf(stderr, "sluice-traffic: --live-file: %s\n", written.error().message.c_str());
            live_warned = true;
        }
    };

    bool interrupted = false;
    int64_t next_tick_ns = start_ns + kNsPerSecond;
    int64_t stopped_ns = end_ns;
    while (!sender_done.load()) {
        const int64_t now = monotonic_ns();
        if (now >= next_tick_ns) {
            update_live_file(std::nullopt);
            next_tick_ns += kNsPerSecond;
        }
        // Short waits, so a sender that failed is noticed promptly.
        const int64_t wait_ns = std::clamp<int64_t>(std::min(next_tick_ns, end_ns) - now, 1, 100'000'000);
        const timespec timeout{0, static_cast<long>(wait_ns)};
        const int signal = sigtimedwait(&stop_signals, nullptr, &timeout);
        if (signal > 0) {
            interrupted = true;
            stopped_ns = monotonic_ns();
            stop_sending = true;
            break;
        }
        if (signal < 0 && errno != EAGAIN && errno != EINTR) {
            runtime_error = "sigtimedwait: " + errno_text(errno);
            stop_sending = true;
            break;
        }
    }
    sender.join();
    // The sender's own end: the loop above notices it up to 100 ms late.
    if (!interrupted) stopped_ns = std::min(end_ns, send_outcome.ended_ns > 0 ? send_outcome.ended_ns : monotonic_ns());
    const double duration_s = static_cast<double>(stopped_ns - start_ns) / kNsPerSecond;
    sleep_until_ns(monotonic_ns() + kDrainNs);
    stop_receiving = true;
    receiver.join();
    update_live_file(duration_s);

    if (!send_outcome.status) runtime_error = send_outcome.status.error().message;
    if (!receive_status) runtime_error = receive_status.error().message;
    auto drops = receiver_drops.total();
    if (!drops) runtime_error = drops.error().message;
    const uint64_t drops_total = drops ? drops.value() : 0;

    const std::string report = report_json(flows, duration_s, drops_total, send_outcome.busy, interrupted);
    if (options.json_path == "-") {
        std::cout << report << std::flush;
        if (!std::cout) runtime_error = "writing the report to stdout failed";
    } else if (auto written = write_file_atomically(options.json_path, report); !written) {
        runtime_error = "--json: " + written.error().message;
    }

    // A summary for people; the JSON is for programs.
    std::fprintf(stderr, "sluice-traffic: sent for %.2f s%s, receiver drops %llu, send queue full %llu times\n",
                 duration_s, interrupted ? " (interrupted)" : "", static_cast<unsigned long long>(drops_total),
                 static_cast<unsigned long long>(send_outcome.busy));
    for (const auto& flow : flows) {
        const uint64_t sent = flow->sent.load();
        const uint64_t received = flow->received.load();
        std::fprintf(stderr, "  %-12s %-20s asked %9.0f pps, sent %9.0f pps (%llu), received %llu (%.1f%%)\n",
                     flow->spec.name.c_str(), flow->spec.source_text.c_str(), flow->spec.pps,
                     duration_s > 0 ? static_cast<double>(sent) / duration_s : 0.0,
                     static_cast<unsigned long long>(sent), static_cast<unsigned long long>(received),
                     sent > 0 ? 100.0 * static_cast<double>(received) / static_cast<double>(sent) : 0.0);
    }
    if (!runtime_error.empty()) return fail(runtime_error);
    return 0;
}

}  // namespace
}  // namespace sluice::traffic

int main(int argc, char** argv) {
    using namespace sluice::traffic;
    auto options = parse_options(argc, argv);
    if (!options) {
        std::fprintf(stderr, "sluice-traffic: %s\n%s", options.error().message.c_str(), kUsage);
        return kExitUsageError;
    }
    if (!options.value()) {
        std::fputs(kUsage, stdout);
        return 0;
    }
    return run(*options.value());
}
