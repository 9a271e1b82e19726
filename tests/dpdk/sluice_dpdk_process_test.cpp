// SPDX-License-Identifier: Apache-2.0
// The sluice-dpdk executable as README.md describes it, run as a child
// process ($SLUICE_DPDK, driven with $SLUICECTL; both set by meson): its
// command line, exit codes, the README's pcap command line end to end,
// SIGHUP and SIGTERM. The child's EAL is its own (--no-shconf and a file
// prefix of its own, so it never meets the EAL of this test binary), its
// port is a net_pcap vdev over capture files in a temp dir: no real
// interface is touched.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/binary_from_env.h"
#include "dpdk_fixture.h"
#include "e2e/process.h"
#include "pcap_file.h"

namespace sluice::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr auto kStartTimeout = 60s;  // the EAL, a 1 GB --no-huge heap and the mbuf pool
constexpr auto kEventTimeout = 30s;

// Three frames per source: 192.0.2.1 sends three (under it), 192.0.2.2 eight
// (five over it). A bucket refills one frame a second, far slower than a
// burst of eleven frames is decided.
constexpr std::string_view kPolicy = R"(
[[class]]
name = "default"
per_source = { rate = 1, burst = 3 }
)";

constexpr std::string_view kWiderPolicy = R"(
[[class]]
name = "default"
per_source = { rate = 7, burst = 9 }
)";

// The line of `text` where `needle` first stands (a needle may begin with
// the newline before it), or "".
std::string line_of(const std::string& text, std::string_view needle) {
    const size_t at = text.find(needle);
    if (at == std::string::npos) return {};
    const size_t begin = text.rfind('\n', at) + 1;  // 0 when it is the first line
    return text.substr(begin, text.find('\n', begin) - begin);
}

// Of `help`, the line that lists option `name`, with its default.
std::string option_line(const std::string& help, const std::string& name) { return line_of(help, "\n  " + name + " "); }

class SluiceDpdkProcess : public ::testing::Test {
  protected:
    void SetUp() override {
        char pattern[] = "/tmp/sluice-dpdk-process-XXXXXX";
        ASSERT_NE(mkdtemp(pattern), nullptr);
        dir_ = pattern;
        static int started = 0;
        file_prefix_ = "sluice-dpdk-process-" + std::to_string(getpid()) + "-" + std::to_string(started++);
    }

    // SIGTERM, so a sanitizer build runs sluice-dpdk's exit path; a
    // sanitizer report on its stderr fails the test.
    void TearDown() override {
        if (pid_ > 0) {
            (void)terminate_child(pid_, 10s);
            pid_ = -1;
        }
        if (std::filesystem::exists(log_path())) {
            EXPECT_EQ(sanitizer_report(log()), "") << "sluice-dpdk reported a sanitizer error";
        }
        if (HasFailure() && std::filesystem::exists(log_path()))
            std::printf("---- sluice-dpdk's stderr ----\n%s\n", log().c_str());
        std::error_code ignored;
        std::filesystem::remove_all(dir_, ignored);
        // What the EAL leaves when it is killed (it removes it on a clean exit).
        std::filesystem::remove_all("/var/run/dpdk/" + file_prefix_, ignored);
    }

    // sluice-dpdk with `args`, to completion.
    ProcResult run_dpdk(std::vector<std::string> args) {
        args.insert(args.begin(), binary_from_env("SLUICE_DPDK"));
        ProcResult result = run(args, dir_ + "/run", kEventTimeout);
        EXPECT_EQ(sanitizer_report(result.err), "") << "sluice-dpdk reported a sanitizer error: " << join_argv(args);
        return result;
    }

    // The EAL options of the README's command line: two lcores (the worker
    // runs on the second), no hugepages, no PCI, our own file prefix.
    std::vector<std::string> eal_args() const {
        return {"-l", "0-1", "--no-huge", "--no-pci", "--no-shconf", "-m", "1024", "--file-prefix", file_prefix_};
    }

