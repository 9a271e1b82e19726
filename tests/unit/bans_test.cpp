// SPDX-License-Identifier: Apache-2.0
// The BanStore (bans.h) on a temp state directory: what it refuses and why,
// what it keeps across a reopen, the pass classes it will not ban over
// without --force, slots and drop counts, and that a change it could not
// store changes nothing.
#include <gtest/gtest.h>

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "bans.h"
#include "policy_texts.h"

namespace sluice::bans_test {
namespace {

constexpr uint64_t kSecond = SLUICE_NANO;
constexpr uint64_t kNow = 1'796'218'554 * kSecond;  // 2026-12-02T13:35:54Z

PolicyPrefix prefix(const std::string& text) {
    auto parsed = parse_ban_prefix(text);
    EXPECT_TRUE(parsed.ok()) << text << ": " << parsed.error().message;
    return parsed.ok() ? parsed.value() : PolicyPrefix{};
}

BanRequest request(const std::string& text, uint64_t for_ns, std::string reason = "", uint32_t uid = 1000,
                   bool force = false) {
    return BanRequest{
        .prefix = prefix(text), .for_ns = for_ns, .reason = std::move(reason), .uid = uid, .force = force};
}

// The protection of a policy loaded from `text`.
PassProtection protection_of(std::string_view text) {
    auto loaded = load_policy_toml(text, "p.toml", {}, PolicyLoadOptions{4});
    EXPECT_TRUE(loaded.ok()) << loaded.error().message;
    if (!loaded.ok()) return {};
    return pass_protection(loaded.value().compiled, loaded.value().class_ids);
}

constexpr std::string_view kDefaultPasses = R"toml(
[defaults]
class = "everyone"

[[class]]
name = "everyone"
action = "pass"

[[class]]
name = "web"
match = ["198.51.100.0/24"]
per_source = { rate = 500, burst = 1_000 }

[[class]]
name = "office"
match = ["198.51.100.128/25"]
action = "pass"
)toml";

const PassProtection kNoPolicy{};

class BanStoreTest : public ::testing::Test {
  protected:
    void SetUp() override {
        char pattern[] = "/tmp/sluice-bans-XXXXXX";
        ASSERT_NE(::mkdtemp(pattern), nullptr);
        dir_ = pattern;
    }
    void TearDown() override {
        std::error_code ignored;
        std::filesystem::remove_all(dir_, ignored);
    }

    BanStore open(uint32_t max_bans = 16, uint64_t now = kNow) {
        auto store = BanStore::open(dir_, max_bans, now);
        EXPECT_TRUE(store.ok()) << store.error().message;
        return std::move(store.value());
    }

    std::string file_text() const {
        std::ifstream file(dir_ + "/bans.json");
        std::ostringstream text;
        text << file.rdbuf();
        return text.str();
    }

    void write_file(const std::string& text) const { std::ofstream(dir_ + "/bans.json") << text; }

