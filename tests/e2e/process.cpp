// SPDX-License-Identifier: Apache-2.0
#include "process.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace sluice::test {
namespace {

// Only async-signal-safe calls run between fork and exec: no strerror, no
// allocation; the errno is written as digits.
void child_fail(const char* what) {
    char digits[16];
    int n = sizeof(digits);
    int e = errno;
    do {
        digits[--n] = static_cast<char>('0' + e % 10);
        e /= 10;
    } while (e > 0 && n > 0);
    (void)!write(STDERR_FILENO, what, strlen(what));
    (void)!write(STDERR_FILENO, ": errno ", 8);
    (void)!write(STDERR_FILENO, digits + n, sizeof(digits) - static_cast<size_t>(n));
    (void)!write(STDERR_FILENO, "\n", 1);
    _exit(127);
}

int decode(int status) {
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return -1;
}

}  // namespace

pid_t spawn(const std::vector<std::string>& argv, const SpawnOptions& options) {
    // Everything the child needs is prepared before fork: after it, in a
    // multithreaded parent, only async-signal-safe calls are allowed.
    std::vector<char*> args;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (options.append ? O_APPEND : O_TRUNC);
    const pid_t parent = getpid();

    const pid_t pid = fork();
    if (pid != 0) return pid;

    // The child.
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(127);
    if (options.own_group && setpgid(0, 0) != 0) _exit(127);
    const int err = open(options.stderr_path.c_str(), flags, 0644);
    if (err < 0 || dup2(err, STDERR_FILENO) < 0) _exit(127);
    const int out = open(options.stdout_path.c_str(), flags, 0644);
    if (out < 0 || dup2(out, STDOUT_FILENO) < 0) child_fail(options.stdout_path.c_str());
    const int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (in < 0 || dup2(in, STDIN_FILENO) < 0) child_fail("/dev/null");
    if (!options.netns_path.empty()) {
        const int ns = open(options.netns_path.c_str(), O_RDONLY | O_CLOEXEC);
        if (ns < 0 || setns(ns, CLONE_NEWNET) != 0) child_fail(options.netns_path.c_str());
    }
    // The test may block signals in its threads; the child starts clean.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(args[0], args.data());
    child_fail(args[0]);
    return -1;  // not reached
}

int wait_exit(pid_t pid, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int code = -1;
    while (!exited(pid, &code)) {
        if (std::chrono::steady_clock::now() > deadline) {
            kill(pid, SIGKILL);
            int status = 0;
            waitpid(pid, &status, 0);
            return -1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return code;
}

bool exited(pid_t pid, int* code) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
        *code = decode(status);
        return true;
    }
    if (r < 0) {  // not our child (already reaped): report it as gone
        *code = -1;
        return true;
    }
    return false;
}

int terminate_child(pid_t pid, std::chrono::milliseconds timeout) {
    if (pid <= 0) return -1;  // kill(-1) would signal every process
    kill(pid, SIGTERM);
    return wait_exit(pid, timeout);
}

std::string sanitizer_report(const std::string& stderr_text) {
    static const char* const kMarks[] = {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                                         "SUMMARY: UndefinedBehaviorSanitizer"};
    size_t first = std::string::npos;
    for (const char* mark : kMarks) first = std::min(first, stderr_text.find(mark));
    if (first == std::string::npos) return {};
    const size_t line = stderr_text.rfind('\n', first);
    return stderr_text.substr(line == std::string::npos ? 0 : line + 1);
}

ProcResult run(const std::vector<std::string>& argv, const std::string& scratch_prefix,
               std::chrono::milliseconds timeout, const std::string& netns_path) {
    SpawnOptions options{.stdout_path = scratch_prefix + ".out",
                         .stderr_path = scratch_prefix + ".err",
                         .netns_path = netns_path,
                         .append = false};
    ProcResult result;
    const pid_t pid = spawn(argv, options);
    if (pid < 0) {
        result.err = std::string("fork: ") + std::strerror(errno);
        return result;
    }
    result.code = wait_exit(pid, timeout);
    result.out = read_file(options.stdout_path);
    result.err = read_file(options.stderr_path);
    return result;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

void write_file(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
}

std::string join_argv(const std::vector<std::string>& argv) {
    std::string line;
    for (const auto& arg : argv) {
        if (!line.empty()) line += ' ';
        const bool quote = arg.empty() || arg.find_first_of(" \t\"'$") != std::string::npos;
        line += quote ? "'" + arg + "'" : arg;
    }
    return line;
}

}  // namespace sluice::test
