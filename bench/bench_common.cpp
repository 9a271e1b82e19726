// SPDX-License-Identifier: Apache-2.0
#include "bench_common.h"

#include <bpf/bpf.h>
#include <sched.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/packet_builder.h"
#include "rate_limits.h"

// The skeletons name their own types; they come after the core's.
#include "baseline.skel.h"
#include "probe.skel.h"
#include "sluice.skel.h"

namespace sluice::bench {

std::atomic<bool> g_interrupted{false};

void Table::print() const {
    std::vector<size_t> width(header.size(), 0);
    for (size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
    for (const auto& row : rows)
        for (size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
    auto line = [&](const std::vector<std::string>& cells) {
        std::string out = "|";
        for (size_t i = 0; i < width.size(); ++i) {
            const std::string cell = i < cells.size() ? cells[i] : "";
            // Text left, figures right, as in the README's tables.
            const bool figure = !cell.empty() && (std::isdigit(static_cast<unsigned char>(cell[0])) || cell == "-");
            const std::string pad(width[i] - cell.size(), ' ');
            out += " " + (figure ? pad + cell : cell + pad) + " |";
        }
        std::printf("%s\n", out.c_str());
    };
    std::printf("\n%s\n\n", title.c_str());
    line(header);
    std::string rule = "|";
    for (size_t w : width) rule += std::string(w + 2, '-') + "|";
    std::printf("%s\n", rule.c_str());
    for (const auto& row : rows) line(row);
    std::fflush(stdout);
}

std::string fixed(double value, int decimals) {
    if (!(value == value)) return "-";  // NaN: not measured
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.*f", decimals, value);
    return buf;
}

std::string count_label(uint64_t n) {
    if (n >= (1u << 20) && n % (1u << 20) == 0) return std::to_string(n >> 20) + "M";
    if (n >= 1024 && n % 1024 == 0) return std::to_string(n >> 10) + "K";
    return std::to_string(n);
}

Json machine_description() {
    Json machine;
    utsname uts{};
    if (uname(&uts) == 0) {
        machine["kernel"] = std::string(uts.sysname) + " " + uts.release;
        machine["arch"] = uts.machine;
    }
    machine["cpus_online"] = std::thread::hardware_concurrency();
    machine["cpus_possible"] = libbpf_num_possible_cpus();
    std::ifstream cpuinfo("/proc/cpuinfo");
    for (std::string line; std::getline(cpuinfo, line);) {
        if (line.rfind("model name", 0) == 0) {
            machine["cpu_model"] = line.substr(line.find(':') + 2);
            break;
        }
    }
    std::ifstream meminfo("/proc/meminfo");
    for (std::string line; std::getline(meminfo, line);) {
        if (line.rfind("MemTotal:", 0) == 0) {
            std::istringstream fields(line.substr(9));
            uint64_t kib = 0;
            fields >> kib;
            machine["memory_mib"] = kib / 1024;
            break;
        }
    }
    char when[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    machine["run_at"] = when;
    return machine;
}

Status write_json(const std::string& path, const Json& report) {
    std::ofstream out(path, std::ios::trunc);
    if (!out) return Error{"cannot write " + path + ": " + std::strerror(errno)};
    out << report.dump(2) << "\n";
    out.close();
    if (!out) return Error{"writing " + path + " failed: " + std::strerror(errno)};
    return ok_status();
}

namespace {
extern "C" void on_interrupt(int) { g_interrupted.store(true); }
}  // namespace

void install_interrupt_handlers() {
    struct sigaction action {};
    action.sa_handler = on_interrupt;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
    sigaction(SIGHUP, &action, nullptr);
}

Status check_interrupted() {
    if (g_interrupted.load()) return Error{"interrupted; cleaning up"};
    return ok_status();
}

int pin_to_current_cpu() {
    const int cpu = sched_getcpu();
    if (cpu < 0) return -1;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof(set), &set);
    return cpu;
}

Result<double> test_run_cpu_ns(int prog_fd, const std::vector<uint8_t>& frame, uint32_t repeat, uint32_t* verdict,
                               uint32_t* kernel_ns) {
    // The kernel may write the frame back; it gets its own copy each call.
    std::vector<uint8_t> data = frame;
    std::vector<uint8_t> out(frame.size() + 256);
    LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = data.data(), .data_out = out.data(),
                .data_size_in = static_cast<uint32_t>(data.size()), .data_size_out = static_cast<uint32_t>(out.size()),
                .repeat = static_cast<int>(repeat));
    timespec start{}, end{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
    if (bpf_prog_test_run_opts(prog_fd, &opts) != 0)
        return Error{std::string("BPF_PROG_TEST_RUN failed: ") + std::strerror(errno)};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end);
    if (verdict) *verdict = opts.retval;
    if (kernel_ns) *kernel_ns = opts.duration;
    const double cpu_ns =
        static_cast<double>(end.tv_sec - start.tv_sec) * 1e9 + static_cast<double>(end.tv_nsec - start.tv_nsec);
    return cpu_ns;
}

Result<UniqueFd> program_map_fd(int prog_fd, const std::string& name) {
    bpf_prog_info info{};
    __u32 len = sizeof(info);
    std::vector<__u32> ids(64);
    info.nr_map_ids = static_cast<__u32>(ids.size());
    info.map_ids = reinterpret_cast<__u64>(ids.data());
    if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0)
        return Error{std::string("reading the program's map list: ") + std::strerror(errno)};
    // The kernel keeps BPF_OBJ_NAME_LEN - 1 characters of a map's name.
    const std::string wanted = name.substr(0, BPF_OBJ_NAME_LEN - 1);
    for (__u32 i = 0; i < std::min<__u32>(info.nr_map_ids, static_cast<__u32>(ids.size())); ++i) {
        UniqueFd fd(bpf_map_get_fd_by_id(ids[i]));
        if (!fd.valid()) return Error{std::string("opening a map of the program: ") + std::strerror(errno)};
        bpf_map_info map{};
        __u32 map_len = sizeof(map);
        if (bpf_obj_get_info_by_fd(fd.get(), &map, &map_len) != 0)
            return Error{std::string("reading map info: ") + std::strerror(errno)};
        if (wanted == map.name) return fd;
    }
    return Error{"the program uses no map called " + name};
}

Result<bpf_map_info> map_info(int map_fd) {
    bpf_map_info info{};
    __u32 len = sizeof(info);
    if (bpf_obj_get_info_by_fd(map_fd, &info, &len) != 0)
        return Error{std::string("reading map info: ") + std::strerror(errno)};
    return info;
}

Result<uint64_t> map_memlock(int map_fd) {
    const std::string path = "/proc/self/fdinfo/" + std::to_string(map_fd);
    std::ifstream fdinfo(path);
    if (!fdinfo) return Error{"cannot read " + path};
    for (std::string line; std::getline(fdinfo, line);)
        if (line.rfind("memlock:", 0) == 0) return static_cast<uint64_t>(std::strtoull(line.c_str() + 8, nullptr, 10));
    return Error{path + " has no memlock line"};
}

Result<std::unique_ptr<BaselineProgram>> BaselineProgram::load(uint32_t source_mask) {
    std::unique_ptr<BaselineProgram> program(new BaselineProgram());
    program->skel_ = baseline_bpf::open();
    if (!program->skel_) return Error{std::string("opening ebpf/baseline.bpf.c: ") + std::strerror(errno)};
    program->skel_->rodata->bench_source_mask = source_mask;
    if (const int err = baseline_bpf::load(program->skel_))
        return Error{std::string("loading ebpf/baseline.bpf.c (root needed): ") + std::strerror(-err)};
    return program;
}

BaselineProgram::~BaselineProgram() { baseline_bpf::destroy(skel_); }
int BaselineProgram::fd() const { return bpf_program__fd(skel_->progs.baseline_xdp); }

Result<std::unique_ptr<ProbeProgram>> ProbeProgram::load(uint32_t source_mask, uint32_t capacity) {
    std::unique_ptr<ProbeProgram> program(new ProbeProgram());
    program->skel_ = probe_bpf::open();
    if (!program->skel_) return Error{std::string("opening ebpf/probe.bpf.c: ") + std::strerror(errno)};
    program->skel_->rodata->bench_source_mask = source_mask;
    if (const int err = bpf_map__set_max_entries(program->skel_->maps.probe_sources, capacity))
        return Error{std::string("sizing the probe's map: ") + std::strerror(-err)};
    if (const int err = probe_bpf::load(program->skel_))
        return Error{std::string("loading ebpf/probe.bpf.c (root needed): ") + std::strerror(-err)};
    return program;
}

ProbeProgram::~ProbeProgram() { probe_bpf::destroy(skel_); }
int ProbeProgram::fd() const { return bpf_program__fd(skel_->progs.probe_xdp); }

Result<std::unique_ptr<SpreadSluiceProgram>> SpreadSluiceProgram::load(const XdpDataplane& dp, uint32_t source_mask,
                                                                       std::optional<uint64_t> test_clock_ns) {
    std::unique_ptr<SpreadSluiceProgram> program(new SpreadSluiceProgram());
    program->skel_ = sluice_bpf::open();
    if (!program->skel_) return Error{std::string("opening ebpf/sluice.bpf.c: ") + std::strerror(errno)};
    program->skel_->rodata->bench_source_mask = source_mask;
    // The source table's shape and key are the dataplane's: this instance
    // must find every source where the dataplane's program puts it.
    program->skel_->rodata->sluice_set_mask = dp.source_sets() - 1;
    for (int i = 0; i < SLUICE_HASH_KEY_WORDS; i++)
        program->skel_->rodata->sluice_hash_key.word[i] = dp.hash_key().word[i];
    if (test_clock_ns) {
        program->skel_->rodata->sluice_use_test_clock = 1;
        program->skel_->bss->sluice_test_now_ns = *test_clock_ns;
    }
    // Every map the program uses, but its own .rodata/.bss, is the
    // dataplane's: same policy, same buckets, same counters. Maps only the
    // control plane touches (sluice_meta) are not in the program's list and
    // stay the instance's own, unused.
    bpf_map* map;
    bpf_object__for_each_map(map, program->skel_->obj) {
        if (bpf_map__is_internal(map)) continue;
        auto fd = program_map_fd(dp.program_fd(), bpf_map__name(map));
        if (!fd) continue;
        if (const int err = bpf_map__reuse_fd(map, fd.value().get()))
            return Error{std::string("sharing map ") + bpf_map__name(map) + ": " + std::strerror(-err)};
    }
    if (const int err = sluice_bpf::load(program->skel_))
        return Error{std::string("loading ebpf/sluice.bpf.c with source spreading: ") + std::strerror(-err)};
    return program;
}

SpreadSluiceProgram::~SpreadSluiceProgram() { sluice_bpf::destroy(skel_); }
int SpreadSluiceProgram::fd() const { return bpf_program__fd(skel_->progs.sluice_xdp); }

Result<CompiledPolicy> single_class_policy(uint64_t rate, uint64_t burst, Accuracy accuracy, uint32_t cpus) {
    LevelSettings settings;
    settings.accuracy = accuracy;
    settings.cpus = cpus;
    settings.limit = {rate, burst, Unit::packets};
    CompiledPolicy policy;
    policy.header.version = 1;
    policy.header.default_class_id = 1;
    sluice_class_entry cls{};
    cls.class_id = 1;
    cls.prefix_v4 = 32;
    cls.prefix_v6 = 64;
    auto per_source = compile_source_limit({rate, burst, Unit::packets}, kDefaultMaxFrameBytes, "per_source");
    if (!per_source) return per_source.error();
    cls.per_source = per_source.value();
    settings.limit = {100'000'000'000, 4'000'000'000, Unit::packets};
    auto open_level = compile_level(settings, "aggregate");
    if (!open_level) return open_level.error();
    cls.aggregate = open_level.value();
    policy.header.global = open_level.value();
    policy.classes.push_back(cls);
    return policy;
}

Result<CompiledPolicy> single_class_policy(uint64_t rate, uint64_t burst, Accuracy accuracy, uint32_t cpus,
                                           const WindowSettings& aggregate) {
    auto policy = single_class_policy(rate, burst, accuracy, cpus);
    if (!policy) return policy.error();
    auto windowed = compile_window_level(aggregate, "aggregate");
    if (!windowed) return windowed.error();
    policy.value().classes[0].aggregate = windowed.value().level;
    policy.value().classes[0].aggregate_window = windowed.value().window;
    return policy;
}

Result<CompiledPolicy> per_source_window_policy(uint32_t cpus, const WindowSettings& per_source) {
    auto policy = single_class_policy(100'000'000'000, 4'000'000'000, Accuracy::lease, cpus);
    if (!policy) return policy.error();
    auto windowed = compile_source_window(per_source, "per_source");
    if (!windowed) return windowed.error();
    policy.value().classes[0].per_source = windowed.value();
    return policy;
}

std::vector<uint8_t> udp_frame(bool ipv6) { return test::sample_udp_frame(ipv6); }

}  // namespace sluice::bench
