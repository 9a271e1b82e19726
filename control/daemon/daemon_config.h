// SPDX-License-Identifier: Apache-2.0
// sluiced's own configuration file (packaging/sluiced.toml is the documented
// example). Strict like the policy loader: an unknown key, a wrong type or a
// bad value is an error naming file:line:column and the key, and the daemon
// does not start.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "control_protocol.h"
#include "interface_host.h"
#include "logger.h"
#include "result.h"
#include "sluice/abi.h"

namespace sluice {

struct InterfaceConfig {
    std::string name;
    XdpMode mode = XdpMode::native;
};

struct DaemonConfig {
    std::string socket = std::string(kDefaultSocketPath);
    std::string socket_group;  // empty: root (and sluiced's own user) only, mode 0600
    std::string state_dir = "/var/lib/sluice";
    std::string bpffs_dir = "/sys/fs/bpf/sluice";
    std::string policy_file;  // empty: policy comes only from pushes
    std::string metrics_address = "127.0.0.1:9464";
    LogLevel log_level = LogLevel::info;
    bool detach_on_exit = false;
    uint32_t source_capacity = SLUICE_SOURCE_CAPACITY_DEFAULT;  // source table entries (8 bytes each)
    std::vector<InterfaceConfig> interfaces;
};

Result<DaemonConfig> parse_daemon_config(std::string_view text, std::string_view path);
Result<DaemonConfig> load_daemon_config(const std::string& path);

}  // namespace sluice
