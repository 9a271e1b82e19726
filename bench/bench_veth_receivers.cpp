// SPDX-License-Identifier: Apache-2.0
// sluice-bench veth's four receivers, each set up on the receiving veth and
// removed when dropped: the baseline (ebpf/baseline.bpf.c, XDP_DROP) and
// Sluice (an XdpDataplane), both native XDP, and the two limiters people use
// instead: an nftables netdev-ingress per-source meter and iptables
// hashlimit in raw PREROUTING.
#include <bpf/bpf.h>
#include <linux/if_link.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "bench_veth.h"

namespace sluice::bench::veth {
namespace {

// counts with the kernel's run count and run time of an XDP program (on
// while run_veth holds BPF_ENABLE_STATS).
Result<Counts> with_bpf_run_stats(int prog_fd, Counts counts) {
    bpf_prog_info info{};
    __u32 len = sizeof(info);
    if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0)
        return Error{std::string("reading program run statistics: ") + std::strerror(errno)};
    counts.bpf_runs = info.run_cnt;
    counts.bpf_run_ns = info.run_time_ns;
    return counts;
}

Result<UniqueFd> attach_xdp(const Netns& rx, int ifindex, int prog_fd) {
    auto scope = InNetns::enter(rx);
    if (!scope) return scope.error();
    // A link detaches when its fd closes: no program outlives the bench.
    LIBBPF_OPTS(bpf_link_create_opts, opts, .flags = XDP_FLAGS_DRV_MODE);
    UniqueFd link(bpf_link_create(prog_fd, ifindex, BPF_XDP, &opts));
    if (!link.valid())
        return Error{std::string("attaching XDP (native) to the receiving veth: ") + std::strerror(errno)};
    return link;
}

class BaselineReceiver : public Receiver {
  public:
    static Result<std::unique_ptr<Receiver>> create(const Netns& rx, int ifindex) {
        std::unique_ptr<BaselineReceiver> r(new BaselineReceiver());
        auto program = BaselineProgram::load(0);
        if (!program) return program.error();
        r->program_ = std::move(program.value());
        auto drops = program_map_fd(r->program_->fd(), "baseline_drops");
        if (!drops) return drops.error();
        r->drops_ = std::move(drops.value());
        auto link = attach_xdp(rx, ifindex, r->program_->fd());
        if (!link) return link.error();
        r->link_ = std::move(link.value());
        return std::unique_ptr<Receiver>(std::move(r));
    }
    Result<Counts> read() override {
        Counts counts;
        std::vector<uint64_t> per_cpu(static_cast<size_t>(libbpf_num_possible_cpus()));
        const uint32_t zero = 0;
        if (bpf_map_lookup_elem(drops_.get(), &zero, per_cpu.data()) != 0)
            return Error{std::string("reading baseline_drops: ") + std::strerror(errno)};
        for (const uint64_t n : per_cpu) counts.decided += n;
        return with_bpf_run_stats(program_->fd(), counts);
    }

  private:
    std::unique_ptr<BaselineProgram> program_;
    UniqueFd drops_, link_;  // the link last: it detaches first
};

class SluiceReceiver : public Receiver {
  public:
    static Result<std::unique_ptr<Receiver>> create(const Netns& rx, int ifindex, const Limit& limit,
                                                    uint32_t sources) {
        std::unique_ptr<SluiceReceiver> r(new SluiceReceiver());
        XdpOptions options;
        // Two entries per source, as nftables' set is sized: every source
        // stays known, so no packet meets a full set (the table needs far
        // fewer: only sources in debt hold an entry).
        options.source_capacity = std::max<uint32_t>(1u << 18, sources * 2);
        auto dp = XdpDataplane::open(options);
        if (!dp) return Error{"loading ebpf/sluice.bpf.c: " + dp.error().message};
        r->dp_ = std::move(dp.value());
        // The per-source limit is GCRA (exact on any CPU); the aggregate and
        // global, wide open, in lease mode, the default.
        auto policy = single_class_policy(limit.rate, limit.burst, Accuracy::lease, r->dp_->possible_cpus());
        if (!policy) return policy.error();
        if (auto status = r->dp_->apply(policy.value()); !status) return status.error();
        auto scope = InNetns::enter(rx);
        if (!scope) return scope.error();
        if (auto status = r->dp_->attach(ifindex, XdpMode::native); !status) return status.error();
        return std::unique_ptr<Receiver>(std::move(r));
    }
    Result<Counts> read() override {
        Counts counts;
        auto counters = dp_->counters();
        if (!counters) return counters.error();
        for (uint32_t i = 0; i < counters.value().size(); ++i) {
            const uint64_t packets = counters.value()[i].packets;
            counts.decided += packets;
            // The index is (class * verdicts + verdict) * reasons + reason; a
            // would_drop passed (its class is in shadow).
            if ((i / SLUICE_REASON_COUNT) % SLUICE_VERDICT_COUNT != SLUICE_VERDICT_DROP) counts.admitted += packets;
        }
        return with_bpf_run_stats(dp_->program_fd(), counts);
    }

