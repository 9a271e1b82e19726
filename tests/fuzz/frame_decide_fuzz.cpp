// SPDX-License-Identifier: Apache-2.0
// The frame parser and the decision over it: the shared core (sluice/parse.h,
// sluice/decide.h) built for the host, as the XDP program and sluice-dpdk run
// it. An input is a run of frames on one clock:
//
//   repeated { u8 clock step (x 1 ms), u8 length high, u8 length low, frame bytes }
//
// Each frame is copied into a heap buffer of exactly its length, so a read
// past the frame is a heap overflow ASan stops at. Asserted besides: what the
// parser reports is consistent, every decision names the level that refused
// (or none), and over the whole run the class aggregate and the global
// ceiling never admit more than burst + rate x elapsed, for every window.
// The class has a penalty box, so its meter shares the small table. Every
// parsed frame's ban keys (sluice_ban_key_make, at each prefix length of its
// family) hold its address's first bits and nothing past them.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#define SLUICE_SHARED_LOCK(shared) ((void)(shared))
#define SLUICE_SHARED_UNLOCK(shared) ((void)(shared))
#include "rate_limits.h"
#include "sluice/decide.h"
#include "sluice/parse.h"

namespace {

__extension__ typedef __int128 int128;

void require(bool holds, const char* what) {
    if (holds) return;
    __builtin_printf("frame_decide_fuzz: invariant broken: %s\n", what);
    std::abort();
}

template <class T>
T compiled_or_die(sluice::Result<T> r) {
    require(r.ok(), "the harness's own limits compile");
    return r.value();
}

// Every window [t_i, t_j] between admissions holds at most burst + rate x
// (t_j - t_i) units: a running minimum over the starts makes it one pass.
class WindowBound {
  public:
    WindowBound(uint64_t rate_per_s, uint64_t burst) : rate_(rate_per_s), burst_nano_(int128(burst) * SLUICE_NANO) {}
    void admit(uint64_t now, uint64_t units) {
        const int128 start = admitted_nano_ - int128(rate_) * now;  // this admission as a window's first
        if (!started_ || start < best_start_) best_start_ = start;
        started_ = true;
        admitted_nano_ += int128(units) * SLUICE_NANO;
        require(admitted_nano_ - int128(rate_) * now - best_start_ <= burst_nano_,
                "admitted more than burst + rate x elapsed");
    }

  private:
    uint64_t rate_;
    int128 burst_nano_;
    int128 admitted_nano_ = 0;
    int128 best_start_ = 0;
    bool started_ = false;
};

constexpr uint64_t kAggregateRate = 50, kAggregateBurst = 8;      // packets
constexpr uint64_t kGlobalRate = 200'000, kGlobalBurst = 20'000;  // bytes
constexpr uint32_t kMaxFrameBytes = 9216;

struct Policy {
    sluice_class_entry cls{};
    sluice_level_limit global{};
    sluice_hash_key hash_key{};

