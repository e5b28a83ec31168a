#!/bin/sh
# Seeds the fuzz corpus in DIR/seed: hand-made sessions plus the sessions
# of a few small ISMRMRD phantoms (noise scans, acceleration with
# calibration lines, repetitions, stored k-space coordinates). DIR/decoder,
# DIR/session, DIR/nhlbi and DIR/xml are where libFuzzer keeps what it
# finds.
#   make_corpus.sh MR-FUZZ-CORPUS DIR
set -eu
corpus_tool=$1
dir=$2
rm -rf "$dir/seed"
mkdir -p "$dir/seed" "$dir/decoder" "$dir/session" "$dir/nhlbi" "$dir/xml"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(
  cd "$tmp"
  ismrmrd_generate_cartesian_shepp_logan -m 16 -c 2 -o plain.h5 >/dev/null
  ismrmrd_generate_cartesian_shepp_logan -m 16 -c 2 -C -r 2 -o noise_reps.h5 >/dev/null
  ismrmrd_generate_cartesian_shepp_logan -m 16 -c 2 -a 2 -w 8 -o accel.h5 >/dev/null
  ismrmrd_generate_cartesian_shepp_logan -m 16 -c 1 -k -O 1 -o coords.h5 >/dev/null
)
"$corpus_tool" "$dir/seed" "$tmp"/plain.h5 "$tmp"/noise_reps.h5 "$tmp"/accel.h5 "$tmp"/coords.h5
