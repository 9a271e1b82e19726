// SPDX-License-Identifier: Apache-2.0
// What a node makes of Redis's replies: the input is the bytes a fake Redis
// on loopback sends back, in order, to the fleet bucket's exchange (EVALSHA,
// and SCRIPT LOAD then EVALSHA again after a NOSCRIPT), after it said the
// instance has no cluster support (so the client stays in single mode and
// never connects anywhere the input names). The fake closes its side after
// the input, so a reply cut short ends the exchange at once.
// Asserted: an exchange that succeeds grants at most what was asked (a reply
// that grants more would mint credit the fleet never had); one that fails
// names the server and says unreachable or internal. The input is also read
// as a "host:port" endpoint, which must print back to itself.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <thread>

#include "fleet_bucket.h"
#include "fuzz_support.h"
#include "redis_client.h"
#include "unique_fd.h"

namespace {

using sluice::fuzz::require;
constexpr std::string_view kNoCluster = "-ERR This instance has cluster support disabled\r\n";

struct Listener {
    sluice::UniqueFd fd;
    uint16_t port = 0;
    Listener() : fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t length = sizeof address;
        require(fd.get() >= 0 && ::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), length) == 0 &&
                    ::listen(fd.get(), 16) == 0 &&
                    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length) == 0,
                "a loopback listener");
        port = ntohs(address.sin_port);
    }
};

// Waits for a request on `client` (whatever it is) and answers with `reply`.
bool answer(int client, std::string_view reply) {
    pollfd readable{client, POLLIN, 0};
    char buffer[4096];
    if (::poll(&readable, 1, 2000) <= 0 || ::recv(client, buffer, sizeof buffer, 0) <= 0) return false;
    return ::send(client, reply.data(), reply.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(reply.size());
}

// The fake Redis: the first connection gets the no-cluster answer to CLUSTER
// SLOTS, then the input to its next request, then EOF; any later connection
// (the client reconnects after a failure) is closed at once.
void serve(int listener, std::string_view input, int stop) {
    bool first = true;
    for (;;) {
        pollfd fds[2] = {{listener, POLLIN, 0}, {stop, POLLIN, 0}};
        if (::poll(fds, 2, 5000) <= 0 || (fds[1].revents & POLLIN)) return;
        sluice::UniqueFd client(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
        if (client.get() < 0 || !first) continue;
        first = false;
        if (answer(client.get(), kNoCluster) && answer(client.get(), input)) ::shutdown(client.get(), SHUT_WR);
        // Let the client read it all before the close resets the connection.
        char buffer[4096];
        pollfd readable{client.get(), POLLIN, 0};
        while (::poll(&readable, 1, 2000) > 0 && ::recv(client.get(), buffer, sizeof buffer, 0) > 0) {
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace sluice::fleet;
    static const Listener listener;
    static const FleetBucketScript script;
    const std::string_view input(reinterpret_cast<const char*>(data), size);

    if (auto endpoint = parse_redis_endpoint(input); endpoint) {
        const std::string text = format_redis_endpoint(endpoint.value());
        const auto again = parse_redis_endpoint(text);
        require(again.ok() && again.value() == endpoint.value(), "an endpoint prints back to itself", text);
    }

    int stop_pipe[2];
    require(::pipe2(stop_pipe, O_CLOEXEC) == 0, "a pipe");
    sluice::UniqueFd stop_read(stop_pipe[0]), stop_write(stop_pipe[1]);
    std::thread server(serve, listener.fd.get(), input, stop_read.get());
    {
        const RedisEndpoint self{"127.0.0.1", listener.port};
        RedisClient client(
            RedisOptions{{self}, std::chrono::milliseconds(1000), std::chrono::milliseconds(1000), {}, {}});
        constexpr uint64_t kRequest = 5;
        const auto exchanged = script.exchange(client, "sluice:{fuzz:0}:bucket", {100, 10}, kRequest, 0);
        if (exchanged) {
            require(exchanged.value().granted <= kRequest, "a grant is at most the request");
        } else {
            const sluice::Error& e = exchanged.error();
            require(e.message.starts_with("redis " + format_redis_endpoint(self)), "an error names the server",
                    e.message);
            require(e.code == sluice::ErrorCode::unreachable || e.code == sluice::ErrorCode::internal,
                    "an error is unreachable or internal", e.message);
        }
    }
    require(::write(stop_write.get(), "x", 1) == 1, "the server is told to stop");
    server.join();
    return 0;
}
