// SPDX-License-Identifier: Apache-2.0
// PolicyService's push/rollback logic against fake dataplanes: apply to every
// target before committing, put earlier targets back when one refuses,
// dry runs, compare-and-swap, reconcile and SIGHUP reloads. The kernel side
// of apply() is covered by tests/bpf.
#include <gmock/gmock.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "policy_service.h"
#include "policy_texts.h"

namespace sluice::test::policy_service_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;
using ::testing::StartsWith;

// kTwoClasses with a comment, other spacing and another number spelling:
// the same canonical content.
constexpr std::string_view kTwoClassesReformatted = R"toml(
# reformatted, same content
[[class]]
name    = "default"
per_source = { rate = 1000, burst = 2000 }

[[class]]
name = "web"
match = [ "198.51.100.0/24" ]
per_source = { rate = 500, burst = 1_000 }
)toml";

constexpr std::string_view kInvalid = R"toml(
[[class]]
name = "default"
per_source = { rate = "fast", burst = 2_000 }
)toml";

// Records what it was given; can be told to refuse its next apply.
class FakeDataplane : public Dataplane {
  public:
    Status apply(const CompiledPolicy& policy) override {
        apply_calls++;
        if (fail_next_apply) {
            fail_next_apply = false;
            return Error{"fake refusal", "fake_setting"};
        }
        applied.push_back(policy);
        active = policy.header.version;
        return ok_status();
    }
    Result<uint64_t> active_version() override {
        if (fail_active_version) return Error{"fake cannot read"};
        return active;
    }

    std::vector<uint64_t> applied_versions() const {
        std::vector<uint64_t> versions;
        for (const CompiledPolicy& policy : applied) versions.push_back(policy.header.version);
        return versions;
    }

    std::vector<CompiledPolicy> applied;
    uint64_t active = 0;
    int apply_calls = 0;
    bool fail_next_apply = false;
    bool fail_active_version = false;
};

// The per-class limits a target got, compared as bytes: the ABI structs pad
// explicitly and the loader zeroes it, so equal bytes mean equal enforcement.
bool same_classes(const CompiledPolicy& a, const CompiledPolicy& b) {
    return a.classes.size() == b.classes.size() &&
           std::memcmp(a.classes.data(), b.classes.data(), a.classes.size() * sizeof(a.classes[0])) == 0;
}

uint32_t web_rate(const CompiledPolicy& policy, uint32_t web_id) {
    const sluice_class_entry* web = policy.find_class(web_id);
    return web ? static_cast<uint32_t>(SLUICE_NANO / web->per_source.current.interval_ns) : 0;
}

class PolicyServiceTest : public ::testing::Test {
  protected:
    void SetUp() override {
        char pattern[] = "/tmp/sluice-policy-service-XXXXXX";
        ASSERT_NE(mkdtemp(pattern), nullptr);
        dir_ = pattern;
        service_ = make_service();
    }
    void TearDown() override {
        service_.reset();
        std::error_code ignored;
        std::filesystem::remove_all(dir_, ignored);
    }

    std::unique_ptr<PolicyService> make_service() {
        auto store = VersionStore::open(dir_);
        EXPECT_TRUE(store.ok()) << store.error().message;
        return std::make_unique<PolicyService>(std::move(store.value()), kOptions);
    }

    void add(std::string name, FakeDataplane& target) {
        auto added = service_->add_target(std::move(name), &target);
        ASSERT_TRUE(added.ok()) << added.error().message;
    }

    // Pushes `text` for real; returns the version it got (0 on failure).
    uint64_t push(std::string_view text, std::optional<uint64_t> if_version = std::nullopt) {
        auto pushed = service_->push(text, "p.toml", if_version, false, "push");
        EXPECT_TRUE(pushed.ok()) << pushed.error().message;
        return pushed ? pushed.value().version.version : 0;
    }

    uint64_t current_version() const {
        const auto current = service_->current();
        return current ? current->version : 0;
    }

    std::string dir_;
    std::unique_ptr<PolicyService> service_;
    FakeDataplane a_, b_, c_;
};

