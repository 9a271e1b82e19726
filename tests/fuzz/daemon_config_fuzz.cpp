// SPDX-License-Identifier: Apache-2.0
// sluiced.toml and sluice-dpdk's --fleet file. Asserted: a refusal names
// the place in the file, and what is accepted holds the promises the daemon
// relies on without checking again (absolute paths, named interfaces, Redis
// servers with a host and a port).
#include <cstdint>
#include <string_view>

#include "daemon_config.h"
#include "fuzz_support.h"

namespace {

using sluice::fuzz::require;
constexpr std::string_view kPath = "fuzz.toml";

void check_fleet(const sluice::FleetConfig& fleet) {
    for (const auto& server : fleet.servers) {
        require(!server.host.empty() && server.port != 0, "a Redis server has a host and a port");
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    if (auto config = sluice::parse_daemon_config(text, kPath); !config) {
        require(sluice::fuzz::names_location(config.error(), kPath), "a refused config names the place",
                config.error().message);
    } else {
        const sluice::DaemonConfig& c = config.value();
        for (const std::string* path : {&c.socket, &c.state_dir, &c.bpffs_dir})
            require(path->starts_with('/'), "socket, state_dir and bpffs_dir are absolute", *path);
        require(c.policy_file.empty() || c.policy_file.starts_with('/'), "policy_file is absolute", c.policy_file);
        for (const auto& interface : c.interfaces) require(!interface.name.empty(), "an interface has a name");
        check_fleet(c.fleet);
    }
    if (auto fleet = sluice::parse_fleet_config(text, kPath); !fleet) {
        require(sluice::fuzz::names_location(fleet.error(), kPath), "a refused fleet file names the place",
                fleet.error().message);
    } else {
        check_fleet(fleet.value());
    }
    return 0;
}