    // The README's pcap command line over `frames`, with `policy` as
    // --policy; returns once `status` answers.
    void start(const std::vector<Bytes>& frames, std::string_view policy = kPolicy) {
        ASSERT_NO_FATAL_FAILURE(write_pcap(in_path(), frames));
        write_file(policy_path(), std::string(policy));
        std::vector<std::string> argv = eal_args();
        argv.insert(argv.begin(), binary_from_env("SLUICE_DPDK"));
        const std::string vdev = "net_pcap0,rx_pcap=" + in_path() + ",tx_pcap=" + out_path();
        argv.insert(argv.end(), {"--vdev", vdev, "--", "--rx", "net_pcap0", "--tx", "net_pcap0"});
        argv.insert(argv.end(), {"--socket", socket_path(), "--state-dir", dir_ + "/state", "--policy", policy_path()});
        argv.insert(argv.end(), {"--metrics", "127.0.0.1:0"});  // a free port: nothing else is disturbed
        SpawnOptions output;
        output.stdout_path = dir_ + "/sluice-dpdk.out";
        output.stderr_path = log_path();
        pid_ = spawn(argv, output);
        ASSERT_GT(pid_, 0) << "cannot fork";
        ASSERT_TRUE(eventually([&] { return ctl({"status"}).code == 0; }, kStartTimeout))
            << "sluice-dpdk did not answer `status`: " << join_argv(argv);
    }

    // Whether sluice-dpdk still runs; if not, it is reaped and its code kept.
    bool running() {
        if (pid_ > 0 && exited(pid_, &exit_code_)) pid_ = -1;
        return pid_ > 0;
    }
    // Sends `sig` to sluice-dpdk, if it runs (a pid of -1 would be every process).
    bool signal(int sig) { return running() && kill(pid_, sig) == 0; }
    // Sends `sig` and waits for the exit code (-1: it did not exit, and was killed).
    int stop(int sig = SIGTERM) {
        if (!signal(sig)) return -1;
        const int code = wait_exit(pid_, kEventTimeout);
        pid_ = -1;
        return code;
    }

    // Polls `done` until it holds (true) or `timeout` passes or sluice-dpdk
    // exited (false).
    bool eventually(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < deadline) {
            if (done()) return true;
            if (!running()) {
                ADD_FAILURE() << "sluice-dpdk exited with " << exit_code_;
                return false;
            }
            std::this_thread::sleep_for(50ms);
        }
        return false;
    }

    // Waits until sluice-dpdk has logged `needle` `times` times.
    bool logged(std::string_view needle, size_t times = 1) {
        return eventually(
            [&] {
                const std::string text = log();
                size_t count = 0;
                for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) count++;
                return count >= times;
            },
            kEventTimeout);
    }

    ProcResult ctl(std::vector<std::string> args) {
        args.insert(args.begin(), {binary_from_env("SLUICECTL"), "--socket", socket_path()});
        return run(args, dir_ + "/sluicectl", kEventTimeout);
    }
    // `sluicectl --json args...`, expecting exit 0; null otherwise (with a failure).
    json ctl_json(std::vector<std::string> args) {
        args.insert(args.begin(), "--json");
        const ProcResult r = ctl(args);
        EXPECT_EQ(r.code, 0) << "sluicectl " << join_argv(args) << ": " << r.err;
        return r.code == 0 ? json::parse(r.out, nullptr, false) : json();
    }
    json current_policy() { return ctl_json({"status"})["policy"]; }

    std::string log() const { return read_file(log_path()); }
    std::string log_path() const { return dir_ + "/sluice-dpdk.err"; }
    std::string socket_path() const { return dir_ + "/sluice-dpdk.sock"; }
    std::string policy_path() const { return dir_ + "/policy.toml"; }
    std::string in_path() const { return dir_ + "/in.pcap"; }
    std::string out_path() const { return dir_ + "/out.pcap"; }

    std::string dir_;
    std::string file_prefix_;
    pid_t pid_ = -1;
    int exit_code_ = -1;  // once it exited by itself
};

// ---- the command line, no EAL ---------------------------------------------------

TEST_F(SluiceDpdkProcess, HelpBeforeOrAfterTheSeparatorListsTheOptionsWithTheirDefaults) {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"--help"}, {"--", "--help"}, {"--no-such-eal-option", "--help"}}) {
        SCOPED_TRACE(join_argv(args));
        const ProcResult r = run_dpdk(args);
        EXPECT_EQ(r.code, 0);
        EXPECT_EQ(r.err, "");  // an EAL would have said "EAL: ..."
        EXPECT_NE(r.out.find("Usage: sluice-dpdk [EAL options] -- --rx PORT --tx PORT [OPTIONS]"), std::string::npos)
            << r.out;
        EXPECT_NE(option_line(r.out, "--rx").find("REQUIRED"), std::string::npos) << r.out;
        EXPECT_NE(option_line(r.out, "--tx").find("REQUIRED"), std::string::npos) << r.out;
        EXPECT_EQ(option_line(r.out, "--socket"), "  --socket PATH=/run/sluice/sluice-dpdk.sock");
        EXPECT_EQ(option_line(r.out, "--state-dir"), "  --state-dir DIR=/var/lib/sluice-dpdk");
        EXPECT_NE(option_line(r.out, "--metrics").find("ADDR=127.0.0.1:9465 "), std::string::npos) << r.out;
        EXPECT_EQ(option_line(r.out, "--source-capacity"), "  --source-capacity N:UINT in [16 - 67108864]=1048576");
        EXPECT_EQ(option_line(r.out, "--mbufs"), "  --mbufs N:UINT in [1024 - 4294967295]=65535");
        EXPECT_EQ(option_line(r.out, "--log-level"), "  --log-level LEVEL:{debug,info,warn,error}=info");
        EXPECT_NE(option_line(r.out, "--policy"), "") << r.out;
    }
}

