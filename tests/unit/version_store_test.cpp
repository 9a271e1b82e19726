// SPDX-License-Identifier: Apache-2.0
// The policy version store: canonical hashing, version numbering and
// compare-and-swap, durable commits that survive a reopen, stable class ids,
// rollback, diffs, and what open() does with leftovers of a crash.
#include <gmock/gmock.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "policy_texts.h"
#include "version_store.h"

namespace sluice::test::version_store_test {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;
using ::testing::StartsWith;

using Ids = std::map<std::string, uint32_t>;

std::string write_text(const std::string& path, std::string_view text) {
    std::ofstream(path, std::ios::binary) << text;
    return path;
}

class VersionStoreTest : public ::testing::Test {
  protected:
    void SetUp() override {
        char pattern[] = "/tmp/sluice-version-store-XXXXXX";
        ASSERT_NE(mkdtemp(pattern), nullptr);
        dir_ = pattern;
    }
    void TearDown() override {
        std::error_code ignored;
        std::filesystem::remove_all(dir_, ignored);
    }

    VersionStore open_store() {
        auto store = VersionStore::open(dir_);
        EXPECT_TRUE(store.ok()) << store.error().message;
        return std::move(store.value());
    }

    // Prepares and commits `text`; returns the version it got.
    uint64_t push(VersionStore& store, std::string_view text, std::string origin = "push") {
        auto prepared = store.prepare(text, "p.toml", std::nullopt, std::move(origin), kOptions);
        EXPECT_TRUE(prepared.ok()) << prepared.error().message;
        if (!prepared) return 0;
        auto committed = store.commit(prepared.value().version);
        EXPECT_TRUE(committed.ok()) << committed.error().message;
        return prepared.value().version.version;
    }

    std::string policies() const { return dir_ + "/policies"; }

    std::string dir_;
};

TEST(Sha256, KnownVectors) {
    EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(CanonicalPolicy, IgnoresCommentsWhitespaceKeyOrderNumberFormatAndVersion) {
    const std::string_view plain = R"toml(version = 3
[defaults]
unit = "packets"
class = "default"
[[class]]
name = "default"
per_source = { rate = 1000, burst = 2000 }
)toml";
    const std::string_view restyled = R"toml(# the same policy, written differently
[defaults]
class   = 'default'     # key order swapped, literal string
unit = "packets"

[[class]]
per_source.burst = 0x7d0
per_source.rate = 1_000
name = "default"
)toml";
    auto a = canonical_policy_text(plain, "a.toml");
    auto b = canonical_policy_text(restyled, "b.toml");
    ASSERT_TRUE(a.ok()) << a.error().message;
    ASSERT_TRUE(b.ok()) << b.error().message;
    EXPECT_EQ(a.value(), b.value());
    EXPECT_EQ(sha256_hex(a.value()), sha256_hex(b.value()));
    EXPECT_THAT(a.value(), Not(HasSubstr("version")));
}

TEST(CanonicalPolicy, DiffersOnARealChange) {
    auto a = canonical_policy_text(kTwoClasses, "a.toml");
    auto b = canonical_policy_text(kWebFaster, "b.toml");
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_NE(sha256_hex(a.value()), sha256_hex(b.value()));
}

TEST(CanonicalPolicy, KeepsTheShapeOfAClass) {
    auto a = canonical_policy_text(kShaped, "a.toml");
    auto b = canonical_policy_text(kShapedLongerQueue, "b.toml");
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_THAT(a.value(), HasSubstr("[class.shape]\nmax_delay_ms = 50\nqueue = 1024\n"));
    EXPECT_NE(sha256_hex(a.value()), sha256_hex(b.value()));
    // What the store keeps loads back to the same shape.
    auto reloaded = load_policy_toml(a.value(), "a.toml", {}, kOptions);
    ASSERT_TRUE(reloaded.ok()) << reloaded.error().message;
    const sluice_class_entry* bulk = reloaded.value().compiled.find_class(reloaded.value().class_ids.at("bulk"));
    ASSERT_NE(bulk, nullptr);
    EXPECT_EQ(bulk->shape.queue_packets, 1024u);
    EXPECT_EQ(bulk->shape.max_delay_ns, 50'000'000u);
}

