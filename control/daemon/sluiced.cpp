// SPDX-License-Identifier: Apache-2.0
// sluiced: the Sluice daemon (see daemon.h and README.md).
//   sluiced --config /etc/sluice/sluiced.toml [--log-level LEVEL]
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "daemon.h"
#include "logger.h"

namespace {

sluice::DaemonSignals g_signals;

int usage(const char* problem) {
    if (problem != nullptr) std::fprintf(stderr, "sluiced: %s\n", problem);
    std::fprintf(stderr,
                 "usage: sluiced --config PATH [--log-level debug|info|warn|error]\n"
                 "Attaches Sluice to the configured interfaces and serves sluicectl on the control socket.\n"
                 "SIGHUP re-reads policy_file; SIGTERM stops, leaving programs enforcing unless\n"
                 "detach_on_exit = true. Example config: packaging/sluiced.toml.\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    std::string config_path;
    std::string log_level;
    for (int i = 1; i < argc; i++) {
        const std::string_view arg = argv[i];
        if ((arg == "--config" || arg == "--log-level") && i + 1 < argc) {
            (arg == "--config" ? config_path : log_level) = argv[++i];
        } else if (arg == "-h" || arg == "--help") {
            usage(nullptr);
            return 0;
        } else if (arg == "--version") {
            std::printf("sluiced %s\n", SLUICE_VERSION);
            return 0;
        } else {
            return usage(("unknown or incomplete argument \"" + std::string(arg) + "\"").c_str());
        }
    }
    if (config_path.empty()) return usage("--config is required");

    auto config = sluice::load_daemon_config(config_path);
    if (!config) {
        sluice::log(sluice::LogLevel::error, "bad config", {{"error", config.error().message}});
        return 1;
    }
    if (!log_level.empty()) {
        const auto level = sluice::parse_log_level(log_level);
        if (!level) return usage(("--log-level \"" + log_level + "\" is not one of debug, info, warn, error").c_str());
        config.value().log_level = *level;
    }

    sluice::install_signal_handlers(g_signals);

    auto daemon = sluice::Daemon::start(std::move(config.value()));
    if (!daemon) {
        sluice::log(sluice::LogLevel::error, "cannot start", {{"error", daemon.error().message}});
        return 1;
    }
    if (auto status = daemon.value()->run(g_signals); !status) {
        sluice::log(sluice::LogLevel::error, "stopped on an error", {{"error", status.error().message}});
        return 1;
    }
    return 0;
}
