// SPDX-License-Identifier: Apache-2.0
#include "nginx_front.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "control_client.h"
#include "process.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

// The address the shipped snippet sends its subrequests to.
constexpr const char* kSnippetAddress = "127.0.0.1:9466";

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// Sends `sig` to `pid` (and its group with `group`), waits up to `timeout`,
// then SIGKILLs (the group too) and reaps.
void stop_process(pid_t& pid, int sig, bool group, std::chrono::milliseconds timeout) {
    if (pid <= 0) return;
    kill(pid, sig);
    if (wait_exit(pid, timeout) < 0 && group) kill(-pid, SIGKILL);
    // Workers of a master that is gone (the group outlives its leader).
    if (group) kill(-pid, SIGKILL);
    pid = -1;
}

}  // namespace

int free_loopback_port() {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    int port = -1;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
        port = ntohs(addr.sin_port);
    close(fd);
    return port;
}

bool loopback_listening(int port) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool connected = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    return connected;
}

NginxFront::NginxFront(NginxFrontOptions options) : options_(std::move(options)) {}

NginxFront::~NginxFront() {
    stop_nginx();
    stop_sluiced();
    if (!dir_.empty()) {
        std::error_code ignored;
        std::filesystem::remove_all(dir_, ignored);
        std::filesystem::remove_all(bpffs_dir(), ignored);
    }
}

std::string NginxFront::bpffs_dir() const { return "/sys/fs/bpf/" + std::filesystem::path(dir_).filename().string(); }

std::string NginxFront::make_dir() {
    std::string templ = options_.dir_prefix + "XXXXXX";
    if (mkdtemp(templ.data()) == nullptr) return errno_text("mkdtemp " + templ);
    dir_ = templ;
    // nginx's workers run as nobody: they may need to reach their temp dirs.
    chmod(dir_.c_str(), 0755);
    return {};
}

std::string NginxFront::sluiced_log() const { return read_file(dir_ + "/sluiced.log"); }
std::string NginxFront::nginx_log() const { return read_file(dir_ + "/nginx.err"); }

std::string NginxFront::start_sluiced() {
    if (dir_.empty()) return "make_dir() first";
    if (sluiced_pid_ > 0) return "sluiced is already running";
    metrics_port_ = free_loopback_port();
    if (metrics_port_ <= 0) return "no free port for metrics";
    const std::string config = "socket = \"" + socket_path() + "\"\n" +                            //
                               "state_dir = \"" + dir_ + "/state\"\n" +                            //
                               "bpffs_dir = \"" + bpffs_dir() + "\"\n" +                           //
                               "metrics_address = \"127.0.0.1:" + std::to_string(metrics_port_) +  //
                               "\"\nsource_capacity = 1024\n\n[request]\n" +                       //
                               "http_address = \"127.0.0.1:0\"\n" +                                //
                               "trusted_proxies = [\"127.0.0.1\"]\n" + options_.request_extra + "\n";
    write_file(dir_ + "/sluiced.toml", config);
    sluiced_pid_ =
        spawn({options_.sluiced, "--config", dir_ + "/sluiced.toml"}, SpawnOptions{.stdout_path = dir_ + "/sluiced.out",
                                                                                   .stderr_path = dir_ + "/sluiced.log",
                                                                                   .netns_path = {},
                                                                                   .append = true,
                                                                                   .own_group = false});
    if (sluiced_pid_ <= 0) return errno_text("fork");

    const auto deadline = std::chrono::steady_clock::now() + 10s;
    std::string last = "no attempt";
    while (std::chrono::steady_clock::now() < deadline) {
        int code = 0;
        if (exited(sluiced_pid_, &code)) {
            sluiced_pid_ = -1;
            return "sluiced exited with " + std::to_string(code) + "; its log:\n" + sluiced_log();
        }
        auto client = ControlClient::connect(socket_path(), 1000);
        if (client.ok()) {
            auto status = client.value().call("status");
            if (status.ok()) {
                const auto& requests = status.value().value("requests", nlohmann::json{});
                if (requests.is_object() && requests.value("http_port", nlohmann::json{}).is_number()) {
                    http_port_ = requests["http_port"].get<int>();
                    return {};
                }
                return "status has no requests.http_port: " + status.value().dump();
            }
            last = status.error().message;
        } else {
            last = client.error().message;
        }
        std::this_thread::sleep_for(50ms);
    }
    return "sluiced did not answer status within 10 s (last: " + last + "); its log:\n" + sluiced_log();
}