TEST(CanonicalPolicy, ParseErrorNamesFileLineAndColumn) {
    auto canonical = canonical_policy_text("[[class]]\nname = \n", "bad.toml");
    ASSERT_FALSE(canonical.ok());
    EXPECT_THAT(canonical.error().message, HasSubstr("bad.toml:2:"));
}

TEST_F(VersionStoreTest, AnEmptyStoreHasNoCurrentVersion) {
    VersionStore store = open_store();
    EXPECT_FALSE(store.current().has_value());
    EXPECT_THAT(store.history(), IsEmpty());
    EXPECT_FALSE(store.same_as_current(kTwoClasses));
    EXPECT_TRUE(std::filesystem::is_directory(policies()));
}

TEST_F(VersionStoreTest, PrepareStoresNothingCommitDoes) {
    VersionStore store = open_store();
    auto prepared = store.prepare(kTwoClasses, "p.toml", std::nullopt, "push", kOptions);
    ASSERT_TRUE(prepared.ok()) << prepared.error().message;
    EXPECT_EQ(prepared.value().version.version, 1u);
    EXPECT_EQ(prepared.value().loaded.version, 1u);
    EXPECT_EQ(prepared.value().loaded.compiled.header.version, 1u);
    EXPECT_TRUE(validate(prepared.value().loaded.compiled).ok());
    EXPECT_FALSE(store.current().has_value());
    EXPECT_TRUE(std::filesystem::is_empty(policies()));

    ASSERT_TRUE(store.commit(prepared.value().version).ok());
    ASSERT_TRUE(store.current().has_value());
    EXPECT_EQ(store.current()->version, 1u);
    EXPECT_EQ(store.current()->source, kTwoClasses);
    EXPECT_EQ(store.current()->origin, "push");
    EXPECT_TRUE(std::filesystem::exists(policies() + "/000000000001.toml"));
    EXPECT_TRUE(std::filesystem::exists(policies() + "/000000000001.source"));
    EXPECT_TRUE(std::filesystem::exists(policies() + "/000000000001.meta"));
}

TEST_F(VersionStoreTest, AbsentVersionIsCurrentPlusOneAndAGreaterOneIsTaken) {
    VersionStore store = open_store();
    EXPECT_EQ(push(store, kTwoClasses), 1u);
    EXPECT_EQ(push(store, kWebFaster), 2u);
    EXPECT_EQ(push(store, "version = 10\n" + std::string(kTwoClasses)), 10u);
    EXPECT_EQ(push(store, kWebFaster), 11u);
    EXPECT_EQ(store.current()->version, 11u);
}

TEST_F(VersionStoreTest, ExplicitVersionNotGreaterIsRefusedNamingBoth) {
    VersionStore store = open_store();
    push(store, "version = 5\n" + std::string(kTwoClasses));
    for (const char* version : {"version = 5\n", "version = 4\n"}) {
        auto prepared = store.prepare(version + std::string(kWebFaster), "p.toml", std::nullopt, "push", kOptions);
        ASSERT_FALSE(prepared.ok());
        EXPECT_THAT(prepared.error().message, HasSubstr("p.toml: version " + std::string(version).substr(10, 1) +
                                                        " is not greater than the current version 5"));
        EXPECT_EQ(prepared.error().setting, "version");
    }
    EXPECT_EQ(store.current()->version, 5u);
}

TEST_F(VersionStoreTest, IfVersionIsACompareAndSwap) {
    VersionStore store = open_store();
    auto first = store.prepare(kTwoClasses, "p.toml", 0, "push", kOptions);  // 0: nothing applied yet
    ASSERT_TRUE(first.ok()) << first.error().message;
    ASSERT_TRUE(store.commit(first.value().version).ok());

    auto matching = store.prepare(kWebFaster, "p.toml", 1, "push", kOptions);
    ASSERT_TRUE(matching.ok()) << matching.error().message;
    EXPECT_EQ(matching.value().version.version, 2u);

    auto stale = store.prepare(kWebFaster, "p.toml", 7, "push", kOptions);
    ASSERT_FALSE(stale.ok());
    EXPECT_THAT(stale.error().message, HasSubstr("version is 1, not 7"));
}

