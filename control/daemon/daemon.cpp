// SPDX-License-Identifier: Apache-2.0
#include "daemon.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <grp.h>
#include <linux/if_link.h>
#include <linux/magic.h>
#include <net/if.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "clock.h"
#include "labels.h"
#include "logger.h"

namespace sluice {
namespace {

using json = nlohmann::json;

constexpr int kPollTimeoutMs = 250;
constexpr auto kSampleInterval = std::chrono::seconds(1);
constexpr auto kCountInterval = std::chrono::seconds(10);
constexpr std::string_view kBpffsRoot = "/sys/fs/bpf";
constexpr std::string_view kUnclassified = "unclassified";

// The source table in status and stats: occupancy is the share in debt.
json sources_json(const SourceTableUsage& usage) {
    return json{
        {"capacity", usage.capacity},
        {"in_debt", usage.in_debt},
        {"known", usage.known},
        {"occupancy", usage.capacity ? static_cast<double>(usage.in_debt) / static_cast<double>(usage.capacity) : 0.0}};
}

double monotonic_s() { return static_cast<double>(monotonic_ns()) / 1e9; }

bool on_bpffs(const std::string& path) {
    struct statfs fs {};
    return statfs(path.c_str(), &fs) == 0 && static_cast<unsigned long>(fs.f_type) == BPF_FS_MAGIC;
}

Result<std::string> read_text_file(const std::string& path) {
    std::ifstream file(path);
    if (!file) return Error{errno_message("cannot read " + path, errno)};
    std::ostringstream text;
    text << file.rdbuf();
    if (file.bad()) return Error{errno_message("cannot read " + path, errno)};
    return text.str();
}

// Argument readers: a missing required or ill-typed argument is bad_request.
Result<std::string> string_arg(const json& args, const char* key, std::optional<std::string> fallback = {}) {
    const auto it = args.find(key);
    if (it == args.end() || it->is_null()) {
        if (fallback) return *fallback;
        return control_error(ErrorCode::bad_request, std::string("missing argument \"") + key + "\"", key);
    }
    if (!it->is_string())
        return control_error(ErrorCode::bad_request, std::string("argument \"") + key + "\" must be a string", key);
    return it->get<std::string>();
}

Result<std::optional<uint64_t>> uint_arg(const json& args, const char* key) {
    const auto it = args.find(key);
    if (it == args.end() || it->is_null()) return std::optional<uint64_t>{};
    if (!it->is_number_unsigned())
        return control_error(ErrorCode::bad_request,
                             std::string("argument \"") + key + "\" must be a non-negative integer", key);
    return std::optional<uint64_t>(it->get<uint64_t>());
}

Result<bool> bool_arg(const json& args, const char* key) {
    const auto it = args.find(key);
    if (it == args.end() || it->is_null()) return false;
    if (!it->is_boolean())
        return control_error(ErrorCode::bad_request, std::string("argument \"") + key + "\" must be true or false",
                             key);
    return it->get<bool>();
}

json version_summary(const PolicyVersion& version) {
    return {{"version", version.version},
            {"sha256", version.sha256},
            {"origin", version.origin},
            {"applied_unix_s", version.applied_unix_s}};
}

json push_json(const PushOutcome& outcome) {
    json result = version_summary(outcome.version);
    result["applied"] = outcome.applied;
    result["diff"] = outcome.diff;
    return result;
}

// A failure of the daemon itself, not of the request.
Error as_internal(Error error) {
    error.code = ErrorCode::internal;
    return error;
}

// sluice-dpdk takes its ports on the command line; the control socket cannot change them.
Error fixed_ports_error(const std::string& verb) {
    return control_error(ErrorCode::invalid,
                         verb +
                             " is not available here: sluice-dpdk's ports are fixed when the appliance starts "
                             "(give them on its command line)",
                         "interface");
}

// The XDP mode our program runs in on `ifindex`, from the kernel.
XdpMode attached_mode(int ifindex, int program_fd) {
    LIBBPF_OPTS(bpf_xdp_query_opts, query);
    bpf_prog_info info{};
    __u32 length = sizeof(info);
    if (bpf_xdp_query(ifindex, 0, &query) == 0 && bpf_obj_get_info_by_fd(program_fd, &info, &length) == 0 &&
        query.skb_prog_id == info.id)
        return XdpMode::generic;
    return XdpMode::native;
}

}  // namespace

namespace {
DaemonSignals* g_signals = nullptr;  // set once, before the handlers are installed

void on_signal(int signal) {
    if (signal == SIGHUP) {
        g_signals->reload.store(true);
    } else {
        g_signals->stop.store(true);
    }
}
}  // namespace

void install_signal_handlers(DaemonSignals& signals) {
    g_signals = &signals;
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    for (const int signal : {SIGTERM, SIGINT, SIGHUP}) sigaction(signal, &action, nullptr);
    signal(SIGPIPE, SIG_IGN);
}

void notify_systemd(const std::string& state) {
    const char* path = std::getenv("NOTIFY_SOCKET");
    if (path == nullptr || path[0] == '\0') return;
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    const size_t length = std::strlen(path);
    if (length >= sizeof(address.sun_path)) return;
    std::memcpy(address.sun_path, path, length);
    if (path[0] == '@') address.sun_path[0] = '\0';  // an abstract socket
    UniqueFd fd(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) return;
    const auto size = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + length);
    if (sendto(fd.get(), state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&address), size) <
        0)
        log(LogLevel::warn, "cannot notify systemd", {{"state", state}, {"error", std::strerror(errno)}});
}

