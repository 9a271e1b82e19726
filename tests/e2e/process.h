// SPDX-License-Identifier: Apache-2.0
// Child processes for the end-to-end tests: fork + exec with stdout and
// stderr going to files (no pipes to drain, so nothing can deadlock), stdin
// from /dev/null, optionally inside a network namespace. Only the network
// namespace is entered (setns(CLONE_NEWNET) in the child): `ip netns exec`
// would also remount /sys and hide the host's bpffs from sluiced.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace sluice::test {

struct SpawnOptions {
    std::string stdout_path = "/dev/null";
    std::string stderr_path = "/dev/null";
    std::string netns_path;  // /var/run/netns/NAME, or empty for this namespace
    bool append = false;     // append to the output files instead of truncating them
    bool own_group = false;  // a process group of its own (pgid = pid), so kill(-pid) reaches its children
};

// Starts argv[0] (a path, not searched in $PATH) with argv; returns the pid,
// or -1 with errno set when fork failed. A child that cannot enter the
// namespace, open its files or exec exits 127 after saying why on its stderr.
// Children get SIGKILL if the test process dies, so none outlives a crash.
pid_t spawn(const std::vector<std::string>& argv, const SpawnOptions& options);

// The exit code (0..255), 128 + signal number when killed by a signal, or -1
// when the child did not exit within `timeout` (it is then killed and reaped).
int wait_exit(pid_t pid, std::chrono::milliseconds timeout);

// Whether the child has exited; reaps it and stores its code if so.
bool exited(pid_t pid, int* code);

// Stops a child the way its service manager would: SIGTERM, and SIGKILL if
// it has not exited within `timeout`; returns as wait_exit. A daemon stopped
// so runs its exit path, where LeakSanitizer looks for leaks.
int terminate_child(pid_t pid, std::chrono::milliseconds timeout);

// The sanitizer reports (AddressSanitizer, LeakSanitizer, UndefinedBehavior-
// Sanitizer) in what a child wrote to its stderr, from the first report's
// line to the end; empty if there is none. Every test that starts sluiced or
// sluice-dpdk checks its stderr with this once the child is stopped.
std::string sanitizer_report(const std::string& stderr_text);

struct ProcResult {
    int code = -1;  // as wait_exit
    std::string out;
    std::string err;
};

// Runs to completion (or timeout) with output captured through two files
// named after `scratch_prefix` (".out", ".err").
ProcResult run(const std::vector<std::string>& argv, const std::string& scratch_prefix,
               std::chrono::milliseconds timeout, const std::string& netns_path = {});

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& text);

// The argv as one shell-like line, for messages.
std::string join_argv(const std::vector<std::string>& argv);

}  // namespace sluice::test
