// SPDX-License-Identifier: Apache-2.0
// unit = "tcp_syn" against the kernel's own TCP: a client namespace connects
// through the veth pair to a listener behind sl0, where the program runs.
// Each source may open `burst` connections at once (GCRA), `limit` per
// window (a fixed window per source), or the class `limit` per rolling
// window (a sliding log); the SYNs of the others are dropped at the driver,
// and the connections that were opened carry data untouched, because only
// connection attempts are counted.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/privilege.h"
#include "e2e_fixture.h"
#include "unique_fd.h"

namespace sluice::test::tcp_syn_test {
namespace {

using namespace std::chrono_literals;

constexpr const char* kServer = "10.77.0.1";
constexpr const char* kClient = "10.77.0.2";
constexpr const char* kSecondClient = "10.77.0.3";  // another source in the same namespace
constexpr uint16_t kPort = 2222;
constexpr int kBurst = 5;
constexpr int kAttempts = 20;

// A second namespace holding sl1, so the client's packets cross the veth
// pair into sl0 instead of staying on loopback. sl1 goes back to the world
// before the namespace is deleted, so the pair outlives it.
class ClientNamespace {
  public:
    ClientNamespace(std::string world, std::string name) : world_(std::move(world)), name_(std::move(name)) {
        created_ = shell("ip netns add " + name_) == 0;
        moved_ = created_ && shell("ip -n " + world_ + " link set sl1 netns " + name_) == 0;
        ok_ = moved_ && shell("ip -n " + world_ + " addr add " + kServer + "/24 dev sl0") == 0 &&
              shell("ip -n " + name_ + " addr add " + kClient + "/24 dev sl1") == 0 &&
              shell("ip -n " + name_ + " addr add " + kSecondClient + "/24 dev sl1") == 0 &&
              shell("ip -n " + name_ + " link set sl1 up") == 0 && shell("ip -n " + name_ + " link set lo up") == 0;
    }
    ~ClientNamespace() {
        if (moved_) shell("ip -n " + name_ + " link set sl1 netns " + world_);
        if (created_) shell("ip netns del " + name_);
    }
    ClientNamespace(const ClientNamespace&) = delete;
    ClientNamespace& operator=(const ClientNamespace&) = delete;
    bool ok() const { return ok_; }
    const std::string& name() const { return name_; }

  private:
    std::string world_, name_;
    bool created_ = false, moved_ = false, ok_ = false;
};

sockaddr_in server_address() {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(kPort);
    inet_pton(AF_INET, kServer, &address.sin_addr);
    return address;
}

// Starts `count` non-blocking connects from address `from`; returns the sockets.
std::vector<UniqueFd> start_connects(int count, const char* from) {
    std::vector<UniqueFd> sockets;
    const sockaddr_in address = server_address();
    sockaddr_in source{};
    source.sin_family = AF_INET;
    inet_pton(AF_INET, from, &source.sin_addr);
    for (int i = 0; i < count; i++) {
        UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
        EXPECT_GE(fd.get(), 0) << std::strerror(errno);
        EXPECT_EQ(bind(fd.get(), reinterpret_cast<const sockaddr*>(&source), sizeof(source)), 0)
            << std::strerror(errno);
        const int rc = connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address));
        EXPECT_TRUE(rc == 0 || errno == EINPROGRESS) << std::strerror(errno);
        sockets.push_back(std::move(fd));
    }
    return sockets;
}

// Which of `sockets` are connected after `wait` (less than the 1 s after
// which TCP sends its first retransmitted SYN).
std::vector<bool> connected_after(const std::vector<UniqueFd>& sockets, std::chrono::milliseconds wait) {
    std::this_thread::sleep_for(wait);
    std::vector<bool> connected;
    for (const UniqueFd& fd : sockets) {
        pollfd p{fd.get(), POLLOUT, 0};
        int error = -1;
        socklen_t length = sizeof(error);
        connected.push_back(poll(&p, 1, 0) == 1 && getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) == 0 &&
                            error == 0);
    }
    return connected;
}