Status prepare_bpffs_dir(const std::string& dir) {
    // The first existing ancestor tells which filesystem `dir` will be on.
    std::filesystem::path existing(dir);
    while (!existing.empty() && existing != existing.root_path() && !std::filesystem::exists(existing))
        existing = existing.parent_path();
    if (!on_bpffs(existing)) {
        const bool under_root = dir.rfind(std::string(kBpffsRoot) + "/", 0) == 0;
        if (!under_root)
            return Error{"bpffs_dir " + dir +
                         " is not on a bpf filesystem: mount one there (mount -t bpf bpf DIR) "
                         "or use a directory under /sys/fs/bpf"};
        if (mount("bpffs", std::string(kBpffsRoot).c_str(), "bpf", 0, "mode=0700") != 0)
            return Error{errno_message("mounting bpffs on /sys/fs/bpf for bpffs_dir " + dir, errno)};
        log(LogLevel::info, "mounted bpffs", {{"path", std::string(kBpffsRoot)}});
    }
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error) return Error{"cannot create bpffs_dir " + dir + ": " + error.message()};
    if (!on_bpffs(dir)) return Error{"bpffs_dir " + dir + " is not on a bpf filesystem"};
    return ok_status();
}

Daemon::Daemon(DaemonConfig config, std::unique_ptr<PolicyService> policy, ControlServer server, bool fixed_ports)
    : config_(std::move(config)), fixed_ports_(fixed_ports), policy_(std::move(policy)), server_(std::move(server)) {
    started_unix_s_ = static_cast<int64_t>(std::time(nullptr));
}

Daemon::~Daemon() {
    // PolicyService points at the dataplanes: let go of them first.
    for (const auto& [name, interface] : interfaces_) (void)policy_->remove_target(name);
}

Result<std::unique_ptr<Daemon>> Daemon::start(DaemonConfig config) {
    set_log_level(config.log_level);
    if (auto status = prepare_bpffs_dir(config.bpffs_dir); !status) return status.error();
    const int cpus = libbpf_num_possible_cpus();
    if (cpus <= 0) return Error{errno_message("counting possible CPUs", -cpus)};
    auto created = create(std::move(config), static_cast<uint32_t>(cpus), false);
    if (!created) return created.error();
    std::unique_ptr<Daemon> daemon = std::move(created.value());

    daemon->bpf_stats_ = UniqueFd(bpf_enable_stats(BPF_STATS_RUN_TIME));
    if (daemon->bpf_stats_.get() < 0)
        log(LogLevel::warn, "BPF run-time statistics unavailable; decision cost will read 0",
            {{"error", std::strerror(errno)}});
    if (auto status = daemon->serve_metrics(); !status) return status.error();

    if (auto status = daemon->adopt_pinned_interfaces(); !status) return status.error();
    daemon->bring_to_current_policy();
    if (auto status = daemon->attach_configured_interfaces(); !status) return status.error();
    daemon->announce_ready();
    return daemon;
}

Result<std::unique_ptr<Daemon>> Daemon::start_fixed(DaemonConfig config, std::vector<FixedPort> ports, uint32_t cpus) {
    set_log_level(config.log_level);
    if (!config.interfaces.empty())
        return Error{"sluice-dpdk takes its ports on the command line, not from [[interface]] tables in the config",
                     "interface"};
    if (cpus == 0) return Error{"sluice-dpdk needs at least one worker to compile the policy for"};
    auto created = create(std::move(config), cpus, true);
    if (!created) return created.error();
    std::unique_ptr<Daemon> daemon = std::move(created.value());
    if (auto status = daemon->serve_metrics(); !status) return status.error();

    for (FixedPort& port : ports) {
        if (!port.dataplane) return Error{"port " + port.name + " has no dataplane"};
        if (daemon->interfaces_.count(port.name)) return Error{"port " + port.name + " is given twice"};
        auto interface = std::make_unique<Interface>();
        interface->name = port.name;
        interface->dataplane = std::move(port.dataplane);
        if (auto status = daemon->policy_->add_target(port.name, interface->dataplane.get()); !status)
            return status.error();
        daemon->interfaces_[port.name] = std::move(interface);
    }
    daemon->bring_to_current_policy();
    daemon->announce_ready();
    return daemon;
}