TEST_F(SluiceDpdkProcess, AUsageErrorExitsTwoNamingWhatIsMissing) {
    ProcResult r = run_dpdk({"--", "--tx", "net_pcap0"});
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(line_of(r.err, "--rx"), "sluice-dpdk: --rx is required") << r.err;
    // Nothing after "--": the application's options were never given.
    r = run_dpdk({"-l", "0-1"});
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(line_of(r.err, "--rx"), "sluice-dpdk: --rx and --tx are required (after \"--\")") << r.err;
    r = run_dpdk({"--", "--rx", "net_pcap0", "--tx", "net_pcap0", "--mbufs", "10"});
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(line_of(r.err, "--mbufs"), "sluice-dpdk: --mbufs: Value 10 not in range 1024 to 4294967295") << r.err;
}

TEST_F(SluiceDpdkProcess, VersionGoesAfterTheSeparator) {
    ProcResult r = run_dpdk({"--", "--version"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "sluice-dpdk " SLUICE_VERSION "\n");
    // Before "--" it is an EAL option, and the application's are missing.
    r = run_dpdk({"--version"});
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.out, "");
}

// ---- with an EAL ------------------------------------------------------------------

TEST_F(SluiceDpdkProcess, AFailureToStartExitsOne) {
    SLUICE_REQUIRE_DPDK();
    std::vector<std::string> args = eal_args();
    for (const char* arg : {"--", "--rx", "net_nowhere", "--tx", "net_nowhere", "--socket"}) args.emplace_back(arg);
    args.push_back(socket_path());
    const ProcResult r = run_dpdk(args);
    EXPECT_EQ(r.code, 1) << r.err;
    const std::string line = line_of(r.err, "msg=\"bad --rx\"");
    EXPECT_NE(line.find("level=error"), std::string::npos) << r.err;
    EXPECT_NE(line.find("net_nowhere"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(socket_path()));  // it failed before the daemon started
}

TEST_F(SluiceDpdkProcess, TheReadmePcapCommandLineForwardsExactlyWhatPassed) {
    SLUICE_REQUIRE_DPDK();
    const Bytes under = udp_from("192.0.2.1");
    const Bytes over = udp_from("192.0.2.2", 100);
    std::vector<Bytes> in;
    for (int i = 0; i < 3; i++) in.push_back(under);
    for (int i = 0; i < 8; i++) in.push_back(over);
    ASSERT_NO_FATAL_FAILURE(start(in));

    const json status = ctl_json({"status"});
    ASSERT_EQ(status["interfaces"].size(), 1u) << status.dump();
    EXPECT_EQ(status["interfaces"][0]["name"], "net_pcap0");
    EXPECT_EQ(status["interfaces"][0]["kind"], "dpdk");
    EXPECT_EQ(status["interfaces"][0]["active_version"], 1);
    EXPECT_EQ(status["policy"]["version"], 1);
    EXPECT_EQ(status["daemon"]["socket"], socket_path());

    // Every frame decided: then the counts are final.
    json classes;
    ASSERT_TRUE(eventually(
        [&] {
            classes = ctl_json({"stats"})["interfaces"][0]["classes"];
            uint64_t decided = 0;
            for (const json& entry : classes)
                decided += entry.value("pass_packets", uint64_t{0}) + entry.value("drop_packets", uint64_t{0});
            return decided == in.size();
        },
        kEventTimeout))
        << "not every frame was decided: " << classes.dump();
    json klass;
    for (const json& entry : classes)
        if (entry["name"] == "default") klass = entry;
    ASSERT_TRUE(klass.is_object()) << classes.dump();
    EXPECT_EQ(klass["pass_packets"], 6);
    EXPECT_EQ(klass["drop_packets"], 5);
    EXPECT_EQ(klass["drops_by_reason"], json({{"source", 5}}));

    ASSERT_EQ(stop(SIGTERM), 0);
    const std::vector<Bytes> out = read_pcap(out_path());
    const std::vector<Bytes> expected = {under, under, under, over, over, over};
    EXPECT_EQ(out, expected);
    uint64_t bytes = 0;
    for (const Bytes& frame : out) bytes += frame.size();
    EXPECT_EQ(out.size(), klass["pass_packets"].get<uint64_t>());
    EXPECT_EQ(bytes, klass["pass_bytes"].get<uint64_t>());
    EXPECT_NE(log().find("msg=\"workers stopped\" workers=1 sent=6"), std::string::npos) << log();
    // --policy applied before the workers started: no frame ever passed without one.
    EXPECT_EQ(log().find("no policy yet"), std::string::npos) << log();
}

TEST_F(SluiceDpdkProcess, SighupRereadsThePolicyOnlyWhenItChangedAndKeepsItWhenItIsBad) {
    SLUICE_REQUIRE_DPDK();
    ASSERT_NO_FATAL_FAILURE(start({udp_from("192.0.2.1")}));
    ASSERT_EQ(current_policy()["version"], 1);

    // Changed: a new version, whose hash is the new file's canonical one.
    write_file(policy_path(), std::string(kWiderPolicy));
    const json expected = ctl_json({"policy", "push", "--dry-run", policy_path()});
    ASSERT_TRUE(expected.contains("sha256")) << expected.dump();
    ASSERT_TRUE(signal(SIGHUP));
    ASSERT_TRUE(logged("msg=\"policy file applied\"")) << log();
    json policy = current_policy();
    EXPECT_EQ(policy["version"], 2);
    EXPECT_EQ(policy["sha256"], expected["sha256"]);
    EXPECT_EQ(policy["origin"], "reload");
    const ProcResult shown = ctl({"policy", "show"});
    EXPECT_NE(shown.out.find("rate = 7"), std::string::npos) << shown.out;

    // Unchanged, and then changed only in a comment: no new version.
    ASSERT_TRUE(signal(SIGHUP));
    ASSERT_TRUE(logged("msg=\"policy file unchanged\"")) << log();
    write_file(policy_path(), "# only a comment more\n" + std::string(kWiderPolicy));
    ASSERT_TRUE(signal(SIGHUP));
    ASSERT_TRUE(logged("msg=\"policy file unchanged\"", 2)) << log();
    EXPECT_EQ(current_policy()["version"], 2);
    EXPECT_EQ(ctl_json({"policy", "history"})["versions"].size(), 2u);

    // Invalid: an error naming the file, and version 2 keeps running.
    write_file(policy_path(), "[[class]]\nname = \"default\"\nper_source = { rate = 1.5, burst = 3 }\n");
    ASSERT_TRUE(signal(SIGHUP));
    ASSERT_TRUE(logged("msg=\"policy file refused; the running policy stays\"")) << log();
    const std::string line = line_of(log(), "msg=\"policy file refused; the running policy stays\"");
    EXPECT_NE(line.find("level=error"), std::string::npos) << line;
    EXPECT_NE(line.find(policy_path()), std::string::npos) << line;
    policy = current_policy();
    EXPECT_EQ(policy["version"], 2);
    EXPECT_EQ(policy["sha256"], expected["sha256"]);
    EXPECT_TRUE(running()) << "exited with " << exit_code_;
    EXPECT_EQ(stop(SIGTERM), 0);
}

TEST_F(SluiceDpdkProcess, SigtermEndsTheControlLoopThenStopsTheWorkersThenRemovesTheSocket) {
    SLUICE_REQUIRE_DPDK();
    ASSERT_NO_FATAL_FAILURE(start({udp_from("192.0.2.1")}));
    ASSERT_TRUE(std::filesystem::exists(socket_path()));
    ASSERT_EQ(stop(SIGTERM), 0);

    const std::string text = log();
    const size_t forwarding = text.find("msg=forwarding");
    const size_t stopped = text.find("msg=stopped ports=1");
    const size_t workers = text.find("msg=\"workers stopped\" workers=1");
    ASSERT_NE(forwarding, std::string::npos) << text;
    ASSERT_NE(stopped, std::string::npos) << text;
    ASSERT_NE(workers, std::string::npos) << text;
    EXPECT_LT(forwarding, stopped) << text;
    // The control loop ends first; the daemon, which owns the workers'
    // dataplane, is freed (and its socket removed) only after they stopped.
    EXPECT_LT(stopped, workers) << text;
    EXPECT_EQ(text.find("level=error"), std::string::npos) << text;
    EXPECT_FALSE(std::filesystem::exists(socket_path()));
}

}  // namespace
}  // namespace sluice::test
