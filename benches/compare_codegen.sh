#!/bin/bash
# Compares the BPF instructions two builds of steadytrace generate for the scripts of benches/event_cost.py
# (`-d --dry-run`): where they are the same, the per-event cost is the same.
#   benches/compare_codegen.sh OLD_BINARY NEW_BINARY
OLD=$1; NEW=$2
E='tracepoint:syscalls:sys_enter_getppid'; X='tracepoint:syscalls:sys_exit_getppid'; S='tracepoint:syscalls:sys_enter_clock_nanosleep'
scripts=(
"$E { }"
"$E /pid == 1/ { @ = count(); }"
"$E /pid == 1234/ { @ = count(); }"
"$E /pid == 1234/ { @[comm] = count(); }"
"$E /pid == 1234/ { @[pid, comm] = count(); }"
"$E /pid == 1234/ { @h = hist(nsecs & 0xffff); }"
"$X /pid == 1234/ { @s = sum(args->ret); }"
"$E /pid == 1234/ { @t[tid] = nsecs; }"
"$E /pid == 1234/ { @start[tid] = nsecs; } $X /@start[tid]/ { @lat = hist(nsecs - @start[tid]); delete(@start[tid]); }"
"$E /pid == 1234/ { printf(\"%s %d\\n\", comm, tid); }"
"$E /pid == 1234/ { @[kstack] = count(); }"
"$S { }"
)
for s in "${scripts[@]}"; do
  a=$($OLD -d --dry-run -e "$s" 2>&1 | md5sum); b=$($NEW -d --dry-run -e "$s" 2>&1 | md5sum)
  na=$($OLD -d --dry-run -e "$s" 2>&1 | grep -c '^ *[0-9]*:'); nb=$($NEW -d --dry-run -e "$s" 2>&1 | grep -c '^ *[0-9]*:')
  if [ "$a" == "$b" ]; then echo "same  ($na insns) $s"; else echo "DIFF ($na -> $nb) $s"; fi
done
