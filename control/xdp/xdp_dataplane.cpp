// SPDX-License-Identifier: Apache-2.0
#include "xdp_dataplane.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <linux/if_link.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "clock.h"
#include "logger.h"
#include "sluice.skel.h"

namespace sluice {
namespace {

constexpr std::string_view kLinkPinPrefix = "xdp_link_";

// libbpf returns -errno; raw bpf() wrappers return -1 and set errno.
int error_code(int ret) { return ret < 0 && ret != -1 ? -ret : errno; }

// Per-CPU map values are laid out one per possible CPU, 8-byte aligned.
size_t percpu_stride(size_t value_size) { return (value_size + 7) / 8 * 8; }

template <class Key, class Fn>
int for_each_key(int map_fd, Fn&& fn) {
    Key key{}, next{};
    const Key* prev = nullptr;
    for (;;) {
        const int err = bpf_map_get_next_key(map_fd, prev, &next);
        if (err) return error_code(err) == ENOENT ? 0 : error_code(err);
        fn(next);
        key = next;
        prev = &key;
    }
}

}  // namespace

void XdpDataplane::SkeletonDeleter::operator()(struct ::sluice_bpf* skel) const { sluice_bpf__destroy(skel); }
void XdpDataplane::RingBufferDeleter::operator()(struct ::ring_buffer* rb) const { ring_buffer__free(rb); }
XdpDataplane::Mapping::~Mapping() {
    if (address) munmap(address, length);
}

XdpDataplane::~XdpDataplane() = default;

Error XdpDataplane::syscall_error(SyscallOp op, const std::string& what, int err) {
    errors_[static_cast<size_t>(op)]++;
    return Error{what + ": " + std::strerror(err)};
}

Result<std::unique_ptr<XdpDataplane>> XdpDataplane::open(const XdpOptions& options) {
    std::unique_ptr<XdpDataplane> dp(new XdpDataplane());
    if (auto status = dp->load(options); !status) return status.error();
    return dp;
}

Status XdpDataplane::load(const XdpOptions& options) {
    const uint32_t period = options.drop_sample_period;
    if (period == 0 || (period & (period - 1)) != 0)
        return Error{"drop sample period " + std::to_string(period) + " is not a power of two"};
    if (options.source_capacity < SLUICE_SOURCE_CAPACITY_MIN || options.source_capacity > SLUICE_SOURCE_CAPACITY_MAX)
        return Error{"source table capacity " + std::to_string(options.source_capacity) + " is outside " +
                     std::to_string(SLUICE_SOURCE_CAPACITY_MIN) + ".." + std::to_string(SLUICE_SOURCE_CAPACITY_MAX) +
                     " entries"};
    source_sets_ = SLUICE_SOURCE_SETS_MIN;
    while (uint64_t{source_sets_} * SLUICE_SET_WAYS < options.source_capacity) source_sets_ *= 2;
    test_clock_ = options.test_clock;
    const int cpus = libbpf_num_possible_cpus();
    if (cpus <= 0) return syscall_error(SyscallOp::load, "counting possible CPUs", -cpus);
    cpus_ = static_cast<uint32_t>(cpus);
    pin_dir_ = options.pin_dir;
    run_time_stats_ = options.run_time_stats;

    skel_.reset(sluice_bpf__open());
    if (!skel_) return syscall_error(SyscallOp::load, "opening the BPF object", errno);
    skel_->rodata->sluice_use_test_clock = options.test_clock;
    skel_->rodata->sluice_use_coarse_clock = options.coarse_clock;
    skel_->rodata->sluice_set_mask = source_sets_ - 1;
    if (const int err = bpf_map__set_max_entries(skel_->maps.sluice_sources, source_sets_))
        return syscall_error(SyscallOp::load, "sizing the source table", error_code(err));
    if (options.prefix_capacity < 1 || options.prefix_capacity > SLUICE_PREFIX_CAPACITY_MAX)
        return Error{"prefix capacity " + std::to_string(options.prefix_capacity) + " is outside 1.." +
                     std::to_string(SLUICE_PREFIX_CAPACITY_MAX) + " prefixes per family"};
    prefix_capacity_ = options.prefix_capacity;
    // The tries hold both policy slots' prefixes.
    for (bpf_map* trie : {skel_->maps.sluice_lpm_v4, skel_->maps.sluice_lpm_v6})
        if (const int err = bpf_map__set_max_entries(trie, SLUICE_POLICY_SLOTS * options.prefix_capacity))
            return syscall_error(SyscallOp::load, "sizing the prefix tries", error_code(err));

    if (!pin_dir_.empty()) {
        if (mkdir(pin_dir_.c_str(), 0700) != 0 && errno != EEXIST)
            return syscall_error(SyscallOp::pin, "creating " + pin_dir_, errno);
        if (auto status = read_pinned_meta(); !status) return status;
        if (auto status = check_pinned_maps(); !status) return status;
        bpf_map* map;
        bpf_object__for_each_map(map, skel_->obj) {
            if (bpf_map__is_internal(map)) continue;
            const std::string path = pin_dir_ + "/" + bpf_map__name(map);
            if (const int err = bpf_map__set_pin_path(map, path.c_str()))
                return syscall_error(SyscallOp::pin, "setting pin path " + path, error_code(err));
        }
    }

    // A pinned table was filled under its own key; a new one gets a new key,
    // so nobody can know in advance which sources share a set.
    if (!adopted_meta_ && options.hash_key)
        hash_key_ = *options.hash_key;
    else if (!adopted_meta_ && getrandom(&hash_key_, sizeof(hash_key_), 0) != static_cast<ssize_t>(sizeof(hash_key_)))
        return syscall_error(SyscallOp::load, "drawing the source table's hash key", errno);
    for (int i = 0; i < SLUICE_HASH_KEY_WORDS; i++) skel_->rodata->sluice_hash_key.word[i] = hash_key_.word[i];

    if (const int err = sluice_bpf__load(skel_.get()))
        return syscall_error(SyscallOp::load, "loading ebpf/sluice.bpf.c into the kernel (the verifier's log is above)",
                             error_code(err));
    if (auto status = adopt_or_stamp_meta(); !status) return status;
    // New tries hold nothing; adopted ones are read as unknown and emptied at their first write.
    if (!adopted_meta_) {
        for (SlotPrefixes& held : slot_prefixes_) held.known = true;
        bans_known_ = true;
    }
    if (auto status = map_shared(skel_->maps.sluice_sources, uint64_t{source_sets_} * sizeof(sluice_source_set),
                                 "the source table", sources_);
        !status)
        return status;
    if (auto status = map_shared(skel_->maps.sluice_fleet, sizeof(sluice_fleet_credit) * SLUICE_MAX_CLASSES,
                                 "the fleet credit", fleet_);
        !status)
        return status;

    events_.reset(
        ring_buffer__new(bpf_map__fd(skel_->maps.sluice_events), &XdpDataplane::on_ring_event, this, nullptr));
    if (!events_) return syscall_error(SyscallOp::ring_buffer, "opening the drop event ring buffer", errno);
    // A pinned period is the last daemon's: start again from the least.
    if (auto status = write_sample_period(period); !status) return status;
    auto lost = stat_sum(SLUICE_STAT_DROP_EVENTS_LOST);
    if (!lost) return lost.error();
    // Each record is the event behind the ring's 8-byte header.
    sampling_ = DropSampling(
        period, bpf_map__max_entries(skel_->maps.sluice_events) / (sizeof(sluice_drop_event) + BPF_RINGBUF_HDR_SZ),
        lost.value());

    // The grace-period trigger: updating an ARRAY_OF_MAPS makes the kernel
    // wait (synchronize_rcu) until every running BPF program has finished.
    grace_inner_ = UniqueFd(bpf_map_create(BPF_MAP_TYPE_ARRAY, "sluice_grace_in", 4, 4, 1, nullptr));
    if (grace_inner_.get() < 0) return syscall_error(SyscallOp::map_update, "creating the grace-period map", errno);
    LIBBPF_OPTS(bpf_map_create_opts, outer_opts, .inner_map_fd = static_cast<__u32>(grace_inner_.get()));
    grace_outer_ = UniqueFd(bpf_map_create(BPF_MAP_TYPE_ARRAY_OF_MAPS, "sluice_grace", 4, 4, 1, &outer_opts));
    if (grace_outer_.get() < 0) return syscall_error(SyscallOp::map_update, "creating the grace-period map", errno);

    return adopt_pinned_links();
}

std::string XdpDataplane::remove_hint() const { return "detach and remove " + pin_dir_ + " to start with fresh state"; }

Error XdpDataplane::abi_mismatch(uint32_t pinned_version) const {
    return Error{"pinned maps under " + pin_dir_ + " were written by Sluice ABI version " +
                 std::to_string(pinned_version) + "; this build speaks version " + std::to_string(SLUICE_ABI_VERSION) +
                 ": " + remove_hint()};
}

Status XdpDataplane::open_pinned_map(const std::string& path, UniqueFd& fd, bpf_map_info& info) {
    if (access(path.c_str(), F_OK) != 0) return ok_status();
    UniqueFd pinned(bpf_obj_get(path.c_str()));
    if (pinned.get() < 0) return syscall_error(SyscallOp::pin, "opening pinned map " + path, errno);
    __u32 len = sizeof(info);
    info = {};
    if (bpf_obj_get_info_by_fd(pinned.get(), &info, &len) != 0)
        return syscall_error(SyscallOp::map_lookup, "reading pinned map " + path, errno);
    fd = std::move(pinned);
    return ok_status();
}

Status XdpDataplane::read_pinned_meta() {
    const std::string path = pin_dir_ + "/sluice_meta";
    UniqueFd pinned;
    bpf_map_info info{};
    if (Status opened = open_pinned_map(path, pinned, info); !opened) return opened;
    if (pinned.get() < 0) return ok_status();
    // Every ABI version begins its meta with the version: read it whatever
    // the value's size, to say which build wrote it.
    std::vector<uint8_t> value(std::max<size_t>(info.value_size, sizeof(sluice_meta)));
    const uint32_t zero = 0;
    if (info.value_size < sizeof(uint32_t))
        return Error{"pinned map " + path + " holds " + std::to_string(info.value_size) +
                     "-byte values, too small for any Sluice build's meta: " + remove_hint()};
    if (bpf_map_lookup_elem(pinned.get(), &zero, value.data()) != 0)
        return syscall_error(SyscallOp::map_lookup, "reading pinned map " + path, errno);
    sluice_meta meta;
    std::memcpy(&meta, value.data(), sizeof(meta));
    if (meta.abi_version == 0) return ok_status();  // created, never stamped: nothing to adopt
    if (meta.abi_version != SLUICE_ABI_VERSION || info.value_size != sizeof(sluice_meta))
        return abi_mismatch(meta.abi_version);
    if (meta.source_sets != source_sets_)
        return Error{"the pinned source table under " + pin_dir_ + " holds " +
                     std::to_string(uint64_t{meta.source_sets} * SLUICE_SET_WAYS) + " entries, not the " +
                     std::to_string(uint64_t{source_sets_} * SLUICE_SET_WAYS) +
                     " configured: set source_capacity to its size, or " + remove_hint()};
    hash_key_ = meta.hash_key;
    adopted_meta_ = true;
    return ok_status();
}

Status XdpDataplane::check_pinned_maps() {
    bpf_map* map;
    bpf_object__for_each_map(map, skel_->obj) {
        if (bpf_map__is_internal(map)) continue;
        const std::string path = pin_dir_ + "/" + bpf_map__name(map);
        UniqueFd pinned;
        bpf_map_info info{};
        if (Status opened = open_pinned_map(path, pinned, info); !opened) return opened;
        if (pinned.get() < 0) continue;
        if (info.type != static_cast<__u32>(bpf_map__type(map)) || info.key_size != bpf_map__key_size(map) ||
            info.value_size != bpf_map__value_size(map) || info.max_entries != bpf_map__max_entries(map))
            return Error{"pinned map " + path + " does not match this build (type " + std::to_string(info.type) +
                         ", key " + std::to_string(info.key_size) + " B, value " + std::to_string(info.value_size) +
                         " B, " + std::to_string(info.max_entries) + " entries; this build wants type " +
                         std::to_string(bpf_map__type(map)) + ", key " + std::to_string(bpf_map__key_size(map)) +
                         " B, value " + std::to_string(bpf_map__value_size(map)) + " B, " +
                         std::to_string(bpf_map__max_entries(map)) +
                         " entries). It was created by another Sluice version or with other table "
                         "options: " +
                         remove_hint()};
    }
    return ok_status();
}

Status XdpDataplane::adopt_or_stamp_meta() {
    const int fd = bpf_map__fd(skel_->maps.sluice_meta);
    const uint32_t zero = 0;
    sluice_meta meta{};
    if (const int err = bpf_map_lookup_elem(fd, &zero, &meta))
        return syscall_error(SyscallOp::map_lookup, "reading sluice_meta", error_code(err));
    if (meta.abi_version == SLUICE_ABI_VERSION) return ok_status();  // read_pinned_meta checked it
    if (meta.abi_version != 0) return abi_mismatch(meta.abi_version);
    meta.abi_version = SLUICE_ABI_VERSION;
    meta.max_classes = SLUICE_MAX_CLASSES;
    meta.created_ns = monotonic_ns();
    meta.source_sets = source_sets_;
    meta.hash_key = hash_key_;
    if (const int err = bpf_map_update_elem(fd, &zero, &meta, BPF_ANY))
        return syscall_error(SyscallOp::map_update, "writing sluice_meta", error_code(err));
    return ok_status();
}

Status XdpDataplane::map_shared(bpf_map* map, size_t bytes, const char* what, Mapping& mapping) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t length = (bytes + page - 1) / page * page;
    void* address = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(map), 0);
    if (address == MAP_FAILED) return syscall_error(SyscallOp::load, std::string("mapping ") + what, errno);
    mapping.address = address;
    mapping.length = length;
    return ok_status();
}