Result<std::unique_ptr<Daemon>> Daemon::create(DaemonConfig config, uint32_t cpus, bool fixed_ports) {
    std::error_code error;
    std::filesystem::create_directories(config.state_dir, error);
    if (error) return Error{"cannot create state_dir " + config.state_dir + ": " + error.message()};
    auto store = VersionStore::open(config.state_dir);
    if (!store) return store.error();
    for (const std::string& warning : store.value().warnings()) log(LogLevel::warn, warning);

    ControlServerOptions server_options;
    server_options.socket_path = config.socket;
    if (!config.socket_group.empty()) {
        const group* found = getgrnam(config.socket_group.c_str());
        if (found == nullptr) return Error{"socket_group \"" + config.socket_group + "\" is not a group on this host"};
        server_options.group = found->gr_gid;
    }
    std::filesystem::create_directories(std::filesystem::path(config.socket).parent_path(), error);
    if (error) return Error{"cannot create the directory of socket " + config.socket + ": " + error.message()};
    // Listening first makes a second sluiced on the same socket fail before
    // it re-adopts (and so takes over) anything.
    auto server = ControlServer::listen(server_options);
    if (!server) return server.error();

    auto policy = std::make_unique<PolicyService>(std::move(store.value()), PolicyLoadOptions{cpus});
    std::unique_ptr<Daemon> daemon(
        new Daemon(std::move(config), std::move(policy), std::move(server.value()), fixed_ports));
    if (Status served = daemon->register_handlers(); !served) return served.error();
    return daemon;
}

Status Daemon::serve_metrics() {
    if (config_.metrics_address.empty()) return ok_status();
    auto metrics = MetricsEndpoint::serve(config_.metrics_address);
    if (!metrics) return metrics.error();
    metrics_ = std::move(metrics.value());
    log(LogLevel::info, "serving metrics",
        {{"address", config_.metrics_address}, {"port", std::to_string(metrics_->port())}});
    return ok_status();
}

void Daemon::bring_to_current_policy() {
    if (auto status = policy_->reconcile(); !status)
        log(LogLevel::error, "an interface does not run the current policy", {{"error", status.error().message}});
    if (!config_.policy_file.empty()) reload_policy_file();
}

void Daemon::announce_ready() {
    sample_counters();
    publish_metrics();
    const auto current = policy_->current();
    log(LogLevel::info, "ready",
        {{"socket", config_.socket},
         {"interfaces", std::to_string(interfaces_.size())},
         {"policy_version", current ? std::to_string(current->version) : "none"}});
    notify_systemd("READY=1\nSTATUS=enforcing");
}

Result<std::unique_ptr<XdpDataplane>> Daemon::open_dataplane(const std::string& pin_dir) const {
    XdpOptions options;
    options.pin_dir = pin_dir;
    options.source_capacity = config_.source_capacity;
    options.run_time_stats = bpf_stats_.get() >= 0;
    return XdpDataplane::open(options);
}

Status Daemon::adopt_pinned_interfaces() {
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(config_.bpffs_dir, error)) {
        if (!entry.is_directory()) continue;
        const std::string name = entry.path().filename();
        const int ifindex = static_cast<int>(if_nametoindex(name.c_str()));
        auto dataplane = open_dataplane(entry.path());
        if (!dataplane) return Error{"cannot re-adopt " + name + ": " + dataplane.error().message};
        const auto links = dataplane.value()->attached_ifindexes();
        if (ifindex == 0 || links.empty() || links.front() != ifindex) {
            log(LogLevel::warn, "pinned state without an attached program; sluicectl attach re-uses it",
                {{"interface", name}, {"pin_dir", entry.path()}});
            continue;
        }
        const XdpMode mode = attached_mode(ifindex, dataplane.value()->program_fd());
        auto interface = std::make_unique<Interface>();
        interface->name = name;
        interface->xdp = XdpAttachment{ifindex, mode, entry.path(), dataplane.value().get()};
        interface->dataplane = std::move(dataplane.value());
        if (auto status = policy_->add_target(name, interface->dataplane.get()); !status) return status;
        log(LogLevel::info, "re-adopted pinned interface",
            {{"interface", name}, {"mode", std::string(xdp_mode_name(mode))}, {"pin_dir", entry.path()}});
        interfaces_[name] = std::move(interface);
    }
    if (error) return Error{"cannot list bpffs_dir " + config_.bpffs_dir + ": " + error.message()};
    return ok_status();
}

Status Daemon::attach_configured_interfaces() {
    for (const InterfaceConfig& wanted : config_.interfaces) {
        const auto found = interfaces_.find(wanted.name);
        if (found != interfaces_.end()) {
            if (found->second->xdp->mode != wanted.mode)
                log(LogLevel::warn, "interface stays in the mode it was attached in; detach and attach to change it",
                    {{"interface", wanted.name},
                     {"mode", std::string(xdp_mode_name(found->second->xdp->mode))},
                     {"configured", std::string(xdp_mode_name(wanted.mode))}});
            continue;
        }
        if (auto status = attach_interface(wanted.name, wanted.mode); !status) return status;
    }
    return ok_status();
}

