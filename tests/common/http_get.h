// SPDX-License-Identifier: Apache-2.0
// An HTTP/1.0 GET to 127.0.0.1 with a deadline, for tests that scrape
// /metrics (sluiced's, sluice-dpdk's, a test's Prometheus) without a client
// library: the network namespace it runs in is the calling thread's.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

namespace sluice::test {

struct HttpResponse {
    int status = -1;  // -1: no response; `error` says why
    std::string body;
    std::string error;
};

inline HttpResponse http_get_loopback(int port, const std::string& target,
                                      std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    HttpResponse response;
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        response.error = std::string("socket: ") + std::strerror(errno);
        return response;
    }
    // Bounds connect, each send and each recv; the deadline bounds the whole.
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>(timeout.count() % 1000 * 1000);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string raw;
    if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
        response.error = "connect to 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(errno);
    } else {
        // HTTP/1.0 without keep-alive: the server closes after the body,
        // so reading to EOF is the whole response, never chunked.
        const std::string request =
            "GET " + target + " HTTP/1.0\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\n\r\n";
        size_t sent = 0;
        while (sent < request.size()) {
            const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
            if (n <= 0) break;
            sent += static_cast<size_t>(n);
        }
        char buffer[16384];
        while (sent == request.size() && std::chrono::steady_clock::now() < deadline) {
            const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
            if (n <= 0) {
                if (n < 0 && errno == EINTR) continue;
                if (n < 0) response.error = std::string("recv: ") + std::strerror(errno);
                break;
            }
            raw.append(buffer, static_cast<size_t>(n));
        }
        if (sent != request.size()) response.error = std::string("send: ") + std::strerror(errno);
    }
    close(fd);
    const size_t head_end = raw.find("\r\n\r\n");
    if (raw.rfind("HTTP/1.", 0) == 0 && raw.size() > 12 && head_end != std::string::npos) {
        response.status = std::atoi(raw.c_str() + 9);
        response.body = raw.substr(head_end + 4);
    } else if (response.error.empty()) {
        response.error = "not an HTTP response (" + std::to_string(raw.size()) + " bytes): " + raw.substr(0, 200);
    }
    return response;
}

}  // namespace sluice::test