std::string XdpDataplane::link_pin_path(int ifindex) const {
    return pin_dir_ + "/" + std::string(kLinkPinPrefix) + std::to_string(ifindex);
}

Status XdpDataplane::adopt_pinned_links() {
    if (pin_dir_.empty()) return ok_status();
    std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(pin_dir_.c_str()), closedir);
    if (!dir) return syscall_error(SyscallOp::pin, "listing " + pin_dir_, errno);
    while (const dirent* entry = readdir(dir.get())) {
        const std::string_view name(entry->d_name);
        if (name.substr(0, kLinkPinPrefix.size()) != kLinkPinPrefix) continue;
        const int ifindex = std::atoi(std::string(name.substr(kLinkPinPrefix.size())).c_str());
        const std::string path = pin_dir_ + "/" + std::string(name);
        UniqueFd link(bpf_obj_get(path.c_str()));
        if (link.get() < 0) return syscall_error(SyscallOp::pin, "opening pinned link " + path, errno);
        // The interface keeps enforcing throughout: the link switches to
        // this instance of the program atomically.
        if (const int err = bpf_link_update(link.get(), program_fd(), nullptr)) {
            // ENOLINK: the interface is gone, so the pin guards nothing.
            if (error_code(err) == ENOLINK && unlink(path.c_str()) == 0) continue;
            return syscall_error(SyscallOp::link, "switching " + path + " to the new program", error_code(err));
        }
        links_[ifindex] = std::move(link);
    }
    return ok_status();
}

