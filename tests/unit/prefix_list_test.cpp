// SPDX-License-Identifier: Apache-2.0
// Prefix-list files (match_files): the parser (comments, spacing, both
// families, bare addresses, bad lines by number, files that are not there or
// not text), the canonical form and its SHA-256; classes that match through
// lists; and the version store keeping each list so a rollback uses the list
// as it was.
#include <gmock/gmock.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "policy_toml.h"
#include "prefix_list.h"
#include "version_store.h"

namespace sluice::test::prefix_list_test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string error_of(std::string_view content) {
    auto list = parse_prefix_list(content, "drop.txt");
    EXPECT_FALSE(list.ok()) << "parsed although it should not";
    return list.ok() ? std::string() : list.error().message;
}

PrefixList parsed(std::string_view content) {
    auto list = parse_prefix_list(content, "drop.txt");
    EXPECT_TRUE(list.ok()) << list.error().message;
    return list.ok() ? std::move(list.value()) : PrefixList{};
}

TEST(PrefixList, ReadsTheFormatOfPublicDropLists) {
    const PrefixList list = parsed(
        "; Spamhaus-style header\n"
        "# and a hash comment\n"
        "\n"
        "   192.0.2.0/24 ; SBL123\n"
        "198.51.100.7\r\n"
        "\t2001:db8::/32\t# documentation\n"
        "2001:db8:1::1\n"
        "10.0.0.0/8");  // no newline at the end
    ASSERT_EQ(list.entries.size(), 5u);
    EXPECT_EQ(list.canonical,
              "10.0.0.0/8\n192.0.2.0/24\n198.51.100.7/32\n2001:db8::/32\n2001:db8:1::1/128\n");
    EXPECT_EQ(list.entries[0].line, 8u);
    EXPECT_EQ(list.entries[2].line, 5u);
    EXPECT_EQ(list.entries[2].prefix.length, 32);
    EXPECT_EQ(list.entries[4].prefix.family, SLUICE_FAMILY_IPV6);
    EXPECT_EQ(list.entries[4].prefix.length, 128);
    EXPECT_EQ(list.sha256, sha256_hex(list.canonical));
}

TEST(PrefixList, AnEmptyListIsAList) {
    const PrefixList list = parsed("# nothing listed today\n\n");
    EXPECT_TRUE(list.entries.empty());
    EXPECT_EQ(list.canonical, "");
}

TEST(PrefixList, BadLinesAreNamedByNumber) {
    EXPECT_EQ(error_of("192.0.2.0/24\nexample.com\n"),
              "drop.txt:2: \"example.com\" is not an IPv4 or IPv6 address or prefix");
    EXPECT_EQ(error_of("\n\n192.0.2.256\n"), "drop.txt:3: \"192.0.2.256\" is not an IPv4 or IPv6 address or prefix");
    EXPECT_EQ(error_of("010.0.0.1\n"), "drop.txt:1: \"010.0.0.1\" is not an IPv4 or IPv6 address or prefix");
    EXPECT_EQ(error_of("192.0.2.0/33\n"), "drop.txt:1: \"192.0.2.0/33\": the prefix length must be 0..32");
    EXPECT_EQ(error_of("2001:db8::/129\n"), "drop.txt:1: \"2001:db8::/129\": the prefix length must be 0..128");
    EXPECT_EQ(error_of("192.0.2.0/\n"), "drop.txt:1: \"192.0.2.0/\": the prefix length must be 0..32");
    EXPECT_EQ(error_of("192.0.2.1/24\n"),
              "drop.txt:1: \"192.0.2.1/24\" has host bits set past /24 (did you mean 192.0.2.0/24?)");
    EXPECT_EQ(error_of("192.0.2.0/24 198.51.100.0/24\n"),
              "drop.txt:1: \"192.0.2.0/24 198.51.100.0/24\": expected one prefix per line (a comment starts with # "
              "or ;)");
}