    std::string dir_;
};

TEST_F(BanStoreTest, AMissingFileIsNoBans) {
    BanStore store = open();
    EXPECT_TRUE(store.bans().empty());
    EXPECT_EQ(store.path(), dir_ + "/bans.json");
    EXPECT_FALSE(std::filesystem::exists(store.path())) << "nothing written until a ban";
}

TEST_F(BanStoreTest, BansAreStoredAndComeBackOnReopen) {
    {
        BanStore store = open();
        auto first = store.ban(request("203.0.113.0/24", 600 * kSecond, "incident 42", 1000), kNow, kNoPolicy);
        ASSERT_TRUE(first.ok()) << first.error().message;
        EXPECT_FALSE(first.value().rebanned);
        EXPECT_EQ(first.value().ban.slot, 0u);
        auto second = store.ban(request("2001:db8::/48", 3600 * kSecond, "", 0), kNow + kSecond, kNoPolicy);
        ASSERT_TRUE(second.ok()) << second.error().message;
        EXPECT_EQ(second.value().ban.slot, 1u);
    }
    const BanStore reopened = open(16, kNow + 2 * kSecond);
    ASSERT_EQ(reopened.bans().size(), 2u) << file_text();
    const Ban& v4 = reopened.bans()[0];
    EXPECT_EQ(prefix_text(v4.prefix), "203.0.113.0/24");
    EXPECT_EQ(v4.created_unix_ns, kNow);
    EXPECT_EQ(v4.until_unix_ns, kNow + 600 * kSecond);
    EXPECT_EQ(v4.reason, "incident 42");
    EXPECT_EQ(v4.uid, 1000u);
    EXPECT_FALSE(v4.forced);
    EXPECT_EQ(v4.slot, 0u);
    const Ban& v6 = reopened.bans()[1];
    EXPECT_EQ(prefix_text(v6.prefix), "2001:db8::/48");
    EXPECT_EQ(v6.until_unix_ns, kNow + kSecond + 3600 * kSecond);
    EXPECT_EQ(v6.uid, 0u);
    EXPECT_EQ(v6.slot, 1u);
}

TEST_F(BanStoreTest, AReopenLeavesOutTheBansThatEnded) {
    {
        BanStore store = open();
        ASSERT_TRUE(store.ban(request("203.0.113.0/24", kSecond), kNow, kNoPolicy).ok());
        ASSERT_TRUE(store.ban(request("198.51.100.0/24", 60 * kSecond), kNow, kNoPolicy).ok());
    }
    const BanStore reopened = open(16, kNow + 2 * kSecond);
    ASSERT_EQ(reopened.bans().size(), 1u);
    EXPECT_EQ(prefix_text(reopened.bans()[0].prefix), "198.51.100.0/24");
    EXPECT_EQ(reopened.bans()[0].slot, 1u) << "a ban keeps its slot across a reopen";
}

TEST_F(BanStoreTest, ExpireRemovesWhatEndedAndStoresIt) {
    BanStore store = open();
    ASSERT_TRUE(store.ban(request("203.0.113.0/24", 10 * kSecond), kNow, kNoPolicy).ok());
    ASSERT_TRUE(store.ban(request("198.51.100.0/24", 20 * kSecond), kNow, kNoPolicy).ok());
    auto none = store.expire(kNow + 9 * kSecond);
    ASSERT_TRUE(none.ok());
    EXPECT_TRUE(none.value().empty());
    EXPECT_EQ(store.active(kNow + 10 * kSecond), 1u) << "a ban ends at its until";
    auto ended = store.expire(kNow + 10 * kSecond);
    ASSERT_TRUE(ended.ok()) << ended.error().message;
    ASSERT_EQ(ended.value().size(), 1u);
    EXPECT_EQ(prefix_text(ended.value()[0].prefix), "203.0.113.0/24");
    ASSERT_EQ(store.bans().size(), 1u);
    EXPECT_EQ(open(16, kNow).bans().size(), 1u) << "stored without it";
}

TEST_F(BanStoreTest, TheCapRefusesANewBanAndCountsIt) {
    BanStore store = open(2);
    ASSERT_TRUE(store.ban(request("203.0.113.0/24", 60 * kSecond), kNow, kNoPolicy).ok());
    ASSERT_TRUE(store.ban(request("198.51.100.0/24", 60 * kSecond), kNow, kNoPolicy).ok());
    auto refused = store.ban(request("192.0.2.0/24", 60 * kSecond), kNow, kNoPolicy);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().message,
              "cannot ban 192.0.2.0/24: 2 bans are in force, as many as max_bans allows (sluiced.toml, or "
              "sluice-dpdk --max-bans; 1..4096); unban one or raise max_bans");
    EXPECT_EQ(refused.error().setting, "max_bans");
    EXPECT_EQ(store.refused_at_cap(), 1u);
    EXPECT_EQ(store.bans().size(), 2u);
    // A re-ban is not a new ban: the cap does not stop it.
    auto again = store.ban(request("198.51.100.0/24", 120 * kSecond), kNow, kNoPolicy);
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_TRUE(again.value().rebanned);
    EXPECT_EQ(store.refused_at_cap(), 1u);
}

