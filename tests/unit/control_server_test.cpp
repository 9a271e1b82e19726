// SPDX-License-Identifier: Apache-2.0
// The control socket end to end: a real server on a Unix socket in a temp
// dir, driven by run_once() on its own thread, talked to by ControlClient or
// by raw sockets when the test needs to misbehave.
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/privilege.h"
#include "control_client.h"
#include "control_protocol.h"
#include "control_server.h"

namespace sluice {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr int kClientTimeoutMs = 2000;

sockaddr_un address_of(const std::string& path) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    path.copy(address.sun_path, sizeof(address.sun_path) - 1);
    return address;
}

// A client that can send anything, including garbage and half lines.
class RawConnection {
  public:
    explicit RawConnection(const std::string& path) : fd_(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
        const sockaddr_un address = address_of(path);
        connected_ = ::connect(fd_.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
    }
    bool connected() const { return connected_; }

    bool send(const std::string& bytes) {
        return ::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
    }

    // Whether the server has sent anything (or closed) not yet read.
    bool has_input() {
        pollfd readable{fd_.get(), POLLIN, 0};
        return !pending_.empty() || ::poll(&readable, 1, 0) > 0;
    }

    // The next line, or nullopt on timeout or when the server closed.
    std::optional<std::string> read_line(int timeout_ms = kClientTimeoutMs) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        for (;;) {
            if (const auto newline = pending_.find('\n'); newline != std::string::npos) {
                std::string line = pending_.substr(0, newline);
                pending_.erase(0, newline + 1);
                return line;
            }
            const auto left =
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            pollfd readable{fd_.get(), POLLIN, 0};
            if (left.count() <= 0 || ::poll(&readable, 1, static_cast<int>(left.count())) <= 0) return std::nullopt;
            char buffer[4096];
            const ssize_t got = ::recv(fd_.get(), buffer, sizeof(buffer), 0);
            if (got <= 0) return std::nullopt;
            pending_.append(buffer, static_cast<std::size_t>(got));
        }
    }

    json read_json(int timeout_ms = kClientTimeoutMs) {
        const std::optional<std::string> line = read_line(timeout_ms);
        if (!line) return json();
        return json::parse(*line, nullptr, false);
    }

    // True when the server closed its end (recv returns 0 or a reset).
    bool closed_by_server(int timeout_ms = kClientTimeoutMs) {
        pollfd readable{fd_.get(), POLLIN, 0};
        if (::poll(&readable, 1, timeout_ms) <= 0) return false;
        char byte;
        return ::recv(fd_.get(), &byte, 1, 0) <= 0;
    }

  private:
    UniqueFd fd_;
    bool connected_ = false;
    std::string pending_;
};

class ControlServerTest : public ::testing::Test {
  protected:
    void SetUp() override {
        char pattern[] = "/tmp/sluice-control-test-XXXXXX";
        ASSERT_NE(::mkdtemp(pattern), nullptr);
        dir_ = pattern;
        path_ = dir_ + "/sluiced.sock";
    }

    void TearDown() override {
        stop_server();
        server_.reset();
        std::error_code ignored;
        std::filesystem::remove_all(dir_, ignored);
    }

    ControlServerOptions options() const {
        ControlServerOptions options;
        options.socket_path = path_;
        return options;
    }

    void start(ControlServerOptions options) {
        Result<ControlServer> listening = ControlServer::listen(options);
        ASSERT_TRUE(listening.ok()) << listening.error().message;
        server_ = std::make_unique<ControlServer>(std::move(listening.value()));
        server_->handle("echo", [](const json& args, const Peer&) -> Result<json> { return args; });
        server_->handle("whoami", [](const json&, const Peer& peer) -> Result<json> {
            return json{{"pid", peer.pid}, {"uid", peer.uid}, {"gid", peer.gid}, {"groups", peer.groups}};
        });
        server_->handle("swap", [](const json&, const Peer&) -> Result<json> {
            return control_error(ErrorCode::conflict, "generation is 7, not 6");
        });
        server_->handle("set_rate", [](const json& args, const Peer&) -> Result<json> {
            if (args.at("rate").get<int>() < 0) return Error{"rate must not be negative", "rate"};
            return json{{"rate", args.at("rate")}};
        });
        thread_ = std::thread([server = server_.get()] {
            while (!server->stopped()) {
                if (!server->run_once(1000).ok()) return;
            }
        });
    }
    void start() { start(options()); }