Status Daemon::attach_interface(const std::string& name, XdpMode mode) {
    if (interfaces_.count(name)) return Error{"interface " + name + " is already attached"};
    const int ifindex = static_cast<int>(if_nametoindex(name.c_str()));
    if (ifindex == 0) return Error{"no interface named \"" + name + "\" in sluiced's network namespace", "interface"};

    const std::string pin_dir = config_.bpffs_dir + "/" + name;
    const bool had_pins = std::filesystem::exists(pin_dir);
    auto dataplane = open_dataplane(pin_dir);
    if (!dataplane) return dataplane.error();
    auto interface = std::make_unique<Interface>();
    interface->name = name;
    interface->xdp = XdpAttachment{ifindex, mode, pin_dir, dataplane.value().get()};
    interface->dataplane = std::move(dataplane.value());

    // Policy first, link second: the interface never runs without the current version.
    auto undo = [&](Error error) -> Status {
        (void)policy_->remove_target(name);
        interface->dataplane.reset();
        std::error_code ignored;
        if (!had_pins) std::filesystem::remove_all(pin_dir, ignored);
        return error;
    };
    if (auto status = policy_->add_target(name, interface->dataplane.get()); !status) return undo(status.error());
    if (auto status = policy_->reconcile(); !status) return undo(status.error());
    if (auto status = interface->xdp->dataplane->attach(ifindex, mode); !status) return undo(status.error());

    log(LogLevel::info, "attached",
        {{"interface", name}, {"mode", std::string(xdp_mode_name(mode))}, {"pin_dir", pin_dir}});
    interfaces_[name] = std::move(interface);
    return ok_status();
}

Status Daemon::detach_interface(const std::string& name) {
    const auto found = interfaces_.find(name);
    if (found == interfaces_.end()) return Error{"interface " + name + " is not attached", "interface"};
    const XdpAttachment& xdp = *found->second->xdp;
    if (auto status = xdp.dataplane->detach(xdp.ifindex); !status) return status;
    (void)policy_->remove_target(name);
    const std::string pin_dir = xdp.pin_dir;
    interfaces_.erase(found);
    std::error_code error;
    std::filesystem::remove_all(pin_dir, error);
    if (error)
        return Error{"detached " + name + " but cannot remove its pins under " + pin_dir + ": " + error.message()};
    log(LogLevel::info, "detached", {{"interface", name}});
    return ok_status();
}

void Daemon::reload_policy_file() {
    if (config_.policy_file.empty()) {
        log(LogLevel::info, "reload requested, but no policy_file is configured");
        return;
    }
    auto text = read_text_file(config_.policy_file);
    if (!text) {
        log(LogLevel::error, "policy file not loaded; the running policy stays", {{"error", text.error().message}});
        return;
    }
    auto changed = policy_->reload_if_changed(text.value(), config_.policy_file);
    if (!changed || changed.value()) count_push(changed.ok());
    if (!changed) {
        log(LogLevel::error, "policy file refused; the running policy stays", {{"error", changed.error().message}});
    } else if (changed.value()) {
        log(LogLevel::info, "policy file applied",
            {{"path", config_.policy_file}, {"version", std::to_string(policy_->current()->version)}});
    } else {
        log(LogLevel::info, "policy file unchanged", {{"path", config_.policy_file}});
    }
}

void Daemon::sample_counters() {
    for (auto& [name, interface] : interfaces_) {
        CounterSample sample;
        sample.at = Clock::now();
        auto counters = interface->dataplane->counters();
        auto stats = interface->dataplane->stats();
        if (!counters || !stats) {
            log(LogLevel::warn, "cannot read counters",
                {{"interface", name}, {"error", (!counters ? counters.error() : stats.error()).message}});
            continue;
        }
        sample.counters = std::move(counters.value());
        sample.stats = stats.value();
        sample.cost = interface->dataplane->decision_cost();
        interface->previous = std::move(interface->latest);
        interface->latest = std::move(sample);
    }
}

void Daemon::count_sources() {
    for (auto& [name, interface] : interfaces_) {
        auto usage = interface->dataplane->source_table();
        if (!usage) {
            log(LogLevel::warn, "cannot count sources", {{"interface", name}, {"error", usage.error().message}});
            continue;
        }
        interface->sources = usage.value();
    }
}

void Daemon::count_push(bool accepted) { (accepted ? pushes_accepted_ : pushes_rejected_)++; }

void Daemon::drain_drop_events() {
    const double now = monotonic_s();
    for (auto& [name, interface] : interfaces_) {
        HotSources& hot = interface->hot_sources;
        auto drained = interface->dataplane->drain_events(
            [&](const sluice_drop_event& event) { hot.add(event.source, static_cast<double>(event.weight), now); });
        if (!drained)
            log(LogLevel::warn, "cannot read drop events", {{"interface", name}, {"error", drained.error().message}});
    }
}

