// SPDX-License-Identifier: Apache-2.0
// sluiced: the Sluice daemon over XDP (see daemon.h and README.md). The one
// program that composes the daemon with control/xdp's XdpHost.
//   sluiced --config /etc/sluice/sluiced.toml [--log-level LEVEL]
#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "command_line.h"
#include "daemon.h"
#include "logger.h"
#include "xdp_host.h"

namespace {

sluice::DaemonSignals g_signals;

// Each control client holds an fd: take the hard limit on open files (any
// process may), so a service manager's soft 1024 does not cap them.
void raise_open_files_limit() {
    rlimit files{};
    if (getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur >= files.rlim_max) return;
    const rlim_t soft = files.rlim_cur;
    files.rlim_cur = files.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &files) != 0)
        sluice::log(sluice::LogLevel::warn, "cannot raise the open files limit",
                    {{"limit", std::to_string(soft)}, {"error", std::strerror(errno)}});
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Attaches Sluice to the configured interfaces and serves sluicectl on the control socket.", "sluiced"};
    sluice::prepare_command_line(app, SLUICE_VERSION);
    app.footer(
        "SIGHUP re-reads policy_file; SIGTERM stops, leaving programs enforcing unless\n"
        "detach_on_exit = true. Example config: packaging/sluiced.toml.");
    std::string config_path;
    app.add_option("--config", config_path, "the daemon's config (TOML; every key: packaging/sluiced.toml)")
        ->type_name("PATH")
        ->required();
    sluice::LogLevel log_level = sluice::LogLevel::info;
    const CLI::Option* log_level_option =
        sluice::add_log_level_option(app, log_level, "overrides the config's log_level");
    if (const auto exit = sluice::parse_command_line(app, argc, argv)) return *exit;

    auto config = sluice::load_daemon_config(config_path);
    if (!config) {
        sluice::log(sluice::LogLevel::error, "bad config", {{"error", config.error().message}});
        return 1;
    }
    if (log_level_option->count() > 0) config.value().log_level = log_level;

    sluice::install_signal_handlers(g_signals);

    sluice::set_log_level(config.value().log_level);
    raise_open_files_limit();
    auto host = sluice::XdpHost::create(
        {config.value().bpffs_dir, config.value().source_capacity, config.value().drop_sample_period,
         config.value().prefix_capacity});
    if (!host) {
        sluice::log(sluice::LogLevel::error, "cannot start", {{"error", host.error().message}});
        return 1;
    }
    auto daemon = sluice::Daemon::start(std::move(config.value()), std::move(host.value()));
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