TEST_F(VersionStoreTest, CommitRefusesAVersionOvertakenByAnother) {
    VersionStore store = open_store();
    auto a = store.prepare(kTwoClasses, "a.toml", std::nullopt, "push", kOptions);
    auto b = store.prepare(kWebFaster, "b.toml", std::nullopt, "push", kOptions);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_TRUE(store.commit(a.value().version).ok());
    auto late = store.commit(b.value().version);
    ASSERT_FALSE(late.ok());
    EXPECT_THAT(late.error().message, HasSubstr("current version is already 1"));
    EXPECT_THAT(store.history(), SizeIs(1));
}

TEST_F(VersionStoreTest, ReopenRestoresHistoryCurrentAndClassIds) {
    {
        VersionStore store = open_store();
        push(store, kTwoClasses, "push");
        push(store, kWebFaster, "reload\nwith a newline and a \\ backslash");
    }
    VersionStore store = open_store();
    EXPECT_THAT(store.warnings(), IsEmpty());
    const auto history = store.history();
    ASSERT_THAT(history, SizeIs(2));
    EXPECT_EQ(history[0].version, 1u);
    EXPECT_EQ(history[0].origin, "push");
    EXPECT_EQ(history[0].source, kTwoClasses);
    EXPECT_EQ(history[1].origin, "reload\nwith a newline and a \\ backslash");
    EXPECT_EQ(history[1].class_ids, (Ids{{"default", 1}, {"web", 2}}));
    EXPECT_EQ(history[1].sha256, sha256_hex(history[1].canonical));
    EXPECT_GT(history[1].applied_unix_s, 0);
    EXPECT_EQ(store.current()->version, 2u);
    EXPECT_TRUE(store.same_as_current(kWebFaster));
    // The next push continues the numbering.
    EXPECT_EQ(push(store, kTwoClasses), 3u);
}

TEST_F(VersionStoreTest, ClassIdsStayStableAndAreNotReusedWhileInHistory) {
    VersionStore store = open_store();
    push(store, kTwoClasses);
    EXPECT_EQ(store.current()->class_ids, (Ids{{"default", 1}, {"web", 2}}));

    // "web" removed, "api" added: api must not inherit web's id 2.
    push(store, R"toml(
[[class]]
name = "default"
[[class]]
name = "api"
match = ["203.0.113.0/24"]
)toml");
    EXPECT_EQ(store.current()->class_ids, (Ids{{"api", 3}, {"default", 1}}));

    // "web" back: it gets its old id again, and after a reopen too.
    push(store, kTwoClasses);
    EXPECT_EQ(store.current()->class_ids, (Ids{{"default", 1}, {"web", 2}}));
    VersionStore reopened = open_store();
    auto prepared = reopened.prepare(R"toml(
[[class]]
name = "default"
[[class]]
name = "api"
match = ["203.0.113.0/24"]
[[class]]
name = "new"
match = ["192.0.2.0/24"]
)toml",
                                     "p.toml", std::nullopt, "push", kOptions);
    ASSERT_TRUE(prepared.ok()) << prepared.error().message;
    EXPECT_EQ(prepared.value().version.class_ids, (Ids{{"api", 3}, {"default", 1}, {"new", 4}}));
}

TEST_F(VersionStoreTest, RollbackToThePreviousVersionIsANewVersion) {
    VersionStore store = open_store();
    push(store, kTwoClasses);
    push(store, kWebFaster);
    auto rollback = store.prepare_rollback(std::nullopt, kOptions);
    ASSERT_TRUE(rollback.ok()) << rollback.error().message;
    const PolicyVersion& version = rollback.value().version;
    EXPECT_EQ(version.version, 3u);
    EXPECT_EQ(version.origin, "rollback of 1");
    EXPECT_EQ(version.canonical, store.get(1).value().canonical);
    EXPECT_EQ(version.sha256, store.get(1).value().sha256);
    EXPECT_EQ(rollback.value().loaded.compiled.header.version, 3u);
    EXPECT_EQ(store.current()->version, 2u);  // prepared, not stored
    ASSERT_TRUE(store.commit(version).ok());
    EXPECT_TRUE(store.same_as_current(kTwoClasses));
    EXPECT_THAT(store.history(), SizeIs(3));
}

