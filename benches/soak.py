#!/usr/bin/env python3
"""Soak: one steadytrace run under N minutes of random cpu1 flaps, as root (needs cpu1 hotplug).

cpu1 goes offline for a random 20-300 ms, online for a random 20-300 ms, again and again, while one tracer runs
  interval:ms:10        printf of its firing time (nsecs)
  profile:hz:1000       printf of cpu and nsecs
  tracepoint:syscalls:sys_enter_getppid, counted per workload process (batches of a known number of calls)
  END                   printf of a marker
cpu1 is kept busy by a spinner that pins itself to cpu1 again every 0.2 ms (the kernel drops the pinning when cpu1
goes offline). Every 10 s the tracer's RSS, open fds and the BPF programs, maps and links it holds are sampled.
At the end the tracer gets SIGINT; END must run, the exit status be 0 and every BPF object it held be gone.

Reported (Markdown on stdout, everything with --json FILE):
- interval firings against the periods due between the first and the last firing; lost = due - fired - skipped,
  skipped as the tracer reports it at exit ("N periods skipped");
- the largest gap between firings per second of the run; every late period (gap > 1.5 periods) and whether a
  write to cpu1's `online` file overlapped it;
- whether cpu1 was sampled in each of its online windows (from the `online` write's return to the next offline
  write) longer than 5 ms, and the delay from each return to the first sample on cpu1;
- the tracepoint counts against the calls made; printf records lost ("Lost N events", "N output records lost");
- RSS, fds and BPF objects over time (flat = no leak); the load average during the run.

The whole soak holds the tests' hotplug lock, and cpu1 is put back online at the end, also on error or Ctrl-C.

    python3 benches/soak.py [--minutes 10] [--seed S] [--json FILE] [--steadytrace PATH] [--workload PATH]
"""
import argparse
import bisect
import ctypes
import fcntl
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

# The spinner that re-pins itself to cpu1, and the lock every user of CPU hotplug here holds.
from hotplug import HOTPLUG_LOCK, SPINNER

ONLINE = "/sys/devices/system/cpu/cpu1/online"
PERIOD_NS = 10_000_000
LATE_NS = PERIOD_NS * 3 // 2
WINDOW_MIN_NS = 5_000_000
BATCH_CALLS = 200_000
BATCH_EVERY_S = 2.0
SAMPLE_EVERY_S = 10.0
END_MARKER = "SOAK-END-RAN"
# What -v says about hotplug (kept out of the stderr shown in the report).
VERBOSE_LINE = re.compile(r"cpu\d+:? (went offline|came|cannot open)| runs on |revival|reopen|moved from", re.I)

SCRIPT = f"""
interval:ms:10 {{ printf("I %lu\\n", nsecs); }}
profile:hz:1000 {{ printf("P %d %lu\\n", cpu, nsecs); }}
tracepoint:syscalls:sys_enter_getppid /comm == "workload"/ {{ @getppid[pid] = count(); }}
END {{ printf("{END_MARKER}\\n"); }}
"""


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)  # the clock of BPF's nsecs


def set_online(value):
    """Writes cpu1's online file; returns (write started, write returned)."""
    for _ in range(100):
        start = now_ns()
        try:
            with open(ONLINE, "w") as f:
                f.write(value)
            return start, now_ns()
        except OSError:
            time.sleep(0.01)
    raise RuntimeError(f"cannot write {value} to {ONLINE}")


def cpu1_online():
    with open(ONLINE) as f:
        return f.read().strip() == "1"


# --- The kernel's BPF objects held by a process -------------------------------------------------------------

SYS_BPF = 321  # x86_64
GET_FD_BY_ID = {"prog": 13, "map": 14, "link": 30}
libc = ctypes.CDLL(None, use_errno=True)


def bpf_object_exists(kind, ident):
    """Whether the kernel still has the BPF program/map/link with this id (BPF_*_GET_FD_BY_ID)."""
    attr = (ctypes.c_uint32 * 4)(ident, 0, 0, 0)
    fd = libc.syscall(SYS_BPF, GET_FD_BY_ID[kind], ctypes.byref(attr), ctypes.sizeof(attr))
    if fd >= 0:
        os.close(fd)
        return True
    return ctypes.get_errno() != 2  # ENOENT: gone; any other error: unknown, count as present


