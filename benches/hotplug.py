#!/usr/bin/env python3
"""Hotplug benchmark: how long a CPU that comes back stays uncovered by a profile probe,
steadytrace side by side with bpftrace, in one run, as root (needs cpu1 hotplug).

cpu1 is kept busy; a `profile:hz:1000 /cpu == 1/` probe prints a timestamp per sample. cpu1 goes
offline and online N times; for each return the delay to the first sample on cpu1 is measured.

    python3 benches/hotplug.py [--cycles N] [--steadytrace PATH] [--bpftrace PATH]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import threading
import time

ONLINE = "/sys/devices/system/cpu/cpu1/online"
SCRIPT = 'profile:hz:1000 /cpu == 1/ { printf("%lu\\n", nsecs); }'


def set_online(value):
    for _ in range(100):
        try:
            with open(ONLINE, "w") as f:
                f.write(value)
            return
        except OSError:
            time.sleep(0.01)
    raise SystemExit("cannot change cpu1")


def spinner(stop):
    """A busy process pinned to cpu1, re-pinned after each return (the kernel drops the pinning)."""
    proc = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    while not stop.is_set():
        try:
            os.sched_setaffinity(proc.pid, {1})
        except OSError:
            pass
        time.sleep(0.002)
    proc.kill()


def run(name, command, cycles):
    stop = threading.Event()
    spin = threading.Thread(target=spinner, args=(stop,))
    spin.start()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    samples = []
    reader = threading.Thread(target=lambda: samples.extend(int(l) for l in proc.stdout if l.strip().isdigit()))
    reader.start()
    time.sleep(1.5)
    returns = []
    try:
        for _ in range(cycles):
            set_online("0")
            time.sleep(0.2)
            set_online("1")
            returns.append(time.clock_gettime_ns(time.CLOCK_MONOTONIC))
            time.sleep(0.3)
    finally:
        set_online("1")
        proc.terminate()
        proc.wait()
        reader.join()
        stop.set()
        spin.join()
    delays = []
    for back in returns:
        after = [t for t in samples if t > back]
        delays.append((min(after) - back) / 1e6 if after else None)
    covered = [d for d in delays if d is not None]
    if covered:
        summary = f"median {statistics.median(covered):.1f} ms, max {max(covered):.1f} ms"
    else:
        summary = "never"
    print(f"| {name} | {len(covered)} of {cycles} | {summary} |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--steadytrace", default="target/release/steadytrace")
    parser.add_argument("--bpftrace", default=shutil.which("bpftrace"))
    args = parser.parse_args()
    print(f"cpu1 offline 200 ms then online, {args.cycles} times; kernel {os.uname().release}")
    print("| tracer | returns after which cpu1 was sampled again | delay to the first sample |")
    print("|---|---|---|")
    run("steadytrace", [args.steadytrace, "-q", "-e", SCRIPT], args.cycles)
    if args.bpftrace:
        run("bpftrace", [args.bpftrace, "-e", SCRIPT], args.cycles)


if __name__ == "__main__":
    main()