int XdpDataplane::program_fd() const { return bpf_program__fd(skel_->progs.sluice_xdp); }

DecisionCost XdpDataplane::decision_cost() {
    if (!run_time_stats_) return {};
    bpf_prog_info info{};
    __u32 length = sizeof(info);
    if (bpf_obj_get_info_by_fd(program_fd(), &info, &length) != 0) return {};
    return {info.run_time_ns, info.run_cnt};
}

void XdpDataplane::set_test_clock(uint64_t now_ns) {
    __atomic_store_n(&skel_->bss->sluice_test_now_ns, now_ns, __ATOMIC_RELEASE);
}

Status XdpDataplane::wait_for_readers() {
    const uint32_t zero = 0;
    const int inner = grace_inner_.get();
    if (bpf_map_update_elem(grace_outer_.get(), &zero, &inner, BPF_ANY) != 0)
        return syscall_error(SyscallOp::map_update, "waiting for running programs", errno);
    return ok_status();
}

template <class LpmKey>
Status XdpDataplane::clear_lpm_slot(int map_fd, uint32_t slot) {
    // Collect, then delete, so the iteration is not disturbed by its own deletions.
    std::vector<LpmKey> stale;
    if (const int err = for_each_key<LpmKey>(map_fd, [&](const LpmKey& key) {
            if (key.slot == slot) stale.push_back(key);
        }))
        return syscall_error(SyscallOp::map_lookup, "listing classification prefixes", err);
    for (const auto& key : stale)
        if (const int err = bpf_map_delete_elem(map_fd, &key))
            return syscall_error(SyscallOp::map_delete, "removing a classification prefix", error_code(err));
    return ok_status();
}

