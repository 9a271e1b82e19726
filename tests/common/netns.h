// SPDX-License-Identifier: Apache-2.0
// Guards for tests that need the kernel's networking: a bpffs directory, a
// throwaway network namespace holding a veth pair sl0 <-> sl1, and a scope
// that moves the calling thread into a namespace. Each removes what it made
// in its destructor, also when the test fails; the host's own interfaces are
// never touched. Names are unique per process and per use, so concurrent runs
// do not collide.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
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

// A bpffs directory that is removed with everything in it, whatever happens.
// Made as sluiced makes its own: bpffs is mounted on /sys/fs/bpf first if
// this machine has none there yet (a fresh boot without systemd has none).
class PinDir {
  public:
    explicit PinDir(std::string path = "/sys/fs/bpf/sluice-test-" + unique_suffix()) : path_(std::move(path)) {
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
