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
    python3 benches/startup.py --floor "$(benches/floor.sh)" [--runs N] [--static PATH] ...

--static: the binary of scripts/build-static (target/x86_64-unknown-linux-gnu/release/steadytrace).
--floor: the binary of benches/floor.sh (benches/floor.c: the least a tracer must do for the two BEGIN scripts,
  raw bpf() calls in a static C program). Measures only the two BEGIN scripts, each tracer's runs interleaved
  (floor, static, dynamic, bpftrace, floor, ...) so that a drifting machine moves all of them, and prints each
  figure as a multiple of the floor's; the floor's `nothing` row is the process alone (exec, exit), the
  measure's own floor. Peak RSS is then the median of all N runs.
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
    return rss_and_faults(command)[0]


def rss_and_faults(command):
    """(peak RSS KiB, minor page faults) of one run, from GNU time."""
    with tempfile.NamedTemporaryFile("r") as report:
        subprocess.run(["/usr/bin/time", "-o", report.name, "-f", "%M %R"] + command,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rss, faults = report.read().split()[-2:]
        return int(rss), int(faults)


def floor_table(args, tracers):
    """The two BEGIN scripts, runs interleaved, beside the floor (benches/floor.c)."""
    scripts = [(SCRIPTS[0], "printf"), (SCRIPTS[1], "exit")]
    rows = [("floor", "(the process alone)", [args.floor, "nothing"])]
    for script, mode in scripts:
        rows.append(("floor", script, [args.floor, mode]))
        rows.extend((name, script, prefix + [script]) for name, prefix in tracers)
    figures = {index: [] for index in range(len(rows))}
    for _ in range(args.runs):
        for index, (_, _, command) in enumerate(rows):
            wall, _, cpu = measure(command)
            figures[index].append((wall, cpu) + rss_and_faults(command))
    medians = [tuple(statistics.median(f[i] for f in figures[index]) for i in range(4)) for index in figures]
    floors = {script: medians[index] for index, (name, script, _) in enumerate(rows) if name == "floor"}
    print("| tracer | script | wall ms | CPU ms | peak RSS MiB | page faults | × floor (wall, CPU, RSS) |")
    print("|---|---|---:|---:|---:|---:|---|")
    for (name, script, _), (wall, cpu, rss, faults) in zip(rows, medians):
        shown = script if script.startswith("(") else f"`{script}`"
        base = floors[script]
        times = "" if name == "floor" else f"{wall / base[0]:.2f}, {cpu / base[1]:.2f}, {rss / base[2]:.2f}"
        print(f"| {name} | {shown} | {wall * 1000:.2f} | {cpu * 1000:.2f} | {rss / 1024:.2f} | {faults:.0f} | {times} |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--steadytrace", default="target/release/steadytrace")
    parser.add_argument("--static", help="the static build's binary, measured beside the others")
    parser.add_argument("--bpftrace", default=shutil.which("bpftrace"))
    parser.add_argument("--floor", help="the binary of benches/floor.sh: the two BEGIN scripts beside it")
    parser.add_argument("--also", action="append", default=[], metavar="PATH",
                        help="another steadytrace binary measured beside the others (a build before a change)")
    args = parser.parse_args()
    if not os.path.exists("/usr/bin/time"):
        raise SystemExit("needs GNU time: apt-get install time")
    tracers = [("steadytrace", [args.steadytrace, "-q", "-e"])]
    if args.static:
        tracers.append(("steadytrace static", [args.static, "-q", "-e"]))
    tracers.extend((os.path.basename(path), [path, "-q", "-e"]) for path in args.also)
    if args.bpftrace:
        tracers.append(("bpftrace", [args.bpftrace, "-e"]))
    print(f"median of {args.runs} runs; kernel {os.uname().release}; {os.cpu_count()} CPUs")
    for name, prefix in tracers:
        print(f"{name}: {prefix[0]}, {os.path.getsize(prefix[0]):,} bytes")
    if args.floor:
        print(f"floor: {args.floor}, {os.path.getsize(args.floor):,} bytes")
        floor_table(args, tracers)
        return
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
