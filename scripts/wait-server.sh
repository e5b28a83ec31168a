#!/bin/sh
# wait-server.sh PID LOG RECONCLIENT [SECONDS]: waits until the reconserver
# of process PID, whose stderr goes to LOG, answers a ping on the loopback
# port its log names (printed on stdout, then exit 0), up to SECONDS
# (default 300: a cold start pages in some 340 MB of CUDA libraries).
# Fails (exit 1) with the reason and the server's log on stderr when the
# server exits first (a port already taken, a bad option) or does not
# answer in time.
set -eu
server=$1
log=$2
client=$3
seconds=${4:-300}

# Whether the server still runs (a zombie, exited but not yet waited for
# by its parent, does not).
running() {
  [ -r "/proc/$1/stat" ] && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat"
}

gave_up() {
  echo "$1; its log ($log):" >&2
  cat "$log" >&2 || true
  exit 1
}

port=""
tenths=0
while :; do
  running "$server" || gave_up "reconserver (pid $server) exited before it was ready"
  # The log is made by the server's shell after the fork: it may not be
  # there yet at the first looks (sed on a missing file failed the wait).
  [ -n "$port" ] || [ ! -e "$log" ] ||
    port=$(sed -n 's/.* listening on 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$log")
  # Ours answers: the port is the one it bound, and it serves.
  if [ -n "$port" ] && "$client" ping -p "$port" >/dev/null 2>&1; then
    echo "$port"
    exit 0
  fi
  tenths=$((tenths + 1))
  [ "$tenths" -lt $((seconds * 10)) ] || gave_up "reconserver did not answer within $seconds s"
  sleep 0.1
done