void Daemon::publish_metrics() {
    if (!metrics_) return;
    DaemonSnapshot snapshot;
    snapshot.version = SLUICE_VERSION;
    snapshot.start_time_s = static_cast<double>(started_unix_s_);
    snapshot.uptime_s = std::chrono::duration<double>(Clock::now() - started_).count();
    if (const auto current = policy_->current()) {
        snapshot.policy_version = current->version;
        snapshot.policy_sha256 = current->sha256;
    }
    snapshot.pushes_accepted = pushes_accepted_;
    snapshot.pushes_rejected = pushes_rejected_;
    snapshot.decision_cost_enabled = decision_cost_enabled();
    snapshot.requests = server_.counts();
    snapshot.class_names = class_names();
    const double now = monotonic_s();
    for (const auto& [name, interface] : interfaces_) {
        if (!interface->latest) continue;
        InterfaceSnapshot entry;
        entry.name = name;
        entry.kind = interface->dataplane->kind();
        const CounterSample& sample = *interface->latest;
        entry.counters = sample.counters;
        entry.stats = sample.stats;
        entry.decision_cost = sample.cost;
        if (interface->xdp) entry.syscall_errors = interface->xdp->dataplane->syscall_errors();
        if (auto version = interface->dataplane->active_version()) entry.active_version = version.value();
        entry.sources = interface->sources;
        entry.hot_sources = interface->hot_sources.top(kHotSourcesExported, now);
        snapshot.interfaces.push_back(std::move(entry));
    }
    metrics_->publish(build_metric_families(snapshot));
}

int Daemon::metrics_port() const { return metrics_ ? metrics_->port() : 0; }

Status Daemon::run(DaemonSignals& signals) {
    while (!signals.stop.load()) {
        if (auto status = server_.run_once(kPollTimeoutMs); !status) return status;
        if (signals.reload.exchange(false)) {
            log(LogLevel::info, "SIGHUP: reloading the policy file");
            reload_policy_file();
        }
        drain_drop_events();
        const auto now = Clock::now();
        if (now - last_sample_ >= kSampleInterval) {
            sample_counters();
            publish_metrics();
            last_sample_ = now;
        }
        if (now - last_count_ >= kCountInterval) {
            count_sources();
            last_count_ = now;
        }
    }
    notify_systemd("STOPPING=1");
    if (fixed_ports_) {
        log(LogLevel::info, "stopped", {{"ports", std::to_string(interfaces_.size())}});
    } else if (config_.detach_on_exit) {
        std::vector<std::string> names;
        for (const auto& [name, interface] : interfaces_) names.push_back(name);
        for (const std::string& name : names) {
            if (auto status = detach_interface(name); !status)
                log(LogLevel::error, "cannot detach on exit", {{"interface", name}, {"error", status.error().message}});
        }
        log(LogLevel::info, "stopped; interfaces detached (detach_on_exit)");
    } else if (interfaces_.empty()) {
        log(LogLevel::info, "stopped; no interface was attached");
    } else {
        log(LogLevel::info, "stopped; pinned programs keep enforcing (fail-static)",
            {{"interfaces", std::to_string(interfaces_.size())}});
    }
    return ok_status();
}

std::map<uint32_t, std::string> Daemon::class_names() const {
    std::map<uint32_t, std::string> names{{0, std::string(kUnclassified)}};
    if (const auto current = policy_->current()) {
        for (const auto& [name, id] : current->class_ids) names[id] = name;
    }
    return names;
}

bool Daemon::decision_cost_enabled() const {
    if (!fixed_ports_) return bpf_stats_.get() >= 0;
    return std::all_of(interfaces_.begin(), interfaces_.end(),
                       [](const auto& entry) { return entry.second->dataplane->decision_cost_enabled(); });
}

std::vector<std::string> Daemon::unprotected_interfaces() const {
    std::vector<std::string> names;
    if (fixed_ports_) return names;  // links without XDP are an XDP host's concern
    std::unique_ptr<struct if_nameindex, void (*)(struct if_nameindex*)> list(if_nameindex(), if_freenameindex);
    UniqueFd probe(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!list || probe.get() < 0) return names;
    for (const struct if_nameindex* it = list.get(); it->if_index != 0; ++it) {
        if (interfaces_.count(it->if_name)) continue;
        ifreq request{};
        std::strncpy(request.ifr_name, it->if_name, IFNAMSIZ - 1);
        if (ioctl(probe.get(), SIOCGIFFLAGS, &request) != 0) continue;
        if ((request.ifr_flags & IFF_UP) && !(request.ifr_flags & IFF_LOOPBACK)) names.emplace_back(it->if_name);
    }
    return names;
}