// Each prefix length in use is a probe for every packet of its family: the
// dataplanes take at most SLUICE_BAN_LENGTHS_MAX, and a ban past them is
// refused before it is stored.
TEST_F(BanStoreTest, ANewPrefixLengthPastTheDataplanesLimitIsRefused) {
    BanStore store = open(64);
    for (unsigned length = 24; length < 24 + SLUICE_BAN_LENGTHS_MAX; length++)
        ASSERT_TRUE(store.ban(request("10.0.0.0/" + std::to_string(length), 60 * kSecond), kNow, kNoPolicy).ok())
            << length;
    EXPECT_TRUE(store.ban(request("11.0.0.0/24", 60 * kSecond), kNow, kNoPolicy).ok()) << "a length in use";
    EXPECT_TRUE(store.ban(request("2001:db8::/48", 60 * kSecond), kNow, kNoPolicy).ok()) << "another family";
    auto refused = store.ban(request("12.0.0.0/16", 60 * kSecond), kNow, kNoPolicy);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().message,
              "cannot ban 12.0.0.0/16: IPv4 bans use 9 prefix lengths; at most 8 (each is a lookup for every packet): "
              "ban wider or narrower prefixes of a length in use");
    EXPECT_EQ(refused.error().setting, "prefix");
    EXPECT_EQ(store.bans().size(), SLUICE_BAN_LENGTHS_MAX + 2);
    EXPECT_EQ(open(64).bans().size(), SLUICE_BAN_LENGTHS_MAX + 2) << "nothing more was stored";
}

TEST_F(BanStoreTest, APassClassProtectsItsPrefixesUnlessForced) {
    const PassProtection protection = protection_of(test::kWebPasses);
    BanStore store = open();
    auto inside = store.ban(request("198.51.100.0/25", 60 * kSecond), kNow, protection);
    ASSERT_FALSE(inside.ok());
    EXPECT_EQ(inside.error().message,
              "198.51.100.0/25 is protected by the running policy: class \"web\" (action pass) matches "
              "198.51.100.0/24, which holds 198.51.100.0/25. A ban is checked before classification, so it would "
              "drop that traffic; --force bans it all the same");
    EXPECT_EQ(inside.error().setting, "prefix");
    auto around = store.ban(request("198.51.0.0/16", 60 * kSecond), kNow, protection);
    ASSERT_FALSE(around.ok());
    EXPECT_NE(around.error().message.find("matches 198.51.100.0/24, which is inside 198.51.0.0/16"), std::string::npos)
        << around.error().message;
    auto same = store.ban(request("198.51.100.0/24", 60 * kSecond), kNow, protection);
    ASSERT_FALSE(same.ok());
    EXPECT_NE(same.error().message.find("matches 198.51.100.0/24, the same prefix"), std::string::npos)
        << same.error().message;
    EXPECT_EQ(store.refused_protected(), 3u);
    EXPECT_TRUE(store.bans().empty());
    EXPECT_FALSE(std::filesystem::exists(store.path()));

    // Beside it, and in the other family, nothing protects.
    EXPECT_TRUE(store.ban(request("198.51.101.0/24", 60 * kSecond), kNow, protection).ok());
    EXPECT_TRUE(store.ban(request("2001:db8::/32", 60 * kSecond), kNow, protection).ok());

    auto forced = store.ban(request("198.51.100.0/25", 60 * kSecond, "", 0, true), kNow, protection);
    ASSERT_TRUE(forced.ok()) << forced.error().message;
    EXPECT_TRUE(forced.value().ban.forced);
    EXPECT_EQ(forced.value().overridden,
              "class \"web\" (action pass) matches 198.51.100.0/24, which holds 198.51.100.0/25");
    // Forcing what nothing protects overrides nothing.
    auto plain = store.ban(request("192.0.2.0/24", 60 * kSecond, "", 0, true), kNow, protection);
    ASSERT_TRUE(plain.ok());
    EXPECT_TRUE(plain.value().overridden.empty());
}

TEST_F(BanStoreTest, ADefaultClassThatPassesProtectsWhatNoLimitingPrefixHolds) {
    const PassProtection protection = protection_of(kDefaultPasses);
    ASSERT_TRUE(protection.default_pass_class.has_value());
    BanStore store = open();
    // Wholly inside "web", clear of the passing "office" inside it.
    EXPECT_TRUE(store.ban(request("198.51.100.0/25", 60 * kSecond), kNow, protection).ok());
    auto elsewhere = store.ban(request("203.0.113.0/24", 60 * kSecond), kNow, protection);
    ASSERT_FALSE(elsewhere.ok());
    EXPECT_NE(elsewhere.error().message.find("the default class \"everyone\" (action pass) takes the addresses of "
                                             "203.0.113.0/24 that no other class matches"),
              std::string::npos)
        << elsewhere.error().message;
    auto wider = store.ban(request("198.51.0.0/16", 60 * kSecond), kNow, protection);
    ASSERT_FALSE(wider.ok()) << "only part of it is web's";
    auto office = store.ban(request("198.51.100.200", 60 * kSecond), kNow, protection);
    ASSERT_FALSE(office.ok());
    EXPECT_NE(office.error().message.find("class \"office\" (action pass) matches 198.51.100.128/25"),
              std::string::npos)
        << office.error().message;
}