  private:
    std::unique_ptr<XdpDataplane> dp_;  // detaches its (unpinned) link when dropped
};

// A limiter in the kernel's stack on the receiving veth, which needs GRO on:
// without an XDP program that is what gives the veth the NAPI instance
// redirected frames are queued to. Dropped, it turns GRO off again, after
// the derived receiver has removed its rules.
class StackReceiver : public Receiver {
  public:
    ~StackReceiver() override { run_cleanup(gro_command(false)); }

  protected:
    StackReceiver(const Netns& rx, std::string dev) : rx_(rx), dev_(std::move(dev)) {}
    Status enable_gro() const { return run_command(gro_command(true)); }
    // Counts from the packet counters of the two rules, in order: the
    // limit's drop, then the accept; `where` names the rules' place.
    static Result<Counts> drop_and_accept_counts(const std::vector<uint64_t>& rule_packets, const std::string& where) {
        if (rule_packets.size() != 2) return Error{"expected two counted rules in " + where};
        Counts counts;
        counts.decided = rule_packets[0] + rule_packets[1];
        counts.admitted = rule_packets[1];
        return counts;
    }

    const Netns& rx_;

  private:
    std::string gro_command(bool on) const { return rx_.exec("ethtool -K " + dev_ + " gro " + (on ? "on" : "off")); }
    std::string dev_;
};

class NftReceiver : public StackReceiver {
  public:
    static Result<std::unique_ptr<Receiver>> create(const Netns& rx, const std::string& dev, const Limit& limit,
                                                    uint32_t sources) {
        std::unique_ptr<NftReceiver> r(new NftReceiver(rx, dev));
        if (auto status = r->enable_gro(); !status) return status.error();
        std::ostringstream script;
        script << "table netdev sluice_bench {\n"
               << "  set sources { type ipv4_addr; size " << std::max<uint64_t>(65536, uint64_t{sources} * 2)
               << "; flags dynamic; }\n"
               << "  chain ingress {\n"
               << "    type filter hook ingress device " << dev << " priority 0; policy accept;\n"
               << "    update @sources { ip saddr limit rate over " << limit.rate << "/second burst " << limit.burst
               << " packets } counter drop\n"
               << "    ip saddr != 0.0.0.0 counter accept\n"
               << "  }\n"
               << "}\n";
        const std::string path = "/tmp/sluice-bench-" + std::to_string(getpid()) + ".nft";
        {
            std::ofstream file(path);
            file << script.str();
        }
        auto loaded = run_command(rx.exec("nft -f " + path));
        std::remove(path.c_str());
        if (!loaded) return loaded.error();
        r->loaded_ = true;
        return std::unique_ptr<Receiver>(std::move(r));
    }
    ~NftReceiver() override {
        if (loaded_) run_cleanup(rx_.exec("nft delete table netdev sluice_bench"));
    }
    Result<Counts> read() override {
        auto out = command_output(rx_.exec("nft -j list chain netdev sluice_bench ingress"));
        if (!out) return out.error();
        const auto doc = Json::parse(out.value(), nullptr, false);
        if (doc.is_discarded()) return Error{"nft -j printed something that is not JSON"};
        std::vector<uint64_t> rule_packets;  // the counter of each rule, in order
        for (const auto& item : doc.value("nftables", Json::array())) {
            if (!item.contains("rule")) continue;
            for (const auto& expr : item["rule"].value("expr", Json::array()))
                if (expr.contains("counter")) rule_packets.push_back(expr["counter"].value("packets", uint64_t{0}));
        }
        return drop_and_accept_counts(rule_packets, "the nftables chain");
    }

