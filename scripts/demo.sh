#!/usr/bin/env bash
# The README's main-job command: the live demo. As root it installs what is
# missing, builds, and then, in a network namespace of its own:
#   - a veth pair sl1 -> sl0, with sluiced enforcing examples/policy.toml on sl0
#     (XDP, native mode);
#   - sluice-traffic sending three sources out of sl1 and counting what
#     reaches sl0: a polite one under its limit, a greedy one far above it, and
#     a flood from 256 addresses of a partner network that is limited per /24;
#   - every second: the daemon's per-class pass/drop rates (sluicectl stats)
#     and the per-source offered/passed rates the traffic tool measured.
# At the end it prints what each source offered and what was let through,
# and removes everything it created (namespace, pins, processes, temp dir)
# on every way out, Ctrl-C included.
#
# SLUICE_BUILD_DIR (default build): the build directory.
# SLUICE_DEMO_SECONDS (default 20): how long the traffic runs.
set -euo pipefail
cd "$(dirname "$0")/.."

readonly netns=sluice-demo
readonly bpffs_dir=/sys/fs/bpf/sluice-demo
readonly policy=examples/policy.toml
seconds=${SLUICE_DEMO_SECONDS:-20}
if ! [[ $seconds =~ ^[0-9]+$ ]] || ((seconds < 1 || seconds > 3600)); then
  echo "demo: SLUICE_DEMO_SECONDS=\"$seconds\": expected whole seconds, 1..3600" >&2
  exit 2
fi
if [[ $EUID -ne 0 ]]; then
  echo "demo: run as root: it installs packages, creates a network namespace and loads XDP programs" >&2
  exit 1
fi

bash scripts/build.sh
build_dir=${SLUICE_BUILD_DIR:-build}
sluiced=$build_dir/control/sluiced
sluicectl=$build_dir/control/sluicectl
traffic=$build_dir/tests/tools/sluice-traffic
for binary in "$sluiced" "$sluicectl" "$traffic"; do
  if [[ ! -x $binary ]]; then
    echo "demo: $binary was not built" >&2
    exit 1
  fi
done

# The sources, NAME:ADDRESS-OR-PREFIX:PACKETS-PER-SECOND. In
# examples/policy.toml, 10.1.0.1 and 10.2.0.1 fall in class "default" (1000/s
# per source) and 203.0.113.0/24 in class "partner", limited per /24: its 256
# addresses share one bucket. The summary reads the policy file to say so.
flows=(
  "polite:10.1.0.1:500"
  "greedy:10.2.0.1:20000"
  "flood:203.0.113.0/24:60000"
)

# Another demo running, or the leftovers of one killed with SIGKILL: this
# script never removes what it did not create.
if ip netns list | awk -v name="$netns" '$1 == name { found = 1 } END { exit !found }'; then
  echo "demo: network namespace $netns already exists (another demo running, or a leftover)." >&2
  echo "demo: if no demo is running: ip netns del $netns; rm -rf $bpffs_dir" >&2
  exit 1
fi
if [[ -e $bpffs_dir ]]; then
  echo "demo: $bpffs_dir already exists (another demo running, or a leftover)." >&2
  echo "demo: if no demo is running: rm -rf $bpffs_dir" >&2
  exit 1
fi

workdir=$(mktemp -d /tmp/sluice-demo.XXXXXX)
socket=$workdir/sluiced.sock
created_netns=0
sluiced_pid=
traffic_pid=

ctl() { "$sluicectl" --socket "$socket" --timeout 5000 "$@"; }

