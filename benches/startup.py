#!/usr/bin/env python3
"""Start-up benchmark: steadytrace side by side with bpftrace (and the static build, given --static), in one
run, as root.

For each tracer and script, the median over N runs of:
  wall      the whole process, from spawn to exit
  first     spawn to the first line of the script's own output (start-up to first event;
            bpftrace's "Attaching N probes..." line does not count)
  CPU       user + system time of the process (wait4)
  RSS       peak resident set size, from GNU time (apt-get install time): a small C parent, so
            that the memory of this Python process does not count in the child's high-water mark

    python3 benches/startup.py [--runs N] [--steadytrace PATH] [--static PATH] [--bpftrace PATH]

--static: the binary of scripts/build-static (target/x86_64-unknown-linux-gnu/release/steadytrace).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time

SCRIPTS = [
    'BEGIN { printf("x\\n"); exit(); }',
    "BEGIN { exit(); }",
    'interval:ms:100 { printf("x\\n"); exit(); }',
]


def measure(command):
    """(wall s, first-event s, CPU s) of one run."""
    start = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    first = float("nan")
    for line in proc.stdout:
        if first != first and line.strip() and not line.startswith("Attaching"):
            first = time.monotonic() - start
    _, _, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    return wall, first, usage.ru_utime + usage.ru_stime


def peak_rss_kib(command):
    with tempfile.NamedTemporaryFile("r") as report:
        subprocess.run(["/usr/bin/time", "-o", report.name, "-f", "%M"] + command,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return int(report.read().split()[-1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--steadytrace", default="target/release/steadytrace")
    parser.add_argument("--static", help="the static build's binary, measured beside the others")
    parser.add_argument("--bpftrace", default=shutil.which("bpftrace"))
    args = parser.parse_args()
    if not os.path.exists("/usr/bin/time"):
        raise SystemExit("needs GNU time: apt-get install time")
    tracers = [("steadytrace", [args.steadytrace, "-q", "-e"])]
    if args.static:
        tracers.append(("steadytrace static", [args.static, "-q", "-e"]))
    if args.bpftrace:
        tracers.append(("bpftrace", [args.bpftrace, "-e"]))
    print(f"median of {args.runs} runs; kernel {os.uname().release}; {os.cpu_count()} CPUs")
    for name, prefix in tracers:
        print(f"{name}: {prefix[0]}, {os.path.getsize(prefix[0]):,} bytes")
    print(f"| tracer | script | wall ms | first event ms | CPU ms | peak RSS MiB |")
    print(f"|---|---|---:|---:|---:|---:|")
    for script in SCRIPTS:
        for name, prefix in tracers:
            runs = [measure(prefix + [script]) for _ in range(args.runs)]
            wall, first, cpu = (statistics.median(r[i] for r in runs) for i in range(3))
            rss = statistics.median(peak_rss_kib(prefix + [script]) for _ in range(3))
            first_ms = "-" if first != first else f"{first * 1000:.1f}"
            print(f"| {name} | `{script}` | {wall * 1000:.1f} | {first_ms} | {cpu * 1000:.1f} | {rss / 1024:.1f} |")


if __name__ == "__main__":
    main()
