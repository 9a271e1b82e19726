// SPDX-License-Identifier: Apache-2.0
// What the control plane drives: one enforcement point (XDP today, DPDK
// later) that runs one policy version at a time. PolicyService works through
// this interface so its push/rollback logic is the same for every dataplane
// and can be tested against a fake.
#pragma once

#include <cstdint>

#include "compiled_policy.h"
#include "result.h"

namespace sluice {

class Dataplane {
  public:
    virtual ~Dataplane() = default;

    // Makes `policy` the running one. All-or-nothing from the caller's view:
    // on error the running policy is untouched.
    virtual Status apply(const CompiledPolicy& policy) = 0;
    // The running policy's version (0 before the first apply).
    virtual Result<uint64_t> active_version() = 0;
};

}  // namespace sluice
