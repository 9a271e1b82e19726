// SPDX-License-Identifier: Apache-2.0
// The documentation states limits and defaults that the code defines once
// (sluice/abi.h, and the daemon's own bounds); these tests keep the two from
// drifting apart.
#include <gtest/gtest.h>

#include <bit>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "bans.h"
#include "penalties.h"
#include "sluice/abi.h"

namespace sluice::test {
namespace {

std::string read_doc(const std::filesystem::path& path) {
    std::ifstream file(path);
    EXPECT_TRUE(file) << path;
    return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

const std::filesystem::path kExamples = SLUICE_EXAMPLES_DIR;

// 1048576 -> "1,048,576", as the README writes large counts.
std::string with_commas(uint64_t value) {
    const std::string digits = std::to_string(value);
    std::string grouped;
    for (size_t at = 0; at < digits.size(); at++) {
        if (at > 0 && (digits.size() - at) % 3 == 0) grouped += ',';
        grouped += digits[at];
    }
    return grouped;
}

// 100000000000 -> "10^11", 4000000000 -> "4·10^9", as the README writes maxima.
std::string power_of_ten(uint64_t value) {
    int exponent = 0;
    while (value % 10 == 0) {
        value /= 10;
        exponent++;
    }
    return (value == 1 ? "" : std::to_string(value) + "·") + "10^" + std::to_string(exponent);
}

TEST(DocsConstants, TheReadmeStatesThePolicyLimitsAndDefaultsOfAbiH) {
    const std::string readme = read_doc(kExamples.parent_path() / "README.md");
    for (const std::string& stated : {
             "Limits of one policy: " + std::to_string(SLUICE_MAX_CLASSES - 1) + " classes; " +
                 "`prefix_capacity` prefixes per address family (default " + with_commas(SLUICE_PREFIX_CAPACITY_DEFAULT) +
                 ", at most " + with_commas(SLUICE_PREFIX_CAPACITY_MAX) + "); rate 1.." +
                 power_of_ten(SLUICE_RATE_MAX) + " per second;\nburst 1.." + power_of_ten(SLUICE_BURST_MAX),
             "The default `source_capacity`, " + with_commas(SLUICE_SOURCE_CAPACITY_DEFAULT) + " entries (" +
                 std::to_string(SLUICE_SOURCE_CAPACITY_DEFAULT * sizeof(__u64) >> 20) + " MiB;",
             "one drop in " + std::to_string(SLUICE_DROP_SAMPLE_PERIOD_DEFAULT) + " (",
         })
        EXPECT_NE(readme.find(stated), std::string::npos) << "README.md should say: " << stated;
}

// 1048576 -> "2^20".
std::string power_of_two(uint64_t value) { return "2^" + std::to_string(std::countr_zero(value)); }

// Its parts, numbers included, as one string.
template <class... Parts>
std::string joined(const Parts&... parts) {
    std::ostringstream out;
    (out << ... << parts);
    return out.str();
}

TEST(DocsConstants, TheArchitectureStatesTheBoundsOfAbiH) {
    const std::string architecture = read_doc(kExamples.parent_path() / "ARCHITECTURE.md");
    for (const std::string& stated : {
             joined("default ", power_of_two(SLUICE_SOURCE_CAPACITY_DEFAULT), " (",
                    SLUICE_SOURCE_CAPACITY_DEFAULT * sizeof(__u64) >> 20, " MiB), ", SLUICE_SOURCE_CAPACITY_MIN, " .. ",
                    power_of_two(SLUICE_SOURCE_CAPACITY_MAX)),
             joined("≤ ", SLUICE_MAX_CLASSES - 1, " classes, ≤ prefix_capacity (default ",
                    power_of_two(SLUICE_PREFIX_CAPACITY_DEFAULT), ", at most ", power_of_two(SLUICE_PREFIX_CAPACITY_MAX),
                    ") prefixes per address family per slot"),
             joined("one drop in ", SLUICE_DROP_SAMPLE_PERIOD_DEFAULT, " by default"),
             joined("≤ ", with_commas(SLUICE_SHAPE_QUEUE_MAX), " packets, ≤ ", SLUICE_SHAPE_MAX_DELAY_NS / SLUICE_NANO,
                    " s of delay"),
         })
        EXPECT_NE(architecture.find(stated), std::string::npos) << "ARCHITECTURE.md should say: " << stated;
}

TEST(DocsConstants, TheArchitectureStatesTheBoundOfThePenaltiesInForce) {
    const std::string architecture = read_doc(kExamples.parent_path() / "ARCHITECTURE.md");
    const std::string stated = joined("≤ ", with_commas(PenaltiesInForce::kDefaultCapacity), " per interface");
    EXPECT_NE(architecture.find(stated), std::string::npos) << "ARCHITECTURE.md should say: " << stated;
}

TEST(DocsConstants, TheReadmeAndArchitectureStateTheBanLimits) {
    const std::string limits =
        "default " + with_commas(BanStore::kDefaultMaxBans) + ", at most " + with_commas(SLUICE_MAX_BANS);
    const std::string readme = read_doc(kExamples.parent_path() / "README.md");
    EXPECT_NE(readme.find("at most `max_bans` (sluiced.toml; " + limits + ") at once"), std::string::npos)
        << "README.md should say: " << limits;
    const std::string architecture = read_doc(kExamples.parent_path() / "ARCHITECTURE.md");
    EXPECT_NE(architecture.find("≤ max_bans in force (" + limits + " = `SLUICE_MAX_BANS`), each ≤ 30 d"),
              std::string::npos)
        << "ARCHITECTURE.md should say: " << limits;
    EXPECT_NE(
        readme.find("at most " + std::to_string(SLUICE_BAN_LENGTHS_MAX) + " prefix lengths (`SLUICE_BAN_LENGTHS_MAX`"),
        std::string::npos);
    EXPECT_EQ(BanStore::kMaxBanNs, 30 * 86'400 * SLUICE_NANO);
}

TEST(DocsConstants, ThePolicySchemaStatesThePrefixLimit) {
    const std::string schema = read_doc(kExamples / "policy-schema.md");
    const std::string stated = "At most `prefix_capacity` IPv4 and as many IPv6 prefixes in a policy (default " +
                               with_commas(SLUICE_PREFIX_CAPACITY_DEFAULT) + ", at most " +
                               with_commas(SLUICE_PREFIX_CAPACITY_MAX) + ")";
    EXPECT_NE(schema.find(stated), std::string::npos) << "policy-schema.md should say: " << stated;
}

TEST(DocsConstants, ThePolicySchemaStatesTheLogLimit) {
    const std::string schema = read_doc(kExamples / "policy-schema.md");
    const std::string stated =
        "the log keeps one time per admission, at most " + std::to_string(SLUICE_LOG_MAX) + " per class";
    EXPECT_NE(schema.find(stated), std::string::npos) << "policy-schema.md should say: " << stated;
    EXPECT_NE(schema.find("`sliding_log`: 1.." + std::to_string(SLUICE_LOG_MAX)), std::string::npos);
}

// A per-source window is timed by its entry, at most SLUICE_DEBT_MAX_NS ahead
// less the rounding of its smallest count (2^1 ns; two windows for sliding).
TEST(DocsConstants, ThePolicySchemaStatesTheLongestPerSourceWindows) {
    const std::string schema = read_doc(kExamples / "policy-schema.md");
    constexpr uint64_t kMinute = 60 * SLUICE_NANO;
    const uint64_t fixed = SLUICE_DEBT_MAX_NS - 2, sliding = (SLUICE_DEBT_MAX_NS - 4) / 2;
    for (const std::string& stated : {
             joined("`\"", fixed / SLUICE_NANO, "s\"` (about ", fixed / kMinute, "m)"),
             joined("`\"", sliding / SLUICE_NANO, "s\"` (about ", sliding / kMinute, "m)"),
         })
        EXPECT_NE(schema.find(stated), std::string::npos) << "policy-schema.md should say: " << stated;
}

}  // namespace
}  // namespace sluice::test