TEST_F(VersionStoreTest, RollbackToAnExplicitVersion) {
    VersionStore store = open_store();
    push(store, "version = 4\n" + std::string(kTwoClasses));
    push(store, kWebFaster);
    push(store, R"toml([[class]]
name = "default"
)toml");
    auto rollback = store.prepare_rollback(4, kOptions);
    ASSERT_TRUE(rollback.ok()) << rollback.error().message;
    EXPECT_EQ(rollback.value().version.version, 7u);
    EXPECT_EQ(rollback.value().version.origin, "rollback of 4");
    EXPECT_EQ(rollback.value().version.class_ids, (Ids{{"default", 1}, {"web", 2}}));
    ASSERT_TRUE(store.commit(rollback.value().version).ok());
    EXPECT_EQ(store.current()->canonical, store.get(4).value().canonical);
}

TEST_F(VersionStoreTest, RollbackWithoutATargetIsRefused) {
    VersionStore store = open_store();
    auto empty = store.prepare_rollback(std::nullopt, kOptions);
    ASSERT_FALSE(empty.ok());
    EXPECT_THAT(empty.error().message, HasSubstr("no policy version has been applied"));

    push(store, kTwoClasses);
    auto only = store.prepare_rollback(std::nullopt, kOptions);
    ASSERT_FALSE(only.ok());
    EXPECT_THAT(only.error().message, HasSubstr("version 1 is the only one"));

    auto unknown = store.prepare_rollback(9, kOptions);
    ASSERT_FALSE(unknown.ok());
    EXPECT_THAT(unknown.error().message, HasSubstr("no policy version 9"));
    EXPECT_FALSE(store.get(9).ok());
}

TEST_F(VersionStoreTest, DiffShowsRemovedAndAddedLines) {
    VersionStore store = open_store();
    push(store, kTwoClasses);
    auto candidate = store.prepare(kWebFaster, "p.toml", std::nullopt, "push", kOptions);  // a dry run
    ASSERT_TRUE(candidate.ok());
    const std::string diff = diff_policies(*store.current(), candidate.value().version);
    EXPECT_THAT(diff, HasSubstr("--- version 1\n+++ version 2\n@@ -"));
    EXPECT_THAT(diff, HasSubstr("\n-rate = 500\n+rate = 900\n"));
    EXPECT_THAT(diff, HasSubstr("\n burst = 1000\n-rate = 500\n"));  // context
    EXPECT_THAT(diff, Not(HasSubstr("-rate = 1000")));
    EXPECT_EQ(diff_policies(*store.current(), *store.current()), "");
}

TEST_F(VersionStoreTest, AShapeChangeIsANewVersionWithAVisibleDiff) {
    VersionStore store = open_store();
    ASSERT_EQ(push(store, kShaped), 1u);
    EXPECT_TRUE(store.same_as_current(kShaped));
    EXPECT_FALSE(store.same_as_current(kShapedLongerQueue));
    ASSERT_EQ(push(store, kShapedLongerQueue), 2u);
    const std::string diff = diff_policies(store.get(1).value(), store.get(2).value());
    EXPECT_THAT(diff, HasSubstr("\n [class.shape]\n max_delay_ms = 50\n-queue = 1024\n+queue = 4096\n"));
}

