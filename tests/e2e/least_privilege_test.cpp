// SPDX-License-Identifier: Apache-2.0
// sluiced with exactly what packaging/sluiced.service gives it (issue #18):
// an unprivileged user (nobody here, sluice in the package) holding only
// CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON, and a view of /sys/fs/bpf that is
// an empty tmpfs with only its own pin directory of the host's bpffs bound in
// (the unit's TemporaryFileSystem= and BindPaths=). It must attach, take a
// policy, drop a flood and re-adopt its pins after a restart; without
// CAP_BPF it must refuse to start and name the capability.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/privilege.h"
#include "e2e_fixture.h"

namespace sluice::test::least_privilege_test {
namespace {

using namespace std::chrono_literals;

constexpr uid_t kNobody = 65534;
constexpr int kCapNetAdmin = 12, kCapPerfmon = 38, kCapBpf = 39;
constexpr uint64_t kUnitCapabilities = 1ull << kCapBpf | 1ull << kCapNetAdmin | 1ull << kCapPerfmon;

constexpr double kRate = 200, kBurst = 200, kSeconds = 2.0;
const Flow kFlooder{"flooder", "10.9.0.1", 5000};
const Flow kPolite{"polite", "10.1.0.1", 100};

const char* const kPolicy = R"(# least-privilege e2e
[defaults]
unit = "packets"

[[class]]
name = "default"
per_source = { rate = 200, burst = 200 }
)";

// One capability list in setpriv's syntax, e.g. "-all,+bpf,+net_admin".
std::string setpriv_caps(const std::vector<std::string>& names) {
    std::string caps = "-all";
    for (const auto& name : names) caps += ",+" + name;
    return caps;
}

// A field of /proc/<pid>/status ("Uid", "CapEff"...), or "".
std::string proc_status_field(pid_t pid, const std::string& field) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind(field + ":", 0) == 0) {
            std::istringstream values(line.substr(field.size() + 1));
            std::string first;
            values >> first;
            return first;
        }
    return {};
}

class LeastPrivilege : public SluiceE2E {
  protected:
    // The world, with its temp dir (socket, state, config) and pin directory
    // handed to nobody as the package hands them to sluice; sluiced will run
    // as nobody with `capabilities` only.
    void make_unprivileged_world(const std::vector<std::string>& capabilities) {
        ASSERT_NO_FATAL_FAILURE(make_world("metrics_address = \"\"\n"));
        for (const auto& path : {dir(), config_path(), pin_root()})
            ASSERT_EQ(chown(path.c_str(), kNobody, kNobody), 0) << path << ": " << std::strerror(errno);
        const std::string caps = setpriv_caps(capabilities);
        // unshare execs sh, sh execs setpriv, setpriv execs sluiced: the pid stays sluiced's.
        set_daemon_wrapper({"/usr/bin/unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
                            "set -e; mount --bind \"$1\" \"$2\"; mount -t tmpfs -o mode=0755 tmpfs /sys/fs/bpf; "
                            "mkdir -p \"$1\"; mount --move \"$2\" \"$1\"; shift 2; exec \"$@\"",
                            "sh", pin_root(), dir(), "/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                            "--clear-groups", "--inh-caps=" + caps, "--ambient-caps=" + caps, "--bounding-set=" + caps,
                            "--"});
    }
};

TEST_F(LeastPrivilege, SluicedAsAnUnprivilegedUserWithTheUnitsCapabilitiesDropsAFloodAndReadoptsItsPins) {
    SLUICE_REQUIRE_BPF();
    ASSERT_NO_FATAL_FAILURE(make_unprivileged_world({"bpf", "net_admin", "perfmon"}));
    ASSERT_NO_FATAL_FAILURE(start_daemon());

    // It runs as the user, with exactly the three capabilities, and cannot gain more.
    EXPECT_EQ(proc_status_field(daemon_pid(), "Uid"), std::to_string(kNobody));
    for (const std::string set : {"CapEff", "CapPrm", "CapBnd", "CapAmb"})
        EXPECT_EQ(std::stoull(proc_status_field(daemon_pid(), set), nullptr, 16), kUnitCapabilities) << set;

    auto status = this->status();
    ASSERT_TRUE(status);
    ASSERT_EQ(status->value("interfaces", json::array()).size(), 1u) << status->dump();
    ASSERT_TRUE(push_policy("policy.toml", kPolicy));

    auto report = traffic({kFlooder, kPolite}, kSeconds);
    ASSERT_TRUE(report);
    expect_no_receiver_drops(*report);
    const FlowCount& flooder = report->flow("flooder");
    const FlowCount& polite = report->flow("polite");
    const double bound = upper_bound(kRate, kBurst, report->duration_s);
    figure_line("flood", "flooder sent " + std::to_string(flooder.sent) + " received " +
                             std::to_string(flooder.received) + " bound " + figure(bound) + "; polite sent " +
                             std::to_string(polite.sent) + " received " + std::to_string(polite.received));
    EXPECT_LE(static_cast<double>(flooder.received), bound);
    EXPECT_GE(static_cast<double>(flooder.received), lower_bound(kRate, report->duration_s, kBurst));
    EXPECT_EQ(polite.received, polite.sent);

    // A restart with the same privileges re-adopts the pinned program (bpf_obj_get,
    // the link and its interface) and keeps the policy.
    signal_daemon(SIGTERM);
    ASSERT_EQ(wait_daemon_exit(10s), 0);
    ASSERT_NO_FATAL_FAILURE(start_daemon());
    EXPECT_NE(read_file(log_path()).find("re-adopted pinned interface"), std::string::npos);
    status = this->status();
    ASSERT_TRUE(status);
    ASSERT_TRUE((*status)["policy"].is_object()) << status->dump();
    EXPECT_EQ((*status)["policy"]["version"], 1);
}

TEST_F(LeastPrivilege, WithoutCapBpfSluicedRefusesToStartAndNamesIt) {
    SLUICE_REQUIRE_BPF();
    ASSERT_NO_FATAL_FAILURE(make_unprivileged_world({"net_admin", "perfmon"}));
    const int code = run_daemon_to_exit(10s);
    const std::string log = read_file(log_path());
    EXPECT_EQ(code, 1) << log;
    EXPECT_NE(log.find("sluiced lacks CAP_BPF in its effective capabilities"), std::string::npos) << log;
    EXPECT_TRUE(std::filesystem::is_empty(pin_root())) << "a refused start must leave no pins";
}

}  // namespace
}  // namespace sluice::test::least_privilege_test
