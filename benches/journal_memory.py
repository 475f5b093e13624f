#!/usr/bin/env python3
"""Memory of the journal of process mappings (docs/LANGUAGE.md, "Stacks"): the tracer's resident memory while
1,000 short-lived processes run and exit under a script that keeps user stacks, against the same script with
the journal's processes not started (a filter that matches nothing still starts the journal, so the baseline is
the tracer before the processes run). As root.

Each process is a small C program (`main → top → mid → leaf → getppid`, built with cc), started by a shell
one after another; the script counts its user stacks, so every process adds one map key and its mappings to
the journal. VmRSS is read from /proc/PID/status before the processes, after them, and the stacks printed at
exit are checked to be named.

    cargo build --release
    python3 benches/journal_memory.py [--processes 1000] [--steadytrace PATH]
"""
import argparse
import os
import signal
import subprocess
import tempfile
import time

PROGRAM = r"""
#include <unistd.h>
__attribute__((noinline)) int leaf(void) { return getppid(); }
__attribute__((noinline)) int mid(void) { return leaf() + 1; }
__attribute__((noinline)) int top(void) { return mid() + 1; }
int main(void) { return top() > 0 ? 0 : 1; }
"""


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=1000)
    parser.add_argument("--steadytrace", default="target/release/steadytrace")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root")
    with tempfile.TemporaryDirectory() as scratch:
        source, binary = os.path.join(scratch, "chain.c"), os.path.join(scratch, "chain")
        with open(source, "w") as f:
            f.write(PROGRAM)
        subprocess.run(["cc", "-O0", "-fno-omit-frame-pointer", "-o", binary, source], check=True)
        script = 'tracepoint:syscalls:sys_enter_getppid /comm == "chain"/ { @[pid, ustack] = count(); }'
        tracer = subprocess.Popen([args.steadytrace, "-e", script], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)
        before = rss_kib(tracer.pid)
        started = time.monotonic()
        for _ in range(args.processes):
            subprocess.run(["sh", "-c", binary], check=True)
        elapsed = time.monotonic() - started
        time.sleep(0.5)
        after = rss_kib(tracer.pid)
        tracer.send_signal(signal.SIGINT)
        out, err = tracer.communicate(timeout=120)
    keys = out.count("@[")
    # A stack the kernel could not store (a hash collision in the stack-trace map: distinct stacks, since each
    # process has its own addresses) prints empty, `@[PID, ]`; the others must be named.
    empty = out.count(", ]:")
    named = out.count("    mid+")
    print(f"processes            {args.processes} (run in {elapsed:.1f} s)")
    print(f"map keys printed     {keys}: {named} stacks with `mid` named, {empty} empty (stack-map collisions)")
    print(f"tracer VmRSS         {before} KiB before, {after} KiB after: "
          f"{after - before} KiB more, {(after - before) * 1024 / max(args.processes, 1):.0f} bytes a process")
    if named + empty != keys or keys != args.processes:
        raise SystemExit(f"expected {args.processes} named stacks: {err[-500:]}")


if __name__ == "__main__":
    main()