// A listener at kServer:kPort in the namespace `world`.
UniqueFd listen_in(const std::string& world) {
    EnterNamespace in_world(world);
    EXPECT_TRUE(in_world.ok());
    UniqueFd listener(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const int one = 1;
    setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    const sockaddr_in address = server_address();
    EXPECT_EQ(bind(listener.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0)
        << std::strerror(errno);
    EXPECT_EQ(listen(listener.get(), 64), 0);
    return listener;
}

// `count` simultaneous attempts from the client namespace; which connected.
std::vector<bool> attempt(const ClientNamespace& client, int count, std::vector<UniqueFd>& sockets,
                          const char* from = kClient) {
    EnterNamespace in_client(client.name());
    EXPECT_TRUE(in_client.ok());
    sockets = start_connects(count, from);
    return connected_after(sockets, 500ms);
}

int opened(const std::vector<bool>& connected) {
    int n = 0;
    for (bool c : connected) n += c;
    return n;
}

// Sends 64 KiB on each connected socket and reads it all at the listener:
// the bytes received.
size_t carry_data(int listener, std::vector<UniqueFd>& sockets, const std::vector<bool>& connected) {
    std::vector<char> block(64 * 1024, 'x');
    for (size_t i = 0; i < sockets.size(); i++) {
        if (!connected[i]) continue;
        const int flags = fcntl(sockets[i].get(), F_GETFL);
        fcntl(sockets[i].get(), F_SETFL, flags & ~O_NONBLOCK);
        EXPECT_EQ(send(sockets[i].get(), block.data(), block.size(), 0), static_cast<ssize_t>(block.size()));
        shutdown(sockets[i].get(), SHUT_WR);
    }
    size_t received = 0;
    for (int accepted = 0; accepted < opened(connected); accepted++) {
        pollfd p{listener, POLLIN, 0};
        if (poll(&p, 1, 5000) != 1) {
            ADD_FAILURE() << "connection " << accepted << " never reached the listener";
            break;
        }
        UniqueFd conn(accept(listener, nullptr, nullptr));
        EXPECT_GE(conn.get(), 0);
        char buffer[16384];
        for (ssize_t n; (n = recv(conn.get(), buffer, sizeof(buffer), 0)) > 0;) received += static_cast<size_t>(n);
    }
    return received;
}

// Closes the attempts that did not connect, before TCP retries them.
void drop_refused(std::vector<UniqueFd>& sockets, const std::vector<bool>& connected) {
    for (size_t i = 0; i < sockets.size(); i++)
        if (!connected[i]) sockets[i] = UniqueFd();
}

class TcpSyn : public SluiceE2E {};

TEST_F(TcpSyn, EachSourceOpensItsBurstOfRealConnectionsAndTheyCarryDataUntouched) {
    SLUICE_REQUIRE_BPF();
    ASSERT_NO_FATAL_FAILURE(start_world());
    ASSERT_TRUE(push_policy("policy.toml", "[[class]]\nname = \"default\"\nper_source = { rate = 1, burst = " +
                                               std::to_string(kBurst) + ", unit = \"tcp_syn\" }\n"));
    ClientNamespace client(netns_name(), netns_name() + "-client");
    ASSERT_TRUE(client.ok()) << "could not set up the client namespace " << client.name();

    const UniqueFd listener = listen_in(netns_name());
    std::vector<UniqueFd> sockets;
    const std::vector<bool> connected = attempt(client, kAttempts, sockets);
    figure_line("connections", std::to_string(opened(connected)) + " of " + std::to_string(kAttempts) +
                                   " simultaneous attempts opened, burst " + std::to_string(kBurst));
    EXPECT_EQ(opened(connected), kBurst) << "exactly the burst of connection attempts is admitted";
    // The open connections carry 64 KiB each: their segments are not SYNs.
    EXPECT_EQ(carry_data(listener.get(), sockets, connected), static_cast<size_t>(kBurst) * 64 * 1024)
        << "established traffic lost data";

    // A second later the source has one attempt again.
    drop_refused(sockets, connected);
    std::this_thread::sleep_for(1100ms);
    std::vector<UniqueFd> later;
    EXPECT_TRUE(attempt(client, 1, later).front()) << "the bucket did not refill at 1 attempt per second";

    const auto stats = this->stats();
    ASSERT_TRUE(stats);
    EXPECT_GE(class_counter(*stats, "default", "drop_packets"), static_cast<uint64_t>(kAttempts - kBurst));
    EXPECT_EQ(stat_counter(*stats, "source_inserts"), 1u) << "one client, one entry";
}

// "4 new connections per 2 s for the whole class, exact": a sliding log of
// TCP SYNs at the class aggregate. The fifth attempt within 2 s of the
// first is refused; once the first admission is 2 s old, one more passes.
TEST_F(TcpSyn, ASlidingLogClassAdmitsExactlyItsLimitInTheRollingWindow) {
    SLUICE_REQUIRE_BPF();
    ASSERT_NO_FATAL_FAILURE(start_world());
    constexpr int kLimit = 4;
    ASSERT_TRUE(push_policy("policy.toml",
                            "[[class]]\nname = \"default\"\naggregate = { algorithm = \"sliding_log\", "
                            "limit = " +
                                std::to_string(kLimit) + ", window = \"2s\", unit = \"tcp_syn\" }\n"));
    ClientNamespace client(netns_name(), netns_name() + "-client");
    ASSERT_TRUE(client.ok()) << "could not set up the client namespace " << client.name();
    const UniqueFd listener = listen_in(netns_name());

    const auto first = std::chrono::steady_clock::now();
    std::vector<UniqueFd> sockets;
    const std::vector<bool> connected = attempt(client, 10, sockets);
    figure_line("connections", std::to_string(opened(connected)) +
                                   " of 10 simultaneous attempts opened, sliding_log limit " + std::to_string(kLimit));
    EXPECT_EQ(opened(connected), kLimit);
    EXPECT_EQ(carry_data(listener.get(), sockets, connected), static_cast<size_t>(kLimit) * 64 * 1024)
        << "established traffic lost data";
    drop_refused(sockets, connected);

    // 1 s on: the window still holds all four.
    std::this_thread::sleep_until(first + 1000ms);
    std::vector<UniqueFd> within;
    EXPECT_FALSE(attempt(client, 1, within).front()) << "a fifth connection within the rolling window";
    within.clear();
    // 2.2 s on: the first admissions have left it.
    std::this_thread::sleep_until(first + 2200ms);
    std::vector<UniqueFd> after;
    EXPECT_TRUE(attempt(client, 1, after).front()) << "the log did not let the first admissions go";

    const auto stats = this->stats();
    ASSERT_TRUE(stats);
    EXPECT_GE(class_counter(*stats, "default", "drop_packets"), 10u - kLimit + 1);
}

// "3 new connections per source per 2 s": a fixed window of TCP SYNs at
// the per-source level. Two sources attempt at once just after a window
// boundary (the program's clock is CLOCK_MONOTONIC): each opens exactly 3,
// their connections carry data untouched, and the next window each opens 3
// again.
TEST_F(TcpSyn, AFixedWindowPerSourceAdmitsEachSourceItsLimitPerWindow) {
    SLUICE_REQUIRE_BPF();
    ASSERT_NO_FATAL_FAILURE(start_world());
    constexpr int kLimit = 3;
    constexpr auto kWindow = 2s;
    ASSERT_TRUE(push_policy("policy.toml",
                            "[[class]]\nname = \"default\"\nper_source = { algorithm = \"fixed_window\", "
                            "limit = " +
                                std::to_string(kLimit) + ", window = \"2s\", unit = \"tcp_syn\" }\n"));
    ClientNamespace client(netns_name(), netns_name() + "-client");
    ASSERT_TRUE(client.ok()) << "could not set up the client namespace " << client.name();
    const UniqueFd listener = listen_in(netns_name());

    // 50 ms into the next window; the attempts take a few ms.
    const auto since_boundary = std::chrono::steady_clock::now().time_since_epoch() % kWindow;
    std::this_thread::sleep_for(kWindow - since_boundary + 50ms);
    std::vector<UniqueFd> first, second;
    std::vector<bool> first_connected, second_connected;
    {
        EnterNamespace in_client(client.name());
        ASSERT_TRUE(in_client.ok());
        first = start_connects(8, kClient);
        second = start_connects(8, kSecondClient);
        first_connected = connected_after(first, 400ms);
        second_connected = connected_after(second, 0ms);
    }
    figure_line("connections", std::to_string(opened(first_connected)) + " and " +
                                   std::to_string(opened(second_connected)) +
                                   " of 8 simultaneous attempts from each of two sources opened, fixed_window limit " +
                                   std::to_string(kLimit) + " per source");
    EXPECT_EQ(opened(first_connected), kLimit);
    EXPECT_EQ(opened(second_connected), kLimit);
    EXPECT_EQ(carry_data(listener.get(), first, first_connected), static_cast<size_t>(kLimit) * 64 * 1024)
        << "established traffic lost data";
    EXPECT_EQ(carry_data(listener.get(), second, second_connected), static_cast<size_t>(kLimit) * 64 * 1024)
        << "established traffic lost data";
    drop_refused(first, first_connected);
    drop_refused(second, second_connected);

    // The next window: each source has its limit again.
    std::this_thread::sleep_for(kWindow - std::chrono::steady_clock::now().time_since_epoch() % kWindow + 50ms);
    std::vector<UniqueFd> again;
    EXPECT_EQ(opened(attempt(client, 5, again)), kLimit) << "the next window did not start a fresh count";

    const auto stats = this->stats();
    ASSERT_TRUE(stats);
    EXPECT_GE(class_counter(*stats, "default", "drop_packets"), 2u * (8 - kLimit) + (5 - kLimit));
    EXPECT_EQ(stat_counter(*stats, "source_inserts"), 2u) << "two clients, two entries";
}

}  // namespace
}  // namespace sluice::test::tcp_syn_test