namespace {

template <class LpmKey>
LpmKey lpm_key(uint32_t slot, const PolicyPrefix& p) {
    LpmKey key{};
    key.prefixlen = SLUICE_LPM_SLOT_BITS + p.length;
    key.slot = slot;
    std::memcpy(key.addr, p.addr.data(), sizeof(key.addr));
    return key;
}

}  // namespace

template <class LpmKey>
Status XdpDataplane::change_lpm_slot(int map_fd, uint32_t slot, uint8_t family, const PrefixChanges& changes) {
    std::vector<LpmKey> keys;
    for (const PolicyPrefix& p : changes.removed)
        if (p.family == family) keys.push_back(lpm_key<LpmKey>(slot, p));
    // One syscall for all: at a million prefixes, one each cost seconds.
    auto count = static_cast<__u32>(keys.size());
    if (count > 0)
        if (const int err = bpf_map_delete_batch(map_fd, keys.data(), &count, nullptr))
            return syscall_error(SyscallOp::map_delete, "removing classification prefixes", error_code(err));
    keys.clear();
    std::vector<__u32> classes;
    for (const PolicyPrefix& p : changes.written)
        if (p.family == family) {
            keys.push_back(lpm_key<LpmKey>(slot, p));
            classes.push_back(p.class_id);
        }
    count = static_cast<__u32>(keys.size());
    if (count > 0)
        if (const int err = bpf_map_update_batch(map_fd, keys.data(), classes.data(), &count, nullptr))
            return syscall_error(SyscallOp::map_update, "writing classification prefixes", error_code(err));
    return ok_status();
}

