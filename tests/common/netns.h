// SPDX-License-Identifier: Apache-2.0
// Guards for tests that need the kernel's networking: a bpffs directory, a
// throwaway network namespace holding a veth pair sl0 <-> sl1, and a scope
// that moves the calling thread into a namespace. Each removes what it made
// in its destructor, also when the test fails; the host's own interfaces are
// never touched. Names are unique per process and per use, so concurrent runs
// do not collide. What a run killed before its destructors ran left (a suite's
// timeout) is removed by the next run's first guard.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>

#include "xdp_host.h"  // prepare_bpffs_dir

namespace sluice::test {

// "<pid>-<n>": unique per run and per use.
inline std::string unique_suffix() {
    static std::atomic<int> counter{0};
    return std::to_string(getpid()) + "-" + std::to_string(counter++);
}

// Runs a shell command with its stdout discarded; returns system()'s status.
inline int shell(const std::string& command) { return std::system((command + " >/dev/null").c_str()); }

// The process a "sluice-<what>-<pid>-<n>" name was made by (0: not such a name).
inline pid_t maker_of(const std::string& name) {
    const size_t last = name.rfind('-');
    const size_t before = last == std::string::npos || last == 0 ? std::string::npos : name.rfind('-', last - 1);
    if (!name.starts_with("sluice-") || before == std::string::npos) return 0;
    const std::string pid = name.substr(before + 1, last - before - 1), n = name.substr(last + 1);
    const auto digits = [](const std::string& text) {
        return !text.empty() && text.size() < 10 && text.find_first_not_of("0123456789") == std::string::npos;
    };
    return digits(pid) && digits(n) ? static_cast<pid_t>(std::stol(pid)) : 0;
}

// Namespaces and pin directories of test runs whose process is gone, once
// per process: a run that meson's timeout killed never ran its destructors.
inline void remove_leftovers_of_dead_runs() {
    static std::once_flag once;
    std::call_once(once, [] {
        const auto dead = [](const std::string& name) {
            const pid_t maker = maker_of(name);
            return maker > 0 && kill(maker, 0) != 0 && errno == ESRCH;
        };
        std::error_code ec;
        for (const auto& entry : std::filesystem::directory_iterator("/var/run/netns", ec))
            if (const std::string name = entry.path().filename(); dead(name)) shell("ip netns del " + name);
        for (const auto& entry : std::filesystem::directory_iterator("/sys/fs/bpf", ec))
            if (dead(entry.path().filename())) std::filesystem::remove_all(entry.path(), ec);
    });
}

// A bpffs directory that is removed with everything in it, whatever happens.
// Made as sluiced makes its own: bpffs is mounted on /sys/fs/bpf first if
// this machine has none there yet (a fresh boot without systemd has none).
class PinDir {
  public:
    explicit PinDir(std::string path = "/sys/fs/bpf/sluice-test-" + unique_suffix()) : path_(std::move(path)) {
        remove_leftovers_of_dead_runs();
        const Status made = prepare_bpffs_dir(path_);
        if (!made) ADD_FAILURE() << made.error().message;
    }
    ~PinDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    PinDir(const PinDir&) = delete;
    PinDir& operator=(const PinDir&) = delete;
    const std::string& path() const { return path_; }
    bool empty() const {
        std::error_code ec;
        return std::filesystem::is_empty(path_, ec) || ec;
    }

  private:
    std::string path_;
};

// A network namespace, its loopback up; deleting it deletes the links in it.
class NetNamespace {
  public:
    explicit NetNamespace(std::string name = "sluice-t-" + unique_suffix()) : name_(std::move(name)) {
        remove_leftovers_of_dead_runs();
        created_ = shell("ip netns add " + name_) == 0;
        ok_ = created_ && shell("ip -n " + name_ + " link set lo up") == 0;
    }
    virtual ~NetNamespace() {
        if (created_) shell("ip netns del " + name_);
    }
    NetNamespace(const NetNamespace&) = delete;
    NetNamespace& operator=(const NetNamespace&) = delete;
    bool ok() const { return ok_; }
    const std::string& name() const { return name_; }
    std::string path() const { return "/var/run/netns/" + name_; }

  protected:
    bool ok_ = false;

  private:
    std::string name_;
    bool created_ = false;
};

// A network namespace holding a veth pair sl0 <-> sl1, both up.
class VethNamespace : public NetNamespace {
  public:
    explicit VethNamespace(std::string name = "sluice-t-" + unique_suffix()) : NetNamespace(std::move(name)) {
        ok_ = ok_ && shell("ip -n " + this->name() + " link add sl0 type veth peer name sl1") == 0 &&
              shell("ip -n " + this->name() + " link set sl0 up") == 0 &&
              shell("ip -n " + this->name() + " link set sl1 up") == 0;
    }
};

// Moves this thread into a named namespace; back to the original on scope exit.
class EnterNamespace {
  public:
    explicit EnterNamespace(const std::string& name) {
        saved_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        const int target = ::open(("/var/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
        ok_ = saved_ >= 0 && target >= 0 && setns(target, CLONE_NEWNET) == 0;
        if (target >= 0) close(target);
    }
    ~EnterNamespace() {
        if (saved_ >= 0) {
            if (setns(saved_, CLONE_NEWNET) != 0)
                ADD_FAILURE() << "could not return to the original network namespace: " << std::strerror(errno);
            close(saved_);
        }
    }
    EnterNamespace(const EnterNamespace&) = delete;
    EnterNamespace& operator=(const EnterNamespace&) = delete;
    bool ok() const { return ok_; }

  private:
    int saved_ = -1;
    bool ok_ = false;
};

}  // namespace sluice::test
