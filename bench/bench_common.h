// SPDX-License-Identifier: Apache-2.0
// What every sluice-bench subcommand shares: the report (a table on
// stdout and a JSON document), the machine description, Ctrl-C handling, and
// the BPF plumbing to run a program under BPF_PROG_TEST_RUN and to load a
// second instance of the sluice program over an XdpDataplane's maps.
#pragma once

#include <bpf/libbpf.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "rate_limits.h"
#include "result.h"
#include "unique_fd.h"
#include "xdp_dataplane.h"

struct sluice_bpf;
struct baseline_bpf;
struct probe_bpf;

namespace sluice::bench {

using Json = nlohmann::ordered_json;

// One table of the report: printed aligned on stdout.
struct Table {
    std::string title;
    std::vector<std::string> header;
    std::vector<std::vector<std::string>> rows;
    void print() const;
};

// "12.3", "1.00": fixed decimals; "-" when the figure does not exist.
std::string fixed(double value, int decimals);
// 1048576 -> "1M", 65536 -> "64K".
std::string count_label(uint64_t n);

// Kernel, CPUs, CPU model, time: the "machine" object of every JSON report.
Json machine_description();
// Writes the report to path (pretty-printed); an error names the path.
Status write_json(const std::string& path, const Json& report);

// Set by SIGINT/SIGTERM: loops stop early so destructors clean up.
extern std::atomic<bool> g_interrupted;
void install_interrupt_handlers();
Status check_interrupted();

// Pins the calling thread to the CPU it runs on: per-CPU state and the
// kernel's per-run time then belong to one CPU for the whole run.
int pin_to_current_cpu();

// Runs the program `repeat` times on frame in one BPF_PROG_TEST_RUN call and
// returns the calling thread's CPU time over the call, in ns. The kernel's
// own figure (*kernel_ns, mean per run) is a whole number of ns, too coarse
// next to a baseline of a few ns; CPU time, unlike wall time, leaves out the
// moments another task had the CPU, but includes the call's fixed cost
// (about half a millisecond here), which callers measure and subtract.
// *verdict: the last run's XDP action.
Result<double> test_run_cpu_ns(int prog_fd, const std::vector<uint8_t>& frame, uint32_t repeat,
                               uint32_t* verdict = nullptr, uint32_t* kernel_ns = nullptr);

// The fd of the map called `name` that the loaded program uses.
Result<UniqueFd> program_map_fd(int prog_fd, const std::string& name);

// bpf_map_info of a map fd, and the kernel's memlock charge for it
// (/proc/self/fdinfo/<fd>, "memlock:").
Result<bpf_map_info> map_info(int map_fd);
Result<uint64_t> map_memlock(int map_fd);

// The baseline program (ebpf/baseline.bpf.c), loaded; with a non-zero
// source_mask each run rewrites its IPv4 source (ebpf/bench_sources.h).
class BaselineProgram {
  public:
    static Result<std::unique_ptr<BaselineProgram>> load(uint32_t source_mask);
    ~BaselineProgram();
    int fd() const;

  private:
    BaselineProgram() = default;
    ::baseline_bpf* skel_ = nullptr;
};

// The probe program (ebpf/probe.bpf.c): parse, one hash-map lookup of the
// source (inserting on a miss), XDP_DROP; its map holds `capacity` sources.
class ProbeProgram {
  public:
    static Result<std::unique_ptr<ProbeProgram>> load(uint32_t source_mask, uint32_t capacity);
    ~ProbeProgram();
    int fd() const;

  private:
    ProbeProgram() = default;
    ::probe_bpf* skel_ = nullptr;
};

// A second instance of the sluice program over the maps of a loaded
// XdpDataplane (so it decides under that dataplane's policy and state, with
// its source table's key), with the benchmark-only source spreading switched
// on by a non-zero source_mask; on a clock that stands at test_clock_ns if
// one is given.
class SpreadSluiceProgram {
  public:
    static Result<std::unique_ptr<SpreadSluiceProgram>> load(const XdpDataplane& dp, uint32_t source_mask,
                                                             std::optional<uint64_t> test_clock_ns = std::nullopt);
    ~SpreadSluiceProgram();
    int fd() const;

  private:
    SpreadSluiceProgram() = default;
    ::sluice_bpf* skel_ = nullptr;
};

// A policy of one class (the default) whose only real limit is per source:
// rate and burst in packets; the class aggregate and the global ceiling, in
// the given accuracy mode, are enabled but never refuse (10^11/s), so every
// packet goes through the source, aggregate and global levels (no new-source
// budget).
Result<CompiledPolicy> single_class_policy(uint64_t rate, uint64_t burst, Accuracy accuracy, uint32_t cpus);

// The same, but the class aggregate counts by `aggregate` (a window algorithm).
Result<CompiledPolicy> single_class_policy(uint64_t rate, uint64_t burst, Accuracy accuracy, uint32_t cpus,
                                           const WindowSettings& aggregate);
// One class whose per-source level counts in windows, every other level as
// open as single_class_policy's (lease mode).
Result<CompiledPolicy> per_source_window_policy(uint32_t cpus, const WindowSettings& per_source);

// A UDP frame with 18 bytes of payload: IPv4 192.0.2.1 -> 198.51.100.1, or
// IPv6 2001:db8::1 -> 2001:db8::2.
std::vector<uint8_t> udp_frame(bool ipv6);

}  // namespace sluice::bench