    // Joins the server thread, after which counts() may be read safely.
    void stop_server() {
        if (server_) server_->stop();
        if (thread_.joinable()) thread_.join();
    }

    ControlClient connect_client() {
        Result<ControlClient> client = ControlClient::connect(path_, kClientTimeoutMs);
        EXPECT_TRUE(client.ok()) << client.error().message;
        return std::move(client.value());
    }

    // Connects from a child running as nobody with `supplementary` as its only
    // supplementary groups, sends `request` (a line, or nothing), reads the
    // first line back; the child's exit status: 0 when it holds `expected`,
    // 2 could not drop privileges, 3 connect failed, 4 not in the reply,
    // 5 write failed. Needs root.
    int exit_status_of_peer_as_nobody(std::vector<gid_t> supplementary, const char* request, const char* expected) {
        const sockaddr_un address = address_of(path_);
        const pid_t child = ::fork();
        if (child < 0) return -1;
        if (child == 0) {
            // Only system calls from here: the parent has other threads.
            if (::setgroups(supplementary.size(), supplementary.data()) != 0 || ::setgid(65534) != 0 ||
                ::setuid(65534) != 0)
                ::_exit(2);
            const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
            if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) ::_exit(3);
            if (request != nullptr) {
                const auto length = static_cast<ssize_t>(std::strlen(request));
                if (::write(fd, request, static_cast<std::size_t>(length)) != length) ::_exit(5);
            }
            char buffer[512] = {};
            std::size_t have = 0;
            while (have < sizeof(buffer) - 1 && std::memchr(buffer, '\n', have) == nullptr) {
                const ssize_t got = ::read(fd, buffer + have, sizeof(buffer) - 1 - have);
                if (got <= 0) break;
                have += static_cast<std::size_t>(got);
            }
            ::_exit(::strstr(buffer, expected) != nullptr ? 0 : 4);
        }
        int status = 0;
        if (::waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
        return WEXITSTATUS(status);
    }

    std::string dir_;
    std::string path_;
    std::unique_ptr<ControlServer> server_;
    std::thread thread_;
};

TEST_F(ControlServerTest, HandlerRoundTripThroughClient) {
    start();
    ControlClient client = connect_client();
    const Result<json> result = client.call("echo", {{"hello", "world"}, {"n", 3}});
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_EQ(result.value(), (json{{"hello", "world"}, {"n", 3}}));
    // The same connection serves further calls.
    const Result<json> again = client.call("echo", {{"n", 4}});
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again.value()["n"], 4);
}

TEST_F(ControlServerTest, HandlerSeesPeerCredentials) {
    start();
    ControlClient client = connect_client();
    const Result<json> result = client.call("whoami", json::object());
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_EQ(result.value()["pid"], ::getpid());
    EXPECT_EQ(result.value()["uid"], ::geteuid());
    EXPECT_EQ(result.value()["gid"], ::getegid());
}

TEST_F(ControlServerTest, UnknownVerbIsReported) {
    start();
    ControlClient client = connect_client();
    const Result<json> result = client.call("frobnicate", json::object());
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.error().code, ErrorCode::unknown_verb);
    EXPECT_NE(result.error().message.find("frobnicate"), std::string::npos);
    EXPECT_NE(result.error().message.find("echo"), std::string::npos) << "lists the known verbs";
}