TEST_F(VersionStoreTest, AShadowChangeIsANewVersionWithAVisibleDiff) {
    VersionStore store = open_store();
    ASSERT_EQ(push(store, kTwoClasses), 1u);
    EXPECT_FALSE(store.same_as_current(kWebInShadow));
    ASSERT_EQ(push(store, kWebInShadow), 2u);
    // Promoting is one new version without shadow.
    ASSERT_EQ(push(store, kTwoClasses), 3u);
    ASSERT_EQ(push(store, "[defaults]\nshadow = true\n" + std::string(kTwoClasses)), 4u);
    const std::string tried = diff_policies(store.get(1).value(), store.get(2).value());
    const std::string promoted = diff_policies(store.get(2).value(), store.get(3).value());
    const std::string version = diff_policies(store.get(3).value(), store.get(4).value());
    EXPECT_THAT(tried, HasSubstr("\n name = \"web\"\n+shadow = true\n \n [class.per_source]\n"));
    EXPECT_THAT(promoted, HasSubstr("\n name = \"web\"\n-shadow = true\n \n [class.per_source]\n"));
    EXPECT_THAT(version, HasSubstr("@@ -1,3 +1,6 @@\n+[defaults]\n+shadow = true\n+\n [[class]]\n"));
}

// A policy whose "ssh" class counts its aggregate by `algorithm`.
std::string windowed(std::string_view algorithm) {
    return "[[class]]\nname = \"default\"\n\n[[class]]\nname = \"ssh\"\nmatch = [\"192.0.2.0/24\"]\n"
           "aggregate = { algorithm = \"" +
           std::string(algorithm) + "\", limit = 10, window = \"1m\", unit = \"tcp_syn\" }\n";
}

TEST_F(VersionStoreTest, AnAlgorithmChangeIsANewVersionWithAVisibleDiff) {
    VersionStore store = open_store();
    ASSERT_EQ(push(store, windowed("sliding_log")), 1u);
    EXPECT_TRUE(store.same_as_current(windowed("sliding_log")));
    EXPECT_FALSE(store.same_as_current(windowed("fixed_window")));
    ASSERT_EQ(push(store, windowed("fixed_window")), 2u);
    const std::string diff = diff_policies(store.get(1).value(), store.get(2).value());
    EXPECT_THAT(diff,
                HasSubstr("\n [class.aggregate]\n-algorithm = \"sliding_log\"\n+algorithm = \"fixed_window\"\n limit = "
                          "10\n unit = \"tcp_syn\"\n window = \"1m\"\n"));
}

PolicyVersion with_text(uint64_t number, std::string canonical) {
    PolicyVersion version;
    version.version = number;
    version.canonical = std::move(canonical);
    return version;
}

TEST(DiffPolicies, HunkHeadersCountLines) {
    const PolicyVersion from = with_text(1, "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n");
    const PolicyVersion to = with_text(2, "a\nB\nc\nd\ne\nf\ng\nh\ni\nj\nk\n");
    EXPECT_EQ(diff_policies(from, to),
              "--- version 1\n+++ version 2\n"
              "@@ -1,5 +1,5 @@\n a\n-b\n+B\n c\n d\n e\n"
              "@@ -8,3 +8,4 @@\n h\n i\n j\n+k\n");
    EXPECT_THAT(diff_policies(with_text(0, ""), to),
                StartsWith("--- version 0\n+++ version 2\n@@ -0,0 +1,11 @@\n+a\n"));
}

TEST(DiffPolicies, AHugeChangeIsShownAsRemovedThenAdded) {
    // Past the size where common lines are searched for, the diff is still correct, just coarser.
    std::string from_text, to_text;
    for (int i = 0; i < 2500; i++) {
        from_text += "old " + std::to_string(i) + "\n";
        to_text += "new " + std::to_string(i) + "\n";
    }
    const std::string diff = diff_policies(with_text(1, "same\n" + from_text), with_text(2, "same\n" + to_text));
    EXPECT_THAT(diff, StartsWith("--- version 1\n+++ version 2\n@@ -1,2501 +1,2501 @@\n same\n-old 0\n"));
    EXPECT_THAT(diff, HasSubstr("\n-old 2499\n+new 0\n"));
}

TEST_F(VersionStoreTest, SameAsCurrentComparesCanonicalHashes) {
    VersionStore store = open_store();
    push(store, kTwoClasses);
    EXPECT_TRUE(store.same_as_current("# reformatted\nversion = 99\n" + std::string(kTwoClasses)));
    EXPECT_FALSE(store.same_as_current(kWebFaster));
    EXPECT_FALSE(store.same_as_current("this is [not toml"));
}