std::optional<std::string> NginxFront::ctl_json(const std::vector<std::string>& args, std::string* error) {
    std::vector<std::string> argv = {options_.sluicectl, "--socket", socket_path(), "--json"};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto result = run(argv, dir_ + "/ctl-" + std::to_string(ctl_runs_++), 30s);
    if (result.code != 0) {
        if (error) *error = join_argv(argv) + " exited " + std::to_string(result.code) + ": " + result.err + result.out;
        return std::nullopt;
    }
    return result.out;
}

std::string NginxFront::push_policy(const std::string& text) {
    const std::string path = dir_ + "/policy-" + std::to_string(ctl_runs_) + ".toml";
    write_file(path, text);
    std::string error;
    if (!ctl_json({"policy", "push", path}, &error)) return error;
    return {};
}

void NginxFront::stop_sluiced() { stop_process(sluiced_pid_, SIGTERM, false, 5s); }

std::string NginxFront::start_nginx(std::vector<NginxSite>& sites) {
    if (dir_.empty()) return "make_dir() first";
    if (nginx_pid_ > 0) return "nginx is already running";

    // The shipped snippet, its sluiced address made the door's.
    std::string snippet = read_file(options_.snippet);
    if (snippet.empty()) return "cannot read the snippet " + options_.snippet;
    const size_t at = snippet.find(kSnippetAddress);
    if (at == std::string::npos || snippet.find(kSnippetAddress, at + 1) != std::string::npos)
        return options_.snippet + " does not name " + kSnippetAddress + " exactly once: update the template";
    snippet.replace(at, std::strlen(kSnippetAddress), "127.0.0.1:" + std::to_string(http_port_));
    write_file(dir_ + "/nginx-sluice.conf", snippet);

    upstream_port_ = free_loopback_port();
    std::string servers;
    for (auto& site : sites) {
        site.port = free_loopback_port();
        if (site.port <= 0 || upstream_port_ <= 0) return "no free port";
        const std::string pass =
            "proxy_pass http://app;\n"
            "            proxy_http_version 1.1;\n"
            "            proxy_set_header Connection \"\";\n";
        servers += "    server {\n        listen 127.0.0.1:" + std::to_string(site.port) + ";\n";
        // One domain: set in the server, as the snippet's example does.
        // Several: set in each location and not in the server, whose `set`
        // would run again in the auth subrequest and win (the snippet says so).
        const auto set_domain = [](const std::string& domain) {
            return "set $sluice_domain \"" + domain + "\";\n            ";
        };
        if (site.limited) {
            if (site.locations.empty()) servers += "        set $sluice_domain \"" + site.domain + "\";\n";
            servers += "        include " + dir_ + "/nginx-sluice.conf;\n";
            for (const auto& location : site.locations)
                servers += "        location " + location.prefix + " {\n            " + set_domain(location.domain) +
                           pass + "        }\n";
        }
        const bool per_location = site.limited && !site.locations.empty();
        servers += "        location / {\n            " + (per_location ? set_domain(site.domain) : std::string()) +
                   pass + "        }\n    }\n";
    }
    const std::string d = dir_;
    const std::string keepalive = options_.upstream_keepalive > 0
                                      ? "        keepalive " + std::to_string(options_.upstream_keepalive) + ";\n"
                                      : "";
    const std::string conf = "worker_processes " + std::to_string(options_.nginx_workers) +
                             ";\n"
                             "events { worker_connections 4096; }\n"
                             "http {\n"
                             "    access_log off;\n"
                             "    client_body_temp_path " +
                             d + "/tmp/body;\n" +                                //
                             "    proxy_temp_path " + d + "/tmp/proxy;\n" +      //
                             "    fastcgi_temp_path " + d + "/tmp/fastcgi;\n" +  //
                             "    uwsgi_temp_path " + d + "/tmp/uwsgi;\n" +      //
                             "    scgi_temp_path " + d + "/tmp/scgi;\n" +        //
                             "    upstream app {\n        server 127.0.0.1:" + std::to_string(upstream_port_) + ";\n" +
                             keepalive +
                             "    }\n"
                             "    server {\n"
                             "        listen 127.0.0.1:" +
                             std::to_string(upstream_port_) +
                             ";\n"
                             "        keepalive_requests 100000;\n"
                             "        location / {\n"
                             "            default_type text/plain;\n"
                             "            add_header X-Bench-User $http_x_user;\n"
                             "            return 200 \"ok\\n\";\n"
                             "        }\n"
                             "    }\n" +
                             servers + "}\n";
    std::filesystem::create_directories(dir_ + "/tmp");
    write_file(dir_ + "/nginx.conf", conf);

    const std::vector<std::string> argv = {options_.nginx,
                                           "-p",
                                           dir_,
                                           "-c",
                                           dir_ + "/nginx.conf",
                                           "-e",
                                           "stderr",
                                           "-g",
                                           "daemon off; pid " + dir_ + "/nginx.pid; error_log stderr;"};
    nginx_pid_ = spawn(argv, SpawnOptions{.stdout_path = dir_ + "/nginx.out",
                                          .stderr_path = dir_ + "/nginx.err",
                                          .netns_path = {},
                                          .append = true,
                                          .own_group = true});
    if (nginx_pid_ <= 0) return errno_text("fork");
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
        int code = 0;
        if (exited(nginx_pid_, &code)) {
            kill(-nginx_pid_, SIGKILL);
            nginx_pid_ = -1;
            return join_argv(argv) + " exited with " + std::to_string(code) + ":\n" + nginx_log() + "\nits config:\n" +
                   conf;
        }
        bool all = loopback_listening(upstream_port_);
        for (const auto& site : sites) all = all && loopback_listening(site.port);
        if (all) return {};
        std::this_thread::sleep_for(20ms);
    }
    return "nginx did not listen within 10 s:\n" + nginx_log();
}

