// SPDX-License-Identifier: Apache-2.0
#include "daemon.h"

#include <grp.h>
#include <signal.h>
#include <sys/socket.h>
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
constexpr std::string_view kUnclassified = "unclassified";

double monotonic_s() { return static_cast<double>(monotonic_ns()) / 1e9; }

Result<std::string> read_text_file(const std::string& path) {
    std::ifstream file(path);
    if (!file) return Error{errno_message("cannot read " + path, errno)};
    std::ostringstream text;
    text << file.rdbuf();
    if (file.bad()) return Error{errno_message("cannot read " + path, errno)};
    return text.str();
}

fleet::FleetLeaserOptions fleet_options(const FleetConfig& config) {
    fleet::FleetLeaserOptions options;
    options.redis.servers = config.servers;
    options.redis.connect_timeout = options.redis.command_timeout = std::chrono::milliseconds(config.timeout_ms);
    options.redis.username = config.username;
    options.redis.password = config.password;
    options.key_namespace = config.key_namespace;
    options.lease_period = std::chrono::milliseconds(config.lease_period_ms);
    options.unavailable_after = std::chrono::milliseconds(config.unavailable_after_ms);
    options.idle_hold = std::chrono::milliseconds(config.idle_hold_ms);
    options.log = [](const std::string& line) { log(LogLevel::warn, line); };
    return options;
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

Daemon::Daemon(DaemonConfig config, std::unique_ptr<InterfaceHost> host, std::unique_ptr<PolicyService> policy,
               ControlServer server, BanStore bans)
    : config_(std::move(config)),
      host_(std::move(host)),
      policy_(std::move(policy)),
      server_(std::move(server)),
      bans_(std::move(bans)) {
    started_unix_s_ = static_cast<int64_t>(std::time(nullptr));
}

Daemon::~Daemon() {
    // PolicyService points at the dataplanes: let go of them first.
    for (const auto& [name, interface] : interfaces_) (void)policy_->remove_target(name);
}

Result<std::unique_ptr<Daemon>> Daemon::start(DaemonConfig config, std::unique_ptr<InterfaceHost> host) {
    set_log_level(config.log_level);
    auto created = create(std::move(config), std::move(host));
    if (!created) return created.error();
    std::unique_ptr<Daemon> daemon = std::move(created.value());
    if (auto status = daemon->serve_metrics(); !status) return status.error();
    if (auto status = daemon->adopt_interfaces(); !status) return status.error();
    daemon->bring_to_current_policy();
    // Only now, after the policy file was read: it may give the adopted
    // interfaces (sluice-dpdk's ports among them) their first policy.
    for (const auto& [name, interface] : daemon->interfaces_) daemon->log_if_no_policy(name);
    if (auto status = daemon->attach_configured_interfaces(); !status) return status.error();
    if (auto status = daemon->start_request_service(); !status) return status.error();
    daemon->announce_ready();
    return daemon;
}

Result<std::unique_ptr<Daemon>> Daemon::start_fixed(DaemonConfig config, std::vector<FixedPort> ports, uint32_t cpus) {
    if (!config.interfaces.empty())
        return Error{"sluice-dpdk takes its ports on the command line, not from [[interface]] tables in the config",
                     "interface"};
    if (cpus == 0) return Error{"sluice-dpdk needs at least one worker to compile the policy for"};
    return start(std::move(config), std::make_unique<FixedPortHost>(std::move(ports), cpus));
}

Result<std::unique_ptr<Daemon>> Daemon::create(DaemonConfig config, std::unique_ptr<InterfaceHost> host) {
    std::error_code error;
    std::filesystem::create_directories(config.state_dir, error);
    if (error) return Error{"cannot create state_dir " + config.state_dir + ": " + error.message()};
    auto store = VersionStore::open(config.state_dir);
    if (!store) return store.error();
    for (const std::string& warning : store.value().warnings()) log(LogLevel::warn, warning);
    // Before anything is adopted: a damaged bans.json stops the start rather
    // than let the bans in it lapse unnoticed.
    auto bans = BanStore::open(config.state_dir, config.max_bans, unix_now_ns());
    if (!bans) return bans.error();
    if (!bans.value().bans().empty())
        log(LogLevel::info, "bans in force",
            {{"count", std::to_string(bans.value().bans().size())}, {"file", bans.value().path()}});

    ControlServerOptions server_options;
    server_options.socket_path = config.socket;
    server_options.max_attachment_bytes = config.max_push_bytes;
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

    const PolicyLoadOptions load_options{.cpus = host->cpus(),
                                         .fleet_leasing = !config.fleet.servers.empty(),
                                         .prefix_capacity = config.prefix_capacity};
    auto policy = std::make_unique<PolicyService>(std::move(store.value()), load_options);
    std::unique_ptr<Daemon> daemon(new Daemon(std::move(config), std::move(host), std::move(policy),
                                              std::move(server.value()), std::move(bans.value())));
    if (Status served = daemon->register_handlers(); !served) return served.error();
    if (!daemon->config_.fleet.servers.empty())
        daemon->fleet_ = std::make_unique<fleet::FleetLeaser>(fleet_options(daemon->config_.fleet));
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
    sync_fleet_quotas();
    if (fleet_) fleet_->start();
    sample_counters();
    publish_metrics();
    const auto current = policy_->current();
    log(LogLevel::info, "ready",
        {{"socket", config_.socket},
         {"interfaces", std::to_string(interfaces_.size())},
         {"policy_version", current ? std::to_string(current->version) : "none"}});
    notify_systemd("READY=1\nSTATUS=enforcing");
}

Status Daemon::adopt_interfaces() {
    auto adopted = host_->adopt();
    if (!adopted) return adopted.error();
    for (std::unique_ptr<HostedInterface>& hosted : adopted.value()) {
        const std::string name = hosted->name();
        auto interface = std::make_unique<Interface>();
        interface->hosted = std::move(hosted);
        if (auto status = policy_->add_target(name, &interface->dataplane()); !status) return status;
        lease_for(name, interface->dataplane());
        // A failure is logged and tried again every second: the interface
        // enforces its policy (and the bans it was left with) meanwhile.
        (void)take_on_bans(name, *interface);
        interfaces_[name] = std::move(interface);
    }
    return ok_status();
}

Status Daemon::attach_configured_interfaces() {
    for (const InterfaceConfig& wanted : config_.interfaces) {
        const auto found = interfaces_.find(wanted.name);
        if (found == interfaces_.end()) {
            if (auto status = attach_interface(wanted.name, wanted.mode); !status) return status;
            continue;
        }
        const auto placement = found->second->hosted->xdp();
        if (placement && placement->mode != wanted.mode)
            log(LogLevel::warn, "interface stays in the mode it was attached in; detach and attach to change it",
                {{"interface", wanted.name},
                 {"mode", std::string(xdp_mode_name(placement->mode))},
                 {"configured", std::string(xdp_mode_name(wanted.mode))}});
    }
    return ok_status();
}

Status Daemon::attach_interface(const std::string& name, XdpMode mode) {
    if (interfaces_.count(name)) return Error{"interface " + name + " is already attached"};
    auto hosted = host_->open(name, mode);
    if (!hosted) return hosted.error();
    auto interface = std::make_unique<Interface>();
    interface->hosted = std::move(hosted.value());

    // Policy first, link second: the interface never runs without the current
    // version. An interface that does not go live removes what opening it made.
    auto undo = [&](Error error) -> Status {
        (void)policy_->remove_target(name);
        return error;
    };
    if (auto status = policy_->add_target(name, &interface->dataplane()); !status) return undo(status.error());
    if (auto status = policy_->reconcile(); !status) return undo(status.error());
    if (auto status = take_on_bans(name, *interface); !status) return undo(status.error());
    // Credit before the link: a fleet class admits nothing until leased.
    lease_for(name, interface->dataplane());
    if (auto status = interface->hosted->go_live(); !status) {
        stop_leasing_for(interface->dataplane());
        return undo(status.error());
    }
    interfaces_[name] = std::move(interface);
    log_if_no_policy(name);
    return ok_status();
}

void Daemon::log_if_no_policy(const std::string& name) {
    if (policy_->current()) return;
    log(LogLevel::warn, "no policy yet: the interface passes every packet (counted as no_policy) until one is pushed",
        {{"interface", name}});
}

Status Daemon::detach_interface(const std::string& name) {
    const auto found = interfaces_.find(name);
    if (found == interfaces_.end()) return Error{"interface " + name + " is not attached", "interface"};
    keep_ban_drops(found->second.get());  // its counters go with it
    if (auto status = found->second->hosted->go_offline(); !status) return status;
    (void)policy_->remove_target(name);
    stop_leasing_for(found->second->dataplane());
    std::unique_ptr<HostedInterface> offline = std::move(found->second->hosted);
    interfaces_.erase(found);
    if (auto status = offline->discard(); !status) return status;
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
    // The lists its match_files name, read from disk now: a version keeps its own copies.
    auto texts = read_match_files(text.value(), config_.policy_file);
    Result<PrefixLists> lists = texts ? parse_prefix_lists(texts.value()) : Result<PrefixLists>(texts.error());
    if (!lists) {
        count_push(false);
        log(LogLevel::error, "policy file refused; the running policy stays", {{"error", lists.error().message}});
        return;
    }
    auto changed = policy_->reload_if_changed(text.value(), config_.policy_file, std::move(lists.value()));
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

void Daemon::sync_fleet_quotas() {
    if (!fleet_) return;
    auto [version, quotas] = policy_->fleet_quotas();
    if (version == fleet_version_) return;
    fleet_->set_quotas(version, std::move(quotas));
    fleet_version_ = version;
}

Status Daemon::start_request_service() {
    const RequestConfig& config = config_.request;
    if (!config.enabled) return ok_status();
    request::LimiterOptions limiter_options;
    limiter_options.max_counters = config.max_counters;
    limiter_options.log = [](const std::string& line) { log(LogLevel::info, line); };
    request_limiter_ = std::make_unique<request::RequestLimiter>(std::move(limiter_options));
    request::GateOptions gate_options;
    gate_options.max_in_flight = config.max_in_flight;
    gate_options.domain_rate_per_s = config.domain_rate;
    gate_options.domain_burst = config.domain_burst;
    gate_options.deadline = std::chrono::milliseconds(config.deadline_ms);
    request_gate_ = std::make_unique<request::RequestGate>(*request_limiter_, gate_options);
    if (!config_.fleet.servers.empty()) {
        request_fleet_ = std::make_unique<fleet::FleetLeaser>(fleet_options(config_.fleet));
        request_fleet_->attach("requests", request_limiter_->fleet_credits());
    }
    sync_request_policy();
    if (request_fleet_) request_fleet_->start();
    if (!config.http_address.empty()) {
        request::HttpServiceOptions options;
        options.address = config.http_address;
        options.trusted_proxies = config.trusted_proxies;
        options.client_address_header = config.client_address_header;
        options.identity_key_file = config.identity_key_file;
        options.threads = static_cast<int>(config.http_threads);
        auto http = request::HttpService::start(*request_gate_, options);
        if (!http) return Error{"request.http_address: " + http.error().message, "request.http_address"};
        request_http_ = std::move(http.value());
        log(LogLevel::info, "serving request decisions for nginx auth_request",
            {{"address", config.http_address}, {"port", std::to_string(request_http_->port())}});
    }
    if (!config.grpc_address.empty()) {
        const request::EnvoyServiceOptions options{
            .address = config.grpc_address, .max_message_bytes = static_cast<int>(config.grpc_max_message_bytes)};
        request_envoy_ = std::make_unique<request::EnvoyService>(*request_gate_, options);
        if (auto started = request_envoy_->start(); !started)
            return Error{"request.grpc_address: " + started.error().message, "request.grpc_address"};
        log(LogLevel::info, "serving Envoy's rate limit service",
            {{"address", config.grpc_address}, {"port", std::to_string(request_envoy_->port())}});
    }
    return ok_status();
}

void Daemon::sync_request_policy() {
    if (!request_limiter_) return;
    PolicyService::RequestPolicy current = policy_->request_policy();
    if (current.version == request_version_) return;
    request_limiter_->apply(current.version, current.classes, current.domains);
    if (request_fleet_) {
        std::vector<FleetQuota> quotas;
        for (const RequestClass& cls : current.classes) {
            if (!cls.fleet) continue;
            FleetQuota quota;
            quota.class_id = cls.id;
            // Its own Redis keys: "request.<domain>.<class>", never a packet class's.
            quota.class_name = "request." + cls.domain + "." + cls.name;
            quota.rate_per_s = cls.fleet->rate_per_s;
            quota.burst = cls.fleet->burst;
            quota.unit = SLUICE_UNIT_PACKETS;
            quota.fail_open = cls.fleet->fail_open;
            quota.fallback_rate_per_s = cls.fleet->fallback_rate_per_s;
            quota.definition_hash = cls.fleet->definition_hash;
            quotas.push_back(std::move(quota));
        }
        request_fleet_->set_quotas(current.version, std::move(quotas));
    }
    request_version_ = current.version;
}

void Daemon::settle_dataplanes() {
    for (const auto& [name, interface] : interfaces_)
        if (auto settled = interface->dataplane().settle(); !settled)
            log(LogLevel::warn, "cannot prepare the standby policy slot; the next push writes every prefix",
                {{"interface", name}, {"error", settled.error().message}});
}

void Daemon::sync_pushed_version() {
    sync_fleet_quotas();
    sync_request_policy();
}

void Daemon::lease_for(const std::string& name, EnforcementPoint& dataplane) {
    if (!fleet_) return;
    sync_fleet_quotas();
    fleet_->attach(name, dataplane.fleet_credits());
}

void Daemon::stop_leasing_for(EnforcementPoint& dataplane) {
    if (fleet_) fleet_->detach(dataplane.fleet_credits());
}

void Daemon::sample_counters() {
    for (auto& [name, interface] : interfaces_) {
        CounterSample sample;
        sample.at = Clock::now();
        auto counters = interface->dataplane().counters();
        auto stats = interface->dataplane().stats();
        if (!counters || !stats) {
            log(LogLevel::warn, "cannot read counters",
                {{"interface", name}, {"error", (!counters ? counters.error() : stats.error()).message}});
            continue;
        }
        sample.counters = std::move(counters.value());
        sample.stats = stats.value();
        sample.cost = interface->dataplane().decision_cost();
        interface->previous = std::move(interface->latest);
        interface->latest = std::move(sample);
    }
}

void Daemon::check_interfaces() {
    for (auto& [name, interface] : interfaces_) {
        std::optional<InterfaceHealth> now = interface->hosted->health();
        if (!now) continue;
        const InterfaceHealth before = interface->health.value_or(InterfaceHealth{});
        if (before.interface_present && !now->interface_present) {
            log(LogLevel::error, "interface deleted behind sluiced's back: its program no longer runs there",
                {{"interface", name}, {"hint", "sluicectl detach " + name}});
        } else if (!before.interface_present && now->interface_present) {
            log(LogLevel::info, "interface present again", {{"interface", name}});
        }
        if (before.missing_pins.empty() && !now->missing_pins.empty()) {
            log(LogLevel::error,
                "pins removed behind sluiced's back: the program enforces while sluiced runs, but comes off if it "
                "stops",
                {{"interface", name},
                 {"missing", now->missing_pins.front()},
                 {"missing_count", std::to_string(now->missing_pins.size())},
                 {"hint", "sluicectl detach " + name + " and attach it again to re-pin"}});
        } else if (!before.missing_pins.empty() && now->missing_pins.empty()) {
            log(LogLevel::info, "pins present again", {{"interface", name}});
        }
        interface->health = std::move(now);
    }
}

void Daemon::count_sources() {
    for (auto& [name, interface] : interfaces_) {
        auto usage = interface->dataplane().source_table();
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
    // How long the current version's penalties last, read once per drain
    // and only when a penalty started.
    std::optional<std::map<uint32_t, uint64_t>> penalty_for_ns;
    for (auto& [name, interface] : interfaces_) {
        HotSources& hot = interface->hot_sources;
        PenaltiesInForce& penalties = interface->penalties;
        // Penalty ends are on the dataplane's clock, the one its events carry.
        const uint64_t dataplane_now = interface->dataplane().now_ns();
        penalties.expire(dataplane_now);
        const uint64_t untracked_before = penalties.untracked();
        auto drained = interface->dataplane().drain_events([&](const sluice_drop_event& event) {
            if (event.flags & SLUICE_EVENT_PENALTY_STARTED) {
                if (!penalty_for_ns) penalty_for_ns = policy_->penalty_durations();
                const auto found = penalty_for_ns->find(event.source.class_id);
                penalties.start(event.source, event.time_ns, found != penalty_for_ns->end() ? found->second : 0,
                                dataplane_now);
            }
            // A penalty's event weighs 0: the drop it reports is in a sampled event's weight.
            if (event.weight > 0) hot.add(event.source, static_cast<double>(event.weight), now, event.verdict);
        });
        if (!drained)
            log(LogLevel::warn, "cannot read drop events", {{"interface", name}, {"error", drained.error().message}});
        // Once per interface: a flood of penalties would otherwise flood the log.
        if (untracked_before == 0 && penalties.untracked() > 0)
            log(LogLevel::warn,
                "a penalty is not tracked: too many in force, or its class no longer has one; the dataplane "
                "enforces it all the same",
                {{"interface", name},
                 {"capacity", std::to_string(penalties.capacity())},
                 {"hint", "sluice_penalties_untracked_total counts them"}});
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
    snapshot.decision_cost_enabled = host_->decision_cost_enabled();
    snapshot.requests = server_.counts();
    snapshot.class_names = class_names();
    snapshot.shadow_classes = policy_->shadow_classes();
    for (const auto& [class_id, for_ns] : policy_->penalty_durations()) snapshot.penalty_classes.insert(class_id);
    snapshot.bans_active = bans_.active(unix_now_ns());
    snapshot.max_bans = bans_.max_bans();
    snapshot.bans_refused_cap = bans_.refused_at_cap();
    snapshot.bans_refused_protected = bans_.refused_protected();
    const double now = monotonic_s();
    for (const auto& [name, interface] : interfaces_) {
        if (!interface->latest) continue;
        InterfaceSnapshot entry;
        entry.name = name;
        entry.kind = interface->dataplane().kind();
        const CounterSample& sample = *interface->latest;
        entry.counters = sample.counters;
        entry.stats = sample.stats;
        entry.decision_cost = sample.cost;
        entry.syscall_errors = interface->hosted->syscall_errors();
        entry.window_restarts = interface->dataplane().window_restarts();
        if (auto version = interface->dataplane().active_version()) entry.active_version = version.value();
        entry.sources = interface->sources;
        entry.hot_sources = interface->hot_sources.top(kHotSourcesExported, now);
        entry.penalties_active = interface->penalties.active_by_class(interface->dataplane().now_ns());
        entry.penalties_untracked = interface->penalties.untracked();
        snapshot.interfaces.push_back(std::move(entry));
    }
    for (const fleet::FleetLeaser* leaser : {fleet_.get(), request_fleet_.get()}) {
        if (!leaser) continue;
        for (const fleet::FleetClassStatus& account : leaser->status()) {
            FleetAccountSnapshot entry;
            entry.interface = account.dataplane;
            entry.class_id = account.class_id;
            if (leaser == request_fleet_.get()) entry.class_name = account.class_name;
            entry.fallback = account.state == fleet::LeaseState::fallback;
            entry.credit = account.credit_available;
            entry.redis_granted = account.redis_granted_total;
            entry.fallback_granted = account.fallback_granted_total;
            entry.exchanges = account.exchanges;
            entry.failures = account.failures;
            entry.fallbacks = account.fallbacks;
            snapshot.fleet.push_back(std::move(entry));
        }
    }
    if (request_gate_) {
        snapshot.request = request_gate_->stats();
        snapshot.request_hot_keys = request_gate_->hot_keys(kHotSourcesExported);
    }
    metrics_->publish(build_metric_families(snapshot));
}

int Daemon::metrics_port() const { return metrics_ ? metrics_->port() : 0; }

Status Daemon::run(DaemonSignals& signals) {
    while (!signals.stop.load()) {
        // Wake at least every 250 ms (bans end), and when the next sample is
        // due rather than at the first wake after it: figures a second old
        // at most, not 1.25 s.
        const auto sample_in =
            std::chrono::ceil<std::chrono::milliseconds>(last_sample_ + kSampleInterval - Clock::now()).count();
        const int timeout = static_cast<int>(std::clamp<long long>(sample_in, 0, kPollTimeoutMs));
        if (auto status = server_.run_once(timeout); !status) return status;
        if (signals.reload.exchange(false)) {
            log(LogLevel::info, "SIGHUP: reloading the policy file");
            reload_policy_file();
        }
        settle_dataplanes();  // after the replies of a push, rollback or reload are out
        sync_fleet_quotas();  // right after a push, rollback or reload changed the version
        sync_request_policy();
        drain_drop_events();
        expire_bans();
        const auto now = Clock::now();
        if (now - last_sample_ >= kSampleInterval) {
            check_interfaces();
            sample_counters();
            publish_metrics();
            // On a one-second grid: a late sample does not push the next
            // one later (unless it is a whole interval late).
            last_sample_ = now - last_sample_ < 2 * kSampleInterval ? last_sample_ + kSampleInterval : now;
        }
        if (now - last_count_ >= kCountInterval) {
            count_sources();
            if (request_limiter_) request_limiter_->sweep();  // counters back to nothing admitted
            last_count_ = now;
        }
    }
    notify_systemd("STOPPING=1");
    keep_ban_drops();
    if (!host_->can_attach()) {
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

}  // namespace sluice