TEST_F(VersionStoreTest, InvalidPolicyIsRefusedWithItsPositionAndNothingStored) {
    VersionStore store = open_store();
    auto bad_syntax =
        store.prepare("[[class]]\nname = \"default\"\nrate = \n", "p.toml", std::nullopt, "push", kOptions);
    ASSERT_FALSE(bad_syntax.ok());
    EXPECT_THAT(bad_syntax.error().message, HasSubstr("p.toml:3:"));
    auto bad_value =
        store.prepare("[[class]]\nname = \"default\"\nunit = \"furlongs\"\n", "p.toml", std::nullopt, "push", kOptions);
    ASSERT_FALSE(bad_value.ok());
    EXPECT_THAT(bad_value.error().message, HasSubstr("p.toml:3:"));
    EXPECT_FALSE(store.current().has_value());
    EXPECT_TRUE(std::filesystem::is_empty(policies()));
}

TEST_F(VersionStoreTest, LeftoversOfACrashedCommitAreRemovedWithAReason) {
    {
        VersionStore store = open_store();
        push(store, kTwoClasses);
    }
    // A crash mid-commit of version 2: a temp file and a text with no meta.
    write_text(policies() + "/000000000002.meta.tmp", "version=2\nsha");
    write_text(policies() + "/000000000002.toml", "[[class]]\nname = \"default\"\n");
    write_text(policies() + "/notes.txt", "hello");
    VersionStore store = open_store();
    EXPECT_EQ(store.current()->version, 1u);
    EXPECT_THAT(store.warnings(), SizeIs(3));
    EXPECT_THAT(store.warnings(), Contains(AllOf(HasSubstr("000000000002.meta.tmp"), HasSubstr("unfinished write"))));
    EXPECT_THAT(store.warnings(), Contains(AllOf(HasSubstr("000000000002.toml"), HasSubstr("never committed"))));
    EXPECT_THAT(store.warnings(), Contains(HasSubstr("notes.txt")));
    // Removed, so they hold no space and are not met again.
    EXPECT_FALSE(std::filesystem::exists(policies() + "/000000000002.meta.tmp"));
    EXPECT_FALSE(std::filesystem::exists(policies() + "/000000000002.toml"));
    EXPECT_TRUE(std::filesystem::exists(policies() + "/notes.txt"));
    // Committing version 2 replaces the leftovers.
    EXPECT_EQ(push(store, kWebFaster), 2u);
    VersionStore reopened = open_store();
    EXPECT_EQ(reopened.current()->version, 2u);
    EXPECT_TRUE(reopened.same_as_current(kWebFaster));
}

// A commit that fails half-way (here the source's temp name is taken by a
// directory, as a full disk fails a write) takes back the canonical text it
// had already renamed into place: nothing of it is loaded or holds space.
TEST_F(VersionStoreTest, AFailedCommitLeavesNothingOfTheVersionBehind) {
    VersionStore store = open_store();
    push(store, kTwoClasses);
    std::filesystem::create_directory(policies() + "/000000000002.source.tmp");
    auto prepared = store.prepare(kWebFaster, "p.toml", std::nullopt, "push", kOptions);
    ASSERT_TRUE(prepared.ok()) << prepared.error().message;
    auto committed = store.commit(prepared.value().version);
    ASSERT_FALSE(committed.ok());
    EXPECT_THAT(committed.error().message, HasSubstr("000000000002.source.tmp"));
    EXPECT_EQ(store.current()->version, 1u);
    EXPECT_FALSE(std::filesystem::exists(policies() + "/000000000002.toml"));
    EXPECT_FALSE(std::filesystem::exists(policies() + "/000000000002.meta"));
    std::filesystem::remove(policies() + "/000000000002.source.tmp");
    EXPECT_EQ(push(store, kWebFaster), 2u);
    VersionStore reopened = open_store();
    EXPECT_EQ(reopened.current()->version, 2u);
    EXPECT_THAT(reopened.warnings(), IsEmpty());
}

