// SPDX-License-Identifier: Apache-2.0
// sluice-bench push: how long a policy push takes as the policy grows to
// 1M prefixes per family, and how long a small change to a large one takes.
//
// For each size N of --sizes (prefixes per family, bench_prefixes.h's
// shapes, every one of class "listed"; a "default" class beside it):
//   load   - the first apply to a fresh dataplane (slot 1, empty before);
//   again  - the same prefixes again, into the other slot (which settle(),
//            as sluiced calls it after each reply, filled after the load:
//            nothing to write, so this is a push's fixed cost);
// and for the largest size, two changes in a row, each removing --change/2
// prefixes per family and adding --change/2 new ones (settle() keeps the
// standby slot at the previous version, so each writes just its change):
//   change - A -> B, then B -> C.
// Two parts, each on its own fresh dataplane per size:
//   dataplane - XdpDataplane::apply in this process, timed alone (the
//               policy is built and sorted before);
//   daemon    - the build's sluiced, attached (native XDP) to a veth in a
//               namespace of its own (bench_veth_topology.cpp), with the
//               policy's classes reading their prefixes from
//               match_files = ["v4.txt", "v6.txt"]; the wall clock of
//               `sluicectl --json policy push FILE`, and the daemon's own
//               breakdown from its answer's "timing_ms" (whatever keys it
//               has: lists, compile, dataplane, store, total).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "bench_prefixes.h"
#include "bench_subcommands.h"
#include "bench_veth.h"
#include "e2e/process.h"

namespace sluice::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kDefaultClass = 1, kListedClass = 2;
// What sluiced takes of prefix-list files per push: 1M per family is ~40 MB of text.
constexpr uint64_t kMaxPushBytes = uint64_t{1} << 30;

// "10", "10K", "100K", "1M": decimal thousands, or count_label's binary units.
std::string size_label(uint64_t n) {
    if (n >= 1000 && n < 1'000'000 && n % 1000 == 0) return std::to_string(n / 1000) + "K";
    return count_label(n);
}

double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// The prefixes of each version of one size, per family: A is the first N
// generated; each change removes the last `half` still in and adds the next
// `half` never used (the generated order is random, so both are spread over
// the address space). The hot 192.0.2.0/24 and 2001:db8::/48 (first) stay.
struct Versions {
    std::vector<std::string> steps;                 // "load", "again", "change", "change"
    std::vector<std::vector<PolicyPrefix>> v4, v6;  // per step, unsorted
    uint32_t half = 0;                              // per change and family: removed, and added
    static Versions make(uint32_t size, uint32_t change) {
        Versions versions;
        const bool changes = change > 0;
        const uint32_t half = versions.half = change / 2;
        const uint32_t total = changes ? size + 2 * half : size;
        const auto all4 = generated_prefixes(SLUICE_FAMILY_IPV4, total, kListedClass);
        const auto all6 = generated_prefixes(SLUICE_FAMILY_IPV6, total, kListedClass);
        auto take = [&](const std::vector<PolicyPrefix>& all, uint32_t kept, uint32_t added) {
            std::vector<PolicyPrefix> out(all.begin(), all.begin() + kept);
            out.insert(out.end(), all.begin() + size, all.begin() + size + added);
            return out;
        };
        for (const char* step : {"load", "again"}) {
            versions.steps.push_back(step);
            versions.v4.push_back(take(all4, size, 0));
            versions.v6.push_back(take(all6, size, 0));
        }
        if (changes)
            for (uint32_t k = 1; k <= 2; k++) {
                versions.steps.push_back("change");
                versions.v4.push_back(take(all4, size - k * half, k * half));
                versions.v6.push_back(take(all6, size - k * half, k * half));
            }
        return versions;
    }
};

// One push measured.
struct Step {
    uint32_t size = 0;
    std::string step;
    uint32_t slot = 0;     // the dataplane slot it landed in
    uint64_t removed = 0;  // per family, against the previous version
    uint64_t added = 0;
    double ms = NAN;               // dataplane: apply; daemon: sluicectl's wall clock
    Json timing = Json::object();  // daemon: its timing_ms
};

void fill_changes(const Versions& versions, std::vector<Step>& steps, uint32_t size) {
    for (size_t i = 0; i < versions.steps.size(); i++) {
        Step step;
        step.size = size;
        step.step = versions.steps[i];
        step.slot = (i + 1) % 2;  // the first apply lands in slot 1 (0 is active, empty)
        if (versions.steps[i] == "change") {
            step.added = step.removed = versions.half;  // by construction (Versions::make)
        } else if (versions.steps[i] == "load") {
            step.added = versions.v4[i].size();  // into an empty slot
        }
        steps.push_back(step);
    }
}