TEST_F(PolicyServiceTest, PushAppliesToEveryTargetThenCommits) {
    add("a", a_);
    add("b", b_);
    auto pushed = service_->push(kTwoClasses, "p.toml", std::nullopt, false, "test push");
    ASSERT_TRUE(pushed.ok()) << pushed.error().message;
    const PushOutcome& outcome = pushed.value();
    EXPECT_TRUE(outcome.applied);
    EXPECT_EQ(outcome.version.version, 1u);
    EXPECT_EQ(outcome.version.sha256, sha256_hex(outcome.version.canonical));
    EXPECT_EQ(outcome.version.origin, "test push");
    EXPECT_THAT(outcome.diff, StartsWith("--- version 0\n+++ version 1\n"));
    EXPECT_THAT(a_.applied_versions(), ElementsAre(1u));
    EXPECT_THAT(b_.applied_versions(), ElementsAre(1u));
    EXPECT_TRUE(same_classes(a_.applied[0], b_.applied[0]));
    ASSERT_TRUE(service_->current().has_value());
    EXPECT_EQ(service_->current()->sha256, outcome.version.sha256);

    // The store committed durably: a fresh store over the same directory sees it.
    auto reopened = VersionStore::open(dir_);
    ASSERT_TRUE(reopened.ok()) << reopened.error().message;
    ASSERT_TRUE(reopened.value().current().has_value());
    EXPECT_EQ(reopened.value().current()->version, 1u);
}

TEST_F(PolicyServiceTest, SecondPushReturnsDiffAgainstTheCurrentVersion) {
    add("a", a_);
    ASSERT_EQ(push(kTwoClasses), 1u);
    auto pushed = service_->push(kWebFaster, "p.toml", std::nullopt, false, "push");
    ASSERT_TRUE(pushed.ok()) << pushed.error().message;
    EXPECT_EQ(pushed.value().version.version, 2u);
    EXPECT_THAT(pushed.value().diff, StartsWith("--- version 1\n+++ version 2\n"));
    EXPECT_THAT(pushed.value().diff, HasSubstr("-rate = 500"));
    EXPECT_THAT(pushed.value().diff, HasSubstr("+rate = 900"));
    EXPECT_THAT(a_.applied_versions(), ElementsAre(1u, 2u));
}

TEST_F(PolicyServiceTest, DryRunChangesNothingAndReturnsTheDiff) {
    add("a", a_);
    ASSERT_EQ(push(kTwoClasses), 1u);
    auto dry = service_->push(kWebFaster, "p.toml", std::nullopt, true, "push");
    ASSERT_TRUE(dry.ok()) << dry.error().message;
    EXPECT_FALSE(dry.value().applied);
    EXPECT_EQ(dry.value().version.version, 2u);
    EXPECT_THAT(dry.value().diff, HasSubstr("+rate = 900"));
    EXPECT_EQ(a_.apply_calls, 1);  // only the first, real push
    EXPECT_EQ(current_version(), 1u);
    EXPECT_THAT(service_->history(), SizeIs(1));
    // The would-be number was not used up.
    EXPECT_EQ(push(kWebFaster), 2u);
}

TEST_F(PolicyServiceTest, DryRunOfSameContentHasAnEmptyDiff) {
    add("a", a_);
    ASSERT_EQ(push(kTwoClasses), 1u);
    auto dry = service_->push(kTwoClassesReformatted, "p.toml", std::nullopt, true, "push");
    ASSERT_TRUE(dry.ok()) << dry.error().message;
    EXPECT_THAT(dry.value().diff, IsEmpty());
    EXPECT_EQ(a_.apply_calls, 1);
}

TEST_F(PolicyServiceTest, InvalidTextIsRefusedAndNothingApplied) {
    add("a", a_);
    auto pushed = service_->push(kInvalid, "bad.toml", std::nullopt, false, "push");
    ASSERT_FALSE(pushed.ok());
    EXPECT_THAT(pushed.error().message, HasSubstr("bad.toml"));
    EXPECT_EQ(a_.apply_calls, 0);
    EXPECT_FALSE(service_->current().has_value());
}

