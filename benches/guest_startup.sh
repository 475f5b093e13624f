#!/bin/sh
# Start-up and memory of a tracer binary inside a guest (docs/ANDROID.md): `BEGIN { exit(); }` seven times, from
# exec to exit, with busybox's `time` (elapsed seconds, peak RSS), then the resident memory of a tracer attached
# to profile on every CPU.
#
#   tests/vm/run --arch arm64 --kernel 6.12 -- \
#     "sh benches/guest_startup.sh $(scripts/build-static --arch aarch64 | tail -n1) /.guest-bin/busybox"
#   tests/vm/run --kernel 6.12 -- "sh benches/guest_startup.sh $(scripts/build-static | tail -n1) /bin/busybox"
T=$1; BB=$2
$T -q -e 'BEGIN { exit(); }' >/dev/null 2>&1   # warm the page cache
for i in 1 2 3 4 5 6 7; do
  $BB time -f "run elapsed_s=%e maxrss_kb=%M" $T -q -e 'BEGIN { exit(); }' 2>&1 >/dev/null | grep '^run'
done
$T -q -e 'profile:hz:99 { @[cpu] = count(); } interval:ms:2500 { exit(); }' >/dev/null 2>&1 &
p=$!; sleep 2; grep -E 'VmRSS|VmHWM' /proc/$p/status; wait $p
