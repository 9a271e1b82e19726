// SPDX-License-Identifier: Apache-2.0
// sluicectl: the command line for sluiced. Everything but the process lives
// in cli_run.h so the unit tests drive it against a real control socket.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "cli_run.h"

namespace {

int stop_pipe_write = -1;
volatile std::sig_atomic_t stopping = 0;

// The first SIGINT or SIGTERM asks a watch to stop after the refresh in
// flight (exit 0); a second one ends the process at once, so a daemon that
// stopped answering cannot hold sluicectl for the whole --timeout.
extern "C" void on_stop_signal(int signal_number) {
    if (stopping) {
        ::signal(signal_number, SIG_DFL);
        ::raise(signal_number);
        return;
    }
    stopping = 1;
    const int saved_errno = errno;
    [[maybe_unused]] const ssize_t written = ::write(stop_pipe_write, "x", 1);
    errno = saved_errno;
}

// Installed only when a watch starts: every other command keeps the default
// SIGINT, which ends it wherever it is.
int watch_stop_fd() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
        // Ctrl-C still ends the watch, only by the default action (not exit 0).
        std::cerr << "sluicectl: cannot create a pipe for Ctrl-C; it will end the watch abruptly\n";
        return -1;
    }
    stop_pipe_write = fds[1];
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (const int signal_number : {SIGINT, SIGTERM}) {
        // A signal ignored from the start (a background job of a script, nohup)
        // stays ignored, as the shell meant.
        struct sigaction previous {};
        if (::sigaction(signal_number, nullptr, &previous) == 0 && previous.sa_handler == SIG_IGN) continue;
        if (::sigaction(signal_number, &action, nullptr) != 0) {
            std::cerr << "sluicectl: cannot handle signal " << signal_number << "; it will end the watch abruptly\n";
        }
    }
    return fds[0];
}

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    sluice::cli::WatchHooks hooks;
    hooks.terminal = ::isatty(STDOUT_FILENO) == 1;
    hooks.begin = watch_stop_fd;
    const int status =
        sluice::cli::run_sluicectl(args, std::getenv("SLUICE_SOCKET"), std::cin, std::cout, std::cerr, hooks);
    // A full disk or closed stdout must not pass for success.
    std::cout.flush();
    if (!std::cout) {
        std::cerr << "sluicectl: cannot write to stdout\n";
        return status == sluice::cli::kExitOk ? sluice::cli::kExitRefused : status;
    }
    return status;
}
