// SPDX-License-Identifier: Apache-2.0
// sluice-bench soak: sluiced for N minutes under what production does to it,
// and whether anything it holds grows. On the veth pair of
// `sluice-bench veth` (bench_veth_topology.cpp), sluiced (the build's own,
// started in the receiving namespace) enforces a policy while:
//   - floods alternate every 5 s between one source and 65,536 sources,
//     at the generator's full rate;
//   - every 5 s a new policy version is pushed (two texts, in turn), and
//     every third time a rollback instead;
//   - /metrics is scraped every second, and `sluicectl status` called;
//     `stats` and `top` every 5 s.
// It reports sluiced's RSS, open file descriptors and pinned BPF objects and
// the decisions counted, at the start (after a 10 s warm-up) and at the end,
// and how many calls of each kind failed (none should). sluiced runs with
// detach_on_exit, so after its SIGTERM no pin may remain. A --smoke run
// keeps every kind of event but runs 6 s, with each 5 s period above cut
// to 1 s and the warm-up to 1 s. The soak stops at once when the flood
// fails or sluiced exits; failed calls are counted, and the run goes on.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "bench_subcommands.h"
#include "bench_veth.h"
#include "common/http_get.h"
#include "e2e/process.h"

namespace sluice::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
constexpr int kMetricsPort = 9464;  // inside the receiving namespace: nothing else listens there

std::string policy_text(uint64_t rate, uint64_t burst) {
    return "[[class]]\nname = \"default\"\nper_source = { rate = " + std::to_string(rate) +
           ", burst = " + std::to_string(burst) + " }\naggregate = { rate = 2_000_000, burst = 200_000 }\n";
}

// What the soak samples of sluiced at one moment.
struct SoakSample {
    double at_s = 0;
    uint64_t rss_kib = 0;
    uint64_t fds = 0;
    uint64_t pins = 0;
    uint64_t decisions = 0;
};

uint64_t rss_kib(pid_t pid) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
    return 0;
}

uint64_t entries(const fs::path& dir, bool recursive) {
    std::error_code error;
    uint64_t n = 0;
    if (recursive) {
        for (auto it = fs::recursive_directory_iterator(dir, error); !error && it != fs::end(it); it.increment(error))
            n += it->is_directory(error) ? 0 : 1;
    } else {
        for (auto it = fs::directory_iterator(dir, error); !error && it != fs::end(it); it.increment(error)) n++;
    }
    return n;
}

// The sum of every sluice_packets_total series: each decided frame lands in one.
uint64_t decisions_in(const std::string& metrics) {
    std::istringstream in(metrics);
    std::string line;
    double sum = 0;
    while (std::getline(in, line)) {
        if (line.rfind("sluice_packets_total{", 0) != 0) continue;
        sum += std::stod(line.substr(line.rfind(' ') + 1));
    }
    return static_cast<uint64_t>(sum);
}

// How long the soak runs and how often things happen in it.
struct Schedule {
    double seconds;    // the whole soak
    double warm_up_s;  // before the start sample
    uint64_t every;    // seconds between pushes (or rollbacks), stats and top calls
    double flood_s;    // each flood, before the other distribution takes over
};

class Soak {
  public:
    Soak(const SoakOptions& options, const Schedule& schedule, veth::Topology& topology)
        : options_(options),
          schedule_(schedule),
          topology_(topology),
          dir_(fs::temp_directory_path() / ("sluice-bench-soak-" + tag())),
          bpffs_dir_("/sys/fs/bpf/sluice-bench-soak-" + tag()) {}
    ~Soak() {
        stop_sluiced();
        std::error_code ignored;
        fs::remove_all(dir_, ignored);
        fs::remove_all(bpffs_dir_, ignored);
    }