void NginxFront::stop_nginx() { stop_process(nginx_pid_, SIGTERM, true, 5s); }

std::optional<std::string> HttpExchange::header(const std::string& name) const {
    for (const auto& [field, value] : headers)
        if (strcasecmp(field.c_str(), name.c_str()) == 0) return value;
    return std::nullopt;
}

std::string HttpExchange::head() const {
    std::string text = status_line;
    for (const auto& [field, value] : headers) text += "\n" + field + ": " + value;
    return text;
}

HttpExchange http_request(int port, const std::string& target, const std::string& source,
                          const std::vector<std::pair<std::string, std::string>>& headers,
                          std::chrono::milliseconds timeout) {
    HttpExchange response;
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        response.error = errno_text("socket");
        return response;
    }
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>(timeout.count() % 1000 * 1000);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    sockaddr_in from{};
    from.sin_family = AF_INET;
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(port));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::string raw;
    if (inet_pton(AF_INET, source.c_str(), &from.sin_addr) != 1) {
        response.error = "bad source address " + source;
    } else if (bind(fd, reinterpret_cast<const sockaddr*>(&from), sizeof(from)) != 0) {
        response.error = errno_text("bind " + source);
    } else if (connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) != 0) {
        response.error = errno_text("connect to 127.0.0.1:" + std::to_string(port));
    } else {
        std::string request =
            "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\nConnection: close\r\n";
        for (const auto& [name, value] : headers) request += name + ": " + value + "\r\n";
        request += "\r\n";
        size_t sent = 0;
        while (sent < request.size()) {
            const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
            if (n <= 0) break;
            sent += static_cast<size_t>(n);
        }
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        char buffer[16384];
        while (sent == request.size() && std::chrono::steady_clock::now() < deadline) {
            const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
            if (n <= 0) {
                if (n < 0 && errno == EINTR) continue;
                if (n < 0) response.error = errno_text("recv");
                break;
            }
            raw.append(buffer, static_cast<size_t>(n));
        }
        if (sent != request.size()) response.error = errno_text("send");
    }
    close(fd);
    const size_t head_end = raw.find("\r\n\r\n");
    if (raw.rfind("HTTP/1.", 0) != 0 || raw.size() < 12 || head_end == std::string::npos) {
        if (response.error.empty())
            response.error = "not an HTTP response (" + std::to_string(raw.size()) + " bytes): " + raw.substr(0, 200);
        return response;
    }
    response.status = std::atoi(raw.c_str() + 9);
    size_t line_end = raw.find("\r\n");
    response.status_line = raw.substr(0, line_end);
    while (line_end < head_end) {
        const size_t start = line_end + 2;
        line_end = raw.find("\r\n", start);
        const std::string line = raw.substr(start, line_end - start);
        const size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        size_t value = colon + 1;
        while (value < line.size() && line[value] == ' ') value++;
        response.headers.emplace_back(line.substr(0, colon), line.substr(value));
    }
    // Connection: close and the bodies here are small: no chunked bodies
    // (nginx sends Content-Length for `return` and its error pages).
    response.body = raw.substr(head_end + 4);
    return response;
}

}  // namespace sluice::test
