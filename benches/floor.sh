#!/usr/bin/env bash
# Builds the floor (benches/floor.c: the least a tracer must do for `BEGIN { printf("x\n"); exit(); }`) as a
# static binary, gcc -static -O2, and prints its path on its last line. benches/startup.py --floor measures it
# beside steadytrace:
#
#     python3 benches/startup.py --floor "$(benches/floor.sh)" --static target/x86_64-unknown-linux-gnu/release/steadytrace
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p target/floor
gcc -static -O2 -Wall -Wextra -o target/floor/floor benches/floor.c >&2
echo "$PWD/target/floor/floor"