TEST_F(ControlServerTest, GarbledLineIsBadRequestAndConnectionStaysUsable) {
    start();
    RawConnection raw(path_);
    ASSERT_TRUE(raw.connected());
    ASSERT_TRUE(raw.send("{this is not json\n"));
    const json garbled = raw.read_json();
    EXPECT_EQ(garbled["ok"], false);
    EXPECT_TRUE(garbled["id"].is_null());
    EXPECT_EQ(garbled["error"]["code"], "bad_request");

    ASSERT_TRUE(raw.send(R"({"id": 2, "verb": "echo", "args": {"x": 1}})"
                         "\n"));
    const json valid = raw.read_json();
    EXPECT_EQ(valid["id"], 2);
    EXPECT_EQ(valid["ok"], true);
    EXPECT_EQ(valid["result"]["x"], 1);
}

TEST_F(ControlServerTest, RequestWithoutVerbOrWithBadFieldsIsBadRequest) {
    start();
    RawConnection raw(path_);
    ASSERT_TRUE(raw.send(R"({"id": 5, "args": {}})"
                         "\n"
                         R"({"id": 6, "verb": 42})"
                         "\n"
                         R"({"id": 7, "verb": "echo", "args": [1, 2]})"
                         "\n"
                         R"({"id": [1], "verb": "echo"})"
                         "\n"
                         "[1, 2, 3]\n"));
    for (const json& expected_id : {json(5), json(6), json(7), json(nullptr), json(nullptr)}) {
        const json response = raw.read_json();
        EXPECT_EQ(response["id"], expected_id);
        EXPECT_EQ(response["ok"], false);
        EXPECT_EQ(response["error"]["code"], "bad_request") << response.dump();
    }
}

TEST_F(ControlServerTest, IdIsEchoedWhetherIntegerOrString) {
    start();
    RawConnection raw(path_);
    ASSERT_TRUE(raw.send(R"({"id": 12345678901, "verb": "echo"})"
                         "\n"
                         R"({"id": "req-α", "verb": "echo"})"
                         "\n"
                         R"({"verb": "echo"})"
                         "\n"));
    EXPECT_EQ(raw.read_json()["id"], 12345678901);
    EXPECT_EQ(raw.read_json()["id"], "req-α");
    const json no_id = raw.read_json();
    EXPECT_TRUE(no_id["id"].is_null());
    EXPECT_EQ(no_id["ok"], true);
    EXPECT_EQ(no_id["result"], json::object()) << "missing args mean {}";
}

TEST_F(ControlServerTest, PipelinedRequestsAreAnsweredInOrder) {
    start();
    RawConnection raw(path_);
    std::string batch;
    for (int i = 0; i < 50; ++i) batch += json{{"id", i}, {"verb", "echo"}, {"args", {{"i", i}}}}.dump() + "\r\n";
    ASSERT_TRUE(raw.send(batch));
    for (int i = 0; i < 50; ++i) {
        const json response = raw.read_json();
        ASSERT_EQ(response["id"], i);
        EXPECT_EQ(response["result"]["i"], i);
    }
}

TEST_F(ControlServerTest, OversizedLineIsRejectedAndClosedWhileOthersAreServed) {
    ControlServerOptions small = options();
    small.max_request_bytes = 1024;
    start(small);

    RawConnection big(path_);
    ASSERT_TRUE(big.send(std::string(4096, 'x')));  // no newline: must not wait for one
    const json rejected = big.read_json();
    EXPECT_EQ(rejected["error"]["code"], "too_large") << rejected.dump();
    EXPECT_TRUE(big.closed_by_server());

    // A complete but oversized line is rejected as well.
    RawConnection long_line(path_);
    ASSERT_TRUE(long_line.send(json{{"verb", "echo"}, {"args", {{"pad", std::string(2000, 'y')}}}}.dump() + "\n"));
    EXPECT_EQ(long_line.read_json()["error"]["code"], "too_large");
    EXPECT_TRUE(long_line.closed_by_server());

    ControlClient client = connect_client();
    EXPECT_TRUE(client.call("echo", {{"still", "serving"}}).ok());
}

