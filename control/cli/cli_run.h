// SPDX-License-Identifier: Apache-2.0
// Layer: control/cli, sluicectl. Sees control/lib only: it reaches any
// daemon through the control socket.
// sluicectl end to end, minus the process: parse the command line, read the
// policy file, call sluiced, print the result, return the exit status.
// Streams and $SLUICE_SOCKET are parameters so tests drive it against a real
// ControlServer.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "control_protocol.h"

namespace sluice::cli {

// The exit statuses the spec fixes; scripts rely on them.
enum ExitStatus : int {
    kExitOk = 0,
    kExitRefused = 1,           // the daemon refused (invalid input, internal error), or FILE unreadable
    kExitUsage = 2,             // the command line is wrong
    kExitUnreachable = 3,       // not running, no socket, timed out
    kExitPermissionDenied = 4,  // the socket's mode or the daemon's peer check
    kExitConflict = 5,          // --if-version lost the compare-and-swap
};

// The exit status for an error response carrying `code`.
ExitStatus exit_status_for(ErrorCode code);

// What --watch needs from the process around it; hooks rather than globals,
// so the tests run watches in-process.
struct WatchHooks {
    // stdout is a terminal: each refresh clears the screen ("\x1b[H\x1b[2J")
    // instead of following the last one after a blank line.
    bool terminal = false;
    // Called once when a watch starts; returns an fd that turns readable when
    // the watch should stop (sluicectl: SIGINT, SIGTERM), or -1 for none.
    std::function<int()> begin;
};

// `args` excludes the program name; `socket_env` is $SLUICE_SOCKET or null.
// A watch runs until --count refreshes are done (0), the stop fd turns
// readable (0), stdout fails (1), or sluiced goes away (3) or refuses (1).
int run_sluicectl(const std::vector<std::string>& args, const char* socket_env, std::istream& in, std::ostream& out,
                  std::ostream& err, const WatchHooks& hooks = {});

}  // namespace sluice::cli
