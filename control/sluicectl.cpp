// SPDX-License-Identifier: Apache-2.0
// sluicectl: the command line for sluiced. Everything but the process lives
// in cli_run.h so the unit tests drive it against a real control socket.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "cli_run.h"

int main(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    const int status = sluice::cli::run_sluicectl(args, std::getenv("SLUICE_SOCKET"), std::cin, std::cout, std::cerr);
    // A full disk or closed stdout must not pass for success.
    std::cout.flush();
    if (!std::cout) {
        std::cerr << "sluicectl: cannot write to stdout\n";
        return status == sluice::cli::kExitOk ? sluice::cli::kExitRefused : status;
    }
    return status;
}
