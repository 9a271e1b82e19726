// SPDX-License-Identifier: Apache-2.0
#include "http_service.h"

#include <httplib.h>
#include <openssl/rand.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "http_fields.h"
#include "identity.h"

namespace sluice::request {
namespace {

// httplib's ThreadPool queues without bound; this one holds at most
// `max_queued` connections and makes the acceptor wait beyond that.
class BoundedPool : public httplib::TaskQueue {
  public:
    BoundedPool(size_t threads, size_t max_queued) : max_queued_(max_queued) {
        for (size_t i = 0; i < threads; i++) threads_.emplace_back([this] { work(); });
    }
    ~BoundedPool() override = default;

    void enqueue(std::function<void()> fn) override {
        std::unique_lock lock(mutex_);
        room_.wait(lock, [&] { return jobs_.size() < max_queued_ || shutdown_; });
        jobs_.push_back(std::move(fn));
        ready_.notify_one();
    }

    void shutdown() override {
        {
            std::lock_guard lock(mutex_);
            shutdown_ = true;
        }
        ready_.notify_all();
        room_.notify_all();
        for (auto& t : threads_) t.join();
    }

  private:
    void work() {
        for (;;) {
            std::function<void()> fn;
            {
                std::unique_lock lock(mutex_);
                ready_.wait(lock, [&] { return !jobs_.empty() || shutdown_; });
                if (jobs_.empty()) return;  // shut down and drained
                fn = std::move(jobs_.front());
                jobs_.pop_front();
                room_.notify_one();
            }
            fn();
        }
    }

    const size_t max_queued_;
    std::mutex mutex_;
    std::condition_variable ready_, room_;
    std::deque<std::function<void()>> jobs_;
    bool shutdown_ = false;
    std::vector<std::thread> threads_;
};

// Every line of `name`, joined with ','; nullopt when there is none.
std::optional<std::string> header(const httplib::Request& req, const std::string& name) {
    const size_t n = req.get_header_value_count(name);
    if (n == 0) return std::nullopt;
    std::string joined;
    for (size_t i = 0; i < n; i++) {
        if (i) joined += ',';
        joined += req.get_header_value(name, i);
    }
    return joined;
}

// A positive decimal integer that fits 64 bits.
std::optional<uint64_t> parse_weight(std::string_view text) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
    if (text.empty() || text.size() > 19) return std::nullopt;
    uint64_t v = 0;
    for (const char c : text) {
        if (c < '0' || c > '9') return std::nullopt;
        v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    if (v == 0) return std::nullopt;
    return v;
}

// httplib 0.11 listens with a backlog of 5: a burst of nginx subrequests (a
// new connection each, without upstream keepalive) overflows it, and a
// dropped SYN is retried after a second, past a short proxy_connect_timeout.
// listen() again on the bound socket raises the backlog (Linux).
class Server : public httplib::Server {
  public:
    bool raise_backlog(int backlog) { return ::listen(svr_sock_, backlog) == 0; }
};
constexpr int kListenBacklog = 1024;

struct HostPort {
    std::string host;
    int port = 0;
};

Result<HostPort> parse_address(const std::string& address) {
    const auto bad = [&](const std::string& why) { return Error{"address \"" + address + "\": " + why, "address"}; };
    const auto colon = address.rfind(':');
    if (colon == std::string::npos) return bad("expected host:port");
    HostPort hp;
    hp.host = address.substr(0, colon);
    if (hp.host.size() >= 2 && hp.host.front() == '[' && hp.host.back() == ']')
        hp.host = hp.host.substr(1, hp.host.size() - 2);
    else if (hp.host.find(':') != std::string::npos)
        return bad("an IPv6 host goes in brackets, [::1]:9466");
    if (hp.host.empty()) return bad("no host");
    const std::string port = address.substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
        std::stoul(port) > 65535)
        return bad("port must be 0..65535");
    hp.port = static_cast<int>(std::stoul(port));
    return hp;
}

}  // namespace

struct HttpService::Impl {
    RequestGate& gate;
    HttpServiceOptions options;
    TrustedProxies proxies;
    ForwardedKind forwarded_kind = ForwardedKind::x_forwarded_for;
    IdentityKey key;
    Server server;
    std::thread listener;
    int port = 0;
    std::once_flag stopped;

    Impl(RequestGate& g, HttpServiceOptions o, TrustedProxies p, ForwardedKind k, IdentityKey identity_key)
        : gate(g), options(std::move(o)), proxies(std::move(p)), forwarded_kind(k), key(std::move(identity_key)) {}

