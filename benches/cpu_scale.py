#!/usr/bin/env python3
"""Scale: a profile probe under random flaps of many CPUs, in the x86 qemu guest with 16 and 64 vCPUs.

Software emulation (TCG) makes every time in the guest the emulator's, so this counts what can be counted:
  returns      CPU returns (a CPU brought back online after a flap)
  resampled    returns after which the CPU was sampled again by `profile:hz:99` (read from the tracer's
               `--metrics` endpoint: the CPU's latest sample time passed the moment it returned)
  missed       returns not sampled again within the limit (the emulator's 20 s)
  perf fds     the tracer's open perf events after each flap: first, largest, last (flat: no leak per flap)
  every cpu    after the last flap, with all CPUs online, every CPU sampled in the last second

Each flap takes 1 to N/4 random CPUs (never cpu0) offline together, waits, and brings them back together.

    python3 benches/cpu_scale.py [--cpus 16,64] [--flaps 100] [--steadytrace PATH] [--kernel 6.12]

The host side boots one guest per CPU count (tests/vm/run) and runs this file in it with --guest.

    python3 benches/cpu_scale.py --host-cost [--probes 1,8,32,128] [--seconds 10] [--flaps 20]

measures on the host (real time, 2 CPUs) what the hotplug thread (`steadytrace-cpus`) costs as a function of the
number of per-CPU events it keeps: K profile probes make 2K events here, as K=1 makes one per CPU on a machine of
2K CPUs. Its CPU time (schedstat, ns) while nothing changes, per second, gives the cost of the 100 looks at the
online CPUs and the 20 liveness sweeps it makes each second; while cpu1 goes offline and comes back (under the
tests' hotplug lock), the extra CPU time per return is the revival of cpu1's K events. Both are fitted as a
constant plus a cost per event, and projected to 256 CPUs.
"""
import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
import urllib.request

SCRIPT = "profile:hz:99 { @last[cpu] = nsecs; @samples[cpu] = count(); }"
PORT = 9435


def online_path(cpu):
    return f"/sys/devices/system/cpu/cpu{cpu}/online"


def set_online(cpus, value):
    for cpu in cpus:
        for _ in range(200):
            try:
                with open(online_path(cpu), "w") as f:
                    f.write(value)
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise SystemExit(f"cannot set cpu{cpu} {value}")


def scrape():
    """{map: {cpu: value}} of the @last and @samples maps."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{PORT}/metrics", timeout=30).read().decode()
    maps = {"last": {}, "samples": {}}
    for line in text.splitlines():
        m = re.match(r'steadytrace_map_(last|samples)(?:_total)?\{cpu="(\d+)"\} (\d+)', line)
        if m:
            maps[m.group(1)][int(m.group(2))] = int(m.group(3))
    return maps


def perf_fds(pid):
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:[perf_event]":
                count += 1
        except OSError:
            pass
    return count


def guest(args):
    # The guest boots with its loopback down; the metrics endpoint is read through it.
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    cpus = os.cpu_count()
    rng = random.Random(args.seed)
    tracer = subprocess.Popen([args.steadytrace, "--metrics", f"127.0.0.1:{PORT}", "-e", SCRIPT],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in tracer.stderr:
        if line.startswith("Attached"):
            break
    else:
        raise SystemExit("the tracer ended before attaching")
    fds, returns, resampled, missed = [], 0, 0, []
    fds.append(perf_fds(tracer.pid))
    for flap in range(args.flaps):
        chosen = rng.sample(range(1, cpus), rng.randint(1, max(1, cpus // 4)))
        set_online(chosen, "0")
        time.sleep(0.2)
        set_online(chosen, "1")
        back = time.monotonic_ns()
        waiting = set(chosen)
        deadline = time.monotonic() + args.limit
        while waiting and time.monotonic() < deadline:
            last = scrape()["last"]
            waiting = {cpu for cpu in waiting if last.get(cpu, 0) <= back}
            if waiting:
                time.sleep(0.1)
        returns += len(chosen)
        resampled += len(chosen) - len(waiting)
        missed += [(flap, cpu) for cpu in sorted(waiting)]
        fds.append(perf_fds(tracer.pid))
    before = scrape()["samples"]
    time.sleep(1.0)
    after = scrape()["samples"]
    silent = [cpu for cpu in range(cpus) if after.get(cpu, 0) <= before.get(cpu, 0)]
    tracer.send_signal(2)
    tracer.wait(timeout=120)
    print("RESULT " + json.dumps({
        "cpus": cpus, "flaps": args.flaps, "returns": returns, "resampled": resampled, "missed": missed,
        "perf_fds": {"first": fds[0], "max": max(fds), "last": fds[-1]}, "silent_at_end": silent,
    }))


def host(args):
    rows = []
    for cpus in [int(c) for c in args.cpus.split(",")]:
        command = [sys.executable, os.path.abspath(__file__), "--guest", "--flaps", str(args.flaps),
                   "--steadytrace", os.path.abspath(args.steadytrace), "--seed", str(args.seed)]
        run = subprocess.run(["tests/vm/run", "--kernel", args.kernel, "--cpus", str(cpus), "--timeout",
                              str(args.timeout), "--", *command], capture_output=True, text=True)
        result = next((json.loads(line[7:]) for line in run.stdout.splitlines() if line.startswith("RESULT ")), None)
        if result is None:
            print(run.stdout[-3000:], run.stderr[-3000:], file=sys.stderr)
            raise SystemExit(f"the {cpus}-CPU guest gave no result (exit {run.returncode})")
        rows.append(result)
    print(f"{'cpus':>5} {'flaps':>6} {'returns':>8} {'resampled':>10} {'missed':>7} "
          f"{'perf fds first/max/last':>24} {'every cpu at end':>17}")
    for r in rows:
        fds = r["perf_fds"]
        print(f"{r['cpus']:>5} {r['flaps']:>6} {r['returns']:>8} {r['resampled']:>10} {len(r['missed']):>7} "
              f"{str(fds['first']) + '/' + str(fds['max']) + '/' + str(fds['last']):>24} "
              f"{'yes' if not r['silent_at_end'] else 'no: ' + str(r['silent_at_end']):>17}")


def thread_ns(pid, name):
    """CPU time (ns) of the tracer's thread called `name`."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() != name[:15]:  # comm keeps 15 characters
                    continue
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                return int(f.read().split()[0])
        except OSError:
            continue
    raise SystemExit(f"no thread {name} in {pid}")


