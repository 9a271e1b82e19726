// SPDX-License-Identifier: Apache-2.0
#include "redis_process.h"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <sstream>
#include <thread>

#include "e2e/process.h"
#include "unique_fd.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
using fleet::RedisReply;
using fleet::RedisReplyType;

bool port_free(uint16_t port) {
    UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return false;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
}

// A port below the ephemeral range whose cluster bus port (+10000) is free
// too. Another process may still take it before redis-server binds it: the
// caller retries with a new port when the server does not come up.
uint16_t pick_port() {
    static std::mt19937 random(std::random_device{}());
    std::uniform_int_distribution<int> range(20000, 29999);
    for (int attempt = 0; attempt < 200; ++attempt) {
        const auto port = static_cast<uint16_t>(range(random));
        if (port_free(port) && port_free(static_cast<uint16_t>(port + 10000))) return port;
    }
    return 0;
}

RedisReply to_reply(const redisReply& raw) {
    RedisReply reply;
    switch (raw.type) {
        case REDIS_REPLY_STRING:
            reply.type = RedisReplyType::string;
            break;
        case REDIS_REPLY_STATUS:
            reply.type = RedisReplyType::status;
            break;
        case REDIS_REPLY_ERROR:
            reply.type = RedisReplyType::error;
            break;
        case REDIS_REPLY_INTEGER:
            reply.type = RedisReplyType::integer;
            reply.integer = raw.integer;
            return reply;
        case REDIS_REPLY_ARRAY:
            reply.type = RedisReplyType::array;
            for (size_t i = 0; i < raw.elements; ++i) reply.elements.push_back(to_reply(*raw.element[i]));
            return reply;
        default:
            return reply;
    }
    reply.str.assign(raw.str, raw.len);
    return reply;
}

RedisReply connection_error(const std::string& what) {
    return RedisReply{.type = RedisReplyType::error, .integer = 0, .str = "CONNECTION " + what, .elements = {}};
}

RedisReply call_at(uint16_t port, const std::string& password, const std::vector<std::string>& argv) {
    const timeval tv{.tv_sec = 2, .tv_usec = 0};
    std::unique_ptr<redisContext, decltype(&redisFree)> context(redisConnectWithTimeout("127.0.0.1", port, tv),
                                                                &redisFree);
    if (!context || context->err != 0) return connection_error(context ? context->errstr : "out of memory");
    redisSetTimeout(context.get(), tv);
    auto run = [&](const std::vector<std::string>& args) {
        std::vector<const char*> pointers;
        std::vector<size_t> lengths;
        for (const auto& arg : args) {
            pointers.push_back(arg.data());
            lengths.push_back(arg.size());
        }
        std::unique_ptr<redisReply, decltype(&freeReplyObject)> raw(
            static_cast<redisReply*>(
                redisCommandArgv(context.get(), static_cast<int>(args.size()), pointers.data(), lengths.data())),
            &freeReplyObject);
        return raw ? to_reply(*raw) : connection_error(context->errstr);
    };
    if (!password.empty()) {
        const RedisReply auth = run({"AUTH", password});
        if (auth.type == RedisReplyType::error) return auth;
    }
    return run(argv);
}

}  // namespace

std::string find_in_path(const std::string& name) {
    const char* path = std::getenv("PATH");
    std::stringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
        if (dir.empty()) continue;
        const std::string candidate = dir + "/" + name;
        if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    return {};
}

std::optional<std::string> missing_redis() {
    for (const char* tool : {"redis-server", "redis-cli"})
        if (find_in_path(tool).empty())
            return std::string("needs ") + tool + " in PATH (Debian: apt-get install redis-server redis-tools)";
    return std::nullopt;
}

RedisServer::RedisServer(RedisServerOptions options) : options_(std::move(options)) {
    char pattern[] = "/tmp/sluice-redis-XXXXXX";
    if (mkdtemp(pattern) == nullptr) {
        error_ = "mkdtemp failed";
        return;
    }
    dir_ = pattern;
    for (int attempt = 0; attempt < 3; ++attempt) {
        error_.clear();
        if (start_once()) return;
    }
}

RedisServer::~RedisServer() {
    kill();
    if (!dir_.empty()) {
        std::error_code ignored;
        std::filesystem::remove_all(dir_, ignored);
    }
}