Status XdpDataplane::write_slot_prefixes(uint32_t slot, const std::vector<PolicyPrefix>& prefixes, uint64_t version) {
    const int v4_fd = bpf_map__fd(skel_->maps.sluice_lpm_v4);
    const int v6_fd = bpf_map__fd(skel_->maps.sluice_lpm_v6);
    // What the slot holds is known once this process wrote it; a slot of
    // adopted pins is emptied first. From then on only the difference is
    // written: a 10K-prefix change to a million-prefix policy is 10K writes.
    SlotPrefixes& held = slot_prefixes_[slot];
    if (!held.known) {
        if (auto status = clear_lpm_slot<sluice_lpm_v4_key>(v4_fd, slot); !status) return status;
        if (auto status = clear_lpm_slot<sluice_lpm_v6_key>(v6_fd, slot); !status) return status;
        held.prefixes.clear();
        held.known = true;
    }
    const PrefixChanges changes = prefix_changes(held.prefixes, prefixes);
    held.known = false;  // until every change is in
    if (auto status = change_lpm_slot<sluice_lpm_v4_key>(v4_fd, slot, SLUICE_FAMILY_IPV4, changes); !status)
        return status;
    if (auto status = change_lpm_slot<sluice_lpm_v6_key>(v6_fd, slot, SLUICE_FAMILY_IPV6, changes); !status)
        return status;
    held.prefixes.assign(prefixes.begin(), prefixes.end());
    held.known = true;
    log(LogLevel::info, "policy slot written",
        {{"slot", std::to_string(slot)},
         {"version", std::to_string(version)},
         {"prefixes", std::to_string(prefixes.size())},
         {"prefixes_written", std::to_string(changes.written.size())},
         {"prefixes_removed", std::to_string(changes.removed.size())}});
    return ok_status();
}

Status XdpDataplane::write_slot(uint32_t slot, const CompiledPolicy& policy, const std::vector<PolicyPrefix>& prefixes) {
    const int classes_fd = bpf_map__fd(skel_->maps.sluice_classes);
    for (uint32_t id = 0; id < SLUICE_MAX_CLASSES; id++) {
        const sluice_class_entry* found = policy.find_class(id);
        const sluice_class_entry entry = found ? *found : sluice_class_entry{};
        const uint32_t index = slot * SLUICE_MAX_CLASSES + id;
        if (const int err = bpf_map_update_elem(classes_fd, &index, &entry, BPF_ANY))
            return syscall_error(SyscallOp::map_update, "writing class " + std::to_string(id), error_code(err));
    }

    if (auto status = write_slot_prefixes(slot, prefixes, policy.header.version); !status) return status;

    const int policy_fd = bpf_map__fd(skel_->maps.sluice_policy);
    if (const int err = bpf_map_update_elem(policy_fd, &slot, &policy.header, BPF_ANY))
        return syscall_error(SyscallOp::map_update, "writing the policy header", error_code(err));
    return ok_status();
}

Status XdpDataplane::apply(const CompiledPolicy& policy) {
    if (auto status = validate(policy); !status) return status;
    if (auto status = check_prefix_capacity(policy, prefix_capacity_, "prefix_capacity"); !status) return status;
    std::lock_guard<std::mutex> lock(apply_mutex_);
    auto active = read_active();
    if (!active) return active.error();
    const uint32_t running_slot = active.value().slot & (SLUICE_POLICY_SLOTS - 1);
    const uint32_t target = running_slot ^ 1;
    auto running = read_classes(running_slot);
    if (!running) return running.error();
    // Carrying limits over touches the header and classes only: no copy of the prefixes.
    CompiledPolicy next;
    next.header = policy.header;
    next.classes = policy.classes;
    const std::vector<CountRestart> restarts = carry_previous_limits(running.value(), next);

    // Packets that read `target` before the previous flip may still be
    // running: wait for them before rewriting it.
    if (auto status = wait_for_readers(); !status) return status;
    if (auto status = write_slot(target, next, policy.prefixes); !status) return status;
    sluice_active flipped = active.value();
    flipped.slot = target;
    if (auto status = write_active(flipped, "flipping the active policy slot"); !status) return status;
    standby_behind_ = true;

    for (const CountRestart& restart : restarts)
        log(LogLevel::info, describe(restart), {{"version", std::to_string(policy.header.version)}});
    window_restarts_.fetch_add(restarts.size(), std::memory_order_relaxed);
    return ok_status();
}