    Status start() {
        std::error_code error;
        fs::create_directories(dir_, error);
        if (error) return Error{"cannot create " + dir_.string() + ": " + error.message()};
        test::write_file(
            dir_ / "sluiced.toml",
            "socket = \"" + socket() + "\"\nstate_dir = \"" + (dir_ / "state").string() + "\"\nbpffs_dir = \"" +
                bpffs_dir_ + "\"\nmetrics_address = \"127.0.0.1:" + std::to_string(kMetricsPort) +
                "\"\ndetach_on_exit = true\n\n[[interface]]\nname = \"" + topology_.rx_dev + "\"\nmode = \"native\"\n");
        test::SpawnOptions spawn;
        spawn.stderr_path = (dir_ / "sluiced.log").string();
        spawn.netns_path = "/var/run/netns/" + topology_.rx->name();
        pid_ = test::spawn({options_.sluiced, "--config", (dir_ / "sluiced.toml").string()}, spawn);
        if (pid_ < 0) return Error{"cannot start " + options_.sluiced};
        for (int i = 0; i < 100; i++) {
            if (ctl({"status"}).code == 0) return push(0);
            int code = 0;
            if (test::exited(pid_, &code)) {
                pid_ = -1;
                return Error{"sluiced exited with " + std::to_string(code) + ": " + log()};
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        return Error{"sluiced did not answer status within 10 s: " + log()};
    }

    // Runs the load with the generator called `generator` and samples at
    // its start (after the warm-up) and its end.
    Status run(const std::string& generator, Json& report) {
        veth::Distribution one{"uniform", 1, {}}, many{"uniform", 65536, {}};
        auto single = veth::create_generator(generator, topology_.tx_link, topology_.rx_link, one);
        if (!single) return single.error();
        auto spread = veth::create_generator(generator, topology_.tx_link, topology_.rx_link, many);
        if (!spread) return spread.error();

        std::atomic<bool> stop{false}, flood_failed{false};
        std::atomic<uint64_t> sent{0};
        std::string flood_error;  // written before flood_failed is set, read after
        std::thread flood([&] {
            for (uint64_t round = 0; !stop.load(); round++) {
                veth::Generator& g = round % 2 == 0 ? *single.value() : *spread.value();
                auto result = g.send(*topology_.tx, 0, schedule_.flood_s, &stop);
                if (!result) {
                    flood_error = result.error().message;
                    flood_failed = true;
                    return;
                }
                sent += result.value().frames;
            }
        });

        begin_ = Clock::now();
        const auto begin = begin_;
        const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - begin).count(); };
        std::optional<SoakSample> first;
        SoakSample last;
        uint64_t tick = 0;
        Status status = ok_status();
        while (elapsed() < schedule_.seconds) {
            if (auto interrupted = check_interrupted(); !interrupted) {
                status = interrupted;
                break;
            }
            std::this_thread::sleep_until(begin + std::chrono::seconds(++tick));
            if (flood_failed.load()) {
                status = Error{"the flood failed at " + fixed(elapsed(), 0) + " s: " + flood_error};
                break;
            }
            int code = 0;
            if (test::exited(pid_, &code)) {
                pid_ = -1;
                status = Error{"sluiced exited with " + std::to_string(code) + " during the soak: " + log()};
                break;
            }
            const auto metrics = scrape();
            count(counts_.scrapes, metrics.has_value(), "no answer from /metrics");
            count(counts_.status_calls, ctl({"status"}));
            if (tick % schedule_.every == 0) {
                count(counts_.stats_calls, ctl({"stats"}));
                count(counts_.top_calls, ctl({"top", "-n", "10"}));
                const uint64_t change = tick / schedule_.every;
                if (change % 3 == 0) {
                    count(counts_.rollbacks, ctl({"policy", "rollback"}));
                } else {
                    const Status pushed = push(change);
                    count(counts_.pushes, pushed.ok(), pushed.ok() ? "" : pushed.error().message);
                }
            }
            if (!metrics) continue;
            const SoakSample now{elapsed(), rss_kib(pid_), entries("/proc/" + std::to_string(pid_) + "/fd", false),
                                 entries(bpffs_dir_, true), decisions_in(*metrics)};
            if (!first && now.at_s >= schedule_.warm_up_s) first = now;
            last = now;
            peak_rss_kib_ = std::max(peak_rss_kib_, now.rss_kib);
        }
        stop = true;
        flood.join();
        if (!status) return status;
        if (flood_failed.load()) return Error{"the flood failed: " + flood_error};
        if (!first) return Error{"the soak ended before its warm-up did (" + fixed(schedule_.warm_up_s, 0) + " s)"};
        stop_sluiced();
        report_figures(*first, last, sent.load(), report);
        return ok_status();
    }

  private:
    struct Calls {
        uint64_t ok = 0, failed = 0;
        std::string first_failure;  // what the first failed call said, at which second
    };
    struct Counts {
        Calls scrapes, status_calls, stats_calls, top_calls, pushes, rollbacks;
    };
    Clock::time_point begin_{};  // the soak's start: failures say when they happened

    static std::string tag() { return std::to_string(getpid()); }
    std::string socket() const { return (dir_ / "sluiced.sock").string(); }
    std::string log() const { return test::read_file(dir_ / "sluiced.log"); }
    void count(Calls& calls, bool ok, const std::string& why) {
        (ok ? calls.ok : calls.failed)++;
        if (!ok && calls.first_failure.empty())
            calls.first_failure =
                "at " + fixed(std::chrono::duration<double>(Clock::now() - begin_).count(), 0) + " s: " + why;
    }
    void count(Calls& calls, const test::ProcResult& result) {
        count(calls, result.code == 0, "exit " + std::to_string(result.code) + ": " + result.err + result.out);
    }

    test::ProcResult ctl(const std::vector<std::string>& args) {
        std::vector<std::string> argv{options_.sluicectl, "--socket", socket(), "--json"};
        argv.insert(argv.end(), args.begin(), args.end());
        return test::run(argv, (dir_ / "ctl").string(), std::chrono::seconds(10));
    }

