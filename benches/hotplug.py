#!/usr/bin/env python3
"""Hotplug benchmark: how long a CPU that comes back stays uncovered by a profile probe,
steadytrace side by side with bpftrace, in one run, as root (needs cpu1 hotplug).

cpu1 is kept busy by a spinner that pins itself to cpu1 again every 0.2 ms (the kernel drops the
pinning when cpu1 goes offline), so that it is back on cpu1 within 0.2 ms of its return and the
workload is not what is measured. A `profile:hz:1000 /cpu == 1/` probe prints a timestamp per sample.
cpu1 goes offline and online N times; for each return, measured from the moment the `online` write
returns: the delay to the first sample on cpu1, and how many of the 20 samples due in the first 20 ms
were taken. The first return of a run is also shown alone: steadytrace checks there whether the kernel
revives re-enabled events (docs/HOTPLUG.md).

    python3 benches/hotplug.py [--cycles N] [--steadytrace PATH] [--bpftrace PATH]
"""
import argparse
import fcntl
import os
import shutil
import statistics
import subprocess
import threading
import time

ONLINE = "/sys/devices/system/cpu/cpu1/online"
# The lock the tests take before changing CPU state: a benchmark never flaps cpu1 under a running test.
HOTPLUG_LOCK = "/tmp/steadytrace-hotplug.lock"
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


# Spins, and pins itself to cpu1 again every 0.2 ms (failing harmlessly while cpu1 is offline).
SPINNER = """
import os, time
last = 0
while True:
    now = time.monotonic_ns()
    if now - last >= 200_000:
        try:
            os.sched_setaffinity(0, {1})
        except OSError:
            pass
        last = now
"""


def spinner(stop):
    """A busy process on cpu1 until `stop` is set."""
    proc = subprocess.Popen(["python3", "-c", SPINNER])
    stop.wait()
    proc.kill()
    proc.wait()


FIRST_MS = 20


def describe(delays, taken):
    """Median and max delay, and the share of the samples due in the first FIRST_MS ms that were taken."""
    covered = [d for d in delays if d is not None]
    if not covered:
        return "never", "0%"
    delay = f"median {statistics.median(covered):.2f} ms, max {max(covered):.2f} ms"
    return delay, f"{100 * sum(taken) / (FIRST_MS * len(taken)):.1f}%"


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
    delays, taken = [], []
    for back in returns:
        after = [t for t in samples if t > back]
        delays.append((min(after) - back) / 1e6 if after else None)
        # At most one per millisecond: a sample more would be one of the next period's.
        taken.append(min(FIRST_MS, sum(1 for t in after if t <= back + FIRST_MS * 1_000_000)))
    sampled = sum(1 for d in delays if d is not None)
    delay, share = describe(delays, taken)
    first_delay, first_share = describe(delays[:1], taken[:1])
    later_delay, later_share = describe(delays[1:], taken[1:])
    print(f"| {name} | {sampled} of {cycles} | {delay} | {share} | {first_delay}, {first_share} | {later_delay}, {later_share} |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--steadytrace", default="target/release/steadytrace")
    parser.add_argument("--bpftrace", default=shutil.which("bpftrace"))
    parser.add_argument("--timer-priority", type=int, default=None,
                        help="passed to steadytrace (its hotplug and timer threads' SCHED_FIFO priority)")
    args = parser.parse_args()
    lock = open(HOTPLUG_LOCK, "a")
    fcntl.flock(lock, fcntl.LOCK_EX)
    print(f"cpu1 offline 200 ms then online, {args.cycles} times; kernel {os.uname().release}")
    print(
        "| tracer | returns after which cpu1 was sampled again | delay to the first sample |"
        f" samples of the first {FIRST_MS} ms taken | first return | later returns |"
    )
    print("|---|---|---|---|---|---|")
    priority = [] if args.timer_priority is None else ["--timer-priority", str(args.timer_priority)]
    run("steadytrace", [args.steadytrace, "-q", *priority, "-e", SCRIPT], args.cycles)
    if args.bpftrace:
        run("bpftrace", [args.bpftrace, "-e", SCRIPT], args.cycles)


if __name__ == "__main__":
    main()