TEST_F(ControlServerTest, AttachmentsLargerThanALineReachTheHandlerWhole) {
    ControlServerOptions small = options();
    small.max_request_bytes = 1024;  // each attachment is far larger than a request line may be
    start(small);
    ControlClient client = connect_client();
    std::string list;
    for (int i = 0; i < 20000; i++) list += "10." + std::to_string(i / 256 % 256) + "." + std::to_string(i % 256) + ".0/24\n";
    const std::string binary("a\0b\nc\r", 6);  // NUL, newline: raw bytes, not a line
    Result<json> echoed = client.call("echo", {{"text", "policy"}}, {{"drop.txt", list}, {"raw", binary}});
    ASSERT_TRUE(echoed.ok()) << echoed.error().message;
    EXPECT_EQ(echoed.value()["text"], "policy");
    // The echo handler returns its args: the attachments came back as sent.
    EXPECT_EQ(echoed.value()["attachments"]["drop.txt"].get<std::string>(), list);
    EXPECT_EQ(echoed.value()["attachments"]["raw"].get<std::string>(), binary);
    // The connection is framed right after them: the next request is served.
    EXPECT_TRUE(client.call("echo", {{"after", "attachments"}}).ok());
}

TEST_F(ControlServerTest, AttachmentsOverTheLimitOrMalformedAreRefusedAndTheConnectionClosed) {
    ControlServerOptions small = options();
    small.max_attachment_bytes = 100;
    start(small);
    RawConnection over(path_);
    ASSERT_TRUE(over.send(R"({"id":1,"verb":"echo","attachments":[{"name":"a","bytes":60},{"name":"b","bytes":41}]})"
                          "\n"));
    const json refused = over.read_json();
    EXPECT_EQ(refused["error"]["code"], "too_large") << refused.dump();
    EXPECT_EQ(refused["id"], 1);
    EXPECT_TRUE(over.closed_by_server());

    RawConnection malformed(path_);
    ASSERT_TRUE(malformed.send(R"({"id":2,"verb":"echo","attachments":[{"name":"a"}]})"
                               "\n"));
    EXPECT_EQ(malformed.read_json()["error"]["code"], "bad_request");
    EXPECT_TRUE(malformed.closed_by_server());

    ControlClient client = connect_client();
    EXPECT_TRUE(client.call("echo", {{"still", "serving"}}, {{"a", std::string(100, 'x')}}).ok());
}

