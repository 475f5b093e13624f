#!/usr/bin/env python3
"""Interval accuracy: steadytrace's timer thread, steadytrace's perf engine and bpftrace's interval,
side by side in one run, as root. Timestamps are taken in BPF (`nsecs`) at each firing.

For `interval:ms:10` over N periods: jitter = |gap between firings - 10 ms| (p50 / p99 / max), and
periods without a firing (missed), on an idle machine and with both CPUs kept busy.

    python3 benches/timer.py [--periods N] [--steadytrace PATH] [--bpftrace PATH]
"""
import argparse
import os
import shutil
import subprocess
import time

PERIOD_MS = 10


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p / 100))]


def measure(command, periods):
    """(firings, jitter in µs, periods the tracer itself reported as skipped)."""
    script = f'interval:ms:{PERIOD_MS} {{ printf("%lu\\n", nsecs); }} interval:ms:{PERIOD_MS * periods + PERIOD_MS // 2} {{ exit(); }}'
    start = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    done = subprocess.run(command + [script], capture_output=True, text=True)
    end = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    # Sorted: bpftrace's per-CPU output buffers do not keep the order of events across CPUs. A number
    # outside the run cannot be a timestamp of it (bpftrace now and then prints one): left out.
    stamps = sorted(n for n in (int(w) for w in done.stdout.split() if w.isdigit()) if start <= n <= end)
    gaps = [(b - a) / 1000 for a, b in zip(stamps, stamps[1:])]
    jitter = [abs(g - PERIOD_MS * 1000) for g in gaps]
    reported = sum(int(line.split()[2]) for line in done.stderr.splitlines() if "periods skipped" in line or "period skipped" in line)
    return len(stamps), jitter, reported


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--periods", type=int, default=1000)
    parser.add_argument("--steadytrace", default="target/release/steadytrace")
    parser.add_argument("--bpftrace", default=shutil.which("bpftrace"))
    args = parser.parse_args()
    engines = [
        ("steadytrace (timer thread)", [args.steadytrace, "-q", "-e"]),
        ("steadytrace --interval-engine perf", [args.steadytrace, "-q", "--interval-engine", "perf", "-e"]),
    ]
    if args.bpftrace:
        engines.append(("bpftrace", [args.bpftrace, "-e"]))
    print(f"interval:ms:{PERIOD_MS}, {args.periods} periods; kernel {os.uname().release}; {os.cpu_count()} CPUs")
    print("| load | engine | firings | jitter p50 / p99 / max (µs) | missed | of which reported |")
    print("|---|---|---:|---|---:|---:|")
    for load in ["idle", "2 busy processes"]:
        spinners = []
        if load != "idle":
            spinners = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(2)]
        try:
            for name, command in engines:
                fired, jitter, reported = measure(command, args.periods)
                summary = f"{percentile(jitter, 50):.1f} / {percentile(jitter, 99):.1f} / {max(jitter):.1f}" if jitter else "-"
                print(f"| {load} | {name} | {fired} | {summary} | {max(0, args.periods - fired)} | {reported} |")
        finally:
            for s in spinners:
                s.kill()


if __name__ == "__main__":
    main()
