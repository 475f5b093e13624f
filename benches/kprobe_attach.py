#!/usr/bin/env python3
"""Attach time of wildcard kprobes: one kprobe_multi link against one perf kprobe event per function.

This machine's kernel has no kprobes, so the measurement runs in the qemu guest rig (tests/vm/run, Debian's 6.12
kernel; software emulation, ~50x slower than the host: compare the two paths, not the numbers with the host's).
For each pattern and path, the median over N runs of:
  resolve   the whole process with --dry-run: reading the kernel's function list, matching, compiling
  attach    spawn to the "Attached N probes" line: the same, then loading and attaching
  wall      the whole process (`... BEGIN { exit(); }`), detaching included

    python3 benches/kprobe_attach.py [--runs N] [--steadytrace PATH] [--kernel 6.12] [PATTERN...]
"""
import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time

PATTERNS = ["vfs_*", "tcp_*", "__x64_sys_*"]
PATHS = [("kprobe_multi", {}), ("perf", {"STEADYTRACE_KPROBE_ATTACH": "perf"})]


def measure(command, env):
    """(attach s, wall s, the Attached line) of one run."""
    start = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env})
    attach, attached = float("nan"), ""
    for line in proc.stderr:
        if line.startswith("Attached") and not attached:
            attach, attached = time.monotonic() - start, line.strip()
    proc.wait()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed with exit code {proc.returncode}")
    return attach, time.monotonic() - start, attached


def dry_run(command, env):
    """Wall seconds of one --dry-run."""
    start = time.monotonic()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env={**os.environ, **env})
    return time.monotonic() - start


def in_guest(tracer, runs, patterns):
    print(f"median of {runs} runs; kernel {os.uname().release}; {os.cpu_count()} CPUs")
    print("| pattern | path | probes | resolve ms | attach ms | wall ms |")
    print("|---|---|---|---:|---:|---:|")
    for pattern in patterns:
        for name, env in PATHS:
            program = f"kprobe:{pattern} {{ @ = count(); }} BEGIN {{ exit(); }}"
            resolve = statistics.median(dry_run([tracer, "--dry-run", "-e", program], env) for _ in range(runs))
            results = [measure([tracer, "-e", program], env) for _ in range(runs)]
            attach = statistics.median(r[0] for r in results)
            wall = statistics.median(r[1] for r in results)
            print(f"| `kprobe:{pattern}` | {name} | {results[0][2]} | {resolve * 1000:.0f} | {attach * 1000:.0f} "
                  f"| {wall * 1000:.0f} |", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steadytrace", default="target/release/steadytrace")
    parser.add_argument("--kernel", default="6.12")
    parser.add_argument("--in-guest", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("patterns", nargs="*", default=PATTERNS, help="kprobe wildcards (default: %(default)s)")
    args = parser.parse_args()
    tracer = os.path.abspath(args.steadytrace)
    if args.in_guest:
        in_guest(tracer, args.runs, args.patterns)
        return
    here = os.path.dirname(os.path.abspath(__file__))
    patterns = " ".join(shlex.quote(p) for p in args.patterns)
    command = f"python3 {os.path.abspath(__file__)} --in-guest --runs {args.runs} --steadytrace {tracer} {patterns}"
    run = [os.path.join(here, "..", "tests", "vm", "run"), "--kernel", args.kernel, "--cpus", "2",
           "--timeout", "3000", "--", command]
    sys.exit(subprocess.run(run).returncode)


if __name__ == "__main__":
    main()