TEST_F(PolicyServiceTest, IfVersionMismatchIsAConflictAndNothingApplied) {
    add("a", a_);
    ASSERT_EQ(push(kTwoClasses), 1u);
    auto pushed = service_->push(kWebFaster, "p.toml", 0, false, "push");  // expects no version yet
    ASSERT_FALSE(pushed.ok());
    EXPECT_THAT(pushed.error().message, HasSubstr("current policy version is 1"));
    EXPECT_EQ(pushed.error().setting, "version");
    EXPECT_EQ(a_.apply_calls, 1);
    EXPECT_EQ(current_version(), 1u);
    // The matching version goes through.
    EXPECT_EQ(push(kWebFaster, 1), 2u);
}

TEST_F(PolicyServiceTest, FailureOnSecondOfThreeRestoresTheFirstAndSkipsTheThird) {
    add("eth0", a_);
    add("eth1", b_);
    add("eth2", c_);
    ASSERT_EQ(push(kTwoClasses), 1u);
    const uint32_t web_id = service_->current()->class_ids.at("web");
    b_.fail_next_apply = true;

    auto pushed = service_->push(kWebFaster, "p.toml", std::nullopt, false, "push");
    ASSERT_FALSE(pushed.ok());
    EXPECT_THAT(pushed.error().message, HasSubstr("version 2 not applied"));
    EXPECT_THAT(pushed.error().message, HasSubstr("target \"eth1\" (2 of 3)"));
    EXPECT_THAT(pushed.error().message, HasSubstr("fake refusal"));
    EXPECT_THAT(pushed.error().message, HasSubstr("\"eth0\" (1 of 3) put back on version 1"));
    EXPECT_EQ(pushed.error().setting, "fake_setting");

    // eth0 ran version 2 briefly and is back on version 1, with its content.
    EXPECT_THAT(a_.applied_versions(), ElementsAre(1u, 2u, 1u));
    EXPECT_EQ(web_rate(a_.applied[1], web_id), 900u);
    EXPECT_TRUE(same_classes(a_.applied[2], a_.applied[0]));
    EXPECT_EQ(a_.active, 1u);
    EXPECT_THAT(b_.applied_versions(), ElementsAre(1u));
    EXPECT_THAT(c_.applied_versions(), ElementsAre(1u));
    EXPECT_EQ(c_.apply_calls, 1);
    EXPECT_EQ(current_version(), 1u);
    EXPECT_THAT(service_->history(), SizeIs(1));
}

TEST_F(PolicyServiceTest, FailureOnTheFirstPushEverCommitsNothing) {
    add("a", a_);
    add("b", b_);
    b_.fail_next_apply = true;
    auto pushed = service_->push(kTwoClasses, "p.toml", std::nullopt, false, "push");
    ASSERT_FALSE(pushed.ok());
    EXPECT_THAT(pushed.error().message, HasSubstr("target \"b\" (2 of 2)"));
    EXPECT_THAT(pushed.error().message, HasSubstr("no committed version to put back"));
    EXPECT_FALSE(service_->current().has_value());
    EXPECT_THAT(service_->history(), IsEmpty());
    auto reopened = VersionStore::open(dir_);
    ASSERT_TRUE(reopened.ok());
    EXPECT_FALSE(reopened.value().current().has_value());

    // The retry numbers the version 1 again and reaches both.
    EXPECT_EQ(push(kTwoClasses), 1u);
    EXPECT_EQ(a_.active, 1u);
    EXPECT_EQ(b_.active, 1u);
}

TEST_F(PolicyServiceTest, FailureOnTheFirstTargetAppliesNothing) {
    add("a", a_);
    add("b", b_);
    ASSERT_EQ(push(kTwoClasses), 1u);
    a_.fail_next_apply = true;
    auto pushed = service_->push(kWebFaster, "p.toml", std::nullopt, false, "push");
    ASSERT_FALSE(pushed.ok());
    EXPECT_THAT(pushed.error().message, HasSubstr("no target had applied it"));
    EXPECT_THAT(a_.applied_versions(), ElementsAre(1u));
    EXPECT_THAT(b_.applied_versions(), ElementsAre(1u));
    EXPECT_EQ(current_version(), 1u);
}