TEST(PrefixList, APrefixListedTwiceNamesBothLines) {
    EXPECT_EQ(error_of("192.0.2.0/24\n10.0.0.0/8\n192.0.2.0/24 ; again\n"),
              "drop.txt:3: 192.0.2.0/24 is listed twice (also at line 1)");
    // The same prefix spelt two ways is the same prefix.
    EXPECT_EQ(error_of("2001:db8::1\n2001:0db8:0:0::1/128\n"),
              "drop.txt:2: 2001:db8::1/128 is listed twice (also at line 1)");
}

TEST(PrefixList, AFileThatIsNotTextIsRefused) {
    EXPECT_EQ(error_of(std::string("192.0.2.0/24\n\x7f" "ELF\0\x01\x02", 20)),
              "drop.txt:2: a NUL byte: this is not a text file of prefixes");
}

TEST(PrefixList, CanonicalFormAndHashDoNotDependOnSpelling) {
    const PrefixList a = parsed("192.0.2.0/24\n198.51.100.7\n2001:db8::/32\n");
    const PrefixList b = parsed(
        "# reordered, commented, spaced\r\n"
        "2001:0DB8:0000::/32   ; docs\r\n"
        "\r\n"
        "  198.51.100.7/32\r\n"
        "192.0.2.0/24");
    EXPECT_EQ(a.canonical, b.canonical);
    EXPECT_EQ(a.sha256, b.sha256);
    EXPECT_NE(a.sha256, parsed("192.0.2.0/24\n198.51.100.8\n2001:db8::/32\n").sha256);
}

class PrefixListFiles : public ::testing::Test {
  protected:
    void SetUp() override {
        char pattern[] = "/tmp/sluice-prefix-list-XXXXXX";
        ASSERT_NE(mkdtemp(pattern), nullptr);
        dir_ = pattern;
    }
    void TearDown() override {
        std::error_code ignored;
        std::filesystem::remove_all(dir_, ignored);
    }
    std::string write(const std::string& name, std::string_view text) {
        const std::string path = dir_ + "/" + name;
        std::ofstream(path, std::ios::binary) << text;
        return path;
    }
    std::string dir_;
};

TEST_F(PrefixListFiles, AFileThatIsNotThereOrIsADirectoryIsNamed) {
    auto missing = read_prefix_list_file(dir_ + "/absent.txt");
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().message, "cannot open " + dir_ + "/absent.txt: No such file or directory");
    auto directory = read_prefix_list_file(dir_);
    ASSERT_FALSE(directory.ok());
    EXPECT_EQ(directory.error().message, dir_ + " is a directory, not a prefix-list file");
}

constexpr std::string_view kDropPolicy = R"toml([[class]]
name = "default"
per_source = { rate = 1000, burst = 100 }

[[class]]
name = "listed"
action = "drop"
match = ["203.0.113.0/24"]
match_files = ["drop.txt", "lists/v6.txt"]
)toml";

TEST_F(PrefixListFiles, AClassMatchesWhatItsListsHoldRelativeToThePolicy) {
    write("drop.txt", "192.0.2.0/24\n198.51.100.7\n");
    std::filesystem::create_directory(dir_ + "/lists");
    write("lists/v6.txt", "2001:db8::/32\n");
    const std::string policy = write("policy.toml", kDropPolicy);
    auto loaded = load_policy_file(policy, {}, PolicyLoadOptions{4});
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    const CompiledPolicy& compiled = loaded.value().compiled;
    const uint32_t listed = loaded.value().class_ids.at("listed");
    ASSERT_EQ(compiled.prefixes.size(), 4u);
    for (const PolicyPrefix& p : compiled.prefixes) EXPECT_EQ(p.class_id, listed);
    EXPECT_EQ(prefix_text(compiled.prefixes[0]), "192.0.2.0/24");
    EXPECT_EQ(prefix_text(compiled.prefixes[2]), "203.0.113.0/24");
    EXPECT_EQ(prefix_text(compiled.prefixes[3]), "2001:db8::/32");
    EXPECT_EQ(loaded.value().list_names, (std::set<std::string>{"drop.txt", "lists/v6.txt"}));
}