def fit(points):
    """(constant, slope) of the least-squares line through (x, y) points."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return my - slope * mx, slope


def measure_thread(tracer, args):
    """The hotplug thread's CPU time per second while nothing changes, and the median of its time in the 50 ms
    after each of `args.flaps` returns of cpu1."""
    import fcntl
    for line in tracer.stderr:
        if line.startswith("Attached"):
            break
    time.sleep(1.0)
    start = thread_ns(tracer.pid, "steadytrace-cpus")
    time.sleep(args.seconds)
    per_second = (thread_ns(tracer.pid, "steadytrace-cpus") - start) / args.seconds
    with open("/tmp/steadytrace-hotplug.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            # The thread's time in the 50 ms after each return (its baseline is taken off by the caller).
            spent = []
            for _ in range(args.flaps):
                set_online([1], "0")
                time.sleep(0.1)
                before = thread_ns(tracer.pid, "steadytrace-cpus")
                set_online([1], "1")
                time.sleep(0.05)
                spent.append(thread_ns(tracer.pid, "steadytrace-cpus") - before)
                time.sleep(0.1)
            window = statistics.median(spent)
        finally:
            set_online([1], "1")
    return per_second, window


def host_cost(args):
    cpus = os.cpu_count()
    idle, windows = [], []
    for k in [int(p) for p in args.probes.split(",")]:
        # Distinct periods, so that no two probes are one.
        script = " ".join(f"profile:us:{10007 + i} {{ @n = count(); }}" for i in range(k))
        tracer = subprocess.Popen([args.steadytrace, "-e", script], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        try:
            per_second, window = measure_thread(tracer, args)
        finally:
            tracer.send_signal(2)
            tracer.wait(timeout=60)
        events = k * cpus
        idle.append((events, per_second))
        windows.append((k, window))
    base, per_event = fit(idle)
    # In the 50 ms after its return cpu1's events are left to the check of the return, so the thread's time
    # there is the revival plus 50 ms of looks and of sweeps of cpu0's K events.
    revival = [(k, w - 0.05 * (base + per_event * k)) for k, w in windows]
    for (events, per_second), (k, per_return) in zip(idle, revival):
        print(f"probes {k:>4}  events {events:>5}  idle {per_second / 1e3:9.1f} us/s  "
              f"per return of cpu1 ({k} events) {per_return / 1e3:8.1f} us")
    print(f"idle: {base / 1e3:.1f} us/s + {per_event / 1e3:.3f} us/s per event swept "
          f"(looks at the online CPUs 100/s; sweeps 20/s, each of at most 16 CPUs' events)")
    print(f"a return: median {statistics.median(r for _, r in revival) / 1e3:.0f} us of the thread's time "
          f"(the window less its baseline; no trend with K is above this machine's noise)")
    for n in (8, 64, 256):
        swept = min(n, 16)
        print(f"  {n:>3} CPUs, one profile probe: idle {(base + per_event * swept) / 1e7:.3f}% of a CPU "
              f"(sweeping every CPU each time: {(base + per_event * n) / 1e7:.3f}%)")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--guest", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--host-cost", action="store_true", help="the hotplug thread's cost on this host")
    parser.add_argument("--probes", default="1,8,32,128")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--cpus", default="16,64")
    parser.add_argument("--flaps", type=int, default=None, help="100 in the guests, 20 on the host")
    parser.add_argument("--limit", type=float, default=20.0, help="seconds a return may wait for its sample")
    parser.add_argument("--seed", type=int, default=41)
    parser.add_argument("--kernel", default="6.12")
    parser.add_argument("--timeout", type=int, default=5400, help="seconds one guest may take")
    parser.add_argument("--steadytrace", default="target/release/steadytrace")
    args = parser.parse_args()
    if args.flaps is None:
        args.flaps = 20 if args.host_cost else 100
    (guest if args.guest else host_cost if args.host_cost else host)(args)


if __name__ == "__main__":
    main()