Status XdpDataplane::settle() {
    std::lock_guard<std::mutex> lock(apply_mutex_);
    // The next version goes into the slot just left, as what it holds plus
    // the difference. Brought up to the running prefixes here, after the
    // reply, that difference is the next push's own changes only, not also
    // the last push's; and after a load into new or adopted tries, not all
    // of them. Tried once per apply: a failure leaves the slot unknown, and
    // the next apply rewrites it whole.
    if (!standby_behind_) return ok_status();
    standby_behind_ = false;
    auto read = read_active();
    if (!read) return read.error();
    const uint32_t active = read.value().slot & (SLUICE_POLICY_SLOTS - 1);
    const SlotPrefixes& running = slot_prefixes_[active];
    if (!running.known) return ok_status();
    if (auto status = wait_for_readers(); !status) return status;
    auto version = active_version();
    return write_slot_prefixes(active ^ 1, running.prefixes, version ? version.value() : 0);
}

Result<std::vector<sluice_class_entry>> XdpDataplane::read_classes(uint32_t slot) {
    const int fd = bpf_map__fd(skel_->maps.sluice_classes);
    std::vector<sluice_class_entry> classes;
    for (uint32_t id = 1; id < SLUICE_MAX_CLASSES; id++) {
        const uint32_t index = slot * SLUICE_MAX_CLASSES + id;
        sluice_class_entry entry{};
        if (const int err = bpf_map_lookup_elem(fd, &index, &entry))
            return syscall_error(SyscallOp::map_lookup, "reading class entries", error_code(err));
        if (entry.class_id == id) classes.push_back(entry);
    }
    return classes;
}

uint64_t XdpDataplane::now_ns() const {
    // bpf_ktime_get_ns is CLOCK_MONOTONIC (the coarse one lags it by a tick).
    return test_clock_ ? __atomic_load_n(&skel_->bss->sluice_test_now_ns, __ATOMIC_ACQUIRE) : monotonic_ns();
}

Result<sluice_active> XdpDataplane::read_active() {
    const uint32_t zero = 0;
    sluice_active active{};
    if (const int err = bpf_map_lookup_elem(bpf_map__fd(skel_->maps.sluice_active), &zero, &active))
        return syscall_error(SyscallOp::map_lookup, "reading the active policy slot", error_code(err));
    return active;
}

Status XdpDataplane::write_active(const sluice_active& active, const char* what) {
    const uint32_t zero = 0;
    if (const int err = bpf_map_update_elem(bpf_map__fd(skel_->maps.sluice_active), &zero, &active, BPF_ANY))
        return syscall_error(SyscallOp::map_update, what, error_code(err));
    return ok_status();
}

Result<uint64_t> XdpDataplane::active_version() {
    auto read = read_active();
    if (!read) return read.error();
    uint32_t active = read.value().slot & (SLUICE_POLICY_SLOTS - 1);
    sluice_policy_header header{};
    if (const int err = bpf_map_lookup_elem(bpf_map__fd(skel_->maps.sluice_policy), &active, &header))
        return syscall_error(SyscallOp::map_lookup, "reading the active policy", error_code(err));
    return static_cast<uint64_t>(header.version);
}

Result<std::vector<sluice_counter>> XdpDataplane::sum_counters(int fd, uint32_t slots, const char* what) {
    // One batched read of all slots and CPUs: a metrics scrape must not cost
    // a syscall per counter (4608 of them took 6 ms).
    const size_t stride = percpu_stride(sizeof(sluice_counter));
    std::vector<uint32_t> keys(slots);
    std::vector<uint8_t> values(slots * stride * cpus_);
    uint32_t done = 0, next_batch = 0;
    while (done < slots) {
        __u32 count = slots - done;
        LIBBPF_OPTS(bpf_map_batch_opts, opts);
        const int err = bpf_map_lookup_batch(fd, done ? &next_batch : nullptr, &next_batch, keys.data() + done,
                                             values.data() + done * stride * cpus_, &count, &opts);
        done += count;
        if (err && error_code(err) == ENOENT) break;
        if (err) return syscall_error(SyscallOp::map_lookup, what, error_code(err));
    }
    std::vector<sluice_counter> sums(slots);
    for (uint32_t i = 0; i < done; i++) {
        const uint32_t index = keys[i];
        if (index >= slots) continue;
        for (uint32_t cpu = 0; cpu < cpus_; cpu++) {
            sluice_counter c;
            std::memcpy(&c, values.data() + (static_cast<size_t>(i) * cpus_ + cpu) * stride, sizeof(c));
            sums[index].packets += c.packets;
            sums[index].bytes += c.bytes;
        }
    }
    return sums;
}

Result<std::vector<sluice_counter>> XdpDataplane::counters() {
    return sum_counters(bpf_map__fd(skel_->maps.sluice_counters), SLUICE_COUNTER_SLOTS, "reading counters");
}

Result<std::vector<sluice_counter>> XdpDataplane::ban_counters() {
    return sum_counters(bpf_map__fd(skel_->maps.sluice_ban_counters), SLUICE_MAX_BANS, "reading ban counters");
}

