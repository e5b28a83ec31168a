#!/bin/sh
# Installs the Debian 12 packages a purpose needs, skipping those already
# present; needs root (or sudo) only when something is missing.
#
#   scripts/install-deps.sh demo    what building and running the server and
#                                   client takes (scripts/demo.sh)
#   scripts/install-deps.sh tests   that and the test toolchain: cmocka, the
#                                   reference tools, sanitizers, valgrind,
#                                   the container and deployment tools
#                                   (scripts/test.sh)
#
# Waits up to MR_APT_WAIT seconds (default 600) for another apt or dpkg
# (unattended-upgrades on a fresh machine) to let go of its lock.
set -eu

DEMO="build-essential cmake pkg-config
  libuv1-dev libcjson-dev libismrmrd-dev ismrmrd-tools libhdf5-dev
  libfftw3-dev libopenblas-dev liblapacke-dev libxml2-dev libpng-dev
  libdcmtk-dev libmicrohttpd-dev"
TESTS="$DEMO hdf5-tools libcmocka-dev bart clang libclang-rt-14-dev valgrind dcmtk dicom3tools
  prometheus podman runc mmdebstrap haproxy curl docker-compose python3-kubernetes
  python3-yaml python3 procps"

case "${1:-}" in
demo) PACKAGES=$DEMO ;;
tests)
  PACKAGES=$TESTS
  # kubectl (for kubectl kustomize) from Debian unless one is installed
  # already (another vendor's package would conflict with it).
  command -v kubectl >/dev/null || PACKAGES="$PACKAGES kubernetes-client"
  ;;
*)
  echo "usage: $0 demo|tests" >&2
  exit 2
  ;;
esac

missing=""
for p in $PACKAGES; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
[ -z "$missing" ] && exit 0

echo "installing:$missing" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
wait_lock="-o DPkg::Lock::Timeout=${MR_APT_WAIT:-600}"
# shellcheck disable=SC2086
$SUDO apt-get $wait_lock update -qq
# shellcheck disable=SC2086
$SUDO apt-get $wait_lock install -y -qq --no-install-recommends $missing >/dev/null
