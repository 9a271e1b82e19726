// SPDX-License-Identifier: Apache-2.0
// SLUICE_TEST_SANITIZED is 1 in the sanitizer build (scripts/sanitize-build.sh:
// clang, ASan + UBSan). The few cases that cannot run there are not compiled
// in it, rather than filtered out at run time: the test summary checks that
// each binary reports every case it lists, so nothing is left out unseen.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define SLUICE_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLUICE_TEST_SANITIZED 1
#endif
#endif
#ifndef SLUICE_TEST_SANITIZED
#define SLUICE_TEST_SANITIZED 0
#endif