TEST_F(VersionStoreTest, ACorruptCommittedVersionFailsOpenNamingTheFile) {
    {
        VersionStore store = open_store();
        push(store, kTwoClasses);
        push(store, kWebFaster);
    }
    write_text(policies() + "/000000000002.toml", "[[class]]\nname = \"tampered\"\n");
    auto tampered = VersionStore::open(dir_);
    ASSERT_FALSE(tampered.ok());
    EXPECT_THAT(tampered.error().message, HasSubstr("000000000002.toml: its SHA-256 is"));

    std::filesystem::remove(policies() + "/000000000002.toml");
    auto missing = VersionStore::open(dir_);
    ASSERT_FALSE(missing.ok());
    EXPECT_THAT(missing.error().message, HasSubstr("000000000002.meta: its policy text is missing"));

    write_text(policies() + "/000000000001.meta", "version=1\nsha256");
    auto cut = VersionStore::open(dir_);
    ASSERT_FALSE(cut.ok());
    EXPECT_THAT(cut.error().message, HasSubstr("000000000001.meta:2:"));
}

// ---- the .meta file: JSON, and the key=value format before it ----------------

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST_F(VersionStoreTest, MetaIsAJsonObjectThatRoundTripsEveryField) {
    const std::string origin = "push by \"uid 0\"\nwith a newline, a \\ backslash, a tab\t and é";
    {
        VersionStore store = open_store();
        push(store, kTwoClasses, origin);
    }
    const auto meta = nlohmann::json::parse(read_text(policies() + "/000000000001.meta"));
    ASSERT_TRUE(meta.is_object()) << meta.dump();
    EXPECT_EQ(meta.at("version"), 1);
    EXPECT_EQ(meta.at("origin"), origin);
    EXPECT_EQ(meta.at("class_ids"), (nlohmann::json{{"default", 1}, {"web", 2}}));
    EXPECT_GT(meta.at("applied_unix_s").get<int64_t>(), 0);

    VersionStore store = open_store();
    EXPECT_THAT(store.warnings(), IsEmpty());
    ASSERT_TRUE(store.current().has_value());
    const PolicyVersion read = *store.current();
    EXPECT_EQ(read.version, 1u);
    EXPECT_EQ(read.origin, origin);
    EXPECT_EQ(read.sha256, meta.at("sha256"));
    EXPECT_EQ(read.sha256, sha256_hex(read.canonical));
    EXPECT_EQ(read.applied_unix_s, meta.at("applied_unix_s").get<int64_t>());
    EXPECT_EQ(read.class_ids, (Ids{{"default", 1}, {"web", 2}}));
    EXPECT_EQ(read.source, kTwoClasses);
}

// A state directory written before metas were JSON: its key=value metas are
// read, then rewritten as JSON once, and nothing of the history is lost.
TEST_F(VersionStoreTest, AnOldKeyValueMetaIsReadOnceAndRewrittenAsJson) {
    PolicyVersion first, second;
    {
        VersionStore store = open_store();
        push(store, kTwoClasses, "push by uid 0");
        push(store, kWebFaster, "reload\nwith a newline and a \\ backslash");
        first = store.history()[0];
        second = store.history()[1];
    }
    // What the store wrote before JSON, escapes included.
    write_text(policies() + "/000000000001.meta", "version=1\nsha256=" + first.sha256 +
                                                      "\norigin=push by uid 0\napplied_unix_s=1700000000\n"
                                                      "class=1 default\nclass=2 web\n");
    write_text(policies() + "/000000000002.meta", "version=2\nsha256=" + second.sha256 +
                                                      "\norigin=reload\\nwith a newline and a \\\\ backslash\n"
                                                      "applied_unix_s=1700000100\nclass=1 default\nclass=2 web\n");

    for (int reopen = 0; reopen < 2; reopen++) {
        VersionStore store = open_store();
        EXPECT_THAT(store.warnings(), IsEmpty());
        const auto history = store.history();
        ASSERT_THAT(history, SizeIs(2));
        EXPECT_EQ(history[0].origin, "push by uid 0");
        EXPECT_EQ(history[0].applied_unix_s, 1700000000);
        EXPECT_EQ(history[1].origin, "reload\nwith a newline and a \\ backslash");
        EXPECT_EQ(history[1].applied_unix_s, 1700000100);
        EXPECT_EQ(history[1].class_ids, (Ids{{"default", 1}, {"web", 2}}));
        EXPECT_EQ(history[1].sha256, second.sha256);
        EXPECT_TRUE(store.same_as_current(kWebFaster));
        // After the first open both metas are JSON, holding the same.
        for (const char* name : {"/000000000001.meta", "/000000000002.meta"}) {
            const auto meta = nlohmann::json::parse(read_text(policies() + name), nullptr, false);
            ASSERT_TRUE(meta.is_object()) << name << ": " << read_text(policies() + name);
        }
        EXPECT_EQ(nlohmann::json::parse(read_text(policies() + "/000000000002.meta")).at("origin"),
                  "reload\nwith a newline and a \\ backslash");
    }
    // History goes on from the migrated versions.
    VersionStore store = open_store();
    EXPECT_EQ(push(store, kTwoClasses), 3u);
    EXPECT_EQ(store.history()[2].class_ids, (Ids{{"default", 1}, {"web", 2}}));
}