  private:
    NftReceiver(const Netns& rx, std::string dev) : StackReceiver(rx, std::move(dev)) {}
    bool loaded_ = false;
};

class IptablesReceiver : public StackReceiver {
  public:
    static Result<std::unique_ptr<Receiver>> create(const Netns& rx, const std::string& dev, const Limit& limit,
                                                    uint32_t sources) {
        std::unique_ptr<IptablesReceiver> r(new IptablesReceiver(rx, dev));
        if (auto status = r->enable_gro(); !status) return status.error();
        // raw PREROUTING: the earliest iptables hook, before connection
        // tracking, where a per-source flood limit belongs. hashlimit's bucket
        // holds `burst` packets; its table takes at most 2^20 entries.
        const std::string match = " -i " + dev + " -p udp";
        const uint64_t table = std::min<uint64_t>(1u << 20, std::max<uint64_t>(65536, uint64_t{sources} * 2));
        r->rules_ = {match + " -m hashlimit --hashlimit-name sluice_bench --hashlimit-mode srcip --hashlimit-above " +
                         std::to_string(limit.rate) + "/sec --hashlimit-burst " + std::to_string(limit.burst) +
                         " --hashlimit-htable-size " + std::to_string(table) + " --hashlimit-htable-max " +
                         std::to_string(table) + " -j DROP",
                     match + " -j ACCEPT"};
        for (const auto& rule : r->rules_) {
            if (auto status = run_command(rx.exec("iptables -w -t raw -A PREROUTING" + rule)); !status)
                return status.error();
            r->added_++;
        }
        return std::unique_ptr<Receiver>(std::move(r));
    }
    ~IptablesReceiver() override {
        for (size_t i = 0; i < added_; ++i) run_cleanup(rx_.exec("iptables -w -t raw -D PREROUTING" + rules_[i]));
    }
    Result<Counts> read() override {
        auto out = command_output(rx_.exec("iptables-save -c -t raw"));
        if (!out) return out.error();
        std::vector<uint64_t> rule_packets;  // "[packets:bytes] -A PREROUTING ..." in order
        std::istringstream lines(out.value());
        for (std::string line; std::getline(lines, line);) {
            unsigned long long packets = 0, bytes = 0;
            if (line.find("-A PREROUTING") != std::string::npos &&
                std::sscanf(line.c_str(), "[%llu:%llu]", &packets, &bytes) == 2)
                rule_packets.push_back(packets);
        }
        return drop_and_accept_counts(rule_packets, "raw PREROUTING");
    }

  private:
    IptablesReceiver(const Netns& rx, std::string dev) : StackReceiver(rx, std::move(dev)) {}
    std::vector<std::string> rules_;
    size_t added_ = 0;
};

}  // namespace

Result<std::unique_ptr<Receiver>> create_receiver(const std::string& name, const Topology& topology, const Limit& limit,
                                                  uint32_t sources) {
    const Netns& rx = *topology.rx;
    if (name == "baseline") return BaselineReceiver::create(rx, topology.rx_link.ifindex);
    if (name == "sluice") return SluiceReceiver::create(rx, topology.rx_link.ifindex, limit, sources);
    if (name == "nftables") return NftReceiver::create(rx, topology.rx_dev, limit, sources);
    if (name == "iptables") return IptablesReceiver::create(rx, topology.rx_dev, limit, sources);
    return Error{"no receiver called " + name};
}

}  // namespace sluice::bench::veth