TEST_F(PolicyServiceTest, ReconcileReappliesToATargetAFailedPushLeftOnAnUncommittedVersion) {
    // The first push fails on b, so a runs an uncommitted version 1...
    add("a", a_);
    add("b", b_);
    b_.fail_next_apply = true;
    ASSERT_FALSE(service_->push(kTwoClasses, "p.toml", std::nullopt, false, "push").ok());
    ASSERT_EQ(a_.active, 1u);
    // ...and while a is detached, different content is committed as version 1.
    ASSERT_TRUE(service_->remove_target("a").ok());
    ASSERT_EQ(push(kWebFaster), 1u);
    const uint32_t web_id = service_->current()->class_ids.at("web");
    add("a", a_);

    // a's version number matches, its content does not: reconcile must still apply.
    ASSERT_TRUE(service_->reconcile().ok());
    EXPECT_THAT(a_.applied_versions(), ElementsAre(1u, 1u));
    EXPECT_EQ(web_rate(a_.applied.back(), web_id), 900u);
    // Now it is up to date: a second reconcile leaves it alone.
    ASSERT_TRUE(service_->reconcile().ok());
    EXPECT_EQ(a_.apply_calls, 2);
}

TEST_F(PolicyServiceTest, RollbackAppliesThePreviousContentAsANewVersion) {
    add("a", a_);
    add("b", b_);
    ASSERT_EQ(push(kTwoClasses), 1u);
    ASSERT_EQ(push(kWebFaster), 2u);
    auto rolled = service_->rollback(std::nullopt, false);
    ASSERT_TRUE(rolled.ok()) << rolled.error().message;
    EXPECT_TRUE(rolled.value().applied);
    EXPECT_EQ(rolled.value().version.version, 3u);
    EXPECT_EQ(rolled.value().version.origin, "rollback of 1");
    EXPECT_EQ(rolled.value().version.sha256, service_->get(1).value().sha256);
    EXPECT_THAT(rolled.value().diff, HasSubstr("-rate = 900"));
    EXPECT_THAT(a_.applied_versions(), ElementsAre(1u, 2u, 3u));
    EXPECT_THAT(b_.applied_versions(), ElementsAre(1u, 2u, 3u));
    EXPECT_TRUE(same_classes(a_.applied[2], a_.applied[0]));
    EXPECT_EQ(current_version(), 3u);
}

TEST_F(PolicyServiceTest, RollbackDryRunAndErrorsChangeNothing) {
    add("a", a_);
    auto nothing = service_->rollback(std::nullopt, false);
    ASSERT_FALSE(nothing.ok());
    EXPECT_THAT(nothing.error().message, HasSubstr("nothing to roll back"));

    ASSERT_EQ(push(kTwoClasses), 1u);
    ASSERT_EQ(push(kWebFaster), 2u);
    auto dry = service_->rollback(1, true);
    ASSERT_TRUE(dry.ok()) << dry.error().message;
    EXPECT_FALSE(dry.value().applied);
    EXPECT_EQ(dry.value().version.version, 3u);
    EXPECT_THAT(dry.value().diff, HasSubstr("+rate = 500"));

    auto missing = service_->rollback(9, false);
    ASSERT_FALSE(missing.ok());
    EXPECT_THAT(missing.error().message, HasSubstr("no policy version 9"));
    EXPECT_EQ(a_.apply_calls, 2);
    EXPECT_EQ(current_version(), 2u);
}

TEST_F(PolicyServiceTest, FailedRollbackRestoresEarlierTargets) {
    add("a", a_);
    add("b", b_);
    ASSERT_EQ(push(kTwoClasses), 1u);
    ASSERT_EQ(push(kWebFaster), 2u);
    b_.fail_next_apply = true;
    auto rolled = service_->rollback(std::nullopt, false);
    ASSERT_FALSE(rolled.ok());
    EXPECT_THAT(rolled.error().message, HasSubstr("version 3 not applied"));
    EXPECT_THAT(a_.applied_versions(), ElementsAre(1u, 2u, 3u, 2u));
    EXPECT_TRUE(same_classes(a_.applied[3], a_.applied[1]));
    EXPECT_EQ(current_version(), 2u);
}