TEST_F(BanStoreTest, AReBanReplacesItsEndReasonAndWhoAndKeepsItsSlotAndDrops) {
    BanStore store = open();
    ASSERT_TRUE(store.ban(request("203.0.113.0/24", 600 * kSecond, "first", 1000), kNow, kNoPolicy).ok());
    ASSERT_TRUE(store.ban(request("198.51.100.0/24", 600 * kSecond), kNow, kNoPolicy).ok());
    ASSERT_TRUE(store.add_drops({{0, {5, 500}}, {7, {9, 900}}}).ok()) << "slot 7 has no ban: ignored";
    auto again = store.ban(request("203.0.113.0/24", 60 * kSecond, "second", 0), kNow + 10 * kSecond, kNoPolicy);
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_TRUE(again.value().rebanned);
    const Ban& ban = again.value().ban;
    EXPECT_EQ(ban.slot, 0u);
    EXPECT_EQ(ban.created_unix_ns, kNow);
    EXPECT_EQ(ban.until_unix_ns, kNow + 70 * kSecond) << "replaced, here shortened";
    EXPECT_EQ(ban.reason, "second");
    EXPECT_EQ(ban.uid, 0u);
    EXPECT_EQ(ban.dropped_before.packets, 5u);
    EXPECT_EQ(ban.dropped_before.bytes, 500u);
    EXPECT_EQ(store.bans().size(), 2u);
    const BanStore reopened = open(16, kNow + 20 * kSecond);
    ASSERT_EQ(reopened.bans().size(), 2u);
    EXPECT_EQ(reopened.bans()[1].dropped_before.packets, 5u) << "203.0.113.0/24 sorts after 198.51.100.0/24";
    EXPECT_EQ(reopened.bans()[1].reason, "second");
}

TEST_F(BanStoreTest, ANewBanTakesTheLowestFreeSlot) {
    BanStore store = open();
    for (const char* cidr : {"192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"})
        ASSERT_TRUE(store.ban(request(cidr, 60 * kSecond), kNow, kNoPolicy).ok());
    auto lifted = store.unban(prefix("198.51.100.0/24"));
    ASSERT_TRUE(lifted.ok()) << lifted.error().message;
    EXPECT_EQ(lifted.value().slot, 1u);
    auto next = store.ban(request("2001:db8::/32", 60 * kSecond), kNow, kNoPolicy);
    ASSERT_TRUE(next.ok());
    EXPECT_EQ(next.value().ban.slot, 1u);
}

TEST_F(BanStoreTest, UnbanOfWhatIsNotBannedNamesIt) {
    BanStore store = open();
    ASSERT_TRUE(store.ban(request("203.0.113.0/24", 60 * kSecond), kNow, kNoPolicy).ok());
    auto unknown = store.unban(prefix("198.51.100.0/24"));
    ASSERT_FALSE(unknown.ok());
    EXPECT_EQ(unknown.error().message, "198.51.100.0/24 is not banned");
    EXPECT_EQ(unknown.error().setting, "prefix");
    auto narrower = store.unban(prefix("203.0.113.7"));
    ASSERT_FALSE(narrower.ok());
    EXPECT_EQ(narrower.error().message, "203.0.113.7/32 is not banned (banned and overlapping it: 203.0.113.0/24)");
    EXPECT_EQ(store.bans().size(), 1u);
}

