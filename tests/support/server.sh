# Sourced by test scripts: start_server BUILD CONFIGS [WRAPPER...] starts
# reconserver on a free loopback port (port 0; the log says which) with its
# stderr in $tmp/server.log, and sets $server (pid) and $port. Needs $tmp.
# CPU only unless $GPUS says otherwise; $SERVER_ARGS are added to its
# command line.
start_server() {
  build=$1
  configs=$2
  shift 2
  : >"$tmp/server.log" # there before the first look at it
  "$@" "$build/bin/reconserver" --listen 127.0.0.1:0 --configs "$configs" --gpus "${GPUS:-none}" \
    ${SERVER_ARGS:-} 2>"$tmp/server.log" &
  server=$!
  port=""
  # Up to 120 s: under valgrind on a loaded 2-core machine start-up alone
  # has taken over 30.
  for _ in $(seq 1200); do
    port=$(sed -n 's/.* listening on 127.0.0.1:\([0-9]*\) .*/\1/p' "$tmp/server.log")
    [ -n "$port" ] && return 0
    sleep 0.1
  done
  echo "reconserver did not start:"
  cat "$tmp/server.log"
  return 1
}

# http_get PORT PATH: an HTTP/1.0 GET on 127.0.0.1:PORT over bash's
# /dev/tcp (bash only), the whole answer on stdout.
http_get() {
  exec 3<>"/dev/tcp/127.0.0.1/$1"
  printf 'GET %s HTTP/1.0\r\nHost: x\r\n\r\n' "$2" >&3
  cat <&3
  exec 3<&-
}

# http_port_in_log: the port of a server started with --http 127.0.0.1:0
# (the kernel's choice, never one another test holds), from its log.
http_port_in_log() {
  sed -n 's|.* health and metrics on http://127.0.0.1:\([0-9]*\) .*|\1|p' "$tmp/server.log"
}