TEST_F(PolicyServiceTest, ReconcileBringsLaggingTargetsToCurrentAndLeavesOthersAlone) {
    add("a", a_);
    ASSERT_EQ(push(kTwoClasses), 1u);
    ASSERT_EQ(push(kWebFaster), 2u);
    // b attached later (never applied), c runs an old version (a restarted
    // daemon re-adopting pinned maps, say).
    c_.active = 1;
    add("b", b_);
    add("c", c_);

    ASSERT_TRUE(service_->reconcile().ok());
    EXPECT_EQ(a_.apply_calls, 2);
    EXPECT_THAT(b_.applied_versions(), ElementsAre(2u));
    EXPECT_THAT(c_.applied_versions(), ElementsAre(2u));
    EXPECT_TRUE(same_classes(b_.applied[0], a_.applied[1]));
    EXPECT_EQ(b_.applied[0].prefixes.size(), a_.applied[1].prefixes.size());
}

TEST_F(PolicyServiceTest, ReconcileWithoutACurrentVersionDoesNothing) {
    add("a", a_);
    ASSERT_TRUE(service_->reconcile().ok());
    EXPECT_EQ(a_.apply_calls, 0);
}

TEST_F(PolicyServiceTest, ReconcileTriesEveryTargetAndNamesTheOnesThatFailed) {
    ASSERT_EQ(push(kTwoClasses), 1u);  // no targets yet
    add("a", a_);
    add("b", b_);
    add("c", c_);
    a_.fail_next_apply = true;
    b_.fail_active_version = true;
    auto reconciled = service_->reconcile();
    ASSERT_FALSE(reconciled.ok());
    EXPECT_THAT(reconciled.error().message, HasSubstr("not every target runs version 1"));
    EXPECT_THAT(reconciled.error().message, HasSubstr("target \"a\" (1 of 3) (running version 0) refused it"));
    EXPECT_THAT(reconciled.error().message, HasSubstr("target \"b\" (2 of 3): cannot read its active version"));
    EXPECT_THAT(reconciled.error().message, Not(HasSubstr("\"c\"")));
    EXPECT_THAT(c_.applied_versions(), ElementsAre(1u));

    // Once the faults are gone a second pass finishes the job.
    b_.fail_active_version = false;
    ASSERT_TRUE(service_->reconcile().ok());
    EXPECT_EQ(a_.active, 1u);
    EXPECT_EQ(b_.active, 1u);
    EXPECT_EQ(c_.apply_calls, 1);
}

TEST_F(PolicyServiceTest, ReconcileAfterRestartUsesTheStoredVersionAndClassIds) {
    add("a", a_);
    ASSERT_EQ(push(kTwoClasses), 1u);
    ASSERT_EQ(push(kWebFaster), 2u);
    const CompiledPolicy running = a_.applied.back();

    service_ = make_service();  // as a restarted daemon would
    add("fresh", b_);
    ASSERT_TRUE(service_->reconcile().ok());
    ASSERT_THAT(b_.applied, SizeIs(1));
    EXPECT_EQ(b_.applied[0].header.version, 2u);
    EXPECT_TRUE(same_classes(b_.applied[0], running));
}

TEST_F(PolicyServiceTest, AShapedPolicyComesBackTheSameFromItsCanonicalText) {
    add("a", a_);
    ASSERT_EQ(push(kShaped), 1u);
    const CompiledPolicy pushed = a_.applied.back();
    ASSERT_EQ(push(kShapedLongerQueue), 2u);
    auto rolled = service_->rollback(std::nullopt, false);
    ASSERT_TRUE(rolled.ok()) << rolled.error().message;
    EXPECT_THAT(rolled.value().diff, HasSubstr("-queue = 4096\n+queue = 1024"));

    service_ = make_service();  // as a restarted daemon would: compiled from the stored canonical text
    add("fresh", b_);
    ASSERT_TRUE(service_->reconcile().ok());
    ASSERT_THAT(b_.applied, SizeIs(1));
    EXPECT_TRUE(same_classes(b_.applied[0], pushed));
    const sluice_class_entry* bulk = b_.applied[0].find_class(3);
    ASSERT_NE(bulk, nullptr);
    EXPECT_EQ(bulk->shape.queue_packets, 1024u);
    EXPECT_EQ(bulk->shape.max_delay_ns, 50'000'000u);
}