namespace {

sluice_ban_key ban_key(const PolicyPrefix& p) {
    sluice_ban_key key{};
    key.family = p.family;
    key.length = p.length;
    std::memcpy(key.addr, p.addr.data(), sizeof(key.addr));
    return key;
}

// The ban of `prefix` in `sorted` (ordered by prefix_less), or nullptr.
const DataplaneBan* find_ban(const std::vector<DataplaneBan>& sorted, const PolicyPrefix& prefix) {
    const auto at = std::lower_bound(sorted.begin(), sorted.end(), prefix,
                                     [](const DataplaneBan& ban, const PolicyPrefix& p) { return prefix_less(ban.prefix, p); });
    return at != sorted.end() && same_prefix(at->prefix, prefix) ? &*at : nullptr;
}

}  // namespace

Status XdpDataplane::set_bans(const std::vector<DataplaneBan>& bans) {
    if (auto status = check_bans(bans); !status) return status;
    std::lock_guard<std::mutex> lock(apply_mutex_);
    const int fd = bpf_map__fd(skel_->maps.sluice_bans);
    // What the map holds: this process's last set, or, the first time after
    // adopting pins, its keys as read (each then rewritten). Listed rather
    // than emptied, so that an adopted ban never lapses.
    const bool known = bans_known_;
    std::vector<PolicyPrefix> held;
    if (known) {
        for (const DataplaneBan& ban : bans_held_) held.push_back(ban.prefix);
    } else if (const int err = for_each_key<sluice_ban_key>(fd, [&](const sluice_ban_key& key) {
                   PolicyPrefix p;
                   p.family = key.family;
                   p.length = key.length;
                   std::memcpy(p.addr.data(), key.addr, sizeof(key.addr));
                   held.push_back(p);
               })) {
        return syscall_error(SyscallOp::map_lookup, "listing bans", err);
    }
    auto active = read_active();
    if (!active) return active.error();
    // New entries first, then the lengths packets probe, then what went:
    // a packet never probes a length whose entries are half written.
    bans_known_ = false;  // until every change is in
    std::vector<DataplaneBan> next = bans;
    std::sort(next.begin(), next.end(),
              [](const DataplaneBan& a, const DataplaneBan& b) { return prefix_less(a.prefix, b.prefix); });
    for (const DataplaneBan& ban : next) {
        const DataplaneBan* had = known ? find_ban(bans_held_, ban.prefix) : nullptr;
        if (had && had->until_ns == ban.until_ns && had->slot == ban.slot) continue;
        const sluice_ban_key key = ban_key(ban.prefix);
        const sluice_ban value{ban.until_ns, ban.slot, 0};
        if (const int err = bpf_map_update_elem(fd, &key, &value, BPF_ANY))
            return syscall_error(SyscallOp::map_update, "writing the ban of " + prefix_text(ban.prefix), error_code(err));
    }
    sluice_active lengths = active.value();
    const BanLengths probed = ban_lengths(bans);
    lengths.ban_lengths_v4 = static_cast<uint8_t>(probed.v4.size());
    lengths.ban_lengths_v6 = static_cast<uint8_t>(probed.v6.size());
    std::copy(probed.v4.begin(), probed.v4.end(), lengths.ban_length_v4);
    std::copy(probed.v6.begin(), probed.v6.end(), lengths.ban_length_v6);
    if (auto status = write_active(lengths, "writing the ban lengths"); !status) return status;
    for (const PolicyPrefix& prefix : held) {
        if (find_ban(next, prefix)) continue;
        const sluice_ban_key key = ban_key(prefix);
        if (const int err = bpf_map_delete_elem(fd, &key); err && error_code(err) != ENOENT)
            return syscall_error(SyscallOp::map_delete, "removing the ban of " + prefix_text(prefix), error_code(err));
    }
    bans_held_ = std::move(next);
    bans_known_ = true;
    return ok_status();
}

Result<uint64_t> XdpDataplane::stat_sum(uint32_t index) {
    std::vector<uint64_t> per_cpu(cpus_);
    if (const int err = bpf_map_lookup_elem(bpf_map__fd(skel_->maps.sluice_stats), &index, per_cpu.data()))
        return syscall_error(SyscallOp::map_lookup, "reading dataplane stats", error_code(err));
    uint64_t sum = 0;
    for (uint64_t v : per_cpu) sum += v;
    return sum;
}

Result<std::array<uint64_t, SLUICE_STAT_COUNT>> XdpDataplane::stats() {
    std::array<uint64_t, SLUICE_STAT_COUNT> sums{};
    for (uint32_t index = 0; index < SLUICE_STAT_COUNT; index++) {
        auto sum = stat_sum(index);
        if (!sum) return sum.error();
        sums[index] = sum.value();
    }
    return sums;
}

