# Sourced by scripts/device-build.sh and scripts/device-run.sh: the areas
# of the check on the GPU device machine, and their command lines.
# shellcheck shell=bash
device_areas="tests e2e stream bench gpu grappa nufft fhd multigpu sparse sparse3d"

# device_usage SCRIPT: the comment block at the top of SCRIPT.
device_usage() { sed -n '2,/^set /{/^# shellcheck/d;/^#/s/^# \{0,1\}//p}' "$1"; }

# device_check_args SCRIPT ARG...: --help prints SCRIPT's usage and exits
# 0; an argument that is not an area exits 2.
device_check_args() {
  local script=$1 a
  shift
  for a in "$@"; do
    case $a in
    -h | --help) device_usage "$script"; exit 0 ;;
    esac
    case " $device_areas " in
    *" $a "*) ;;
    *)
      echo "$(basename "$script"): unknown area '$a' (areas: $device_areas)" >&2
      device_usage "$script" >&2
      exit 2
      ;;
    esac
  done
}