Result<json> Daemon::status_json() {
    json interfaces = json::array();
    for (const auto& [name, interface] : interfaces_) {
        auto version = interface->dataplane->active_version();
        auto sources = interface->dataplane->source_table();  // counted afresh: status is asked for by hand
        if (!version) return as_internal(version.error());
        if (!sources) return as_internal(sources.error());
        json entry{{"name", name},
                   {"kind", interface->dataplane->kind()},
                   {"active_version", version.value()},
                   {"sources", sources_json(sources.value())}};
        if (interface->xdp) {
            entry["ifindex"] = interface->xdp->ifindex;
            entry["mode"] = xdp_mode_name(interface->xdp->mode);
            entry["pin_dir"] = interface->xdp->pin_dir;
        }
        interfaces.push_back(std::move(entry));
    }
    const auto current = policy_->current();
    const double uptime = std::chrono::duration<double>(Clock::now() - started_).count();
    return json{{"daemon",
                 {{"pid", getpid()},
                  {"version", SLUICE_VERSION},
                  {"started_unix_s", started_unix_s_},
                  {"uptime_s", uptime},
                  {"socket", config_.socket},
                  {"state_dir", config_.state_dir},
                  {"bpffs_dir", fixed_ports_ ? json(nullptr) : json(config_.bpffs_dir)}}},
                {"policy", current ? version_summary(*current) : json(nullptr)},
                {"interfaces", std::move(interfaces)},
                {"unprotected", unprotected_interfaces()}};
}

Result<json> Daemon::stats_json() {
    const auto names = class_names();
    json interfaces = json::array();
    double interval_s = 0;
    for (const auto& [name, interface] : interfaces_) {
        // Totals are read now; rates come from the two latest periodic samples.
        auto counters = interface->dataplane->counters();
        auto stats = interface->dataplane->stats();
        auto version = interface->dataplane->active_version();
        if (!counters) return as_internal(counters.error());
        if (!stats) return as_internal(stats.error());
        if (!version) return as_internal(version.error());
        const bool have_rates = interface->previous && interface->latest;
        const double dt =
            have_rates ? std::chrono::duration<double>(interface->latest->at - interface->previous->at).count() : 0.0;
        interval_s = std::max(interval_s, dt);
        auto rate = [&](uint32_t index, bool bytes) {
            if (!have_rates || dt <= 0) return 0.0;
            const sluice_counter& now = interface->latest->counters[index];
            const sluice_counter& then = interface->previous->counters[index];
            const uint64_t delta = bytes ? now.bytes - then.bytes : now.packets - then.packets;
            return static_cast<double>(delta) / dt;
        };

        json classes = json::array();
        for (uint32_t id = 0; id < SLUICE_MAX_CLASSES; id++) {
            json entry{{"id", id}};
            uint64_t packets[SLUICE_VERDICT_COUNT] = {}, bytes[SLUICE_VERDICT_COUNT] = {};
            double pps[SLUICE_VERDICT_COUNT] = {}, bps[SLUICE_VERDICT_COUNT] = {};
            json by_reason[SLUICE_VERDICT_COUNT] = {json::object(), json::object()};
            json drop_pps_by_reason = json::object();
            for (uint32_t verdict = 0; verdict < SLUICE_VERDICT_COUNT; verdict++) {
                for (uint32_t reason = 0; reason < SLUICE_REASON_COUNT; reason++) {
                    const uint32_t index = sluice_counter_index(id, verdict, reason);
                    const sluice_counter& counter = counters.value()[index];
                    if (counter.packets == 0) continue;
                    packets[verdict] += counter.packets;
                    bytes[verdict] += counter.bytes;
                    by_reason[verdict][std::string(reason_label(reason))] = counter.packets;
                    pps[verdict] += rate(index, false);
                    bps[verdict] += rate(index, true);
                    if (verdict == SLUICE_VERDICT_DROP)
                        drop_pps_by_reason[std::string(reason_label(reason))] = rate(index, false);
                }
            }
            const auto named = names.find(id);
            if (named == names.end() && packets[SLUICE_VERDICT_PASS] == 0 && packets[SLUICE_VERDICT_DROP] == 0)
                continue;
            entry["name"] = named != names.end() ? named->second : "class " + std::to_string(id) + " (removed)";
            entry["pass_packets"] = packets[SLUICE_VERDICT_PASS];
            entry["pass_bytes"] = bytes[SLUICE_VERDICT_PASS];
            entry["drop_packets"] = packets[SLUICE_VERDICT_DROP];
            entry["drop_bytes"] = bytes[SLUICE_VERDICT_DROP];
            entry["pass_pps"] = pps[SLUICE_VERDICT_PASS];
            entry["drop_pps"] = pps[SLUICE_VERDICT_DROP];
            entry["pass_bps"] = bps[SLUICE_VERDICT_PASS];
            entry["drop_bps"] = bps[SLUICE_VERDICT_DROP];
            entry["passes_by_reason"] = std::move(by_reason[SLUICE_VERDICT_PASS]);
            entry["drops_by_reason"] = std::move(by_reason[SLUICE_VERDICT_DROP]);
            entry["drop_pps_by_reason"] = std::move(drop_pps_by_reason);
            classes.push_back(std::move(entry));
        }
        json health = json::object();
        for (uint32_t stat = 0; stat < SLUICE_STAT_COUNT; stat++)
            health[std::string(stat_label(stat))] = stats.value()[stat];
        double decision_ns = 0, decisions_per_second = 0;
        if (have_rates && dt > 0) {
            const uint64_t runs = interface->latest->cost.decisions - interface->previous->cost.decisions;
            const uint64_t spent = interface->latest->cost.time_ns - interface->previous->cost.time_ns;
            decisions_per_second = static_cast<double>(runs) / dt;
            if (runs > 0) decision_ns = static_cast<double>(spent) / static_cast<double>(runs);
        }
        const bool cost_enabled = interface->dataplane->decision_cost_enabled();
        interfaces.push_back({{"name", name},
                              {"kind", interface->dataplane->kind()},
                              {"active_version", version.value()},
                              {"decision_cost_enabled", cost_enabled},
                              {"bpf_stats_enabled", cost_enabled},  // its name before DPDK; kept for clients
                              {"decision_ns", decision_ns},
                              {"decisions_per_second", decisions_per_second},
                              {"classes", std::move(classes)},
                              {"sources", sources_json(interface->sources)},
                              {"stats", std::move(health)}});
    }
    return json{{"interval_s", interval_s}, {"interfaces", std::move(interfaces)}};
}

