// SPDX-License-Identifier: Apache-2.0
// sluicectl end to end, minus the process: parse the command line, read the
// policy file, call sluiced, print the result, return the exit status.
// Streams and $SLUICE_SOCKET are parameters so tests drive it against a real
// ControlServer.
#pragma once

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
ExitStatus exit_status_for(ControlErrorCode code);

// `args` excludes the program name; `socket_env` is $SLUICE_SOCKET or null.
int run_sluicectl(const std::vector<std::string>& args, const char* socket_env, std::istream& in, std::ostream& out,
                  std::ostream& err);

}  // namespace sluice::cli
