// SPDX-License-Identifier: Apache-2.0
// A real nginx in front of sluiced's auth_request door, for the nginx e2e
// test and `sluice-bench http` (gtest-free, so the bench links it too).
//
// One NginxFront owns a temp dir and what it starts there:
//   - sluiced, with no interfaces, its socket and state dir under the temp
//     dir (its bpffs dir, which must be on bpffs, is /sys/fs/bpf/<the temp
//     dir's name>, removed with it), metrics and `[request] http_address` on 127.0.0.1 (the HTTP
//     door on port 0: its port comes from `status`);
//   - nginx (`nginx -p DIR -c DIR/nginx.conf -e stderr -g 'daemon off; pid
//     DIR/nginx.pid;'`, its own process group): an upstream server block that
//     answers 200 "ok" (echoing X-User as X-Bench-User), and front servers on
//     127.0.0.1 ports picked free, each either limited (the shipped snippet
//     packaging/nginx-sluice.conf included, its one sluiced address
//     templated with the door's port) or bare (straight to the upstream).
// The destructor stops nginx (SIGTERM to the master, then SIGKILL to its
// group) and sluiced, and removes the temp dir, also when a caller failed
// half-way. Each step returns an empty string or what went wrong.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sluice::test {

// One location of a limited front server: requests under `prefix` are
// decided in request domain `domain` (`set $sluice_domain` in the location).
struct NginxLocation {
    std::string prefix;  // "/window/"
    std::string domain;
};

// One front server block.
struct NginxSite {
    bool limited = true;                   // include the snippet
    std::string domain = "web";            // the server's $sluice_domain
    std::vector<NginxLocation> locations;  // besides `location /` (the server's domain)
    int port = 0;                          // filled by start_nginx()
};

struct NginxFrontOptions {
    std::string sluiced;  // binaries (paths)
    std::string sluicectl;
    std::string nginx = "/usr/sbin/nginx";
    std::string snippet;        // packaging/nginx-sluice.conf
    std::string request_extra;  // more lines of sluiced's [request] table
    int nginx_workers = 1;
    int upstream_keepalive = 32;  // front -> upstream connections kept (0: a new one per request)
    std::string dir_prefix = "/tmp/sluice-nginx-";
};

class NginxFront {
  public:
    explicit NginxFront(NginxFrontOptions options);
    ~NginxFront();
    NginxFront(const NginxFront&) = delete;
    NginxFront& operator=(const NginxFront&) = delete;

    // mkdtemp; must come first.
    std::string make_dir();
    // Writes sluiced.toml and starts sluiced; ready when `status` answers
    // with the HTTP door's port (10 s).
    std::string start_sluiced();
    // `sluicectl --socket S policy push FILE` with `text` as FILE.
    std::string push_policy(const std::string& text);
    // `sluicectl --socket S --json ARGS...`: stdout, or nullopt (with *error).
    std::optional<std::string> ctl_json(const std::vector<std::string>& args, std::string* error);
    // SIGTERM, then waits (5 s; SIGKILL after).
    void stop_sluiced();

    // Writes nginx.conf for `sites` (filling their ports) and starts nginx;
    // ready when every front port answers (10 s).
    std::string start_nginx(std::vector<NginxSite>& sites);
    void stop_nginx();

    const std::string& dir() const { return dir_; }
    int http_port() const { return http_port_; }        // sluiced's auth_request door
    int metrics_port() const { return metrics_port_; }  // sluiced's /metrics
    int upstream_port() const { return upstream_port_; }
    std::string socket_path() const { return dir_ + "/sluiced.sock"; }
    std::string bpffs_dir() const;
    std::string sluiced_log() const;  // its stderr so far
    std::string nginx_log() const;    // nginx's stderr so far (error_log)
    pid_t sluiced_pid() const { return sluiced_pid_; }
    pid_t nginx_pid() const { return nginx_pid_; }

  private:
    NginxFrontOptions options_;
    std::string dir_;
    pid_t sluiced_pid_ = -1;
    pid_t nginx_pid_ = -1;
    int http_port_ = 0;
    int metrics_port_ = 0;
    int upstream_port_ = 0;
    int ctl_runs_ = 0;
};

// A TCP port on 127.0.0.1 nothing listens on now (bound to port 0, closed).
int free_loopback_port();
// Whether something accepts connections on 127.0.0.1:port.
bool loopback_listening(int port);

// One HTTP/1.1 exchange (Connection: close) as the client saw it.
struct HttpExchange {
    int status = -1;  // -1: no response; `error` says why
    std::string status_line;
    std::vector<std::pair<std::string, std::string>> headers;  // as received, in order
    std::string body;
    std::string error;
    // The first field called `name` (case-insensitive), or nullopt.
    std::optional<std::string> header(const std::string& name) const;
    // Status line and header lines, as received.
    std::string head() const;
};

// GET http://127.0.0.1:port<target> from `source` (a 127.0.0.0/8 address, so
// one machine has many clients), with `headers` added.
HttpExchange http_request(int port, const std::string& target, const std::string& source,
                          const std::vector<std::pair<std::string, std::string>>& headers = {},
                          std::chrono::milliseconds timeout = std::chrono::seconds(5));

}  // namespace sluice::test
