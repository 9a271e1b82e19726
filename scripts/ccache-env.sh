# Sourced by the build scripts: compile through ccache (meson and the package
# build pick it up from PATH) with a cache outside the checkout, shared by
# every clone on the machine. Paths under the checkout are rewritten relative
# to it and the working directory is left out of the hash, but meson's unity
# files include their sources by absolute path: a unity target hits only from
# a clone at a path the cache has seen (CI's folder, a developer's checkout).
export CCACHE_DIR=${CCACHE_DIR:-${HOME:-/root}/.cache/ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
export CCACHE_NOHASHDIR=1
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-10G}
