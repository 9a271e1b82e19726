// SPDX-License-Identifier: Apache-2.0
// The policy loader: TOML text in, a validated policy or an error out.
// Asserted: an error names the place in the file; a policy that loads has a
// canonical form that loads to the same classes and ids, and is a fixed
// point, so its SHA-256 (what history, `status` and rollback compare) does
// not change by being stored and read back.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "policy_toml.h"
#include "version_store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using sluice::fuzz::require;
    constexpr std::string_view kPath = "fuzz.toml";
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const sluice::PolicyLoadOptions options{2, true};
    auto loaded = sluice::load_policy_toml(text, kPath, {}, options);
    if (!loaded) {
        require(sluice::fuzz::names_location(loaded.error(), kPath), "a refused policy names the place",
                loaded.error().message);
        return 0;
    }
    auto canonical = sluice::canonical_policy_text(text, kPath);
    require(canonical.ok(), "a policy that loads has a canonical form",
            canonical.ok() ? "" : canonical.error().message);
    auto reloaded = sluice::load_policy_toml(canonical.value(), kPath, {}, options);
    require(reloaded.ok(), "the canonical form loads", reloaded.ok() ? "" : reloaded.error().message);
    require(reloaded.value().class_ids == loaded.value().class_ids, "the canonical form keeps every class and id",
            canonical.value());
    require(reloaded.value().compiled.classes.size() == loaded.value().compiled.classes.size() &&
                reloaded.value().compiled.prefixes.size() == loaded.value().compiled.prefixes.size() &&
                reloaded.value().compiled.requests.size() == loaded.value().compiled.requests.size(),
            "the canonical form compiles to as many entries", canonical.value());
    auto again = sluice::canonical_policy_text(canonical.value(), kPath);
    require(again.ok() && sluice::sha256_hex(again.value()) == sluice::sha256_hex(canonical.value()),
            "the canonical form is its own canonical form (same SHA-256)", canonical.value());
    return 0;
}
