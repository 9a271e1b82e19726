// SPDX-License-Identifier: Apache-2.0
// Privileged suites (BPF, netns, DPDK) start with SLUICE_REQUIRE_BPF(). Without
// root or a working bpf() it skips with the reason; with
// SLUICE_REQUIRE_PRIVILEGED=1 in the environment (set by .ci/run) the same
// reason is a failure, so CI can never pass by skipping them.
#pragma once

#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

namespace sluice::test {

inline bool privileged_suites_required() {
    const char* value = std::getenv("SLUICE_REQUIRE_PRIVILEGED");
    return value != nullptr && std::strcmp(value, "0") != 0 && value[0] != '\0';
}

// Why BPF tests cannot run here, or nothing if they can.
inline std::optional<std::string> missing_bpf_privilege() {
    if (geteuid() != 0) return "needs root (BPF maps, programs and BPF_PROG_TEST_RUN)";
    const int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "sluice_probe", 4, 8, 1, nullptr);
    if (fd < 0) return std::string("bpf() unavailable: ") + std::strerror(errno);
    close(fd);
    return std::nullopt;
}

}  // namespace sluice::test

#define SLUICE_REQUIRE_BPF()                                                                     \
    do {                                                                                         \
        if (const auto sluice_missing = ::sluice::test::missing_bpf_privilege()) {               \
            if (::sluice::test::privileged_suites_required())                                    \
                FAIL() << "SLUICE_REQUIRE_PRIVILEGED is set but this suite " << *sluice_missing; \
            GTEST_SKIP() << "skipped: " << *sluice_missing;                                      \
        }                                                                                        \
    } while (0)

// A suite that cannot test what it is for on this machine (too few CPUs, ...):
// skips with `why`, or fails when SLUICE_REQUIRE_PRIVILEGED is set, so CI
// cannot pass without it.
#define SLUICE_SKIP_UNLESS(condition, why)                                            \
    do {                                                                              \
        if (!(condition)) {                                                           \
            if (::sluice::test::privileged_suites_required())                         \
                FAIL() << "SLUICE_REQUIRE_PRIVILEGED is set but this test " << (why); \
            GTEST_SKIP() << "skipped: " << (why);                                     \
        }                                                                             \
    } while (0)
