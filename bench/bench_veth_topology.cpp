// SPDX-License-Identifier: Apache-2.0
// sluice-bench veth's topology: the shell commands that build it, the two
// network namespaces (and entering one from a thread), the veth pair between
// them, and removing what a run killed with SIGKILL left behind.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "bench_veth.h"

namespace sluice::bench::veth {

// ---- shell commands ---------------------------------------------------------

Result<std::string> command_output(const std::string& command) {
    FILE* pipe = popen((command + " 2>&1").c_str(), "r");
    if (pipe == nullptr) return Error{"cannot run " + command + ": " + std::strerror(errno)};
    std::string output;
    char buf[4096];
    while (size_t n = std::fread(buf, 1, sizeof(buf), pipe)) output.append(buf, n);
    const int status = pclose(pipe);
    if (status != 0) return Error{"`" + command + "` failed: " + output};
    return output;
}

Status run_command(const std::string& command) {
    auto out = command_output(command);
    if (!out) return out.error();
    return ok_status();
}

void run_cleanup(const std::string& command) {
    if (auto out = command_output(command); !out)
        std::fprintf(stderr, "sluice-bench: cleanup: %s\n", out.error().message.c_str());
}

Status require_tool(const std::string& tool) {
    if (command_output("command -v " + tool)) return ok_status();
    return Error{tool + " is not installed: run scripts/install-deps.sh as root"};
}

// ---- namespaces -------------------------------------------------------------

Result<std::unique_ptr<Netns>> Netns::create(const std::string& name) {
    if (auto status = run_command("ip netns add " + name); !status) return status.error();
    return std::unique_ptr<Netns>(new Netns(name));
}

Netns::~Netns() { run_cleanup("ip netns del " + name_); }

Result<std::unique_ptr<InNetns>> InNetns::enter(const Netns& ns) {
    std::unique_ptr<InNetns> scope(new InNetns());
    scope->saved_ = UniqueFd(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    UniqueFd target(::open(("/var/run/netns/" + ns.name()).c_str(), O_RDONLY | O_CLOEXEC));
    if (!scope->saved_.valid() || !target.valid() || setns(target.get(), CLONE_NEWNET) != 0)
        return Error{"cannot enter network namespace " + ns.name() + ": " + std::strerror(errno)};
    return scope;
}

InNetns::~InNetns() {
    if (saved_.valid() && setns(saved_.get(), CLONE_NEWNET) != 0)
        std::fprintf(stderr, "sluice-bench: cannot return to the original network namespace: %s\n",
                     std::strerror(errno));
}

namespace {

// Namespaces of runs that died without cleaning up (SIGKILL): their pid is
// in the name, and that process is gone.
void remove_stale_namespaces() {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/var/run/netns", ec)) {
        const std::string name = entry.path().filename();
        if (name.rfind("sluice-bench-", 0) != 0) continue;
        const long pid = std::strtol(name.c_str() + std::strlen("sluice-bench-"), nullptr, 10);
        if (pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) run_cleanup("ip netns del " + name);
    }
}

// ---- the veth pair ----------------------------------------------------------

Result<Link> link_of(const Netns& ns, const std::string& dev) {
    auto out = command_output("ip -n " + ns.name() + " -j link show dev " + dev);
    if (!out) return out.error();
    const auto links = Json::parse(out.value(), nullptr, false);
    if (!links.is_array() || links.empty()) return Error{"cannot read link " + dev + " in " + ns.name()};
    Link link;
    link.ifindex = links[0].value("ifindex", 0);
    unsigned m[6];
    if (std::sscanf(links[0].value("address", "").c_str(), "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4],
                    &m[5]) != 6)
        return Error{"cannot read the MAC address of " + dev};
    for (int i = 0; i < 6; ++i) link.mac[i] = static_cast<uint8_t>(m[i]);
    return link;
}

}  // namespace

Result<Topology> create_topology() {
    remove_stale_namespaces();
    const std::string tag = std::to_string(getpid());
    Topology topology;
    auto tx_ns = Netns::create("sluice-bench-" + tag + "-tx");
    if (!tx_ns) return tx_ns.error();
    topology.tx = std::move(tx_ns.value());
    auto rx_ns = Netns::create("sluice-bench-" + tag + "-rx");
    if (!rx_ns) return rx_ns.error();
    topology.rx = std::move(rx_ns.value());
    const Netns& tx = *topology.tx;
    const Netns& rx = *topology.rx;
    topology.tx_dev = "sb" + tag + "t";
    topology.rx_dev = "sb" + tag + "r";
    const std::string& tx_dev = topology.tx_dev;
    const std::string& rx_dev = topology.rx_dev;
    for (const std::string& command :
         {tx.exec("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1"),
          rx.exec("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1"),
          "ip -n " + tx.name() + " link add " + tx_dev + " type veth peer name " + rx_dev + " netns " + rx.name(),
          "ip -n " + tx.name() + " link set " + tx_dev + " up", "ip -n " + rx.name() + " link set " + rx_dev + " up",
          "ip -n " + rx.name() + " addr add " + std::string(kRxAddress) + "/24 dev " + rx_dev,
          "ip -n " + rx.name() + " link set lo up"})
        if (auto status = run_command(command); !status) return status.error();
    auto tx_link = link_of(tx, tx_dev);
    if (!tx_link) return tx_link.error();
    topology.tx_link = tx_link.value();
    auto rx_link = link_of(rx, rx_dev);
    if (!rx_link) return rx_link.error();
    topology.rx_link = rx_link.value();
    return topology;
}

}  // namespace sluice::bench::veth