Result<CompiledPolicy> prefix_policy(uint32_t cpus, uint64_t version, const std::vector<PolicyPrefix>& v4,
                                     const std::vector<PolicyPrefix>& v6) {
    auto policy = single_class_policy(1000, 1000, Accuracy::lease, cpus);
    if (!policy) return policy;
    CompiledPolicy& p = policy.value();
    p.header.version = version;
    p.header.default_class_id = kDefaultClass;
    sluice_class_entry listed = p.classes[0];
    listed.class_id = kListedClass;
    p.classes.push_back(listed);
    p.prefixes = v4;
    p.prefixes.insert(p.prefixes.end(), v6.begin(), v6.end());
    sort_prefixes(p.prefixes);
    mark_prefix_families(p);
    return policy;
}

// (a) XdpDataplane::apply in this process.
Status measure_dataplane(const PushOptions& options, std::vector<Step>& steps) {
    const uint64_t largest = *std::max_element(options.sizes.begin(), options.sizes.end());
    for (const uint64_t size64 : options.sizes) {
        const auto size = static_cast<uint32_t>(size64);
        const uint32_t change = size64 == largest && options.change < size ? static_cast<uint32_t>(options.change) : 0;
        const Versions versions = Versions::make(size, change);
        XdpOptions xdp;
        xdp.prefix_capacity = std::max<uint32_t>(size, SLUICE_PREFIX_CAPACITY_DEFAULT);
        auto dp = XdpDataplane::open(xdp);
        if (!dp) return Error{"loading ebpf/sluice.bpf.c (root needed): " + dp.error().message};
        const size_t first = steps.size();
        fill_changes(versions, steps, size);
        for (size_t i = 0; i < versions.steps.size(); i++) {
            if (auto status = check_interrupted(); !status) return status;
            auto policy = prefix_policy(dp.value()->possible_cpus(), i + 1, versions.v4[i], versions.v6[i]);
            if (!policy) return policy.error();
            const auto start = Clock::now();
            const Status applied = dp.value()->apply(policy.value());
            const double ms = ms_since(start);
            if (!applied) return Error{"applying " + size_label(size) + " prefixes: " + applied.error().message};
            steps[first + i].ms = ms;
            std::printf("  dataplane %s %s: %.1f ms\n", size_label(size).c_str(), versions.steps[i].c_str(), ms);
            std::fflush(stdout);
            // What sluiced's control loop does after replying (untimed, as
            // it is not part of a push): the standby slot catches up.
            if (auto settled = dp.value()->settle(); !settled)
                return Error{"settling after " + versions.steps[i] + ": " + settled.error().message};
        }
    }
    return ok_status();
}

// (b) sluiced and sluicectl, one fresh daemon per size.
class Daemon {
  public:
    Daemon(const PushOptions& options, const veth::Topology& topology, uint32_t prefix_capacity, uint32_t index)
        : options_(options),
          topology_(topology),
          dir_(fs::temp_directory_path() /
               ("sluice-bench-push-" + std::to_string(getpid()) + "-" + std::to_string(index))),
          bpffs_dir_("/sys/fs/bpf/sluice-bench-push-" + std::to_string(getpid()) + "-" + std::to_string(index)),
          prefix_capacity_(prefix_capacity) {}
    ~Daemon() {
        stop();
        std::error_code ignored;
        fs::remove_all(dir_, ignored);
        fs::remove_all(bpffs_dir_, ignored);
    }

    const fs::path& dir() const { return dir_; }