Result<json> Daemon::top_json(const json& args) {
    auto wanted = uint_arg(args, "n");
    if (!wanted) return wanted.error();
    const size_t n = wanted.value() ? static_cast<size_t>(*wanted.value()) : kDefaultTopSources;
    if (n == 0 || n > kMaxTopSources)
        return control_error(ErrorCode::bad_request, "argument \"n\" must be in 1.." + std::to_string(kMaxTopSources),
                             "n");
    const auto names = class_names();
    const double now = monotonic_s();
    double total_rate = 0, total_decayed = 0;
    std::vector<std::pair<double, json>> ranked;  // by decayed drops, as each interface ranks
    for (const auto& [name, interface] : interfaces_) {
        total_rate += interface->hot_sources.total_drops_per_second(now);
        total_decayed += interface->hot_sources.decayed_drops_total(now);
        for (const HotSource& source : interface->hot_sources.top(n, now)) {
            ranked.emplace_back(source.decayed_drops, json{{"interface", name},
                                                           {"source", source_address(source.key)},
                                                           {"class", class_label(names, source.key.class_id)},
                                                           {"class_id", source.key.class_id},
                                                           {"drops_per_second", source.drops_per_second},
                                                           {"error_per_second", source.error_per_second}});
        }
    }
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    json sources = json::array();
    for (auto& [decayed, entry] : ranked) {
        if (sources.size() == n) break;
        // The share of all (decayed) drops on every interface, not only the entry's own.
        entry["share"] = total_decayed > 0 ? decayed / total_decayed : 0.0;
        sources.push_back(std::move(entry));
    }
    return json{{"total_drops_per_second", total_rate},
                {"tau_s", HotSources::kDefaultTauSeconds},
                {"sources", std::move(sources)}};
}

void Daemon::serve(Verb verb, Handler handler) {
    const VerbSpec& spec = spec_of(verb);
    served_[static_cast<size_t>(verb)] = true;
    if (!spec.changes_state) {
        server_.handle(std::string(spec.wire), std::move(handler));
        return;
    }
    // Who changed what the daemon enforces, in the log, whatever the outcome.
    server_.handle(std::string(spec.wire),
                   [this, &spec, handler = std::move(handler)](const json& args, const Peer& peer) {
                       json shown = args;
                       if (shown.is_object()) shown.erase("text");  // a policy's text is in the version store
                       log(LogLevel::info, std::string(spec.wire) + " requested",
                           {{"peer_uid", std::to_string(peer.uid)},
                            {"peer_pid", std::to_string(peer.pid)},
                            {"args", shown.dump(-1, ' ', false, json::error_handler_t::replace)}});
                       return handler(args, peer);
                   });
}