def held_objects(pid):
    """fd count, perf events and the ids of the BPF programs, maps and links open in `pid`."""
    ids = {"prog": set(), "map": set(), "link": set()}
    fds = perf = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        fds += 1
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if "perf_event" in target:
                perf += 1
            if "bpf" not in target:
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = f.read()
        except OSError:
            continue  # closed meanwhile
        for kind in ids:
            m = re.search(rf"^{kind}_id:\s*(\d+)", info, re.M)
            if m:
                ids[kind].add(int(m.group(1)))
    return fds, perf, ids


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"^VmRSS:\s*(\d+)", f.read(), re.M).group(1))


# --- The run ---------------------------------------------------------------------------------------------------


class Soak:
    def __init__(self, args):
        self.args = args
        self.intervals = []  # nsecs of each firing
        self.cpu1 = []  # nsecs of each profile sample on cpu1
        self.samples_per_cpu = {}
        self.end_seen = False
        self.map_counts = {}  # pid -> count printed at exit
        self.other_out = []
        self.stderr = []  # (time, line)
        self.flaps = []  # {"offline": (start, end), "online": (start, end)}
        self.batches = []  # (pid, calls, exit status)
        self.resources = []
        self.all_ids = {"prog": set(), "map": set(), "link": set()}
        self.stop = threading.Event()

    def read_stdout(self, stream):
        for line in stream:
            if line.startswith("I "):
                self.intervals.append(int(line[2:]))
            elif line.startswith("P "):
                cpu, t = line[2:].split()
                self.samples_per_cpu[cpu] = self.samples_per_cpu.get(cpu, 0) + 1
                if cpu == "1":
                    self.cpu1.append(int(t))
            elif line.startswith(END_MARKER):
                self.end_seen = True
            elif m := re.match(r"@getppid\[(\d+)\]: (\d+)", line):
                self.map_counts[int(m.group(1))] = int(m.group(2))
            elif line.strip():
                self.other_out.append(line.rstrip("\n"))

    def read_stderr(self, stream):
        for line in stream:
            self.stderr.append((now_ns(), line.rstrip("\n")))

    def spinner(self):
        proc = subprocess.Popen([sys.executable, "-c", SPINNER])
        self.stop.wait()
        proc.kill()
        proc.wait()

    def workload(self):
        """Batches of BATCH_CALLS getppid calls on 2 threads (pinned to cpu0 and cpu1), one every BATCH_EVERY_S."""
        while not self.stop.wait(BATCH_EVERY_S):
            proc = subprocess.Popen([self.args.workload, "getppid", str(BATCH_CALLS), "2"])
            self.batches.append([proc.pid, BATCH_CALLS, proc.wait()])

    def sample(self, pid, t0):
        fds, perf, ids = held_objects(pid)
        for kind in ids:
            self.all_ids[kind] |= ids[kind]
        with open("/proc/loadavg") as f:
            load = f.read().split()[:3]
        self.resources.append({
            "t_s": round((now_ns() - t0) / 1e9, 1), "rss_kib": rss_kib(pid), "fds": fds, "perf_events": perf,
            "progs": len(ids["prog"]), "maps": len(ids["map"]), "links": len(ids["link"]),
            "loadavg": " ".join(load),
        })

    def flap_until(self, deadline, pid, t0):
        rng = random.Random(self.args.seed)
        next_sample = time.monotonic() + SAMPLE_EVERY_S
        while time.monotonic() < deadline:
            offline = set_online("0")
            time.sleep(rng.uniform(0.020, 0.300))
            online = set_online("1")
            self.flaps.append({"offline": offline, "online": online})
            time.sleep(rng.uniform(0.020, 0.300))
            if time.monotonic() >= next_sample:
                self.sample(pid, t0)
                next_sample += SAMPLE_EVERY_S

    def run(self):
        cmd = [self.args.steadytrace, "-q", "-v", "-e", SCRIPT]
        self.command = " ".join(sys.argv)
        threads = [threading.Thread(target=self.spinner)]
        threads[0].start()
        tracer = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1 << 20)
        readers = [threading.Thread(target=self.read_stdout, args=(tracer.stdout,)),
                   threading.Thread(target=self.read_stderr, args=(tracer.stderr,))]
        for r in readers:
            r.start()
        try:
            time.sleep(1.0)  # attached
            if tracer.poll() is not None:
                raise RuntimeError(f"tracer exited early ({tracer.returncode}): {self.stderr}")
            t0 = now_ns()
            self.start_ns = t0
            self.sample(tracer.pid, t0)
            work = threading.Thread(target=self.workload)
            work.start()
            threads.append(work)
            self.flap_until(time.monotonic() + self.args.minutes * 60, tracer.pid, t0)
            self.stop.set()
            work.join()  # the last batch has exited
            time.sleep(0.5)  # cpu1 online, covered again before the end
            self.sample(tracer.pid, t0)
            self.end_ns = now_ns()
        finally:
            if not cpu1_online():
                set_online("1")
            self.stop.set()
            tracer.send_signal(signal.SIGINT)
            try:
                self.exit_status = tracer.wait(timeout=30)
            except subprocess.TimeoutExpired:
                tracer.kill()
                self.exit_status = f"killed after 30 s (SIGINT ignored): {tracer.wait()}"
            for t in readers + threads:
                t.join()
        # Freeing a BPF object waits for an RCU grace period: give the kernel a moment.
        for _ in range(50):
            left = {k: sorted(i for i in ids if bpf_object_exists(k, i)) for k, ids in self.all_ids.items()}
            if not any(left.values()):
                break
            time.sleep(0.1)
        self.objects_left = left