TEST_F(PolicyServiceTest, ReloadIfChangedMakesAVersionOnlyForRealChanges) {
    add("a", a_);
    auto first = service_->reload_if_changed(kTwoClasses, "/etc/sluice/policy.toml");
    ASSERT_TRUE(first.ok()) << first.error().message;
    EXPECT_TRUE(first.value());
    EXPECT_EQ(service_->current()->origin, "reload");

    auto same = service_->reload_if_changed(kTwoClassesReformatted, "/etc/sluice/policy.toml");
    ASSERT_TRUE(same.ok()) << same.error().message;
    EXPECT_FALSE(same.value());
    EXPECT_EQ(current_version(), 1u);
    EXPECT_EQ(a_.apply_calls, 1);

    auto changed = service_->reload_if_changed(kWebFaster, "/etc/sluice/policy.toml");
    ASSERT_TRUE(changed.ok()) << changed.error().message;
    EXPECT_TRUE(changed.value());
    EXPECT_EQ(current_version(), 2u);
    EXPECT_THAT(a_.applied_versions(), ElementsAre(1u, 2u));

    auto invalid = service_->reload_if_changed(kInvalid, "/etc/sluice/policy.toml");
    ASSERT_FALSE(invalid.ok());
    EXPECT_THAT(invalid.error().message, HasSubstr("/etc/sluice/policy.toml"));
    EXPECT_EQ(current_version(), 2u);
}

TEST_F(PolicyServiceTest, VersionsGrowMonotonicallyAcrossPushesAndRollbacks) {
    add("a", a_);
    std::vector<uint64_t> versions;
    versions.push_back(push(kTwoClasses));
    versions.push_back(push(kWebFaster));
    versions.push_back(service_->rollback(std::nullopt, false).value().version.version);
    versions.push_back(push(kWebFaster));
    versions.push_back(service_->rollback(1, false).value().version.version);
    ASSERT_TRUE(service_->reload_if_changed(kWebFaster, "p.toml").value());
    versions.push_back(current_version());
    EXPECT_THAT(versions, ElementsAre(1u, 2u, 3u, 4u, 5u, 6u));
    EXPECT_EQ(a_.applied_versions(), versions);
    std::vector<uint64_t> history;
    for (const PolicyVersion& version : service_->history()) history.push_back(version.version);
    EXPECT_EQ(history, versions);
}

TEST_F(PolicyServiceTest, TargetsNeedUniqueNamesAndADataplane) {
    add("eth0", a_);
    auto duplicate = service_->add_target("eth0", &b_);
    ASSERT_FALSE(duplicate.ok());
    EXPECT_THAT(duplicate.error().message, HasSubstr("\"eth0\" is already added"));
    EXPECT_FALSE(service_->add_target("eth1", nullptr).ok());
    auto unknown = service_->remove_target("eth9");
    ASSERT_FALSE(unknown.ok());
    EXPECT_THAT(unknown.error().message, HasSubstr("\"eth9\""));

    add("eth1", b_);
    EXPECT_THAT(service_->target_names(), ElementsAre("eth0", "eth1"));
    ASSERT_TRUE(service_->remove_target("eth0").ok());
    EXPECT_THAT(service_->target_names(), ElementsAre("eth1"));
    ASSERT_EQ(push(kTwoClasses), 1u);
    EXPECT_EQ(a_.apply_calls, 0);  // removed targets are not touched
    EXPECT_EQ(b_.active, 1u);
}

TEST_F(PolicyServiceTest, ConcurrentPushesAreSerialised) {
    add("a", a_);
    add("b", b_);
    constexpr int kThreads = 4, kPushesEach = 5;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; t++) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < kPushesEach; i++) {
                // Distinct content per push so each one makes a version.
                const std::string text =
                    "[[class]]\nname = \"default\"\nper_source = { rate = " + std::to_string(1000 + t * 100 + i) +
                    ", burst = 5000 }\n";
                auto pushed = service_->push(text, "p.toml", std::nullopt, false, "thread " + std::to_string(t));
                EXPECT_TRUE(pushed.ok()) << pushed.error().message;
            }
        });
    }
    for (std::thread& thread : threads) thread.join();
    std::vector<uint64_t> expected;
    for (uint64_t v = 1; v <= kThreads * kPushesEach; v++) expected.push_back(v);
    EXPECT_EQ(a_.applied_versions(), expected);
    EXPECT_EQ(b_.applied_versions(), expected);
    EXPECT_EQ(current_version(), static_cast<uint64_t>(kThreads * kPushesEach));
}

}  // namespace
}  // namespace sluice::test::policy_service_test