TEST_F(BanStoreTest, DurationsOutsideOneSecondToThirtyDaysAreRefused) {
    BanStore store = open();
    for (const uint64_t for_ns : {uint64_t{0}, kSecond - 1, 30 * 86'400 * kSecond + kSecond, UINT64_MAX}) {
        auto refused = store.ban(request("203.0.113.0/24", for_ns), kNow, kNoPolicy);
        ASSERT_FALSE(refused.ok()) << for_ns;
        EXPECT_EQ(refused.error().message.rfind("a ban lasts 1s..30d, not ", 0), 0u) << refused.error().message;
        EXPECT_EQ(refused.error().setting, "for");
    }
    EXPECT_TRUE(store.ban(request("203.0.113.0/24", kSecond), kNow, kNoPolicy).ok());
    EXPECT_TRUE(store.ban(request("198.51.100.0/24", 30 * 86'400 * kSecond), kNow, kNoPolicy).ok());
}

TEST_F(BanStoreTest, AReasonIsShortPrintableUtf8) {
    EXPECT_TRUE(check_ban_reason("").ok());
    EXPECT_TRUE(check_ban_reason("incident 42: SYN flood from \"AS64500\" — see ticket").ok());
    EXPECT_TRUE(check_ban_reason(std::string(200, 'x')).ok());
    EXPECT_EQ(check_ban_reason(std::string(201, 'x')).error().message, "reason is 201 bytes; at most 200");
    EXPECT_EQ(check_ban_reason("tab\there").error().message,
              "reason has a control character (U+0009 at byte 3); give it on one line, printable");
    EXPECT_EQ(check_ban_reason("del\x7f").error().message,
              "reason has a control character (U+007F at byte 3); give it on one line, printable");
    EXPECT_EQ(check_ban_reason("c1 \xc2\x85").error().message,
              "reason has a control character (U+0085 at byte 3); give it on one line, printable");
    EXPECT_EQ(check_ban_reason("cut \xe2\x80").error().message, "reason is not UTF-8 (at byte 4)");
    EXPECT_EQ(check_ban_reason("overlong \xc0\xaf").error().message, "reason is not UTF-8 (at byte 9)");
    EXPECT_EQ(check_ban_reason("surrogate \xed\xa0\x80").error().message, "reason is not UTF-8 (at byte 10)");
    BanStore store = open();
    auto refused = store.ban(request("203.0.113.0/24", 60 * kSecond, "two\nlines"), kNow, kNoPolicy);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().setting, "reason");
    EXPECT_TRUE(store.bans().empty());
}

TEST_F(BanStoreTest, PrefixesAreCanonicalAndNeverEverything) {
    EXPECT_EQ(prefix_text(prefix("203.0.113.7")), "203.0.113.7/32");
    EXPECT_EQ(prefix_text(prefix("2001:db8::1")), "2001:db8::1/128");
    EXPECT_EQ(prefix_text(prefix("2001:0db8:0000::/32")), "2001:db8::/32");
    EXPECT_EQ(parse_ban_prefix("203.0.113.7/24").error().message, "\"203.0.113.7/24\" has host bits set past /24");
    EXPECT_EQ(parse_ban_prefix("::/0").error().message,
              "\"::/0\" is every address of its family; a ban is for a prefix (a class with action = \"drop\" drops "
              "everything)");
    EXPECT_FALSE(parse_ban_prefix("203.0.113.0/33").ok());
    EXPECT_FALSE(parse_ban_prefix("").ok());
}

TEST_F(BanStoreTest, AMalformedFileStopsTheOpenNamingFileAndFault) {
    const std::string path = dir_ + "/bans.json";
    const std::pair<std::string, std::string> cases[] = {
        {"{\"bans\": [", path + ": not JSON (a damaged file? it holds the bans in force)"},
        {"[]", path + ": expected an object with a \"bans\" array"},
        {R"({"bans": [{"prefix": "203.0.113.0/24"}]})", path + ": ban 1: \"created_unix_ns\" is missing"},
        {R"({"bans": [{"prefix": "203.0.113.0/24", "created_unix_ns": 1, "until_unix_ns": -5, "uid": 0,
            "slot": 0, "dropped_packets_before": 0, "dropped_bytes_before": 0, "reason": "", "forced": false}]})",
         path + ": ban 1: \"until_unix_ns\" must be an integer in 0..18446744073709551615"},
        {R"({"bans": [{"prefix": "203.0.113.9/24", "created_unix_ns": 1, "until_unix_ns": 5, "uid": 0,
            "slot": 0, "dropped_packets_before": 0, "dropped_bytes_before": 0, "reason": "", "forced": false}]})",
         path + ": ban 1: \"203.0.113.9/24\" has host bits set past /24"},
        {R"({"bans": [{"prefix": "203.0.113.0/24", "created_unix_ns": 1, "until_unix_ns": 5, "uid": 0,
            "slot": 5000, "dropped_packets_before": 0, "dropped_bytes_before": 0, "reason": "", "forced": false}]})",
         path + ": ban 1 (203.0.113.0/24): slot 5000 is not below 4096"},
        {R"({"bans": [{"prefix": "203.0.113.0/24", "created_unix_ns": 1, "until_unix_ns": 5, "uid": 0,
            "slot": 3, "dropped_packets_before": 0, "dropped_bytes_before": 0, "reason": "", "forced": false},
           {"prefix": "198.51.100.0/24", "created_unix_ns": 1, "until_unix_ns": 5, "uid": 0,
            "slot": 3, "dropped_packets_before": 0, "dropped_bytes_before": 0, "reason": "", "forced": false}]})",
         path + ": ban 2 (198.51.100.0/24): slot 3 is another ban's too"},
        {R"({"bans": [{"prefix": "203.0.113.0/24", "created_unix_ns": 1, "until_unix_ns": 5, "uid": 0,
            "slot": 3, "dropped_packets_before": 0, "dropped_bytes_before": 0, "reason": "", "forced": false},
           {"prefix": "203.0.113.0/24", "created_unix_ns": 1, "until_unix_ns": 5, "uid": 0,
            "slot": 4, "dropped_packets_before": 0, "dropped_bytes_before": 0, "reason": "", "forced": false}]})",
         path + ": 203.0.113.0/24 is banned twice"},
        {R"({"bans": [{"prefix": "203.0.113.0/24", "created_unix_ns": 1, "until_unix_ns": 5, "uid": 0,
            "slot": 3, "dropped_packets_before": 0, "dropped_bytes_before": 0, "reason": "a\u0007", "forced": 1}]})",
         path + ": ban 1 (203.0.113.0/24): reason has a control character (U+0007 at byte 1); give it on one line, "
                "printable"},
    };
    for (const auto& [text, expected] : cases) {
        write_file(text);
        auto opened = BanStore::open(dir_, 16, 0);
        ASSERT_FALSE(opened.ok()) << text;
        EXPECT_EQ(opened.error().message, expected);
    }
}

