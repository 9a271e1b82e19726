// SPDX-License-Identifier: Apache-2.0
// packaging/sluicectl.bash-completion, driven the way bash drives it: a
// non-interactive bash sources the script (with and without bash-completion's
// helpers loaded), finds the function `complete -p sluicectl` names, sets
// COMP_WORDS/COMP_CWORD/COMP_LINE/COMP_POINT for a typed line and calls it;
// the test compares COMPREPLY with the exact candidates. Interface names come
// from a real sluiced in a throwaway namespace (the e2e fixture: root and
// BPF), so that case skips, or fails under SLUICE_REQUIRE_PRIVILEGED=1.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/binary_from_env.h"
#include "common/privilege.h"
#include "e2e/e2e_fixture.h"
#include "e2e/process.h"

namespace sluice::test {
namespace completion_test {

using namespace std::chrono_literals;
using Candidates = std::set<std::string>;

constexpr const char* kBashCompletion = "/usr/share/bash-completion/bash_completion";

// `text` in single quotes for bash.
std::string quoted(const std::string& text) {
    std::string out = "'";
    for (const char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

// COMP_WORDS as bash makes them from a line typed up to the cursor (at its
// end): split at blanks, and '=' a word of its own (it is in COMP_WORDBREAKS);
// a trailing blank starts an empty word.
std::vector<std::string> comp_words(const std::string& line) {
    std::vector<std::string> words;
    std::istringstream in(line);
    std::string word;
    while (in >> word) {
        std::string part;
        for (const char c : word) {
            if (c != '=') {
                part += c;
                continue;
            }
            if (!part.empty()) words.push_back(part);
            words.push_back("=");
            part.clear();
        }
        if (!part.empty() || word.back() != '=') words.push_back(part);
    }
    if (line.empty() || line.back() == ' ') words.push_back("");
    return words;
}

struct Completion {
    Candidates candidates;
    std::chrono::milliseconds took{};
    ProcResult run;
};

class CompletionTest : public ::testing::TestWithParam<bool> {
  protected:
    void SetUp() override {
        char templ[] = "/tmp/sluice-completion-XXXXXX";
        ASSERT_NE(mkdtemp(templ), nullptr);
        dir_ = templ;
        if (with_helpers()) {
            SLUICE_SKIP_UNLESS(std::filesystem::exists(kBashCompletion),
                               std::string("needs bash-completion (") + kBashCompletion + ")");
        }
    }
    void TearDown() override {
        std::error_code ignored;
        std::filesystem::remove_all(dir_, ignored);
    }

    bool with_helpers() const { return GetParam(); }

    // The bash that sources the script with the built sluicectl first in
    // PATH, then runs `body`.
    std::string prologue(const std::string& socket_env) const {
        const std::string ctl_dir = std::filesystem::path(binary_from_env("SLUICECTL")).parent_path();
        std::string script = "PATH=" + quoted(ctl_dir) + ":$PATH\n";
        script += socket_env.empty() ? "unset SLUICE_SOCKET\n" : "export SLUICE_SOCKET=" + quoted(socket_env) + "\n";
        if (with_helpers()) script += "source " + quoted(kBashCompletion) + " || exit 90\n";
        script += "source " + quoted(binary_from_env("SLUICECTL_COMPLETION")) + " || exit 91\n";
        return script;
    }

    ProcResult bash(const std::string& script) {
        return run({"/bin/bash", "--norc", "--noprofile", "-c", script}, dir_ + "/bash-" + std::to_string(runs_++),
                   20s);
    }

    // What completing `line` (the cursor at its end) offers.
    Completion complete(const std::string& line, const std::string& socket_env = {}) {
        const std::vector<std::string> words = comp_words(line);
        std::string script = prologue(socket_env);
        script +=
            "spec=$(complete -p sluicectl) || exit 92\n"
            "fn=${spec#*-F }; fn=${fn%% *}\n"
            "COMP_WORDS=(";
        for (const std::string& word : words) script += quoted(word) + " ";
        const std::size_t cword = words.size() - 1;
        script += ")\nCOMP_CWORD=" + std::to_string(cword) + "\nCOMP_LINE=" + quoted(line) +
                  "\nCOMP_POINT=" + std::to_string(line.size()) + "\nCOMP_TYPE=9 COMP_KEY=9\n" + "\"$fn\" sluicectl " +
                  quoted(words[cword]) + " " + quoted(cword > 0 ? words[cword - 1] : "") +
                  "\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n";
        const auto start = std::chrono::steady_clock::now();
        Completion result;
        result.run = bash(script);
        result.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
        EXPECT_EQ(result.run.code, 0) << "completing \"" << line << "\": " << result.run.err;
        std::istringstream out(result.run.out);
        for (std::string candidate; std::getline(out, candidate);)
            if (!candidate.empty()) result.candidates.insert(candidate);
        return result;
    }

    Candidates candidates(const std::string& line, const std::string& socket_env = {}) {
        return complete(line, socket_env).candidates;
    }

    std::string dir_;
    int runs_ = 0;
};

INSTANTIATE_TEST_SUITE_P(BashCompletion, CompletionTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                             return info.param ? "WithBashCompletion" : "WithoutBashCompletion";
                         });

TEST_P(CompletionTest, LoadsAndRegistersForSluicectl) {
    const ProcResult loaded = bash(prologue({}) + "complete -p sluicectl\n");
    EXPECT_EQ(loaded.code, 0) << loaded.err;
    EXPECT_EQ(loaded.out, "complete -F _sluicectl sluicectl\n");
    EXPECT_EQ(loaded.err, "");
}

TEST_P(CompletionTest, Verbs) {
    EXPECT_EQ(candidates("sluicectl po"), Candidates({"policy"}));
    EXPECT_EQ(candidates("sluicectl st"), Candidates({"stats", "status"}));
    EXPECT_EQ(candidates("sluicectl "),
              Candidates({"attach", "ban", "bans", "detach", "policy", "stats", "status", "top", "unban"}));
    EXPECT_EQ(candidates("sluicectl ba"), Candidates({"ban", "bans"}));
    EXPECT_EQ(candidates("sluicectl x"), Candidates());
    // Global options and their values are stepped over.
    EXPECT_EQ(candidates("sluicectl --socket /nonexistent/s --timeout 5 --json to"), Candidates({"top"}));
    EXPECT_EQ(candidates("sluicectl --socket=/nonexistent/s de"), Candidates({"detach"}));
}

TEST_P(CompletionTest, SubVerbs) {
    EXPECT_EQ(candidates("sluicectl policy pu"), Candidates({"push"}));
    EXPECT_EQ(candidates("sluicectl policy "), Candidates({"diff", "history", "push", "rollback", "show"}));
    EXPECT_EQ(candidates("sluicectl --json policy r"), Candidates({"rollback"}));
    // A command without sub-verbs offers none.
    EXPECT_EQ(candidates("sluicectl status "), Candidates());
}

TEST_P(CompletionTest, GlobalOptions) {
    EXPECT_EQ(candidates("sluicectl --so"), Candidates({"--socket"}));
    EXPECT_EQ(candidates("sluicectl --"), Candidates({"--help", "--json", "--socket", "--timeout", "--version"}));
    EXPECT_EQ(candidates("sluicectl -"), Candidates({"-h", "--help", "--json", "--socket", "--timeout", "--version"}));
}

TEST_P(CompletionTest, AVerbsOwnOptions) {
    EXPECT_EQ(candidates("sluicectl top --"), Candidates({"--count", "--help", "--interval", "--watch"}));
    EXPECT_EQ(candidates("sluicectl top -n 5 --w"), Candidates({"--watch"}));
    EXPECT_EQ(candidates("sluicectl --json policy push --d"), Candidates({"--dry-run"}));
    EXPECT_EQ(candidates("sluicectl policy rollback --"), Candidates({"--dry-run", "--help", "--to"}));
    // Global options go before the command: sluicectl refuses them after it.
    EXPECT_EQ(candidates("sluicectl status --js"), Candidates());
}

TEST_P(CompletionTest, OptionValues) {
    EXPECT_EQ(candidates("sluicectl attach --mode "), Candidates({"generic", "native"}));
    EXPECT_EQ(candidates("sluicectl attach --mode=g"), Candidates({"generic"}));
    EXPECT_EQ(candidates("sluicectl attach --mode n"), Candidates({"native"}));
    // A number has nothing to offer.
    EXPECT_EQ(candidates("sluicectl --timeout "), Candidates());
    EXPECT_EQ(candidates("sluicectl policy rollback --to "), Candidates());
}

TEST_P(CompletionTest, FilesForPolicyPushAndSocket) {
    write_file(dir_ + "/policy.toml", "");
    write_file(dir_ + "/sluiced.sock", "");
    EXPECT_EQ(candidates("sluicectl policy push " + dir_ + "/po"), Candidates({dir_ + "/policy.toml"}));
    EXPECT_EQ(candidates("sluicectl --json policy push --dry-run " + dir_ + "/p"), Candidates({dir_ + "/policy.toml"}));
    EXPECT_EQ(candidates("sluicectl --socket " + dir_ + "/sl"), Candidates({dir_ + "/sluiced.sock"}));
    EXPECT_EQ(candidates("sluicectl --socket=" + dir_ + "/sl"), Candidates({dir_ + "/sluiced.sock"}));
    // FILE given: nothing more to name.
    EXPECT_EQ(candidates("sluicectl policy push " + dir_ + "/policy.toml "), Candidates());
}

TEST_P(CompletionTest, NoDaemonNoInterfacesPromptly) {
    for (const std::string& line :
         {"sluicectl --socket " + dir_ + "/none.sock attach ", "sluicectl --socket=" + dir_ + "/none.sock detach "}) {
        const Completion completion = complete(line);
        EXPECT_EQ(completion.candidates, Candidates()) << line;
        EXPECT_LT(completion.took, 3s) << line;
    }
    const Completion from_env = complete("sluicectl detach ", dir_ + "/none.sock");
    EXPECT_EQ(from_env.candidates, Candidates());
    EXPECT_LT(from_env.took, 3s);
}

// A socket that takes connections (the kernel's backlog) and never answers,
// like a daemon that is stuck: completion gives up after sluicectl's
// --timeout instead of hanging the shell.
TEST_P(CompletionTest, StuckDaemonDoesNotHang) {
    const std::string path = dir_ + "/stuck.sock";
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    path.copy(address.sun_path, sizeof(address.sun_path) - 1);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    ASSERT_EQ(::listen(fd, 8), 0);
    const Completion completion = complete("sluicectl --socket " + path + " detach ");
    ::close(fd);
    EXPECT_EQ(completion.candidates, Candidates());
    EXPECT_LT(completion.took, 5s) << "the script asks with --timeout 1000";
    EXPECT_GE(completion.took, 900ms) << "it did not wait for the daemon at all: was the socket asked?";
}

// sluiced in a namespace with sl0 attached and sl1 up beside it: detach
// offers what is attached, attach what sluiced does not protect yet.
TEST_P(CompletionTest, InterfacesFromTheRunningDaemon) {
    SLUICE_REQUIRE_BPF();
    SluiceWorld world;
    ASSERT_NO_FATAL_FAILURE(world.start_world());
    const std::string socket = world.socket_path();

    EXPECT_EQ(candidates("sluicectl --socket " + socket + " detach "), Candidates({"sl0"}));
    EXPECT_EQ(candidates("sluicectl --socket=" + socket + " detach s"), Candidates({"sl0"}));
    EXPECT_EQ(candidates("sluicectl --socket " + socket + " attach "), Candidates({"sl1"}));
    EXPECT_EQ(candidates("sluicectl --socket " + socket + " attach --mode generic s"), Candidates({"sl1"}));
    EXPECT_EQ(candidates("sluicectl --socket " + socket + " attach x"), Candidates());
    // $SLUICE_SOCKET, as sluicectl itself reads it.
    EXPECT_EQ(candidates("sluicectl detach ", socket), Candidates({"sl0"}));
    // --socket on the line wins over $SLUICE_SOCKET.
    EXPECT_EQ(candidates("sluicectl --socket " + socket + " detach ", dir_ + "/none.sock"), Candidates({"sl0"}));
    // The interface is given: nothing more to name.
    EXPECT_EQ(candidates("sluicectl --socket " + socket + " detach sl0 "), Candidates());
    if (HasFailure()) world.teardown(true);
}

}  // namespace completion_test
}  // namespace sluice::test
