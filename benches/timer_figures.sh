#!/bin/sh
# Regenerates the figures of docs/TIMER-BENCHMARK.md, each picture and its numbers from one run:
# docs/timer-benchmark-{quiet,busy,flap}.{txt,svg}. Run as root on a machine doing nothing else:
#
#   sh benches/timer_figures.sh [TRACER]        (default target/release/steadytrace; about 4 minutes)
#
# quiet: no options. busy: the same while two shells spin on the CPUs. flap: cpu1 offline and back every
# 200 ms. tests/bench_interval.rs checks that each .txt is quoted in the document and agrees with its picture.
set -eu
T=${1:-target/release/steadytrace}
figure() {
  name=$1; shift
  "$T" bench interval "$@" --plot "docs/timer-benchmark-$name.svg" > "docs/timer-benchmark-$name.txt"
  echo "docs/timer-benchmark-$name: steadytrace bench interval $*" >&2
}
figure quiet
sh -c 'while :; do :; done' & a=$!
sh -c 'while :; do :; done' & b=$!
trap 'kill $a $b 2>/dev/null' EXIT
figure busy
kill $a $b
figure flap --flap 1:200