// When the JSON cannot be written (here its temp file's name is taken by a
// directory), the old meta is still read, and the store says why it stays.
TEST_F(VersionStoreTest, AnOldMetaThatCannotBeRewrittenIsStillReadWithAWarning) {
    std::string sha;
    {
        VersionStore store = open_store();
        push(store, kTwoClasses);
        sha = store.current()->sha256;
    }
    const std::string old_meta = "version=1\nsha256=" + sha + "\norigin=push\napplied_unix_s=5\nclass=1 default\n";
    write_text(policies() + "/000000000001.meta", old_meta);
    std::filesystem::create_directory(policies() + "/000000000001.meta.tmp");
    VersionStore store = open_store();
    ASSERT_TRUE(store.current().has_value());
    EXPECT_EQ(store.current()->origin, "push");
    EXPECT_EQ(store.current()->class_ids, (Ids{{"default", 1}}));
    EXPECT_THAT(store.warnings(), Contains(AllOf(HasSubstr("000000000001.meta is in the key=value format"),
                                                 HasSubstr("could not be rewritten as JSON"))));
    EXPECT_EQ(read_text(policies() + "/000000000001.meta"), old_meta);
}

TEST_F(VersionStoreTest, ABadJsonMetaFailsOpenNamingTheFileAndTheField) {
    std::string sha;
    {
        VersionStore store = open_store();
        push(store, kTwoClasses);
        sha = store.current()->sha256;
    }
    const std::string meta = policies() + "/000000000001.meta";
    const std::pair<std::string, std::string> cases[] = {
        {"{\"version\": 1, \"sha256\": ", "000000000001.meta: not valid JSON: parse error at line 1, column 26"},
        {"[1]", "000000000001.meta: expected a JSON object"},
        {"{\"version\": 1, \"sha256\": \"" + sha + "\", \"applied_unix_s\": 5, \"class_ids\": {}}",
         "000000000001.meta: \"origin\" is missing"},
        {"{\"version\": -1, \"sha256\": \"" + sha + "\", \"origin\": \"\", \"applied_unix_s\": 5, \"class_ids\": {}}",
         "000000000001.meta: \"version\" is not a positive integer"},
        {"{\"version\": 1, \"sha256\": \"" + sha +
             "\", \"origin\": \"\", \"applied_unix_s\": 5, \"class_ids\": {\"web\": \"2\"}}",
         "000000000001.meta: \"class_ids\".\"web\" is not a class id"},
    };
    for (const auto& [text, expected] : cases) {
        write_text(meta, text);
        auto opened = VersionStore::open(dir_);
        ASSERT_FALSE(opened.ok()) << text;
        EXPECT_THAT(opened.error().message, HasSubstr(expected)) << text;
    }
}

}  // namespace
}  // namespace sluice::test::version_store_test