    void decide(const httplib::Request& req, httplib::Response& res) {
        const std::string name = req.matches[1];
        auto& limiter = gate.limiter();
        const auto domain = limiter.domain(name);
        if (!domain) {
            res.status = 404;
            res.set_content("unknown domain \"" + name + "\": policy version " + std::to_string(limiter.version()) +
                                " has no request domain of that name\n",
                            "text/plain");
            return;
        }

        std::map<std::string, std::string> entries;
        for (const auto& [key_name, header_name] : domain->headers) {
            const bool is_signed = std::find(domain->signed_keys.begin(), domain->signed_keys.end(), key_name) !=
                                   domain->signed_keys.end();
            const auto value = header(req, header_name);
            if (!is_signed) {
                if (value) entries[key_name] = *value;
                continue;
            }
            if (!value) {
                entries[key_name] = domain->anonymous;
                continue;
            }
            // Several lines of a signed header are not one signed value.
            const auto outcome = req.get_header_value_count(header_name) > 1
                                     ? IdentityOutcome{IdentityFailure::malformed}
                                     : verify_identity(key, *value);
            if (const auto* failure = std::get_if<IdentityFailure>(&outcome)) {
                gate.count_identity_failure(name, *failure);
                entries[key_name] = domain->anonymous;
            } else {
                entries[key_name] = std::get<std::string>(outcome);
            }
        }
        entries["remote_address"] = proxies.client_address(
            req.remote_addr, header(req, options.client_address_header).value_or(""), forwarded_kind);

        Query query;
        query.domain = name;
        query.descriptors = limiter.descriptors_for(name, entries);
        if (!domain->cost_header.empty()) {
            if (const auto text = header(req, domain->cost_header)) {
                const auto weight = parse_weight(*text);
                if (!weight) {
                    res.status = 400;
                    res.set_content(
                        "header " + domain->cost_header + ": \"" + *text + "\" is not a positive decimal integer\n",
                        "text/plain");
                    return;
                }
                query.hits = *weight;
            }
        }

        auto answer = gate.decide(Door::http, query);
        if (!answer) {
            const bool invalid = answer.error().code == ErrorCode::invalid;
            res.status = invalid ? 400 : 503;
            res.set_content(answer.error().message + "\n", "text/plain");
            return;
        }
        const Answer& a = answer.value();
        const bool allowed = a.overall == Code::ok;
        res.status = allowed ? 200 : 403;
        res.set_header("X-Sluice-Decision", !allowed ? "refuse" : a.shadowed ? "shadow" : "allow");
        for (const auto& field : rate_limit_fields(a)) res.set_header(field.name, field.value);
    }
};

HttpService::HttpService(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpService::~HttpService() { stop(); }

int HttpService::port() const { return impl_->port; }

void HttpService::stop() {
    std::call_once(impl_->stopped, [&] {
        impl_->server.stop();
        if (impl_->listener.joinable()) impl_->listener.join();
    });
}

Result<std::unique_ptr<HttpService>> HttpService::start(RequestGate& gate, HttpServiceOptions options) {
    auto address = parse_address(options.address);
    if (!address) return address.error();
    if (options.threads < 1 || options.threads > 1024) return Error{"threads must be 1..1024", "threads"};
    if (options.max_queued < 1) return Error{"max_queued must be at least 1", "max_queued"};
    auto proxies = TrustedProxies::parse(options.trusted_proxies);
    if (!proxies) return proxies.error();
    auto kind = parse_forwarded_kind(options.client_address_header);
    if (!kind) return kind.error();

    // Without a key file no signed value can verify: a key nobody has, so
    // every signed key reads as anonymous, its failures still told apart.
    std::string key_bytes;
    if (options.identity_key_file.empty()) {
        key_bytes.resize(IdentityKey::min_bytes);
        if (RAND_bytes(reinterpret_cast<unsigned char*>(key_bytes.data()), static_cast<int>(key_bytes.size())) != 1)
            return Error{"no random bytes for the placeholder identity key", "", ErrorCode::internal};
    }
    auto key = options.identity_key_file.empty() ? IdentityKey::from_bytes(std::move(key_bytes))
                                                 : IdentityKey::load(options.identity_key_file);
    if (!key) return key.error();

    auto impl = std::make_unique<Impl>(gate, options, std::move(proxies.value()), kind.value(), std::move(key.value()));
    auto& server = impl->server;
    const auto threads = static_cast<size_t>(options.threads);
    const auto max_queued = static_cast<size_t>(options.max_queued);
    server.new_task_queue = [threads, max_queued] { return new BoundedPool(threads, max_queued); };
    server.set_keep_alive_max_count(100);
    server.set_keep_alive_timeout(2);
    server.set_read_timeout(2, 0);
    server.set_write_timeout(2, 0);
    server.set_payload_max_length(64 * 1024);
    Impl* self = impl.get();
    const auto handler = [self](const httplib::Request& req, httplib::Response& res) { self->decide(req, res); };
    server.Get(R"(/v1/decide/([^/]+))", handler);
    server.Post(R"(/v1/decide/([^/]+))", handler);
    server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        res.status = 500;
        res.set_content("internal error\n", "text/plain");
    });

    const auto& hp = address.value();
    if (hp.port == 0) {
        impl->port = server.bind_to_any_port(hp.host);
        if (impl->port < 0) return Error{"cannot bind " + options.address, "address"};
    } else {
        if (!server.bind_to_port(hp.host, hp.port)) return Error{"cannot bind " + options.address, "address"};
        impl->port = hp.port;
    }
    if (!server.raise_backlog(kListenBacklog))
        return Error{"listen on " + options.address + ": " + std::strerror(errno), "address"};
    // Bound and listening: connections wait in the backlog until the
    // listener accepts them.
    impl->listener = std::thread([self] { self->server.listen_after_bind(); });
    // httplib's stop() does nothing before the listener runs: wait for it.
    while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return std::unique_ptr<HttpService>(new HttpService(std::move(impl)));
}

}  // namespace sluice::request
