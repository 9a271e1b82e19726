#!/usr/bin/env bash
# Builds the Debian packages (debian/): installs the build dependencies
# debian/control names, builds with `dpkg-buildpackage -us -uc -b` in a copy
# of the source tree (dpkg-buildpackage writes its results next to the tree),
# runs lintian on them (any error fails) and leaves sluice_*.deb,
# sluice-dpdk_*.deb and sluice-bench_*.deb in OUT_DIR (default: the top of
# the source tree), for `apt install ./sluice_*.deb`.
#
#   bash scripts/package.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source_dir=$PWD
out_dir=$(realpath -m "${1:-$source_dir}")
mkdir -p "$out_dir"

if [[ $EUID -ne 0 ]]; then
  echo "package: run as root (it installs the build dependencies)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! compgen -G '/var/lib/apt/lists/*_Packages' >/dev/null; then
  apt-get update
fi
# dpkg-dev, debhelper and lintian build and check; `apt-get build-dep` reads
# the rest from debian/control.
apt-get install -y --no-install-recommends dpkg-dev debhelper lintian fakeroot >/dev/null
apt-get build-dep -y ./ >/dev/null

version=$(dpkg-parsechangelog -S Version)
# Built at one path on every run, so the compiler's command lines (which
# carry it: dpkg-buildflags' -ffile-prefix-map) repeat and ccache hits; one
# package build at a time on a machine.
work=/var/tmp/sluice-package
exec {lock}>"$work.lock"
flock "$lock"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
tree=$work/sluice-$version
mkdir "$tree"
# The files git knows and new ones it does not ignore: no build directories.
if git rev-parse --git-dir >/dev/null 2>&1; then
  git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$tree"
else
  tar -C "$source_dir" --exclude='./build*' -cf - . | tar -C "$tree" -xf -
fi

export CCACHE_BASEDIR=$tree
source scripts/ccache-env.sh
echo "package: building sluice $version in $tree"
build_options="${DEB_BUILD_OPTIONS:+$DEB_BUILD_OPTIONS }parallel=$(nproc)"
(cd "$tree" && DEB_BUILD_OPTIONS=$build_options dpkg-buildpackage -us -uc -b)

changes=$(ls "$work"/sluice_"$version"_*.changes)
echo "package: lintian $(basename "$changes")"
lintian --fail-on error --info "$changes"

debs=("$work"/*.deb)
cp "${debs[@]}" "$out_dir"/
echo "package: built"
for deb in "${debs[@]}"; do echo "  $out_dir/$(basename "$deb")"; done
