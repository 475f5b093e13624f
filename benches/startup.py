#!/usr/bin/env python3
"""Start-up benchmark: steadytrace side by side with bpftrace, in one run, as root.

For each tracer and script, the median over N runs of:
  wall      the whole process, from spawn to exit
  first     spawn to the first line of the script's own output (start-up to first event;
            bpftrace's "Attaching N probes..." line does not count)
  CPU       user + system time of the process
  RSS       peak resident set size, from GNU time (apt-get install time)

    python3 benches/startup.py [--runs N] [--steadytrace PATH] [--bpftrace PATH]
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
    """(wall s, first-event s, CPU s, peak RSS KiB) of one run, timed through GNU time."""
    with tempfile.NamedTemporaryFile("r") as report:
        timed = ["/usr/bin/time", "-o", report.name, "-f", "%U %S %M"] + command
        start = time.monotonic()
        proc = subprocess.Popen(timed, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        first = float("nan")
        for line in proc.stdout:
            if first != first and not line.startswith("Attaching"):
                first = time.monotonic() - start
        proc.wait()
        wall = time.monotonic() - start
        user, system, rss = report.read().split()[-3:]
    return wall, first, float(user) + float(system), int(rss)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--steadytrace", default="target/release/steadytrace")
    parser.add_argument("--bpftrace", default=shutil.which("bpftrace"))
    args = parser.parse_args()
    if not os.path.exists("/usr/bin/time"):
        raise SystemExit("needs GNU time: apt-get install time")
    tracers = [("steadytrace", [args.steadytrace, "-q", "-e"])]
    if args.bpftrace:
        tracers.append(("bpftrace", [args.bpftrace, "-e"]))
    print(f"median of {args.runs} runs; kernel {os.uname().release}; {os.cpu_count()} CPUs")
    print(f"| tracer | script | wall ms | first event ms | CPU ms | peak RSS MiB |")
    print(f"|---|---|---:|---:|---:|---:|")
    for script in SCRIPTS:
        for name, prefix in tracers:
            runs = [measure(prefix + [script]) for _ in range(args.runs)]
            wall, first, cpu, rss = (statistics.median(r[i] for r in runs) for i in range(4))
            first_ms = "-" if first != first else f"{first * 1000:.1f}"
            print(f"| {name} | `{script}` | {wall * 1000:.1f} | {first_ms} | {cpu * 1000:.0f} | {rss / 1024:.1f} |")


if __name__ == "__main__":
    main()