// A write that fails (here: the temp file's name is taken by a directory,
// which even root cannot open for writing) is refused, and neither the
// bans in memory nor the file change.
TEST_F(BanStoreTest, AChangeThatCannotBeStoredChangesNothing) {
    BanStore store = open();
    ASSERT_TRUE(store.ban(request("203.0.113.0/24", 60 * kSecond, "kept"), kNow, kNoPolicy).ok());
    const std::string before = file_text();
    ASSERT_EQ(::mkdir((dir_ + "/bans.json.tmp").c_str(), 0755), 0);

    auto refused = store.ban(request("198.51.100.0/24", 60 * kSecond), kNow, kNoPolicy);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code, ErrorCode::internal);
    EXPECT_EQ(refused.error().message, "the bans could not be stored, so nothing changed: cannot create " + dir_ +
                                           "/bans.json.tmp: Is a directory");
    auto reban = store.ban(request("203.0.113.0/24", 600 * kSecond, "changed"), kNow, kNoPolicy);
    ASSERT_FALSE(reban.ok());
    ASSERT_FALSE(store.unban(prefix("203.0.113.0/24")).ok());
    ASSERT_FALSE(store.expire(kNow + 60 * kSecond).ok());
    ASSERT_FALSE(store.add_drops({{0, {1, 1}}}).ok());
    ASSERT_EQ(store.bans().size(), 1u);
    EXPECT_EQ(store.bans()[0].reason, "kept");
    EXPECT_EQ(store.bans()[0].until_unix_ns, kNow + 60 * kSecond);
    EXPECT_EQ(store.bans()[0].dropped_before.packets, 0u);
    EXPECT_EQ(file_text(), before);

    std::filesystem::remove(dir_ + "/bans.json.tmp");
    EXPECT_TRUE(store.ban(request("198.51.100.0/24", 60 * kSecond), kNow, kNoPolicy).ok());
    EXPECT_EQ(store.bans().size(), 2u);
}

