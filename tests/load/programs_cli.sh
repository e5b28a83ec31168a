#!/bin/sh
# Every program, and every subcommand, answers --help with its usage on
# stdout and exit 0 (none runs its work instead), and refuses an unknown
# option, a stray argument or a malformed number with exit 2 and nothing on
# stdout. mr-load's scans_per_s counts only scans that succeeded.
#   programs_cli.sh BUILD_DIR FUZZ
# Programs: every one in BUILD_DIR/bin (so a new one is checked without
# editing this list), mr-fuzz-corpus, and the fuzz targets' replay drivers
# (FUZZ=OFF; with FUZZ=ON they are libFuzzer's, which has its own -help=1).
set -u
build=$1
fuzz=${2:-OFF}
status=0
fail() {
  echo "$*"
  status=1
}

# expect_help PROGRAM ARGS...: usage on stdout, exit 0.
expect_help() {
  out=$(timeout 20 "$@" 2>/dev/null)
  rc=$?
  case "$out" in
  *usage*) ;;
  *) fail "$*: no usage on stdout" ;;
  esac
  [ $rc -eq 0 ] || fail "$*: exit $rc, not 0"
}

# expect_refused PROGRAM ARGS...: exit 2, nothing on stdout.
expect_refused() {
  out=$(timeout 20 "$@" 2>/dev/null)
  rc=$?
  [ $rc -eq 2 ] || fail "$*: exit $rc, not 2"
  [ -z "$out" ] || fail "$*: wrote to stdout: $(echo "$out" | head -n 1)"
}

programs=""
for prog in reconserver reconclient mr-load mr-bench mr-grappa-e2e; do
  [ -x "$build/bin/$prog" ] || fail "$prog: not built"
done
for bin in "$build"/bin/*; do
  [ -f "$bin" ] && [ -x "$bin" ] && programs="$programs $bin"
done
[ -x "$build/tests/mr-fuzz-corpus" ] && programs="$programs $build/tests/mr-fuzz-corpus"
if [ "$fuzz" != ON ]; then
  for bin in "$build"/tests/fuzz_*; do
    [ -x "$bin" ] && programs="$programs $bin"
  done
fi
for bin in $programs; do
  expect_help "$bin" --help
  expect_refused "$bin" --no-such-option
done

# Subcommands.
client=$build/bin/reconclient
if [ -x "$client" ]; then
  for cmd in send ping info configs simulate; do
    expect_help "$client" $cmd --help
    expect_refused "$client" $cmd --no-such-option
  done
  expect_refused "$client" no-such-command
  expect_refused "$client" ping stray-argument
fi
bench=$build/bin/mr-bench
if [ -x "$bench" ]; then
  # The subcommands are the lines after "subcommands" in its usage.
  subs=$("$bench" --help | sed -n '/^subcommands/,$s/^  \([a-z0-9_-]*\) .*/\1/p')
  [ -n "$subs" ] || fail "mr-bench --help lists no subcommand"
  for sub in $subs; do
    expect_help "$bench" "$sub" --help
    expect_refused "$bench" "$sub" --no-such-option
  done
  expect_refused "$bench" no-such-subcommand
  expect_refused "$bench" --rounds 0
fi
load=$build/bin/mr-load
if [ -x "$load" ]; then
  expect_refused "$load" -p 1 stray-argument
  expect_refused "$load" -p not-a-port
  expect_refused "$load" -p 1 -c 2x
fi
e2e=$build/bin/mr-grappa-e2e
[ -x "$e2e" ] && expect_refused "$e2e" --slices many
[ -x "$build/bin/reconserver" ] && expect_refused "$build/bin/reconserver" --max-connections 1x

# Nothing listens on port 1: every scan fails, so none counts as done.
json=$(timeout 60 "$load" -p 1 -c 2 -n 2 -m 8 -k 1 2>/dev/null)
rc=$?
[ $rc -ne 0 ] || fail "mr-load: exit 0 with every scan failed"
case "$json" in
*'"ok": 0,'*'"scans_per_s": 0.0,'*) ;;
*) fail "mr-load: scans_per_s counts failed scans: $json" ;;
esac
exit $status