Status Daemon::register_handlers() {
    serve(Verb::top, [this](const json& args, const Peer&) { return top_json(args); });
    serve(Verb::status, [this](const json&, const Peer&) { return status_json(); });
    serve(Verb::stats, [this](const json&, const Peer&) { return stats_json(); });

    serve(Verb::attach, [this](const json& args, const Peer&) -> Result<json> {
        if (fixed_ports_) return fixed_ports_error("attach");
        auto name = string_arg(args, "interface");
        auto mode_name = string_arg(args, "mode", std::string("native"));
        if (!name) return name.error();
        if (!mode_name) return mode_name.error();
        auto mode = parse_xdp_mode(mode_name.value());
        if (!mode) return mode.error();
        if (auto status = attach_interface(name.value(), mode.value()); !status) return status.error();
        const Interface& interface = *interfaces_.at(name.value());
        auto version = interface.dataplane->active_version();
        return json{{"interface", name.value()},
                    {"ifindex", interface.xdp->ifindex},
                    {"mode", xdp_mode_name(interface.xdp->mode)},
                    {"active_version", version ? version.value() : 0}};
    });

    serve(Verb::detach, [this](const json& args, const Peer&) -> Result<json> {
        if (fixed_ports_) return fixed_ports_error("detach");
        auto name = string_arg(args, "interface");
        if (!name) return name.error();
        if (auto status = detach_interface(name.value()); !status) return status.error();
        return json{{"interface", name.value()}};
    });

    serve(Verb::policy_push, [this](const json& args, const Peer& peer) -> Result<json> {
        auto text = string_arg(args, "text");
        auto path = string_arg(args, "path", std::string("<pushed policy>"));
        auto if_version = uint_arg(args, "if_version");
        auto dry_run = bool_arg(args, "dry_run");
        if (!text) return text.error();
        if (!path) return path.error();
        if (!if_version) return if_version.error();
        if (!dry_run) return dry_run.error();
        // The control loop is the only writer, so this check and the push
        // below cannot be separated by another push.
        if (if_version.value()) {
            const auto current = policy_->current();
            const uint64_t current_version = current ? current->version : 0;
            if (*if_version.value() != current_version) {
                if (!dry_run.value()) count_push(false);
                return control_error(ErrorCode::conflict,
                                     "the current policy version is " + std::to_string(current_version) + ", not " +
                                         std::to_string(*if_version.value()) +
                                         " (another push came first; review it and retry)",
                                     "if_version");
            }
        }
        auto pushed = policy_->push(text.value(), path.value(), if_version.value(), dry_run.value(),
                                    "push by uid " + std::to_string(peer.uid));
        if (!dry_run.value()) count_push(pushed.ok());
        if (!pushed) {
            log(LogLevel::warn, "policy push refused", {{"error", pushed.error().message}});
            return pushed.error();
        }
        if (pushed.value().applied)
            log(LogLevel::info, "policy pushed",
                {{"version", std::to_string(pushed.value().version.version)},
                 {"sha256", pushed.value().version.sha256}});
        return push_json(pushed.value());
    });

    serve(Verb::policy_rollback, [this](const json& args, const Peer&) -> Result<json> {
        auto to = uint_arg(args, "to");
        auto dry_run = bool_arg(args, "dry_run");
        if (!to) return to.error();
        if (!dry_run) return dry_run.error();
        auto pushed = policy_->rollback(to.value(), dry_run.value());
        if (!dry_run.value()) count_push(pushed.ok());
        if (!pushed) return pushed.error();
        if (pushed.value().applied)
            log(LogLevel::info, "policy rolled back",
                {{"version", std::to_string(pushed.value().version.version)},
                 {"origin", pushed.value().version.origin}});
        return push_json(pushed.value());
    });

    serve(Verb::policy_show, [this](const json& args, const Peer&) -> Result<json> {
        auto wanted = uint_arg(args, "version");
        if (!wanted) return wanted.error();
        PolicyVersion version;
        if (wanted.value()) {
            auto found = policy_->get(*wanted.value());
            if (!found) return found.error();
            version = std::move(found.value());
        } else {
            auto current = policy_->current();
            if (!current) return control_error(ErrorCode::invalid, "no policy has been pushed yet");
            version = std::move(*current);
        }
        json result = version_summary(version);
        result["canonical"] = version.canonical;
        result["source"] = version.source;
        result["classes"] = version.class_ids;
        return result;
    });

    serve(Verb::policy_history, [this](const json&, const Peer&) -> Result<json> {
        json versions = json::array();
        for (const PolicyVersion& version : policy_->history()) versions.push_back(version_summary(version));
        const auto current = policy_->current();
        return json{{"current", current ? json(current->version) : json(nullptr)}, {"versions", std::move(versions)}};
    });

    serve(Verb::policy_diff, [this](const json& args, const Peer&) -> Result<json> {
        auto from = uint_arg(args, "from");
        auto to = uint_arg(args, "to");
        if (!from) return from.error();
        if (!to) return to.error();
        if (!from.value() || !to.value())
            return control_error(ErrorCode::bad_request, "policy.diff needs \"from\" and \"to\" versions");
        auto a = policy_->get(*from.value());
        auto b = policy_->get(*to.value());
        if (!a) return a.error();
        if (!b) return b.error();
        return json{{"from", *from.value()}, {"to", *to.value()}, {"diff", diff_policies(a.value(), b.value())}};
    });
    for (const VerbSpec& spec : kVerbs)
        if (!served_[static_cast<size_t>(spec.verb)])
            return Error{
                "internal: sluiced has no handler for the verb " + std::string(spec.wire), {}, ErrorCode::internal};
    return ok_status();
}

}  // namespace sluice
