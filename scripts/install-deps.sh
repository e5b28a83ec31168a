#!/bin/sh
# Installs the Debian 12 packages the build, the demo and the tests need,
# skipping those already present. Needs root (or sudo) only when something
# is missing.
set -eu

PACKAGES="build-essential cmake pkg-config
  libuv1-dev libcjson-dev libismrmrd-dev ismrmrd-tools libhdf5-dev hdf5-tools
  libfftw3-dev libopenblas-dev liblapacke-dev libxml2-dev libpng-dev
  libcmocka-dev bart clang libclang-rt-14-dev valgrind libdcmtk-dev dcmtk dicom3tools
  libmicrohttpd-dev prometheus
  podman runc mmdebstrap haproxy curl docker-compose python3-kubernetes python3-yaml
  python3 procps"
# kubectl (for kubectl kustomize) from Debian unless one is installed
# already (another vendor's package would conflict with it).
command -v kubectl >/dev/null || PACKAGES="$PACKAGES kubernetes-client"

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
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