TEST_F(BanStoreTest, DataplanesGetTheBansInForceOnTheirOwnClock) {
    BanStore store = open();
    ASSERT_TRUE(store.ban(request("203.0.113.0/24", 600 * kSecond), kNow, kNoPolicy).ok());
    ASSERT_TRUE(store.ban(request("198.51.100.0/24", 10 * kSecond), kNow, kNoPolicy).ok());
    const uint64_t dataplane_now = 5 * kSecond;
    const std::vector<DataplaneBan> bans = store.dataplane_bans(kNow + 20 * kSecond, dataplane_now);
    ASSERT_EQ(bans.size(), 1u) << "the ended one is left out";
    EXPECT_EQ(prefix_text(bans[0].prefix), "203.0.113.0/24");
    EXPECT_EQ(bans[0].until_ns, dataplane_now + 580 * kSecond);
    EXPECT_EQ(bans[0].slot, 0u);
    EXPECT_TRUE(check_bans(bans).ok());
    EXPECT_EQ(store.dataplane_bans(kNow, UINT64_MAX - kSecond)[0].until_ns, UINT64_MAX) << "saturates";
}

TEST_F(BanStoreTest, TheLongestBanInForceCoversAnAddress) {
    BanStore store = open();
    ASSERT_TRUE(store.ban(request("203.0.0.0/16", 600 * kSecond), kNow, kNoPolicy).ok());
    ASSERT_TRUE(store.ban(request("203.0.113.0/24", 60 * kSecond), kNow, kNoPolicy).ok());
    const uint8_t inside[16] = {203, 0, 113, 7};
    const uint8_t wider[16] = {203, 0, 9, 1};
    const uint8_t outside[16] = {192, 0, 2, 1};
    ASSERT_NE(store.covering(SLUICE_FAMILY_IPV4, inside, kNow), nullptr);
    EXPECT_EQ(prefix_text(store.covering(SLUICE_FAMILY_IPV4, inside, kNow)->prefix), "203.0.113.0/24");
    EXPECT_EQ(prefix_text(store.covering(SLUICE_FAMILY_IPV4, inside, kNow + 61 * kSecond)->prefix), "203.0.0.0/16");
    EXPECT_EQ(prefix_text(store.covering(SLUICE_FAMILY_IPV4, wider, kNow)->prefix), "203.0.0.0/16");
    EXPECT_EQ(store.covering(SLUICE_FAMILY_IPV4, outside, kNow), nullptr);
    EXPECT_EQ(store.covering(SLUICE_FAMILY_IPV6, inside, kNow), nullptr);
}

TEST(BanDropBaseline, CountsFromItsBaselineAndNeverBelowZero) {
    std::vector<sluice_counter> counters(SLUICE_MAX_BANS);
    counters[3] = {10, 1000};
    BanDropBaseline baseline;
    EXPECT_EQ(baseline.since(3, counters).packets, 10u) << "a fresh baseline counts from zero";
    baseline.reset_all(counters);
    counters[3] = {15, 1500};
    counters[4] = {2, 200};
    EXPECT_EQ(baseline.since(3, counters).packets, 5u);
    EXPECT_EQ(baseline.since(3, counters).bytes, 500u);
    baseline.reset_slot(4, counters);
    counters[4] = {3, 300};
    EXPECT_EQ(baseline.since(4, counters).packets, 1u);
    counters[3] = {1, 100};  // counters that went back (a dataplane made afresh)
    EXPECT_EQ(baseline.since(3, counters).packets, 0u);
    EXPECT_EQ(baseline.since(SLUICE_MAX_BANS, counters).packets, 0u);
}

TEST(PrefixHolds, SameFamilyShorterAndTheSameBits) {
    EXPECT_TRUE(prefix_holds(prefix("10.0.0.0/8"), prefix("10.1.0.0/16")));
    EXPECT_TRUE(prefix_holds(prefix("10.0.0.0/8"), prefix("10.0.0.0/8")));
    EXPECT_FALSE(prefix_holds(prefix("10.1.0.0/16"), prefix("10.0.0.0/8")));
    EXPECT_FALSE(prefix_holds(prefix("10.0.0.0/8"), prefix("11.0.0.0/16")));
    EXPECT_FALSE(prefix_holds(prefix("10.0.0.0/8"), prefix("a00::/16"))) << "another family";
    EXPECT_TRUE(prefix_holds(prefix("2001:db8::/32"), prefix("2001:db8:1::7")));
}

}  // namespace
}  // namespace sluice::bans_test
