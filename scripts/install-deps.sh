#!/usr/bin/env bash
# Installs the Debian packages Sluice needs to build and test, and only those
# that are missing. Safe to run again: a second run installs nothing.
set -euo pipefail

packages=(
  # build
  meson ninja-build pkg-config g++ gcc python3
  # every build compiles through it (scripts/ccache-env.sh): a second run recompiles only what changed
  ccache
  # network namespaces and veth pairs for the tests
  iproute2
  # BPF: compiler, libbpf, skeleton generator, kernel UAPI headers
  clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev linux-libc-dev
  # the sanitizer build (scripts/sanitize-build.sh): clang 14's ASan/UBSan runtimes and libFuzzer
  libclang-rt-14-dev libfuzzer-14-dev
  # libraries
  libtomlplusplus-dev nlohmann-json3-dev libssl-dev libgtest-dev libgmock-dev libbenchmark-dev
  prometheus-cpp-dev
  # command lines of sluicectl, sluiced, sluice-dpdk and sluice-bench
  libcli11-dev
  # the man pages (packaging/man/): go-md2man turns their Markdown into roff; the man suite
  # renders each with man-db's man
  go-md2man man-db
  # the metrics test scrapes sluiced with a real Prometheus and lints with promtool
  prometheus
  # sluice-bench veth: the nftables and iptables (hashlimit) receivers it compares against, ethtool
  # (GRO gives their veth the NAPI that redirected frames need), and the plot
  nftables iptables ethtool gnuplot-nox
  # fleet quotas (control/fleet/): hiredis; the fleet-redis tests start redis-server and build
  # their cluster with redis-cli
  libhiredis-dev redis-server redis-tools
  # the fleet e2e test runs one node's sluiced with its wall clock 5 s ahead
  faketime
  # request-level decisions (control/request/): Envoy's rate limit service over gRPC (grpc++,
  # protobuf and their code generators), the nginx auth_request endpoint (cpp-httplib); the tests
  # and sluice-bench http put a real nginx in front and load it with wrk
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc libcpp-httplib-dev nginx wrk
  # the packaging suite: sluicectl's completion is tried with bash-completion's helpers loaded,
  # the installed unit is checked with systemd-analyze (scripts/package.sh installs what the
  # package build needs itself)
  bash-completion systemd
  # sluice-dpdk and sluice-bench dpdk: DPDK's headers and libraries; it depends on every PMD plugin,
  # among them net_null, net_ring and net_pcap (librte-net-{null,ring,pcap}23) that the tests use
  libdpdk-dev
)

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

if [[ $EUID -ne 0 ]]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root (or: sudo apt-get install ${missing[*]})" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# A fresh machine has no package lists, and old lists may name versions the
# archive no longer serves: refresh when there are none or the install fails.
if ! compgen -G '/var/lib/apt/lists/*_Packages' >/dev/null; then
  apt-get update
fi
if ! apt-get install -y --no-install-recommends "${missing[@]}"; then
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
fi
