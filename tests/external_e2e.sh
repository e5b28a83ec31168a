#!/bin/bash
# The external step through a real server and client: the example Python
# step in both modes (execute from --external-dir, connect to it running
# as a server) and a reconserver as the peer, images reaching reconclient; a client that vanishes
# mid-scan and a peer that is not there give no leftover process; the
# client of a failed step gets a line naming it.
#   external_e2e.sh BUILD_DIR SOURCE_DIR
set -eu
# A failing command names its line (set -e alone exits silently).
trap 'echo "external_e2e.sh: line $LINENO failed: $BASH_COMMAND"' ERR
build=$1
src=$2
command -v python3 >/dev/null || { echo "no python3: skipped"; exit 77; }
tmp=$(mktemp -d)
py=""
trap 'kill "$server" $py 2>/dev/null || true; rm -rf "$tmp"' EXIT
. "$src/tests/support/server.sh"
mkdir "$tmp/configs"
cp "$src/examples/external/configs/"*.json "$src/configs/cartesian.json" "$tmp/configs/"
# Its own CONFIG_SCRIPTs below use the external gadget: allowed explicitly
# (test_server_session checks that a default server refuses them).
SERVER_ARGS="--external-dir $src/examples/external --allow-script-external" \
  start_server "$build" "$tmp/configs"
client="$build/bin/reconclient"
"$client" simulate --trajectory cartesian --matrix 64 --coils 4 -o "$tmp/phantom.h5" >/dev/null

# No process of the server's may be left once its sessions are over.
no_children() {
  for _ in $(seq 100); do
    [ -z "$(pgrep -P "$server" || true)" ] && return 0
    sleep 0.05
  done
  echo "processes left behind by the server:"; pgrep -a -P "$server"
  return 1
}

send() { # NAME-or--C-FILE... : one image expected
  rc=0
  out=$("$client" send "$tmp/phantom.h5" "$@" -p "$port" -o "$tmp/out.h5" -t 60000 2>&1) || rc=$?
  echo "$out"
  [ "$rc" = 0 ] || { echo "reconclient send $* failed ($rc); server log:"; cat "$tmp/server.log"; exit 1; }
  echo "$out" | grep -q "^1 image" || { echo "expected 1 image"; exit 1; }
}

send -c external_recon
send -c cartesian_smooth
no_children

python3 "$src/examples/external/mrd_step.py" --listen 127.0.0.1:0 >"$tmp/py.out" &
py=$!
for _ in $(seq 100); do grep -q listening "$tmp/py.out" && break; sleep 0.05; done
pyport=$(sed -n 's/listening on //p' "$tmp/py.out")
printf '{"name":"connect","gadgets":[{"gadget":"external","connect":"127.0.0.1:%s"}]}' \
  "$pyport" >"$tmp/connect.json"
send -C "$tmp/connect.json"

# Another reconserver as the peer (this one: a session of its own).
printf '{"name":"self","gadgets":[{"gadget":"external","connect":"127.0.0.1:%s","config":"cartesian"}]}' \
  "$port" >"$tmp/self.json"
send -C "$tmp/self.json"

# A peer that is not there: the client's error names the step.
kill "$py"; wait "$py" 2>/dev/null || true; py=""
if out=$("$client" send "$tmp/phantom.h5" -C "$tmp/connect.json" -p "$port" -o "$tmp/o2.h5" 2>&1); then
  echo "a session with nobody to connect to succeeded: $out"; exit 1
fi
echo "$out" | grep -q "gadget 0 'external': cannot connect to 127.0.0.1:$pyport" ||
  { echo "unexpected error: $out"; exit 1; }

# A client that goes away mid-scan (CONFIG_FILE and HEADER, then gone):
# the program started for it is killed and reaped.
header='<ismrmrdHeader><encoding><encodedSpace><matrixSize><x>128</x><y>64</y><z>1</z></matrixSize><fieldOfView_mm><x>128</x><y>64</y><z>1</z></fieldOfView_mm></encodedSpace><reconSpace><matrixSize><x>64</x><y>64</y><z>1</z></matrixSize><fieldOfView_mm><x>64</x><y>64</y><z>1</z></fieldOfView_mm></reconSpace><trajectory>cartesian</trajectory></encoding></ismrmrdHeader>'
n=${#header}
exec 3<>"/dev/tcp/127.0.0.1/$port"
{ printf '\001\000external_recon'; head -c $((1024 - 14)) /dev/zero
  printf '\003\000'; printf "$(printf '\\x%02x\\x%02x' $((n & 255)) $((n >> 8)))\000\000"
  printf '%s' "$header"; } >&3
for _ in $(seq 100); do [ -n "$(pgrep -P "$server" || true)" ] && break; sleep 0.05; done
[ -n "$(pgrep -P "$server" || true)" ] || { echo "the step's program did not start"; cat "$tmp/server.log"; exit 1; }
exec 3>&-
no_children
kill -TERM "$server"
wait "$server"
echo "external steps end to end: ok"