TEST_F(PrefixListFiles, ErrorsNameThePolicyPositionTheListAndTheLine) {
    const std::string policy = write("policy.toml", kDropPolicy);
    auto missing = load_policy_file(policy, {}, PolicyLoadOptions{4});
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().message, policy + ":9:16: class \"listed\".match_files[0]: cannot open " + dir_ +
                                           "/drop.txt: No such file or directory");

    write("drop.txt", "192.0.2.0/24\nnot-a-prefix\n");
    std::filesystem::create_directory(dir_ + "/lists");
    write("lists/v6.txt", "");
    auto bad_line = load_policy_file(policy, {}, PolicyLoadOptions{4});
    ASSERT_FALSE(bad_line.ok());
    EXPECT_EQ(bad_line.error().message, "drop.txt:2: \"not-a-prefix\" is not an IPv4 or IPv6 address or prefix");
}

TEST_F(PrefixListFiles, APrefixTwoClassesMatchIsRefusedNamingBoth) {
    std::filesystem::create_directory(dir_ + "/lists");
    write("lists/v6.txt", "");
    write("drop.txt", "192.0.2.0/24\n\n203.0.113.0/24\n");  // also inline in the same class
    auto twice = load_policy_file(write("policy.toml", kDropPolicy), {}, PolicyLoadOptions{4});
    ASSERT_FALSE(twice.ok());
    EXPECT_THAT(twice.error().message,
                StartsWith(dir_ + "/policy.toml:9:16: class \"listed\".match_files[0]: 203.0.113.0/24 at drop.txt:3 is "
                                  "listed twice in class \"listed\" (also at " +
                           dir_ + "/policy.toml:8:"));

    write("drop.txt", "192.0.2.0/24\n");
    const std::string other = std::string(kDropPolicy) + "\n[[class]]\nname = \"other\"\nmatch_files = [\"drop.txt\"]\n";
    auto conflict = load_policy_file(write("policy.toml", other), {}, PolicyLoadOptions{4});
    ASSERT_FALSE(conflict.ok());
    EXPECT_THAT(conflict.error().message, HasSubstr("192.0.2.0/24 at drop.txt:1 conflicts with drop.txt:1"));
    EXPECT_THAT(conflict.error().message, HasSubstr("a prefix belongs to one class only"));

    const std::string named_twice = std::string(kDropPolicy).replace(
        std::string(kDropPolicy).find("\"drop.txt\", "), 12, "\"drop.txt\", \"drop.txt\", ");
    auto repeated = load_policy_file(write("policy.toml", named_twice), {}, PolicyLoadOptions{4});
    ASSERT_FALSE(repeated.ok());
    EXPECT_THAT(repeated.error().message,
                HasSubstr("class \"listed\".match_files[1]: \"drop.txt\" is named twice in class \"listed\""));
}

TEST_F(PrefixListFiles, TheCapacityCountsListedPrefixes) {
    std::filesystem::create_directory(dir_ + "/lists");
    write("lists/v6.txt", "");
    write("drop.txt", "192.0.2.0/24\n198.51.100.0/24\n");
    PolicyLoadOptions options{4};
    options.prefix_capacity = 2;
    auto refused = load_policy_file(write("policy.toml", kDropPolicy), {}, options);
    ASSERT_FALSE(refused.ok());
    EXPECT_THAT(refused.error().message,
                HasSubstr("the policy has 3 IPv4 prefixes; the dataplane holds 2 per family (raise prefix_capacity"));
}

class ListVersions : public PrefixListFiles {
  protected:
    PrefixLists lists_now() {
        auto texts = read_match_files(kDropPolicy, dir_ + "/policy.toml");
        EXPECT_TRUE(texts.ok()) << texts.error().message;
        auto lists = parse_prefix_lists(texts.value());
        EXPECT_TRUE(lists.ok()) << lists.error().message;
        return lists.ok() ? std::move(lists.value()) : PrefixLists{};
    }
    uint64_t push(VersionStore& store) {
        auto prepared = store.prepare(kDropPolicy, "policy.toml", std::nullopt, "push", PolicyLoadOptions{4}, lists_now());
        EXPECT_TRUE(prepared.ok()) << prepared.error().message;
        if (!prepared) return 0;
        auto committed = store.commit(prepared.value().version, prepared.value().lists);
        EXPECT_TRUE(committed.ok()) << committed.error().message;
        return prepared.value().version.version;
    }
};