cleanup() {
  local status=$?
  set +e
  trap - INT TERM
  if [[ -n $traffic_pid ]] && kill -0 "$traffic_pid" 2>/dev/null; then
    kill -TERM "$traffic_pid"
    wait "$traffic_pid" 2>/dev/null
  fi
  if [[ -n $sluiced_pid ]] && kill -0 "$sluiced_pid" 2>/dev/null; then
    # sluiced leaves programs enforcing when it exits (fail-static): detach
    # first so nothing stays attached or pinned.
    ctl detach sl0 >/dev/null || echo "demo: detach sl0 failed; the namespace and pins go anyway" >&2
    kill -TERM "$sluiced_pid"
    for _ in $(seq 50); do
      kill -0 "$sluiced_pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$sluiced_pid" 2>/dev/null; then
      echo "demo: sluiced did not exit within 5 s of SIGTERM; killing it" >&2
      kill -KILL "$sluiced_pid"
    fi
    wait "$sluiced_pid" 2>/dev/null
  fi
  if ((created_netns)); then
    ip netns del "$netns" || echo "demo: could not delete network namespace $netns" >&2
  fi
  # Everything under it is ours: the directory did not exist before.
  rm -rf "$bpffs_dir" || echo "demo: could not remove $bpffs_dir" >&2
  rm -rf "$workdir"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo
echo "demo: lab: network namespace $netns, veth sl1 -> sl0"
ip netns add "$netns"
created_netns=1
ip -n "$netns" link add sl0 type veth peer name sl1
ip -n "$netns" link set lo up
ip -n "$netns" link set sl0 up
ip -n "$netns" link set sl1 up

mkdir -p "$workdir/state"
cat >"$workdir/sluiced.toml" <<EOF
socket = "$socket"
state_dir = "$workdir/state"
bpffs_dir = "$bpffs_dir"
log_level = "info"

[[interface]]
name = "sl0"
mode = "native"
EOF

# sluiced runs in the lab's network namespace but the host's mount namespace,
# so its pins land in the host's /sys/fs/bpf. setsid keeps it out of the
# terminal's process group: Ctrl-C reaches this script, which detaches first.
echo "demo: starting sluiced"
setsid nsenter --net="/var/run/netns/$netns" "$sluiced" --config "$workdir/sluiced.toml" \
  2>"$workdir/sluiced.log" &
sluiced_pid=$!

show_sluiced_log() {
  echo "demo: sluiced's log:" >&2
  sed 's/^/  /' "$workdir/sluiced.log" >&2
}
ready=0
for _ in $(seq 100); do
  if ! kill -0 "$sluiced_pid" 2>/dev/null; then
    wait "$sluiced_pid" && code=0 || code=$?
    sluiced_pid=
    echo "demo: sluiced exited with status $code before it was ready" >&2
    show_sluiced_log
    exit 1
  fi
  if [[ -S $socket ]] && ctl status >/dev/null 2>&1; then
    ready=1
    break
  fi
  sleep 0.1
done
if ((!ready)); then
  echo "demo: sluiced did not answer on $socket within 10 s" >&2
  show_sluiced_log
  exit 1
fi

echo "demo: sluicectl policy push $policy"
if ! pushed=$(ctl policy push "$policy" 2>&1); then
  echo "demo: sluicectl policy push failed:" >&2
  printf '%s\n' "$pushed" | sed 's/^/  /' >&2
  show_sluiced_log
  exit 1
fi
# The first line says which version was applied; the diff from nothing is
# the whole policy, which is in the file anyway.
echo "  ${pushed%%$'\n'*}"

flow_args=()
for flow in "${flows[@]}"; do flow_args+=(--flow "$flow"); done
live_file=$workdir/traffic.live
report=$workdir/traffic.json
# --tx-cpu 0: the sender, and so the XDP program that sees its frames on veth,
# stay on one CPU, so per-CPU (split) limits come out the same on every run.
ip netns exec "$netns" "$traffic" --tx-dev sl1 --rx-dev sl0 --duration "$seconds" "${flow_args[@]}" \
  --tx-cpu 0 --json "$report" --live-file "$live_file" 2>"$workdir/traffic.log" &
traffic_pid=$!

# Ctrl-C (or SIGTERM) while traffic runs ends it early and still prints the
# summary; the traffic tool stops on the same signal and writes its report.
stopping=0
trap 'stopping=130; kill -TERM "$traffic_pid" 2>/dev/null' INT
trap 'stopping=143; kill -TERM "$traffic_pid" 2>/dev/null' TERM

if [[ -t 1 ]]; then clear_screen=$'\033[H\033[2J'; else clear_screen=$'\n'; fi
started=$SECONDS
# Ctrl-C also reaches sleep and the frame's subshell; "|| true" keeps set -e
# from ending the script there, so the summary still comes.
while kill -0 "$traffic_pid" 2>/dev/null; do
  sleep 1 || true
  kill -0 "$traffic_pid" 2>/dev/null || break
  frame=$(
    printf 'Sluice live demo, %d of %d s: sluiced enforces %s on sl0 (XDP); sluice-traffic\n' \
      $((SECONDS - started)) "$seconds" "$policy"
    printf 'sends three sources out of sl1 and counts what gets through to sl0. Ctrl-C stops early.\n\n'
    echo "sluicectl stats: per class, as the daemon counts"
    ctl stats 2>&1 | sed 's/^/  /' || true
    echo
    echo "sluice-traffic: per source, as the receiver counts"
    if [[ -s $live_file ]]; then sed 's/^/  /' "$live_file"; else echo "  (first figures after one second)"; fi
    echo
    echo "sluicectl top -n 3: the sources dropped most, from sampled drop events"
    ctl top -n 3 2>&1 | sed 's/^/  /' || true
  ) || true
  printf '%s%s\n' "$clear_screen" "$frame"
done
# wait returns early when a trapped signal arrives: wait until the tool exits.
traffic_status=0
while true; do
  wait "$traffic_pid" && traffic_status=0 || traffic_status=$?
  kill -0 "$traffic_pid" 2>/dev/null || break
done
traffic_pid=
trap 'exit 130' INT
trap 'exit 143' TERM

if ((traffic_status != 0)) || [[ ! -s $report ]]; then
  echo "demo: sluice-traffic failed (status $traffic_status):" >&2
  sed 's/^/  /' "$workdir/traffic.log" >&2
  exit 1
fi

echo
echo "sluicectl stats at the end (totals in PASS_PKTS and DROP_PKTS):"
ctl stats | sed 's/^/  /'
echo
python3 - "$report" "$policy" <<'PY'
# What each source offered, what reached sl0, and what the policy predicts:
# the class its addresses fall in (longest prefix), and for a packet limit,
# rate x time + burst per bucket (sources share a bucket per prefix_v4/v6).
import ipaddress
import json
import sys
import tomllib

report = json.load(open(sys.argv[1]))
policy = tomllib.load(open(sys.argv[2], "rb"))
seconds = report["duration_s"]
defaults = policy.get("defaults", {})
classes = {c["name"]: c for c in policy.get("class", [])}


def class_of(address):
    best, best_length = defaults.get("class", "default"), -1
    for klass in classes.values():
        for prefix in klass.get("match", []):
            network = ipaddress.ip_network(prefix, strict=False)
            if address.version == network.version and address in network and network.prefixlen > best_length:
                best, best_length = klass["name"], network.prefixlen
    return best


def setting(klass, level, key, fallback):
    return level.get(key, klass.get(key, defaults.get(key, fallback)))


def predict(flow):
    """The policy in words, and the packets per second it should let through."""
    source = ipaddress.ip_network(flow["src"], strict=False)
    name = class_of(source.network_address)
    klass = classes.get(name, {})
    action = klass.get("action", "limit")
    if action != "limit":
        return f"class {name}: action {action}", None
    level = klass.get("per_source")
    if level is None:
        return f"class {name}: no per-source limit", None
    unit = setting(klass, level, "unit", "packets")
    v4 = source.version == 4
    bits = setting(klass, level, "prefix_v4" if v4 else "prefix_v6", 32 if v4 else 64)
    rate, burst = level["rate"], level["burst"]
    per = "source" if bits == source.max_prefixlen else f"/{bits}"
    text = f"class {name}: {rate}/s per {per}, burst {burst} {unit}"
    if unit != "packets":
        return text, None
    buckets = 2 ** max(0, bits - source.prefixlen)
    return text, min(flow["sent"], buckets * (rate * seconds + burst)) / seconds


print(f"What each source offered and what Sluice let through, over {seconds:.1f} s"
      + (" (stopped early)" if report.get("interrupted") else "") + ", in packets per second:")
print(f"  {'source':<7} {'address':<15} {'offered':>8} {'allowed':>8} {'%':>6} {'predicted':>9}   policy")
for flow in report["flows"]:
    offered = flow["sent"] / seconds
    allowed = flow["received"] / seconds
    share = 100 * flow["received"] / flow["sent"] if flow["sent"] else 0
    text, predicted = predict(flow)
    predicted_text = f"{predicted:.0f}" if predicted is not None else "-"
    print(f"  {flow['name']:<7} {flow['src']:<15} {offered:>8.0f} {allowed:>8.0f} {share:>5.1f}%"
          f" {predicted_text:>9}   {text}")
print("  allowed: what reached sl0 past the XDP program. predicted: rate x time, plus the burst of")
print("  the bucket, which starts full; per bucket, and at most what was offered.")
if report["receiver_drops"]:
    print(f"  note: the counter itself missed {report['receiver_drops']} frames (its receive buffer was full),")
    print("  so 'allowed' reads a little low.")
PY
# Stopped by a signal: say so in the exit status, as an untrapped one would.
if ((stopping)); then exit "$stopping"; fi