# --- The report ------------------------------------------------------------------------------------------------


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def summary(values):
    if not values:
        return None
    return {"min": round(min(values), 2), "median": round(statistics.median(values), 2),
            "p99": round(percentile(values, 99), 2), "max": round(max(values), 2)}


def deadline_slots(fired):
    """The phase of the deadlines, and the number of the deadline each firing served.

    The timer thread fires at start + k periods (CLOCK_MONOTONIC, the clock of nsecs); a firing comes some µs
    after its deadline (and is the only firing of every deadline it passed, the skipped ones). The phase of
    the deadlines is taken as the least late firing of the whole run, so that a slot is the last deadline a
    firing had passed, and a missing slot is a period with no firing of its own."""
    if not fired:
        return 0, []
    t0 = fired[0]
    folded = [(t - t0) % PERIOD_NS for t in fired]
    typical = sorted(folded)[len(folded) // 2]
    # Offsets around the typical one; a firing comes at most ~1 ms earlier than a typical one (it waits for
    # its deadline), so anything earlier than that is a firing late by more than half a period.
    around = [((o - typical + PERIOD_NS // 2) % PERIOD_NS) - PERIOD_NS // 2 for o in folded]
    phase = t0 + typical + min(a for a in around if a > -1_000_000)
    return phase, [(t - phase) // PERIOD_NS for t in fired]


def cpu1_state(flaps, t):
    """Whether cpu1 was offline or online at `t` (between the writes that changed it)."""
    for f in flaps:
        if f["offline"][1] <= t < f["online"][0]:
            return "offline"
    return "online"


def overlaps_flap(flaps, a, b):
    """The flap writes (offline/online, start, end) overlapping [a, b]."""
    return [(kind, s, e) for f in flaps for kind, (s, e) in f.items() if s <= b and e >= a]


def analyse(soak):
    r = {"command": soak.command, "kernel": os.uname().release, "minutes": soak.args.minutes,
         "seed": soak.args.seed, "flaps": len(soak.flaps)}
    start, end = soak.start_ns, soak.end_ns

    # Interval: firings between start and end (the window flapping + settling).
    fired = [t for t in soak.intervals if start <= t <= end]
    all_fired = soak.intervals
    skipped = sum(int(m.group(1)) for _, l in soak.stderr
                  if (m := re.search(r"interval:ms:10: (\d+) periods? skipped", l)))
    gaps = [(a, b) for a, b in zip(all_fired, all_fired[1:])]
    phase, slots = deadline_slots(all_fired)
    due = slots[-1] - slots[0] + 1 if slots else 0  # the deadlines from the first firing's to the last's
    late = []
    for (a, b), (sa, sb) in zip(gaps, zip(slots, slots[1:])):
        if b - a > LATE_NS:
            writes = overlaps_flap(soak.flaps, a, b)
            late.append({"at_s": round((a - start) / 1e9, 3), "gap_ms": round((b - a) / 1e6, 2),
                         "late_ms": round((b - phase - sb * PERIOD_NS) / 1e6, 2),
                         "periods_without_firing": sb - sa - 1,
                         "flap_write": ", ".join(sorted({k for k, _, _ in writes}))
                         or f"none (cpu1 {cpu1_state(soak.flaps, b)})"})
    per_second = {}
    for a, b in gaps:
        sec = (b - start) // 1_000_000_000
        per_second[sec] = max(per_second.get(sec, 0), b - a)
    r["interval"] = {
        "fired_total": len(all_fired), "fired_during_soak": len(fired), "due": due, "skipped_reported": skipped,
        "lost": due - len(all_fired) - skipped,
        "periods_without_firing": sum(b - a - 1 for a, b in zip(slots, slots[1:])),
        "late": late, "late_count": len(late),
        "late_with_flap": sum(1 for l in late if not l["flap_write"].startswith("none")),
        "max_gap_ms": round(max(b - a for a, b in gaps) / 1e6, 2) if gaps else None,
        "per_second_max_gap_ms": {int(s): round(g / 1e6, 2) for s, g in sorted(per_second.items())},
    }

    # Profile: coverage of cpu1's online windows and the revival delay per return.
    cpu1 = soak.cpu1
    windows, delays, uncovered, flap_log = 0, [], [], []
    reopened = [t for t, line in soak.stderr if "cpu1 came back online" in line]
    for i, f in enumerate(soak.flaps):
        back = f["online"][1]
        until = soak.flaps[i + 1]["offline"][0] if i + 1 < len(soak.flaps) else end
        j = bisect.bisect_right(cpu1, back)
        first = cpu1[j] if j < len(cpu1) else None
        if first is not None and first <= until:
            delays.append((first - back) / 1e6)
        in_window = bisect.bisect_right(cpu1, until) - j
        # The tracer's -v line saying it reopened cpu1's events (arrival time on our side of the pipe).
        said = next((t for t in reopened if t > f["online"][0]), None)
        flap_log.append({"offline_write_s": [round((t - start) / 1e9, 4) for t in f["offline"]],
                         "online_write_s": [round((t - start) / 1e9, 4) for t in f["online"]],
                         "first_sample_ms": round((first - back) / 1e6, 2) if first is not None else None,
                         "window_ms": round((until - back) / 1e6, 1), "samples_in_window": in_window,
                         "reopen_said_ms": round((said - back) / 1e6, 2) if said is not None else None})
        if until - back > WINDOW_MIN_NS:
            windows += 1
            if first is None or first > until:
                nxt = soak.flaps[i + 1]["offline"] if i + 1 < len(soak.flaps) else None
                uncovered.append({
                    "flap": i, "at_s": round((back - start) / 1e9, 3), "window_ms": round((until - back) / 1e6, 1),
                    "first_sample_after_return_ms": round((first - back) / 1e6, 1) if first is not None else None,
                    "next_offline_write_ms": round((nxt[1] - nxt[0]) / 1e6, 1) if nxt else None,
                    "online_write_ms": round((f["online"][1] - f["online"][0]) / 1e6, 1),
                    "reopen_said_ms": flap_log[-1]["reopen_said_ms"]})
    r["profile"] = {
        "samples_per_cpu": soak.samples_per_cpu, "windows_over_5ms": windows, "windows_uncovered": uncovered,
        "returns": len(soak.flaps), "returns_sampled": len(delays), "flap_log": flap_log,
        "reopen_said_ms": summary([f["reopen_said_ms"] for f in flap_log if f["reopen_said_ms"] is not None]),
        "revival_ms": summary(delays),
        "online_write_ms": {"median": round(statistics.median((f["online"][1] - f["online"][0]) / 1e6
                                                               for f in soak.flaps), 1),
                            "max": round(max((f["online"][1] - f["online"][0]) / 1e6 for f in soak.flaps), 1)},
        "offline_write_ms": {"median": round(statistics.median((f["offline"][1] - f["offline"][0]) / 1e6
                                                                for f in soak.flaps), 1),
                             "max": round(max((f["offline"][1] - f["offline"][0]) / 1e6 for f in soak.flaps), 1)},
    }

    # Tracepoint: every workload process counted exactly. pids wrap (pid_max 32768 and builds beside): the
    # batches that had the same pid share its count.
    expected = {}
    for pid, calls, status in soak.batches:
        expected[pid] = expected.get(pid, 0) + calls
    wrong = [{"pid": pid, "calls": calls, "counted": soak.map_counts.get(pid)}
             for pid, calls in expected.items() if soak.map_counts.get(pid) != calls]
    wrong += [{"pid": pid, "exit_status": status} for pid, _, status in soak.batches if status != 0]
    r["tracepoint"] = {"batches": len(soak.batches), "pids_reused": len(soak.batches) - len(expected),
                       "calls": sum(expected.values()),
                       "counted": sum(soak.map_counts.get(p, 0) for p in expected), "wrong": wrong}

    lost_live = sum(int(m.group(1)) for _, l in soak.stderr if (m := re.match(r"Lost (\d+) events", l)))
    lost_exit = sum(int(m.group(1)) for _, l in soak.stderr if (m := re.search(r"(\d+) output records? lost", l)))
    r["printf"] = {"records": len(soak.intervals) + sum(soak.samples_per_cpu.values()),
                   "lost_reported_live": lost_live, "lost_reported_at_exit": lost_exit}
    r["resources"] = soak.resources
    r["exit"] = {"status": soak.exit_status, "end_ran": soak.end_seen,
                 "objects_held": {k: len(v) for k, v in soak.all_ids.items()}, "objects_left": soak.objects_left,
                 "stderr": [l for _, l in soak.stderr if not VERBOSE_LINE.search(l)],
                 "other_stdout": soak.other_out[:20]}
    return r


def markdown(r):
    out = [f"## Soak: {r['minutes']} min, {r['flaps']} flaps of cpu1, kernel {r['kernel']}", "",
           f"`{r['command']}` (seed {r['seed']})", ""]
    loads = [float(s["loadavg"].split()[0]) for s in r["resources"]]
    if loads:
        out += [f"Load average (1 min) during the run: {min(loads)}–{max(loads)}, "
                f"median {statistics.median(loads)}", ""]
    i = r["interval"]
    out += ["### interval:ms:10", "", "| due | fired | skipped (reported) | lost | periods without a firing (seen) "
            "| late (gap > 15 ms) | late during a write to `online` | max gap |", "|---:|---:|---:|---:|---:|---:|---:|---:|",
            f"| {i['due']} | {i['fired_total']} | {i['skipped_reported']} | {i['lost']} | {i['periods_without_firing']} "
            f"| {i['late_count']} | {i['late_with_flap']} | {i['max_gap_ms']} ms |", ""]
    buckets = [(11, "≤ 11 ms"), (15, "11–15 ms"), (20, "15–20 ms"), (50, "20–50 ms"), (float("inf"), "> 50 ms")]
    counts = {label: 0 for _, label in buckets}
    for g in i["per_second_max_gap_ms"].values():
        counts[next(label for limit, label in buckets if g <= limit)] += 1
    out += ["Largest gap between firings, per second of the run:", "",
            "| " + " | ".join(counts) + " |", "|" + "---:|" * len(counts),
            "| " + " | ".join(str(c) for c in counts.values()) + " |", ""]
    if i["late"]:
        out += ["Late periods:", "",
                "| at s | gap ms | late by ms | periods without a firing | overlapping write to `online` |",
                "|---:|---:|---:|---:|---|"]
        out += [f"| {l['at_s']} | {l['gap_ms']} | {l['late_ms']} | {l['periods_without_firing']} | {l['flap_write']} |"
                for l in i["late"]]
        out.append("")
    p = r["profile"]
    rv = p["revival_ms"] or {}
    out += ["### profile:hz:1000 on cpu1", "",
            "| returns | sampled again | online windows > 5 ms | not sampled | revival min / median / p99 / max "
            "| online write median / max | offline write median / max |",
            "|---:|---:|---:|---:|---|---|---|",
            f"| {p['returns']} | {p['returns_sampled']} | {p['windows_over_5ms']} | {len(p['windows_uncovered'])} "
            f"| {rv.get('min')} / {rv.get('median')} / {rv.get('p99')} / {rv.get('max')} ms "
            f"| {p['online_write_ms']['median']} / {p['online_write_ms']['max']} ms "
            f"| {p['offline_write_ms']['median']} / {p['offline_write_ms']['max']} ms |", "",
            f"Samples per CPU: {p['samples_per_cpu']}. The tracer's `-v` line \"cpu1 came back online\" arrived "
            f"(ms after the `online` write returned; negative: before): {p['reopen_said_ms']}", ""]
    if p["windows_uncovered"]:
        out += ["Online windows without a sample on cpu1: " + json.dumps(p["windows_uncovered"]), ""]
    t, pr = r["tracepoint"], r["printf"]
    out += ["### tracepoint and printf", "", "| getppid batches (pids reused) | calls | counted | not exact "
            "| printf records | lost (`Lost N events`) | lost (at exit) |", "|---:|---:|---:|---:|---:|---:|---:|",
            f"| {t['batches']} ({t['pids_reused']}) | {t['calls']} | {t['counted']} | {len(t['wrong'])} | {pr['records']} "
            f"| {pr['lost_reported_live']} | {pr['lost_reported_at_exit']} |", ""]
    if t["wrong"]:
        out += ["Batches not counted exactly: " + json.dumps(t["wrong"][:20]), ""]
    out += ["### The tracer over time", "", "| t s | RSS KiB | fds | perf events | progs | maps | links | load avg |",
            "|---:|---:|---:|---:|---:|---:|---:|---|"]
    out += [f"| {s['t_s']} | {s['rss_kib']} | {s['fds']} | {s['perf_events']} | {s['progs']} | {s['maps']} "
            f"| {s['links']} | {s['loadavg']} |" for s in r["resources"]]
    e = r["exit"]
    left = sum(len(v) for v in e["objects_left"].values())
    out += ["", "### Exit (SIGINT)", "",
            "| exit status | END ran | BPF objects held (progs/maps/links) | left after exit |",
            "|---|---|---|---:|",
            f"| {e['status']} | {'yes' if e['end_ran'] else 'NO'} | {e['objects_held']['prog']} / "
            f"{e['objects_held']['map']} / {e['objects_held']['link']} | {left} |", ""]
    if e["stderr"]:
        out += ["Tracer stderr:", "", "```", *e["stderr"][:30], "```", ""]
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--steadytrace", default="target/release/steadytrace")
    parser.add_argument("--workload", default="target/release/examples/workload")
    args = parser.parse_args()
    if args.seed is None:
        args.seed = random.randrange(1 << 32)
    for path in (args.steadytrace, args.workload):
        if not os.access(path, os.X_OK):
            raise SystemExit(f"{path} missing: cargo build --release --examples")
    if not os.path.exists(ONLINE):
        raise SystemExit(f"SKIPPED: no {ONLINE}")
    lock = open(HOTPLUG_LOCK, "a")
    print(f"waiting for {HOTPLUG_LOCK}", file=sys.stderr)
    fcntl.flock(lock, fcntl.LOCK_EX)
    print("lock held, soaking", file=sys.stderr)
    soak = Soak(args)
    try:
        soak.run()
    finally:
        if not cpu1_online():
            set_online("1")
        fcntl.flock(lock, fcntl.LOCK_UN)
    report = analyse(soak)
    print(markdown(report))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
