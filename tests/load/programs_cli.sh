#!/bin/sh
# Every program answers --help with its usage on stdout and exit 0 (none
# runs its work instead), and mr-load's scans_per_s counts only scans that
# succeeded.
#   programs_cli.sh BUILD_DIR
set -u
build=$1
status=0
for prog in reconserver reconclient mr-load mr-bench mr-grappa-e2e; do
  bin="$build/bin/$prog"
  if [ ! -x "$bin" ]; then
    echo "$prog: not built"
    status=1
    continue
  fi
  out=$(timeout 20 "$bin" --help 2>/dev/null)
  rc=$?
  case "$out" in
  *usage*) ;;
  *) echo "$prog --help: no usage on stdout"; status=1 ;;
  esac
  [ $rc -eq 0 ] || { echo "$prog --help: exit $rc"; status=1; }
done
# Nothing listens on port 1: every scan fails, so none counts as done.
json=$(timeout 60 "$build/bin/mr-load" -p 1 -c 2 -n 2 -m 8 -k 1 2>/dev/null)
rc=$?
[ $rc -ne 0 ] || { echo "mr-load: exit 0 with every scan failed"; status=1; }
case "$json" in
*'"ok": 0,'*'"scans_per_s": 0.0,'*) ;;
*) echo "mr-load: scans_per_s counts failed scans: $json"; status=1 ;;
esac
exit $status