    Status start() {
        std::error_code error;
        fs::create_directories(dir_ / "policy", error);
        if (error) return Error{"cannot create " + dir_.string() + ": " + error.message()};
        test::write_file(dir_ / "sluiced.toml",
                         "socket = \"" + socket() + "\"\nstate_dir = \"" + (dir_ / "state").string() +
                             "\"\nbpffs_dir = \"" + bpffs_dir_ + "\"\ndetach_on_exit = true\nprefix_capacity = " +
                             std::to_string(prefix_capacity_) + "\nmax_push_bytes = " + std::to_string(kMaxPushBytes) +
                             "\n\n[[interface]]\nname = \"" + topology_.rx_dev + "\"\nmode = \"native\"\n");
        test::write_file(dir_ / "policy" / "policy.toml",
                         "[[class]]\nname = \"default\"\nper_source = { rate = 1000, burst = 1000 }\n\n"
                         "[[class]]\nname = \"listed\"\nmatch_files = [\"v4.txt\", \"v6.txt\"]\n"
                         "per_source = { rate = 100, burst = 100 }\n");
        test::SpawnOptions spawn;
        spawn.stderr_path = (dir_ / "sluiced.log").string();
        spawn.netns_path = "/var/run/netns/" + topology_.rx->name();
        pid_ = test::spawn({options_.sluiced, "--config", (dir_ / "sluiced.toml").string()}, spawn);
        if (pid_ < 0) return Error{"cannot start " + options_.sluiced};
        for (int i = 0; i < 100; i++) {
            if (ctl({"status"}, std::chrono::seconds(5)).code == 0) return ok_status();
            int code = 0;
            if (test::exited(pid_, &code)) {
                pid_ = -1;
                return Error{"sluiced exited with " + std::to_string(code) + ": " + log()};
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        return Error{"sluiced did not answer status within 10 s: " + log()};
    }

    // Writes the prefix files, then times the push of the policy that reads them.
    Status push(const std::vector<PolicyPrefix>& v4, const std::vector<PolicyPrefix>& v6, Step& step) {
        if (auto status = write_prefix_file((dir_ / "policy" / "v4.txt").string(), v4); !status) return status;
        if (auto status = write_prefix_file((dir_ / "policy" / "v6.txt").string(), v6); !status) return status;
        const auto start = Clock::now();
        const auto result = ctl({"--timeout", "600000", "policy", "push", (dir_ / "policy" / "policy.toml").string()},
                                std::chrono::minutes(10));
        step.ms = ms_since(start);
        if (result.code != 0)
            return Error{"sluicectl policy push exited " + std::to_string(result.code) + ": " + result.err +
                         result.out + "\nsluiced: " + log()};
        const Json answer = Json::parse(result.out, nullptr, false);
        if (answer.is_discarded() || !answer.is_object())
            return Error{"sluicectl policy push --json printed no JSON object: " + result.out};
        if (!answer.value("applied", false)) return Error{"the push was not applied: " + result.out};
        if (answer.contains("timing_ms") && answer["timing_ms"].is_object()) step.timing = answer["timing_ms"];
        return ok_status();
    }

    void stop() {
        if (pid_ < 0) return;
        ::kill(pid_, SIGTERM);
        test::wait_exit(pid_, std::chrono::seconds(30));
        pid_ = -1;
    }

  private:
    std::string socket() const { return (dir_ / "sluiced.sock").string(); }
    std::string log() const { return test::read_file(dir_ / "sluiced.log"); }
    test::ProcResult ctl(const std::vector<std::string>& args, std::chrono::milliseconds timeout) {
        std::vector<std::string> argv{options_.sluicectl, "--socket", socket(), "--json"};
        argv.insert(argv.end(), args.begin(), args.end());
        return test::run(argv, (dir_ / "ctl").string(), timeout);
    }

    const PushOptions& options_;
    const veth::Topology& topology_;
    fs::path dir_;
    std::string bpffs_dir_;
    uint32_t prefix_capacity_;
    pid_t pid_ = -1;
};

Status measure_daemon(const PushOptions& options, std::vector<Step>& steps) {
    for (const std::string& tool : {options.sluiced, options.sluicectl})
        if (::access(tool.c_str(), X_OK) != 0) return Error{tool + " is not an executable (--sluiced, --sluicectl)"};
    auto topology = veth::create_topology();
    if (!topology) return topology.error();
    const uint64_t largest = *std::max_element(options.sizes.begin(), options.sizes.end());
    uint32_t index = 0;
    for (const uint64_t size64 : options.sizes) {
        const auto size = static_cast<uint32_t>(size64);
        const uint32_t change = size64 == largest && options.change < size ? static_cast<uint32_t>(options.change) : 0;
        const Versions versions = Versions::make(size, change);
        Daemon daemon(options, topology.value(), std::max<uint32_t>(size, SLUICE_PREFIX_CAPACITY_DEFAULT), index++);
        if (auto started = daemon.start(); !started) return started;
        const size_t first = steps.size();
        fill_changes(versions, steps, size);
        for (size_t i = 0; i < versions.steps.size(); i++) {
            if (auto status = check_interrupted(); !status) return status;
            if (auto pushed = daemon.push(versions.v4[i], versions.v6[i], steps[first + i]); !pushed)
                return Error{"pushing " + size_label(size) + " prefixes (" + versions.steps[i] +
                             "): " + pushed.error().message};
            std::printf("  daemon %s %s: %.1f ms %s\n", size_label(size).c_str(), versions.steps[i].c_str(),
                        steps[first + i].ms, steps[first + i].timing.dump().c_str());
            std::fflush(stdout);
        }
    }
    return ok_status();
}

std::string change_label(const Step& s) {
    if (s.step != "change") return "+" + size_label(s.added);
    return "-" + size_label(s.removed) + " +" + size_label(s.added);
}

Json step_json(const Step& s, const char* part) {
    Json row = {{"part", part},   {"prefixes_per_family", s.size},   {"step", s.step},
                {"slot", s.slot}, {"removed_per_family", s.removed}, {"added_per_family", s.added},
                {"ms", s.ms}};
    if (std::string(part) == "daemon") row["timing_ms"] = s.timing;
    return row;
}

}  // namespace

Status run_push(const CommonOptions& /*common*/, const PushOptions& options, Json& report) {
    const bool dataplane = std::find(options.parts.begin(), options.parts.end(), "dataplane") != options.parts.end();
    const bool daemon = std::find(options.parts.begin(), options.parts.end(), "daemon") != options.parts.end();
    report["settings"] = {
        {"sizes", options.sizes},
        {"change", options.change},
        {"parts", options.parts},
        {"steps",
         "load: first apply to a fresh dataplane; again: the same prefixes again (the other slot, settled); change (largest "
         "size, twice): change/2 prefixes removed and change/2 added per family, against the previous version"},
        {"prefixes",
         "bench_prefixes.h: IPv4 /12../32 weighted to /24, IPv6 /29../64 weighted to /48, fixed seed, "
         "all of class \"listed\"; a \"default\" class beside it"},
        {"dataplane", "XdpDataplane::apply alone, in process"},
        {"daemon",
         "wall clock of `sluicectl --json policy push FILE` (match_files = [\"v4.txt\", \"v6.txt\"]), "
         "sluiced attached native to a veth in a namespace; timing_ms is sluiced's own breakdown"}};
    Json results = Json::array();
    std::vector<Step> dataplane_steps, daemon_steps;
    if (dataplane) {
        if (auto status = measure_dataplane(options, dataplane_steps); !status) return status;
        Table table{"push, dataplane part: XdpDataplane::apply in process, ms",
                    {"prefixes per family", "step", "slot", "vs previous version", "apply ms"},
                    {}};
        for (const Step& s : dataplane_steps) {
            table.rows.push_back({size_label(s.size), s.step, std::to_string(s.slot), change_label(s), fixed(s.ms, 1)});
            results.push_back(step_json(s, "dataplane"));
        }
        table.print();
    }
    if (daemon) {
        if (auto status = measure_daemon(options, daemon_steps); !status) return status;
        // The daemon's breakdown: the keys it gave, those known in their order first.
        std::vector<std::string> keys;
        const auto given = [&](const std::string& key) {
            return std::any_of(daemon_steps.begin(), daemon_steps.end(),
                               [&](const Step& s) { return s.timing.contains(key); });
        };
        for (const char* key : {"read", "lists", "compile", "dataplane", "store", "total"})
            if (given(key)) keys.push_back(key);
        for (const Step& s : daemon_steps)
            for (const auto& [key, value] : s.timing.items())
                if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
        std::vector<std::string> header = {"prefixes per family", "step", "vs previous version", "sluicectl wall ms"};
        for (const auto& key : keys) header.push_back(key + " ms");
        Table table{"push, end to end: sluicectl policy push (wall clock) and sluiced's timing_ms", header, {}};
        for (const Step& s : daemon_steps) {
            std::vector<std::string> row = {size_label(s.size), s.step, change_label(s), fixed(s.ms, 1)};
            for (const auto& key : keys)
                row.push_back(
                    s.timing.contains(key) && s.timing[key].is_number() ? fixed(s.timing[key].get<double>(), 1) : "-");
            table.rows.push_back(row);
            results.push_back(step_json(s, "daemon"));
        }
        table.print();
    }
    report["results"] = results;
    return ok_status();
}

}  // namespace sluice::bench