    Policy() {
        using sluice::Accuracy, sluice::Unit;
        cls.class_id = 1;
        cls.action = SLUICE_ACTION_LIMIT;
        cls.on_table_full = SLUICE_TABLE_FULL_EVICT;
        cls.prefix_v4 = 24;
        cls.prefix_v6 = 48;
        cls.per_source = compiled_or_die(sluice::compile_source_limit({10, 3, Unit::packets}, kMaxFrameBytes, "fuzz"));
        // Over 3 times its limit for 100 ms: dropped for 2 s, in fuzz clock steps of up to 255 ms.
        cls.penalty =
            compiled_or_die(sluice::compile_penalty(cls.per_source, 3, 100'000'000, 2'000'000'000, "fuzz"));
        cls.new_sources = compiled_or_die(
            sluice::compile_level({{20, 6, Unit::packets}, Accuracy::split, 1, kMaxFrameBytes, 0, 0}, "fuzz"));
        cls.aggregate = compiled_or_die(sluice::compile_level(
            {{kAggregateRate, kAggregateBurst, Unit::packets}, Accuracy::split, 1, kMaxFrameBytes, 0, 0}, "fuzz"));
        global = compiled_or_die(sluice::compile_level(
            {{kGlobalRate, kGlobalBurst, Unit::bytes}, Accuracy::split, 1, kMaxFrameBytes, 0, 0}, "fuzz"));
        for (uint32_t i = 0; i < SLUICE_HASH_KEY_WORDS; i++) hash_key.word[i] = 0x9e3779b97f4a7c15ull * (i + 1);
    }
};

void check_parse(const sluice_packet& pkt, uint8_t status, size_t len) {
    require(pkt.status == status, "returned status is the packet's");
    require(status < SLUICE_PARSE_STATUS_COUNT, "status is a known one");
    require(pkt.frame_len == len, "frame_len is the frame's length");
    require(pkt.vlan_depth <= 2, "at most two VLAN tags");
    if (status == SLUICE_PARSE_OK) {
        require(pkt.family == SLUICE_FAMILY_IPV4 || pkt.family == SLUICE_FAMILY_IPV6, "a parsed frame has a family");
        if (pkt.family == SLUICE_FAMILY_IPV4) {
            for (int i = 4; i < 16; i++) require(pkt.src[i] == 0, "an IPv4 source fills only src[0..3]");
        }
        return;
    }
    require(pkt.family == 0, "an unparsed frame has no family");
    require(pkt.tcp_syn == 0, "an unparsed frame is no SYN");
    for (uint8_t b : pkt.src) require(b == 0, "an unparsed frame has no source");
}

void check_decision(const sluice_decision& d) {
    if (d.verdict == SLUICE_VERDICT_PASS) {
        require(d.level == SLUICE_LEVEL_NONE, "a pass names no refusing level");
        return;
    }
    require(d.verdict == SLUICE_VERDICT_DROP, "a limited class passes or drops");
    require(d.level != SLUICE_LEVEL_NONE, "a drop names its level");
    require(d.reason == sluice_level_reason(d.level) ||
                (d.reason == SLUICE_REASON_PENALTY && d.level == SLUICE_LEVEL_SOURCE),
            "a drop's reason is its level's, or the penalty box's at the source");
    require(d.table != SLUICE_TABLE_PENALISED || d.reason == SLUICE_REASON_PENALTY, "a penalty starts with one");
}

// The ban key at each length: the family, the address's first `length`
// bits, and zeros after them and in the padding.
void check_ban_keys(const sluice_packet& pkt) {
    const unsigned bits = pkt.family == SLUICE_FAMILY_IPV4 ? 32 : 128;
    for (unsigned length = 0; length <= bits; length++) {
        sluice_ban_key key;
        std::memset(&key, 0xa5, sizeof(key));
        sluice_ban_key_make(&key, &pkt, static_cast<__u8>(length));
        require(key.family == pkt.family && key.length == length && key._pad[0] == 0 && key._pad[1] == 0,
                "a ban key names its family and length, its padding zero");
        for (unsigned bit = 0; bit < 128; bit++) {
            const bool in_key = (key.addr[bit / 8] >> (7 - bit % 8)) & 1;
            const bool in_source = (pkt.src[bit / 8] >> (7 - bit % 8)) & 1;
            require(in_key == (bit < length && in_source), "a ban key holds the source's first bits and no more");
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const Policy policy;
    // Four sets of eight ways: a few dozen sources fill it, so eviction and
    // the full table are reached as often as a plain insert.
    std::vector<sluice_source_set> table(4);
    sluice_cpu_bucket cpu[3]{};
    sluice_shared_bucket shared[3]{};
    WindowBound aggregate(kAggregateRate, kAggregateBurst), global(kGlobalRate, kGlobalBurst);
    uint64_t now = 1'000'000'000'000ull;  // far from 0: a zero stamp means "new bucket"

    size_t at = 0;
    while (size - at >= 3) {
        now += uint64_t(data[at]) * 1'000'000;
        const size_t len = std::min<size_t>((size_t(data[at + 1]) << 8) | data[at + 2], size - at - 3);
        at += 3;
        std::unique_ptr<uint8_t[]> frame(new uint8_t[len ? len : 1]);
        if (len) std::memcpy(frame.get(), data + at, len);
        at += len;

        sluice_packet pkt;
        std::memset(&pkt, 0xa5, sizeof(pkt));  // stale bytes: the parser must set every field
        const uint8_t status = sluice_parse(frame.get(), frame.get() + len, &pkt);
        check_parse(pkt, status, len);
        if (status != SLUICE_PARSE_OK) continue;
        check_ban_keys(pkt);

        sluice_source_key key;
        sluice_source_key_make(&key, &pkt, &policy.cls);
        sluice_levels levels{};
        sluice_source_ref_make(&levels.source, &policy.cls, &key, &policy.hash_key,
                               static_cast<uint32_t>(table.size() - 1));
        levels.source.home = &table[levels.source.home_index];
        levels.source.second = &table[levels.source.second_index];
        levels.new_sources = {&policy.cls.new_sources, &cpu[0], &shared[0], nullptr};
        levels.aggregate = {&policy.cls.aggregate, &cpu[1], &shared[1], nullptr};
        levels.global = {&policy.global, &cpu[2], &shared[2], nullptr};
        levels.penalty = {&policy.cls.penalty, &key, &policy.hash_key, table.data(),
                          static_cast<uint32_t>(table.size() - 1)};
        const sluice_decision d =
            sluice_penalty_after(&levels, sluice_decide(&levels, pkt.frame_len, pkt.tcp_syn, now), pkt.frame_len,
                                 pkt.tcp_syn, now);
        check_decision(d);
        if (d.verdict == SLUICE_VERDICT_PASS) {
            aggregate.admit(now, 1);
            global.admit(now, pkt.frame_len);
        }
    }
    return 0;
}