TEST_F(ListVersions, AChangedListIsANewVersionAndARollbackUsesTheListAsItWas) {
    std::filesystem::create_directory(dir_ + "/lists");
    write("lists/v6.txt", "2001:db8::/32\n");
    write("drop.txt", "192.0.2.0/24\n");
    auto opened = VersionStore::open(dir_ + "/state");
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    VersionStore& store = opened.value();
    ASSERT_EQ(push(store), 1u);
    EXPECT_TRUE(store.same_as_current(kDropPolicy, lists_now()));

    write("drop.txt", "# comments and order do not make a new version\n192.0.2.0/24 ; again\n");
    EXPECT_TRUE(store.same_as_current(kDropPolicy, lists_now()));

    write("drop.txt", "192.0.2.0/24\n198.51.100.0/24\n");
    EXPECT_FALSE(store.same_as_current(kDropPolicy, lists_now()));
    ASSERT_EQ(push(store), 2u);
    const std::string diff = diff_policies(store.get(1).value(), store.get(2).value());
    EXPECT_THAT(diff, HasSubstr("-#! list \"drop.txt\" sha256=" + parse_prefix_list("192.0.2.0/24\n", "x").value().sha256 +
                                " prefixes=1"));
    EXPECT_THAT(diff, HasSubstr("prefixes=2"));

    // The file changes again and the store is reopened: version 1's list comes from the store.
    write("drop.txt", "10.0.0.0/8\n");
    auto reopened = VersionStore::open(dir_ + "/state");
    ASSERT_TRUE(reopened.ok()) << reopened.error().message;
    auto rollback = reopened.value().prepare_rollback(1, PolicyLoadOptions{4});
    ASSERT_TRUE(rollback.ok()) << rollback.error().message;
    EXPECT_EQ(rollback.value().version.sha256, store.get(1).value().sha256);
    std::vector<std::string> prefixes;
    for (const PolicyPrefix& p : rollback.value().loaded.compiled.prefixes) prefixes.push_back(prefix_text(p));
    EXPECT_EQ(prefixes, (std::vector<std::string>{"192.0.2.0/24", "203.0.113.0/24", "2001:db8::/32"}));
    ASSERT_TRUE(reopened.value().commit(rollback.value().version, rollback.value().lists).ok());
}

TEST_F(ListVersions, AListGoneFromTheStoreIsNamedWhenTheStoreOpens) {
    std::filesystem::create_directory(dir_ + "/lists");
    write("lists/v6.txt", "2001:db8::/32\n");
    write("drop.txt", "192.0.2.0/24\n");
    {
        auto opened = VersionStore::open(dir_ + "/state");
        ASSERT_TRUE(opened.ok());
        ASSERT_EQ(push(opened.value()), 1u);
    }
    const std::string sha = parse_prefix_list("192.0.2.0/24\n", "x").value().sha256;
    const std::string stored = dir_ + "/state/policies/lists/" + sha + ".txt";
    ASSERT_TRUE(std::filesystem::exists(stored));
    std::filesystem::remove(stored);
    auto broken = VersionStore::open(dir_ + "/state");
    ASSERT_FALSE(broken.ok());
    EXPECT_THAT(broken.error().message, HasSubstr("version 1: its prefix list drop.txt (" + stored + ") cannot be read"));
}

TEST_F(ListVersions, AListNoClassNamesIsRefused) {
    auto opened = VersionStore::open(dir_ + "/state");
    ASSERT_TRUE(opened.ok());
    PrefixLists extra;
    extra.emplace("stray.txt", parse_prefix_list("192.0.2.0/24\n", "stray.txt").value());
    auto refused = opened.value().prepare("[[class]]\nname = \"default\"\n", "p.toml", std::nullopt, "push",
                                          PolicyLoadOptions{4}, std::move(extra));
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().message, "p.toml: prefix list stray.txt was sent, but no class names it in match_files");
}

}  // namespace
}  // namespace sluice::test::prefix_list_test