Status XdpDataplane::write_sample_period(uint32_t period) {
    const uint32_t zero = 0;
    if (const int err = bpf_map_update_elem(bpf_map__fd(skel_->maps.sluice_sample_period), &zero, &period, BPF_ANY))
        return syscall_error(SyscallOp::map_update, "setting the drop sampling period", error_code(err));
    return ok_status();
}

int XdpDataplane::on_ring_event(void* ctx, void* data, size_t size) {
    auto* self = static_cast<XdpDataplane*>(ctx);
    if (size < sizeof(sluice_drop_event) || !self->event_sink_) return 0;
    sluice_drop_event event;
    std::memcpy(&event, data, sizeof(event));
    (*self->event_sink_)(event);
    return 0;
}

Result<size_t> XdpDataplane::drain_events(const std::function<void(const sluice_drop_event&)>& on_event) {
    event_sink_ = &on_event;
    const int consumed = ring_buffer__consume(events_.get());
    event_sink_ = nullptr;
    if (consumed < 0) return syscall_error(SyscallOp::ring_buffer, "reading drop events", -consumed);
    auto lost = stat_sum(SLUICE_STAT_DROP_EVENTS_LOST);
    if (!lost) return lost.error();
    const uint32_t before = sampling_.period();
    if (const uint32_t period = sampling_.after_drain(static_cast<uint64_t>(consumed), lost.value()); period != before)
        if (auto status = write_sample_period(period); !status) return status.error();
    return static_cast<size_t>(consumed);
}

Result<SourceTableUsage> XdpDataplane::source_table() {
    return survey_source_table(static_cast<sluice_source_set*>(sources_.address), source_sets_, now_ns());
}

void XdpDataplane::forget_sources() {
    auto* sets = static_cast<sluice_source_set*>(sources_.address);
    for (uint32_t s = 0; s < source_sets_; s++)
        for (__u64& entry : sets[s].entry) __atomic_store_n(&entry, 0, __ATOMIC_RELAXED);
}

Status XdpDataplane::attach(int ifindex, XdpMode mode) {
    if (links_.count(ifindex)) return Error{"interface " + std::to_string(ifindex) + " is already attached"};
    LIBBPF_OPTS(bpf_link_create_opts, opts,
                .flags = static_cast<__u32>(mode == XdpMode::native ? XDP_FLAGS_DRV_MODE : XDP_FLAGS_SKB_MODE));
    UniqueFd link(bpf_link_create(program_fd(), ifindex, BPF_XDP, &opts));
    if (link.get() < 0)
        return syscall_error(SyscallOp::link,
                             std::string("attaching to interface ") + std::to_string(ifindex) + " in " +
                                 (mode == XdpMode::native ? "native" : "generic") + " mode",
                             errno);
    if (!pin_dir_.empty()) {
        const std::string path = link_pin_path(ifindex);
        if (bpf_obj_pin(link.get(), path.c_str()) != 0) return syscall_error(SyscallOp::pin, "pinning " + path, errno);
    }
    links_[ifindex] = std::move(link);
    return ok_status();
}

Status XdpDataplane::detach(int ifindex) {
    auto it = links_.find(ifindex);
    if (it == links_.end()) return Error{"interface " + std::to_string(ifindex) + " is not attached"};
    if (bpf_link_detach(it->second.get()) != 0)
        return syscall_error(SyscallOp::link, "detaching from interface " + std::to_string(ifindex), errno);
    if (!pin_dir_.empty() && unlink(link_pin_path(ifindex).c_str()) != 0 && errno != ENOENT)
        return syscall_error(SyscallOp::pin, "removing " + link_pin_path(ifindex), errno);
    links_.erase(it);
    return ok_status();
}

std::vector<std::string> XdpDataplane::missing_pins() const {
    std::vector<std::string> missing;
    if (pin_dir_.empty()) return missing;
    auto check = [&](const std::string& path) {
        struct stat info {};
        if (::stat(path.c_str(), &info) != 0 && errno == ENOENT) missing.push_back(path);
    };
    check(pin_dir_);
    if (!missing.empty()) return missing;  // the whole directory: one line says it
    bpf_map* map;
    bpf_object__for_each_map(map, skel_->obj) {
        if (const char* path = bpf_map__pin_path(map)) check(path);
    }
    for (const auto& [ifindex, fd] : links_) check(link_pin_path(ifindex));
    return missing;
}

std::vector<int> XdpDataplane::attached_ifindexes() const {
    std::vector<int> out;
    for (const auto& [ifindex, fd] : links_) out.push_back(ifindex);
    return out;
}

}  // namespace sluice