bool RedisServer::start_once() {
    port_ = options_.port != 0 ? options_.port : pick_port();
    if (port_ == 0) {
        error_ = "no free port pair (port, port + 10000) in 20000..29999";
        return false;
    }
    std::vector<std::string> argv{find_in_path("redis-server"),
                                  "--port",
                                  std::to_string(port_),
                                  "--bind",
                                  options_.bind,
                                  "--protected-mode",
                                  options_.bind == "127.0.0.1" ? "yes" : "no",
                                  "--dir",
                                  dir_,
                                  "--save",
                                  "",
                                  "--appendonly",
                                  "no",
                                  "--daemonize",
                                  "no",
                                  "--logfile",
                                  ""};
    if (options_.cluster) {
        // A short node timeout: the tests never wait for a failover.
        for (const char* arg :
             {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "3000"})
            argv.emplace_back(arg);
        if (!options_.netns.empty()) {
            argv.emplace_back("--cluster-announce-ip");
            argv.push_back(options_.host);
        }
    }
    if (!options_.requirepass.empty()) {
        argv.emplace_back("--requirepass");
        argv.push_back(options_.requirepass);
    }
    const std::string log_path = dir_ + "/redis.log";
    const std::string netns_path = options_.netns.empty() ? std::string() : "/var/run/netns/" + options_.netns;
    pid_ = spawn(
        argv, SpawnOptions{.stdout_path = log_path, .stderr_path = log_path, .netns_path = netns_path, .append = true});
    if (pid_ < 0) {
        error_ = "fork failed";
        return false;
    }
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
        int code = 0;
        if (exited(pid_, &code)) {
            pid_ = -1;
            error_ = "redis-server exited with " + std::to_string(code) + " on port " + std::to_string(port_) + ":\n" +
                     log();
            return false;
        }
        const RedisReply pong = call({"PING"});
        if (pong.type == RedisReplyType::status && pong.str == "PONG") return true;
        std::this_thread::sleep_for(10ms);
    }
    kill();
    error_ = "redis-server on port " + std::to_string(port_) + " did not answer PING within 10 s:\n" + log();
    return false;
}

RedisReply RedisServer::call(const std::vector<std::string>& argv) const {
    if (options_.netns.empty()) return call_at(port_, options_.requirepass, argv);
    // Only the socket has to be made inside the namespace: a thread of its
    // own, so the calling thread (which forks children) stays where it is.
    RedisReply reply;
    std::thread worker([&] {
        const UniqueFd ns(open(("/var/run/netns/" + options_.netns).c_str(), O_RDONLY | O_CLOEXEC));
        if (!ns.valid() || setns(ns.get(), CLONE_NEWNET) != 0) {
            reply = connection_error("cannot enter network namespace " + options_.netns);
            return;
        }
        reply = call_at(port_, options_.requirepass, argv);
    });
    worker.join();
    return reply;
}

void RedisServer::kill() {
    if (pid_ < 0) return;
    ::kill(pid_, SIGCONT);  // a paused server must not be left stopped
    ::kill(pid_, SIGKILL);
    (void)wait_exit(pid_, 5000ms);
    pid_ = -1;
}

void RedisServer::pause() {
    if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void RedisServer::resume() {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
}

std::string RedisServer::log() const { return read_file(dir_ + "/redis.log"); }

RedisCluster::RedisCluster(RedisServerOptions options) {
    options.cluster = true;
    options.port = 0;
    std::vector<std::string> create{find_in_path("redis-cli"), "--cluster", "create"};
    for (int i = 0; i < 3; ++i) {
        nodes_.push_back(std::make_unique<RedisServer>(options));
        if (!nodes_.back()->error().empty()) {
            error_ = "cluster node " + std::to_string(i) + ": " + nodes_.back()->error();
            return;
        }
        create.push_back(options.host + ":" + std::to_string(nodes_.back()->port()));
    }
    create.emplace_back("--cluster-yes");
    const ProcResult made = run(create, nodes_[0]->dir() + "/cluster-create", 60s,
                                options.netns.empty() ? std::string() : "/var/run/netns/" + options.netns);
    if (made.code != 0) {
        error_ = join_argv(create) + " exited with " + std::to_string(made.code) + ":\n" + made.out + made.err;
        return;
    }
    // redis-cli returns once the nodes agree on the slots; each node still
    // has to see the others up before it says ok.
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    for (size_t i = 0; i < nodes_.size(); ++i) {
        for (;;) {
            const RedisReply info = nodes_[i]->call({"CLUSTER", "INFO"});
            if (info.str.find("cluster_state:ok") != std::string::npos) break;
            if (std::chrono::steady_clock::now() > deadline) {
                error_ = "cluster node " + std::to_string(i) + " not ok after 20 s:\n" + info.str;
                return;
            }
            std::this_thread::sleep_for(20ms);
        }
    }
}

std::vector<fleet::RedisEndpoint> RedisCluster::endpoints() const {
    std::vector<fleet::RedisEndpoint> all;
    for (const auto& node : nodes_) all.push_back(node->endpoint());
    return all;
}

std::string RedisCluster::node_id(size_t i) const { return nodes_[i]->call({"CLUSTER", "MYID"}).str; }

std::optional<size_t> RedisCluster::owner(uint16_t slot) const {
    const RedisReply slots = nodes_[0]->call({"CLUSTER", "SLOTS"});
    for (const auto& range : slots.elements) {
        if (range.elements.size() < 3 || range.elements[0].integer > slot || range.elements[1].integer < slot) continue;
        const long long port = range.elements[2].elements.at(1).integer;
        for (size_t i = 0; i < nodes_.size(); ++i)
            if (nodes_[i]->port() == port) return i;
    }
    return std::nullopt;
}

}  // namespace sluice::test