    Status push(uint64_t change) {
        const std::string path = (dir_ / "policy.toml").string();
        test::write_file(path, change % 2 == 0 ? policy_text(1000, 1000) : policy_text(2000, 500));
        const auto result = ctl({"policy", "push", path});
        if (result.code != 0) return Error{"policy push exited " + std::to_string(result.code) + ": " + result.err};
        return ok_status();
    }

    std::optional<std::string> scrape() {
        auto inside = veth::InNetns::enter(*topology_.rx);
        if (!inside) return std::nullopt;
        const auto response = test::http_get_loopback(kMetricsPort, "/metrics", std::chrono::seconds(2));
        if (response.status != 200) return std::nullopt;
        return response.body;
    }

    void stop_sluiced() {
        if (pid_ < 0) return;
        ::kill(pid_, SIGTERM);
        exit_code_ = test::wait_exit(pid_, std::chrono::seconds(10));
        pid_ = -1;
    }

    void report_figures(const SoakSample& first, const SoakSample& last, uint64_t sent, Json& report) {
        const uint64_t pins_after_exit = entries(bpffs_dir_, true);
        Table table{"soak: sluiced over " + fixed(last.at_s, 0) + " s (start after a " + fixed(schedule_.warm_up_s, 0) +
                        " s warm-up)",
                    {"", "at s", "RSS KiB", "fds", "pins", "decisions"},
                    {}};
        for (const auto& [name, s] : {std::pair{"start", first}, std::pair{"end", last}})
            table.rows.push_back({name, fixed(s.at_s, 0), std::to_string(s.rss_kib), std::to_string(s.fds),
                                  std::to_string(s.pins), std::to_string(s.decisions)});
        table.print();
        Table calls{"calls during the soak", {"kind", "ok", "failed"}, {}};
        const std::pair<const char*, const Calls*> kinds[] = {
            {"scrapes", &counts_.scrapes}, {"status", &counts_.status_calls}, {"stats", &counts_.stats_calls},
            {"top", &counts_.top_calls},   {"pushes", &counts_.pushes},       {"rollbacks", &counts_.rollbacks}};
        Json calls_json = Json::object();
        for (const auto& [name, c] : kinds) {
            calls.rows.push_back({name, std::to_string(c->ok), std::to_string(c->failed)});
            calls_json[name] = {{"ok", c->ok}, {"failed", c->failed}, {"first_failure", c->first_failure}};
        }
        calls.print();
        for (const auto& [name, c] : kinds)
            if (c->failed > 0) std::printf("first failed %s call %s\n", name, c->first_failure.c_str());
        std::printf("flood frames sent %llu; peak RSS %llu KiB; sluiced exit %d; pins left after exit %llu\n",
                    static_cast<unsigned long long>(sent), static_cast<unsigned long long>(peak_rss_kib_), exit_code_,
                    static_cast<unsigned long long>(pins_after_exit));
        const auto sample_json = [](const SoakSample& s) {
            return Json{
                {"at_s", s.at_s}, {"rss_kib", s.rss_kib}, {"fds", s.fds}, {"pins", s.pins}, {"decisions", s.decisions}};
        };
        report["results"] = {
            {"start", sample_json(first)},       {"end", sample_json(last)}, {"peak_rss_kib", peak_rss_kib_},
            {"flood_frames_sent", sent},         {"calls", calls_json},      {"sluiced_exit", exit_code_},
            {"pins_after_exit", pins_after_exit}};
    }

    const SoakOptions& options_;
    const Schedule schedule_;
    veth::Topology& topology_;
    fs::path dir_;
    std::string bpffs_dir_;
    pid_t pid_ = -1;
    int exit_code_ = -1;
    uint64_t peak_rss_kib_ = 0;
    Counts counts_;
};

}  // namespace

Status run_soak(const CommonOptions& common, const SoakOptions& options, Json& report) {
    // A smoke run needs every kind of event (two pushes and a rollback
    // included) and a sample after the warm-up, not minutes.
    const Schedule schedule =
        common.smoke ? Schedule{6, 1, 1, 1} : Schedule{static_cast<double>(options.minutes) * 60, 10, 5, 5};
    auto topology = veth::create_topology();
    if (!topology) return topology.error();
    auto generator = veth::choose_generator(options.generator, topology.value());
    if (!generator) return generator.error();
    report["settings"] = {{"seconds", schedule.seconds},
                          {"warm_up_s", schedule.warm_up_s},
                          {"generator", generator.value()},
                          {"floods", fixed(schedule.flood_s, 0) + " s of 1 source, " + fixed(schedule.flood_s, 0) +
                                         " s of 65536, in turn"},
                          {"push_every_s", schedule.every},
                          {"rollback_every", "third change"},
                          {"scrape_every_s", 1}};
    Soak soak(options, schedule, topology.value());
    if (auto started = soak.start(); !started) return started;
    return soak.run(generator.value(), report);
}

}  // namespace sluice::bench