TEST_F(ControlServerTest, HalfSentRequestTimesOutWhileOthersAreServed) {
    // Long enough that the other client's call (well under a millisecond)
    // ends first on any machine that is not stalled for a second.
    ControlServerOptions quick = options();
    quick.idle_timeout = 1000ms;
    start(quick);

    RawConnection slow(path_);
    const auto sent_at = std::chrono::steady_clock::now();
    ASSERT_TRUE(slow.send(R"({"id": 1, "verb": "ec)"));

    // Meanwhile another client is answered, while the half-sent one waits.
    ControlClient client = connect_client();
    ASSERT_TRUE(client.call("echo", json::object()).ok());
    EXPECT_FALSE(slow.has_input()) << "the half-sent request was answered or closed before the other client";

    const json timed_out = slow.read_json();
    EXPECT_EQ(timed_out["error"]["code"], "timeout") << timed_out.dump();
    EXPECT_GE(std::chrono::steady_clock::now() - sent_at, quick.idle_timeout);
    EXPECT_TRUE(slow.closed_by_server());
}

TEST_F(ControlServerTest, IdleConnectionWithoutPartialRequestStaysOpen) {
    ControlServerOptions quick = options();
    quick.idle_timeout = 100ms;
    start(quick);
    RawConnection raw(path_);
    ASSERT_TRUE(raw.send(R"({"id": 1, "verb": "echo"})"
                         "\n"));
    EXPECT_EQ(raw.read_json()["id"], 1);
    std::this_thread::sleep_for(250ms);
    ASSERT_TRUE(raw.send(R"({"id": 2, "verb": "echo"})"
                         "\n"));
    EXPECT_EQ(raw.read_json()["id"], 2);
}

TEST_F(ControlServerTest, ManyConcurrentClientsAreAllServed) {
    start();
    constexpr int kClients = 20;
    constexpr int kCallsEach = 10;
    std::atomic<int> answered{0};
    std::vector<std::thread> clients;
    for (int c = 0; c < kClients; ++c) {
        clients.emplace_back([&, c] {
            Result<ControlClient> client = ControlClient::connect(path_, kClientTimeoutMs);
            if (!client.ok()) return;
            for (int i = 0; i < kCallsEach; ++i) {
                const Result<json> result = client.value().call("echo", {{"c", c}, {"i", i}});
                if (result.ok() && result.value() == json{{"c", c}, {"i", i}}) ++answered;
            }
        });
    }
    for (std::thread& client : clients) client.join();
    EXPECT_EQ(answered.load(), kClients * kCallsEach);
}

TEST_F(ControlServerTest, HandlerErrorsCarryTheirCode) {
    start();
    ControlClient client = connect_client();

    const Result<json> conflict = client.call("swap", json::object());
    ASSERT_FALSE(conflict.ok());
    EXPECT_EQ(conflict.error().code, ErrorCode::conflict);
    EXPECT_EQ(conflict.error().message, "generation is 7, not 6") << "the code is a field, not a prefix";

    const Result<json> invalid = client.call("set_rate", {{"rate", -1}});
    ASSERT_FALSE(invalid.ok());
    EXPECT_EQ(invalid.error().code, ErrorCode::invalid) << "plain Errors default to invalid";
    EXPECT_EQ(invalid.error().message, "rate must not be negative");
    EXPECT_EQ(invalid.error().setting, "rate");

    // nlohmann throws on a wrong type inside the handler: the client's fault.
    const Result<json> wrong_type = client.call("set_rate", {{"rate", "fast"}});
    ASSERT_FALSE(wrong_type.ok());
    EXPECT_EQ(wrong_type.error().code, ErrorCode::bad_request);

    EXPECT_TRUE(client.call("set_rate", {{"rate", 5}}).ok()) << "the connection survives handler errors";
}

TEST_F(ControlServerTest, CountsRequestsByVerbAndOutcome) {
    start();
    {
        ControlClient client = connect_client();
        ASSERT_TRUE(client.call("echo", json::object()).ok());
        ASSERT_TRUE(client.call("echo", json::object()).ok());
        ASSERT_FALSE(client.call("swap", json::object()).ok());
        ASSERT_FALSE(client.call("nope", json::object()).ok());
        RawConnection raw(path_);
        ASSERT_TRUE(raw.send("garbage\n"));
        ASSERT_FALSE(raw.read_json().is_null());
    }
    stop_server();
    const RequestCounts& counts = server_->counts();
    EXPECT_EQ(counts.at("echo").at("ok"), 2u);
    EXPECT_EQ(counts.at("swap").at("conflict"), 1u);
    EXPECT_EQ(counts.at("<unknown>").at("unknown_verb"), 1u);
    EXPECT_EQ(counts.at("<none>").at("bad_request"), 1u);
    EXPECT_EQ(counts.count("nope"), 0u) << "unknown verbs must not grow the map";
}

TEST_F(ControlServerTest, SocketModeDefaultsTo0600) {
    start();
    struct stat info {};
    ASSERT_EQ(::stat(path_.c_str(), &info), 0);
    EXPECT_TRUE(S_ISSOCK(info.st_mode));
    EXPECT_EQ(info.st_mode & 07777, 0600u);
}

TEST_F(ControlServerTest, GroupMakesSocketGroupWritable) {
    ControlServerOptions with_group = options();
    with_group.group = ::getegid();  // a group chown to it always succeeds
    start(with_group);
    struct stat info {};
    ASSERT_EQ(::stat(path_.c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 07777, 0660u);
    EXPECT_EQ(info.st_gid, ::getegid());
}

TEST_F(ControlServerTest, StaleSocketFileIsReplaced) {
    {  // A socket bound and closed without unlink, as a crashed daemon leaves it.
        UniqueFd stale(::socket(AF_UNIX, SOCK_STREAM, 0));
        const sockaddr_un address = address_of(path_);
        ASSERT_EQ(::bind(stale.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
    }
    ASSERT_TRUE(std::filesystem::exists(path_));
    // The client explains that nobody is there.
    const Result<ControlClient> early = ControlClient::connect(path_, kClientTimeoutMs);
    ASSERT_FALSE(early.ok());
    EXPECT_NE(early.error().message.find("not running"), std::string::npos) << early.error().message;

    start();
    ControlClient client = connect_client();
    EXPECT_TRUE(client.call("echo", json::object()).ok());
}

TEST_F(ControlServerTest, SecondServerOnLivePathIsRefused) {
    start();
    const Result<ControlServer> second = ControlServer::listen(options());
    ASSERT_FALSE(second.ok());
    EXPECT_NE(second.error().message.find("already listening"), std::string::npos) << second.error().message;
    // The first server's socket is untouched and still works.
    ControlClient client = connect_client();
    EXPECT_TRUE(client.call("echo", json::object()).ok());
}

TEST_F(ControlServerTest, PathThatIsNotASocketIsLeftAlone) {
    { UniqueFd file(::open(path_.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600)); }
    const Result<ControlServer> server = ControlServer::listen(options());
    ASSERT_FALSE(server.ok());
    EXPECT_NE(server.error().message.find("not a socket"), std::string::npos) << server.error().message;
    EXPECT_TRUE(std::filesystem::is_regular_file(path_));
}

TEST_F(ControlServerTest, OverlongPathIsAClearError) {
    ControlServerOptions overlong = options();
    overlong.socket_path = dir_ + "/" + std::string(200, 'p');
    const Result<ControlServer> server = ControlServer::listen(overlong);
    ASSERT_FALSE(server.ok());
    EXPECT_NE(server.error().message.find("bytes long"), std::string::npos);
}

TEST_F(ControlServerTest, DestructorUnlinksSocketFile) {
    start();
    ASSERT_TRUE(std::filesystem::exists(path_));
    stop_server();
    server_.reset();
    EXPECT_FALSE(std::filesystem::exists(path_));
}

TEST_F(ControlServerTest, ClientReportsMissingSocketAsNotRunning) {
    const Result<ControlClient> client = ControlClient::connect(path_, kClientTimeoutMs);
    ASSERT_FALSE(client.ok());
    EXPECT_NE(client.error().message.find("sluiced is not running"), std::string::npos);
    EXPECT_NE(client.error().message.find(path_), std::string::npos);
    EXPECT_NE(client.error().message.find("sluiced --config"), std::string::npos);
}

TEST_F(ControlServerTest, ClientTimesOutWhenServerDoesNotAnswer) {
    // Listening but never driven: connect succeeds through the backlog, the call cannot.
    Result<ControlServer> idle = ControlServer::listen(options());
    ASSERT_TRUE(idle.ok()) << idle.error().message;
    Result<ControlClient> client = ControlClient::connect(path_, 100);
    ASSERT_TRUE(client.ok()) << client.error().message;
    const Result<json> result = client.value().call("echo", json::object());
    ASSERT_FALSE(result.ok());
    EXPECT_NE(result.error().message.find("timed out"), std::string::npos) << result.error().message;
}

TEST_F(ControlServerTest, StopWakesABlockedRunOnce) {
    Result<ControlServer> listening = ControlServer::listen(options());
    ASSERT_TRUE(listening.ok());
    ControlServer& server = listening.value();
    const auto started = std::chrono::steady_clock::now();
    std::thread loop([&server] { (void)server.run_once(-1); });
    std::this_thread::sleep_for(20ms);
    server.stop();
    loop.join();
    EXPECT_LT(std::chrono::steady_clock::now() - started, 1s);
    EXPECT_TRUE(server.stopped());
}

TEST_F(ControlServerTest, InjectedPeerCheckDeniesWithPermissionDenied) {
    ControlServerOptions strict = options();
    strict.authorize = [](const Peer& peer) { return peer.uid == 4242; };
    start(strict);
    Result<ControlClient> client = ControlClient::connect(path_, kClientTimeoutMs);
    ASSERT_TRUE(client.ok());
    // Let the server answer and hang up first: the client must still report
    // the server's reason, not a broken pipe.
    std::this_thread::sleep_for(50ms);
    const Result<json> result = client.value().call("echo", json::object());
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.error().code, ErrorCode::permission_denied) << result.error().message;
}

// A real other user: a child drops to nobody before connecting. The socket is
// world-writable here so the kernel lets it connect and SO_PEERCRED decides.
TEST_F(ControlServerTest, PeerWithAnotherUidIsDenied) {
    SLUICE_SKIP_UNLESS(::geteuid() == 0, "needs root to switch uid");
    ControlServerOptions open_mode = options();
    open_mode.mode = 0666;
    start(open_mode);
    ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);  // mkdtemp makes it 0700

    EXPECT_EQ(exit_status_of_peer_as_nobody({}, nullptr, "\"permission_denied\""), 0)
        << "2: could not drop privileges, 3: connect failed, 4: not denied";

    // Root (same uid as the server) is still served.
    ControlClient client = connect_client();
    EXPECT_TRUE(client.call("echo", json::object()).ok());
}

TEST_F(ControlServerTest, PeerCarriesTheClientsSupplementaryGroups) {
    start();
    std::vector<gid_t> ours(static_cast<std::size_t>(::getgroups(0, nullptr)));
    ours.resize(static_cast<std::size_t>(::getgroups(static_cast<int>(ours.size()), ours.data())));
    ControlClient client = connect_client();
    const Result<json> who = client.call("whoami", json::object());
    ASSERT_TRUE(who.ok()) << who.error().message;
    std::vector<gid_t> seen = who.value().at("groups").get<std::vector<gid_t>>();
    std::sort(ours.begin(), ours.end());
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, ours);
}

TEST(PeerMayConnect, RootTheServersUserAndMembersOfTheGroupOnly) {
    constexpr gid_t kGroup = 4242;
    const auto peer = [](uid_t uid, gid_t gid, std::vector<gid_t> groups = {}) {
        Peer made;
        made.uid = uid;
        made.gid = gid;
        made.groups = std::move(groups);
        return made;
    };
    const uid_t other_uid = ::geteuid() == 65534 ? 65533 : 65534;
    EXPECT_TRUE(peer_may_connect(peer(0, 0), std::nullopt));
    EXPECT_TRUE(peer_may_connect(peer(::geteuid(), 0), std::nullopt));
    EXPECT_FALSE(peer_may_connect(peer(other_uid, kGroup), std::nullopt)) << "no group configured";
    EXPECT_TRUE(peer_may_connect(peer(other_uid, kGroup), kGroup)) << "primary group";
    EXPECT_TRUE(peer_may_connect(peer(other_uid, 100, {27, kGroup}), kGroup))
        << "supplementary group, as `adduser NAME sluice` makes it";
    EXPECT_FALSE(peer_may_connect(peer(other_uid, 100, {27, 4243}), kGroup));
}

// The Debian package's case: a user whose primary group is its own and who
// was added to the socket's group (a supplementary group) is served.
TEST_F(ControlServerTest, PeerInTheSocketsGroupOnlyAsASupplementaryGroupIsServed) {
    SLUICE_SKIP_UNLESS(::geteuid() == 0, "needs root to switch uid and groups");
    constexpr gid_t kSocketGroup = 4242;
    ControlServerOptions with_group = options();
    with_group.group = kSocketGroup;
    start(with_group);
    ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);  // mkdtemp makes it 0700

    EXPECT_EQ(
        exit_status_of_peer_as_nobody({kSocketGroup}, "{\"id\": 1, \"verb\": \"echo\", \"args\": {}}\n", "\"ok\":true"),
        0)
        << "2: could not drop privileges, 3: connect failed, 4: not served, 5: write failed";
}

}  // namespace
}  // namespace sluice
