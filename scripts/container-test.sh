#!/bin/sh
# The container image, built and run (issue 13, item 1), with podman from
# Debian and a Debian base made by mmdebstrap from Debian's archive (no
# registry needed):
#   - builds the CPU image (docker/Dockerfile, MR_CUDA=OFF) in Docker format
#     so its HEALTHCHECK is kept;
#   - `--info` under --memory 512m --cpus 1 shows the cgroup's limits
#     (a 256 MiB budget, 1 CPU thread);
#   - runs it under those limits with both ports published on loopback:
#     the health check and /readyz pass, the user is 10001;
#   - reconstructs a Shepp-Logan phantom through the published port and
#     compares the image with the host build's;
#   - 32 clients at 256x256x16 at once: all served, no OOM kill;
#   - stops one (SIGTERM; --cpus 0.25 so that scans stay in flight) while
#     16 scans are in flight: none lost, exit 0.
# Prints one JSON line with the image size, build time, load and stop
# figures. Exits 77 (skipped) where the kernel refuses containers.
#   scripts/container-test.sh [BUILD_DIR]   (host binaries: build/ by default)
set -eu
cd "$(dirname "$0")/.."
src=$PWD
build=$(cd "${1:-build}" && pwd)
mirror=${MR_DEBIAN_MIRROR:-http://deb.debian.org/debian}
base=localhost/mrrecon-debian:bookworm
image=localhost/mrrecon:cpu
name=mrrecon-ct-$$

say() { echo "container-test: $*" >&2; }
skip() {
  echo "container-test: skipped: $*"
  exit 77
}
fail() {
  say "FAILED: $*"
  exit 1
}
for tool in podman mmdebstrap curl h5diff ismrmrd_generate_cartesian_shepp_logan; do
  command -v "$tool" >/dev/null || fail "$tool is missing (scripts/install-deps.sh tests installs it)"
done
for prog in reconserver reconclient mr-load; do
  [ -x "$build/bin/$prog" ] || fail "$build/bin/$prog is missing: build first"
done

work=$(mktemp -d)
server=""
cleanup() {
  podman rm -f -t 0 "$name" >/dev/null 2>&1 || true
  [ -z "$server" ] || kill "$server" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Two workarounds for VMs like this one, set here rather than on the host:
# podman's default ulimits may exceed the VM's hard limits, and crun refuses
# a hybrid cgroup v1 mount where runc does not.
runtime=""
command -v runc >/dev/null && runtime='runtime = "runc"'
cat >"$work/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
$runtime
EOF
export CONTAINERS_CONF="$work/containers.conf"

now() { date +%s.%N; }
elapsed() { echo "$(now) $1" | awk '{printf "%.1f", $1 - $2}'; }

# The kernel may refuse containers (no user namespaces, no overlay, a
# cgroup setup the runtime rejects, a CI job that is itself an unprivileged
# container): find out first with an image of just /usr/bin/true, and skip
# saying why.
mkdir -p "$work/probe"
for f in /usr/bin/true $(ldd /usr/bin/true | awk '/\// {print $(NF - 1)}'); do
  mkdir -p "$work/probe$(dirname "$f")"
  cp -L "$f" "$work/probe$f"
done
tar -C "$work/probe" -cf "$work/probe.tar" .
if ! podman import "$work/probe.tar" localhost/mrrecon-probe:latest >"$work/probe.log" 2>&1 ||
   ! podman run --rm --memory 64m localhost/mrrecon-probe:latest /usr/bin/true >>"$work/probe.log" 2>&1; then
  cat "$work/probe.log" >&2
  podman rmi -f localhost/mrrecon-probe:latest >/dev/null 2>&1 || true
  skip "this kernel or host refuses containers (podman import or run failed; see above)"
fi
podman rmi -f localhost/mrrecon-probe:latest >/dev/null 2>&1 || true

# The Debian base, once per machine: bookworm's apt variant, imported.
if ! podman image exists "$base"; then
  say "making $base with mmdebstrap from $mirror"
  t=$(now)
  mmdebstrap --variant=apt --quiet bookworm "$work/base.tar" "$mirror" >"$work/mmdebstrap.log" 2>&1 ||
    { cat "$work/mmdebstrap.log" >&2; fail "mmdebstrap"; }
  podman import "$work/base.tar" "$base" >/dev/null 2>"$work/import.log" ||
    { cat "$work/import.log" >&2; fail "podman import of the base"; }
  rm -f "$work/base.tar"
  say "base made in $(elapsed "$t") s"
fi

say "building $image"
t=$(now)
podman build --format docker -f docker/Dockerfile --build-arg MR_CUDA=OFF \
  --build-arg BUILD_IMAGE="$base" --build-arg RUNTIME_IMAGE="$base" -t "$image" . \
  >"$work/build.log" 2>&1 || { tail -40 "$work/build.log" >&2; fail "podman build"; }
build_s=$(elapsed "$t")
image_bytes=$(podman image inspect --format '{{.Size}}' "$image")
say "built in $build_s s, $image_bytes bytes"
podman image inspect --format '{{.Config.Healthcheck}}' "$image" | grep -q reconclient ||
  fail "the image has no HEALTHCHECK"
[ "$(podman image inspect --format '{{.Config.User}}' "$image")" = "10001:10001" ] ||
  fail "the image's USER is not numeric 10001:10001"

limits="--memory 512m --cpus 1"
# shellcheck disable=SC2086
info=$(podman run --rm $limits "$image" --info 2>/dev/null)
echo "$info" | grep -q "memory budget: 256 MiB" || { echo "$info" >&2; fail "--info: budget"; }
echo "$info" | grep -q "cpu: .* 1 threads" || { echo "$info" >&2; fail "--info: threads"; }

# shellcheck disable=SC2086
podman run -d --name "$name" $limits -p 127.0.0.1::9002 -p 127.0.0.1::9102 "$image" \
  --drain-timeout 120000 >/dev/null 2>"$work/run.log" || { cat "$work/run.log" >&2; fail "podman run"; }
port=$(podman port "$name" 9002/tcp | sed 's/.*://')
http=$(podman port "$name" 9102/tcp | sed 's/.*://')
ready=""
for _ in $(seq 300); do
  if curl -sf "http://127.0.0.1:$http/readyz" >/dev/null; then
    ready=1
    break
  fi
  sleep 0.1
done
[ -n "$ready" ] || { podman logs "$name" >&2; fail "/readyz never said ready"; }
podman healthcheck run "$name" >/dev/null 2>&1 || fail "the health check fails"
[ "$(podman exec "$name" id -u)" = "10001" ] || fail "not running as uid 10001"

# A phantom through the published port, against the host build's image.
(cd "$work" && ismrmrd_generate_cartesian_shepp_logan -m 128 -c 8 -o phantom.h5 >/dev/null)
"$build/bin/reconclient" send "$work/phantom.h5" -c default.xml -a 127.0.0.1 -p "$port" \
  -o "$work/container.h5" -G recon >/dev/null 2>"$work/send.log" ||
  { cat "$work/send.log" >&2; fail "reconclient send through the container"; }
tmp=$work
. "$src/tests/support/server.sh"
start_server "$build" "$src/configs"
"$build/bin/reconclient" send "$work/phantom.h5" -c default.xml -p "$port" \
  -o "$work/host.h5" -G recon >/dev/null 2>&1 || fail "reconclient send to the host server"
kill -TERM "$server"
wait "$server" || true
server=""
port=$(podman port "$name" 9002/tcp | sed 's/.*://')
h5diff -d 1e-4 "$work/container.h5" "$work/host.h5" /recon/image_1/data /recon/image_1/data ||
  fail "the container's image differs from the host build's"

# 32 clients at 256x256x16 under --memory 512m: the container survives
# (no OOM kill); a scan over the 256 MiB budget gets a clear error, and
# every image that comes back is right.
"$build/bin/mr-load" -p "$port" -c 32 -n 1 -m 256 -k 16 >"$work/load32.json" 2>"$work/load32.err" ||
  true
[ "$(podman inspect --format '{{.State.OOMKilled}} {{.State.Running}}' "$name")" = "false true" ] ||
  fail "the container was OOM-killed or stopped under 32 clients"
grep -q '"mismatched": 0' "$work/load32.json" || { cat "$work/load32.json" >&2; fail "wrong images"; }
if grep -v "memory budget\|--memory-budget" "$work/load32.err" | grep -q "mr-load:"; then
  cat "$work/load32.err" >&2
  fail "32 clients: errors other than the memory budget's"
fi

podman rm -f -t 0 "$name" >/dev/null 2>&1

# SIGTERM with 16 scans in flight: every one completes and is checked. A
# quarter of a CPU keeps the scans in flight long enough to be caught.
# shellcheck disable=SC2086
podman run -d --name "$name" --memory 512m --cpus 0.25 -p 127.0.0.1::9002 -p 127.0.0.1::9102 \
  "$image" --drain-timeout 120000 >/dev/null 2>"$work/run.log" ||
  { cat "$work/run.log" >&2; fail "podman run"; }
port=$(podman port "$name" 9002/tcp | sed 's/.*://')
http=$(podman port "$name" 9102/tcp | sed 's/.*://')
for _ in $(seq 300); do
  curl -sf "http://127.0.0.1:$http/readyz" >/dev/null && break
  sleep 0.1
done
"$build/bin/mr-load" -p "$port" -c 16 -n 1 -m 256 -k 8 >"$work/load16.json" 2>"$work/load16.err" &
load=$!
active=0
for _ in $(seq 3000); do
  active=$(curl -sf "http://127.0.0.1:$http/metrics" | sed -n 's/^mrrecon_sessions_active //p')
  [ "${active:-0}" -ge 16 ] && break
  kill -0 "$load" 2>/dev/null || break
done
[ "${active:-0}" -ge 16 ] || fail "only ${active:-0} scans were ever in flight at once"
t=$(now)
podman stop -t 120 "$name" >/dev/null
stop_s=$(elapsed "$t")
status=0
wait "$load" || status=$?
exit_code=$(podman inspect --format '{{.State.ExitCode}}' "$name")
[ "$status" -eq 0 ] || { cat "$work/load16.json" "$work/load16.err" >&2; fail "scans lost at stop"; }
[ "$exit_code" = "0" ] || fail "reconserver exited $exit_code after SIGTERM"

one_line() { tr -d '\n' <"$1" | tr -s ' '; }
echo "{\"image_bytes\": $image_bytes, \"build_s\": $build_s, \"in_flight_at_stop\": $active," \
  "\"stop_s\": $stop_s, \"load_32x256x16_512m\": $(one_line "$work/load32.json")," \
  "\"stop_16_in_flight\": $(one_line "$work/load16.json")}"
say "passed"
