#!/usr/bin/env python3
"""The rate of user stacks `dw_ustack` sustains, next to `ustack` (frame pointers, bpf_get_stackid) on
steadytrace and bpftrace. As root.

The workload (examples/workload.rs `getppid N THREADS`: N getppid system calls as fast as they go) waits in a
shell for a line on stdin, so its pid is known and written into the script (`$PID`) before the tracer starts, as
in benches/event_cost.py; the tracer counts as attached once its program has run (this process calls getppid
until it has, kernel.bpf_stats_enabled switched on for that wait only). Each case runs

    tracepoint:syscalls:sys_enter_getppid /pid == $PID/ { @[STACK] = count(); }

with `-f json`, and reports, per run:
  calls/s    N over the workload's wall time (from the line on stdin to its exit): how fast the traced process
             went under the tracer ("no tracer": the workload alone)
  counted    the sum of the map's counts printed at exit, against N; of them, those whose stack has frames and
             those printed as an empty stack (for dw_ustack: a copy the ring buffer had no room for), and the
             distinct stacks with frames
  dropped    the map updates the tracer reported dropped at exit because the map was full (steadytrace's
             "@: N updates dropped" on stderr; bpftrace 0.17 reports none)
  lost       output records the tracer reported lost ("N output records lost" or "Lost N events" on stderr or
             stdout, `lost_events` records in JSON)
  CPU        the tracer's user + system time (/proc/PID/stat, every thread) from just before the workload starts
             to SETTLE seconds after it ended (its reader drains the ring buffer every 10 ms and folds dw_ustack
             keys every 100 ms), and over its whole run (wait4: start-up, and printing the maps at exit)
  exit       seconds from SIGINT to the tracer's exit (the maps read, stacks unwound and named, printed)

The case "dw_ustack, every key kept" declares the map large enough for a key per call (`let @ = percpuhash(N +
4096)`), so that no update is dropped: its stacks with frames are then every copy that reached userspace. Its
map holds a key per call (a handle per event), so it is slow to print and takes memory (about 0.5 GB of the
tracer's for 1,000,000 calls).

Paced (--paced RATES, --seconds S): what the workload above cannot show, since flat out it overruns any reader:
the rate up to which every dw_ustack is counted with its frames. A small C program (built with cc, `main →
paced → getppid`, with .eh_frame) makes RATE / 1000 getppid calls every millisecond (absolute deadlines) for S
seconds, under steadytrace's `@[dw_ustack] = count()` with the map as declared by default; the columns as above,
and ns/event: the program's run_time_ns / run_cnt over the workload (kernel.bpf_stats_enabled on for these runs,
as in benches/event_cost.py), the cost of copying the stack when the ring buffer has room.

    cargo build --release && cargo build --release --examples
    python3 benches/dw_ustack_rate.py [--runs N] [--calls N] [--threads N] [--only TEXT] [--paced RATES]
                                      [--seconds S] [--steadytrace PATH] [--bpftrace PATH] [--workload PATH]
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from event_cost import ENTER, programs, read_stats_enabled, wait_attached, write_stats_enabled  # noqa: E402

SETTLE = 0.5
PACED = r"""
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
/* RATE getppid calls a second, RATE / 1000 every millisecond, for SECONDS seconds. */
__attribute__((noinline)) long paced(long per_ms, long ms) {
    struct timespec next;
    long sum = 0;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (long t = 0; t < ms; t++) {
        for (long i = 0; i < per_ms; i++)
            sum += getppid();
        next.tv_nsec += 1000000;
        if (next.tv_nsec >= 1000000000) {
            next.tv_nsec -= 1000000000;
            next.tv_sec++;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    }
    return sum;
}
int main(int argc, char **argv) {
    return paced(atol(argv[1]) / 1000, atol(argv[2]) * 1000) > 0 ? 0 : 1;
}
"""
# (name, tracer, prelude, stack): tracer None runs the workload alone; "{keep}" in the prelude is --calls + 4096.
CASES = [
    ("no tracer", None, "", None),
    ("steadytrace ustack", "steadytrace", "", "ustack"),
    ("bpftrace ustack", "bpftrace", "", "ustack"),
    ("steadytrace dw_ustack", "steadytrace", "", "dw_ustack"),
    ("steadytrace dw_ustack, every key kept", "steadytrace", "let @ = percpuhash({keep}); ", "dw_ustack"),
]


def cpu_seconds(pid):
    """utime + stime of the process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def reap(proc, timeout=300.0):
    """Waits for `proc` with wait4: its CPU time over its whole run (user + system, seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return usage.ru_utime + usage.ru_stime
        if time.monotonic() > deadline:
            proc.kill()
        time.sleep(0.01)


def counts(output):
    """(sum of the counts, of them with frames, as empty stacks, distinct stacks with frames, lost records) of
    the tracer's JSON output. A map's keys may repeat (dw_ustack's empty stacks): pairs, not a dict."""
    total = framed = empty = lost = 0
    stacks = set()
    for line in output.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        record = dict(json.loads(line, object_pairs_hook=lambda pairs: pairs))
        if record.get("type") == "lost_events":
            lost += int(record.get("count", 0))
            continue
        if record.get("type") != "map":
            continue
        for _, entries in record["data"]:
            for key, value in entries:
                total += value
                if key.strip():
                    framed += value
                    stacks.add(key)
                else:
                    empty += value
    return total, framed, empty, len(stacks), lost


def run(args, command, calls, tracer, prelude, stack, stats=False):
    """One run of a case, `command` making `calls` getppid calls: a dict of what the docstring lists; with
    `stats`, also the program's ns/event over the workload (BPF statistics on for the whole run)."""
    holder = subprocess.Popen(["sh", "-c", 'read _ && exec "$0" "$@"'] + command, stdin=subprocess.PIPE)
    result = {}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = restore = None
        try:
            if tracer:
                script = (prelude.format(keep=calls + 4096)
                          + f"{ENTER} /pid == {holder.pid}/ {{ @[{stack}] = count(); }}")
                binary = args.steadytrace if tracer == "steadytrace" else args.bpftrace
                proc = subprocess.Popen([binary, "-q", "-f", "json", "-e", script], stdin=subprocess.DEVNULL,
                                        stdout=out, stderr=err)
                # Attached once its program has run: run_cnt counts only with BPF statistics on, which are
                # switched off again (to what they were) for the workload, unless its cost is measured.
                restore = read_stats_enabled()
                write_stats_enabled(1)
                wait_attached(proc, 1)
                before = programs(proc.pid)
                if not stats:
                    write_stats_enabled(restore)
                    restore = None
                cpu = cpu_seconds(proc.pid)
            started = time.monotonic()
            holder.stdin.write(b"go\n")
            holder.stdin.close()
            if holder.wait() != 0:
                raise RuntimeError(f"the workload failed ({holder.returncode})")
            wall = time.monotonic() - started
            result["calls/s"] = calls / wall
            if proc and stats:
                after = programs(proc.pid)
                write_stats_enabled(restore)
                restore = None
                time_ns, runs = (sum(a[i] - before.get(p, (0, 0))[i] for p, a in after.items()) for i in (0, 1))
                result["ns/event"] = time_ns / runs if runs else float("nan")
            if proc:
                time.sleep(SETTLE)
                result["cpu"] = cpu_seconds(proc.pid) - cpu
                stopping = time.monotonic()
                proc.send_signal(signal.SIGINT)
                result["cpu whole"] = reap(proc)
                result["exit"] = time.monotonic() - stopping
        except BaseException:
            err.seek(0)
            print(err.read()[-2000:], file=sys.stderr)
            raise
        finally:
            if restore is not None:
                write_stats_enabled(restore)
            holder.kill()
            holder.wait()
            if proc and proc.poll() is None:
                proc.kill()
                proc.wait()
        if not tracer:
            return result
        out.seek(0)
        err.seek(0)
        output, said = out.read(), err.read()
    total, framed, empty, distinct, lost = counts(output)
    # The same losses are said in JSON records as they happen and once more, in all, on stderr at exit.
    lost = max(lost, sum(int(n) for n in re.findall(r"(\d+) output records? lost", said)),
               sum(int(n) for n in re.findall(r"^Lost (\d+) events", output + said, re.M)))
    dropped = sum(int(n) for n in re.findall(r"(\d+) updates? dropped", said))
    result.update(counted=total, framed=framed, empty=empty, distinct=distinct, lost=lost, dropped=dropped)
    return result


def spread(values, form="{:.0f}"):
    """The value, or min–max when the runs differ."""
    low, high = min(values), max(values)
    return form.format(low) if low == high else f"{form.format(low)}–{form.format(high)}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", help="only the cases whose name contains this text")
    parser.add_argument("--paced", default="5000,10000,20000,40000,80000",
                        help="getppid calls a second of the paced runs, comma-separated (multiples of 1000; "
                             "empty: none)")
    parser.add_argument("--seconds", type=int, default=2, help="length of each paced run")
    parser.add_argument("--steadytrace", default="target/release/steadytrace")
    parser.add_argument("--bpftrace", default=shutil.which("bpftrace"))
    parser.add_argument("--workload", default="target/release/examples/workload")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root")
    # SIGTERM too goes through the finally blocks, which put kernel.bpf_stats_enabled back.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    for path in [args.steadytrace, args.workload]:
        if not os.access(path, os.X_OK):
            raise SystemExit(f"{path} missing: cargo build --release && cargo build --release --examples")
    cases = [c for c in CASES if (c[1] != "bpftrace" or args.bpftrace) and (not args.only or args.only in c[0])]
    flat_out = [args.workload, "getppid", str(args.calls), str(args.threads)]
    # The cases interleaved run by run, so that a drift of the machine's speed falls on all of them.
    results = {case[0]: [] for case in cases}
    for _ in range(args.runs):
        for name, tracer, prelude, stack in cases:
            results[name].append(run(args, flat_out, args.calls, tracer, prelude, stack))
    print(f"{args.runs} runs of {args.calls} getppid calls on {args.threads} thread(s); "
          f"kernel {os.uname().release}; {os.cpu_count()} CPUs; medians, or min–max where noted")
    table(results)
    kept = results.get(CASES[-1][0], [])
    if kept:
        rates = [r["framed"] * r["calls/s"] / args.calls for r in kept]
        shares = [100 * r["framed"] / args.calls for r in kept]
        print(f"\n{CASES[-1][0]}: stacks with frames per second of the workload {spread(rates)}, "
              f"{spread(shares, '{:.2f}')}% of the calls")
    rates = [int(r) for r in args.paced.split(",") if r.strip()]
    if not rates:
        return
    with tempfile.TemporaryDirectory() as scratch:
        source, binary = os.path.join(scratch, "paced.c"), os.path.join(scratch, "paced")
        with open(source, "w") as f:
            f.write(PACED)
        subprocess.run(["cc", "-O2", "-o", binary, source], check=True)
        name = "dw_ustack at {} calls/s ({} calls)"
        paced = {name.format(rate, rate // 1000 * 1000 * args.seconds): [] for rate in rates}
        for _ in range(args.runs):
            for rate in rates:
                calls = rate // 1000 * 1000 * args.seconds
                paced[name.format(rate, calls)].append(
                    run(args, [binary, str(rate), str(args.seconds)], calls, "steadytrace", "", "dw_ustack", True))
    print(f"\npaced: {args.runs} runs of {args.seconds} s each, steadytrace `@[dw_ustack] = count()`")
    table(paced)


def table(results):
    """Prints the results of each case."""
    print(f"{'case':40} {'calls/s':>9} {'counted (of them: with frames / empty)':>40} {'stacks':>6} "
          f"{'dropped':>15} {'lost':>5} {'CPU s':>5} {'whole':>5} {'exit s':>6}"
          + (f" {'ns/event':>9}" if any("ns/event" in runs[0] for runs in results.values()) else ""))
    for name, runs in results.items():
        rate = statistics.median(r["calls/s"] for r in runs)
        line = f"{name:40} {rate:9.0f}"
        if "counted" in runs[0]:
            counted = (f"{spread([r['counted'] for r in runs])} ({spread([r['framed'] for r in runs])} / "
                       f"{spread([r['empty'] for r in runs])})")
            line += (f" {counted:>40} {spread([r['distinct'] for r in runs]):>6}"
                     f" {spread([r['dropped'] for r in runs]):>15} {spread([r['lost'] for r in runs]):>5}"
                     f" {statistics.median(r['cpu'] for r in runs):5.2f}"
                     f" {statistics.median(r['cpu whole'] for r in runs):5.2f}"
                     f" {statistics.median(r['exit'] for r in runs):6.2f}")
        if "ns/event" in runs[0]:
            line += f" {statistics.median(r['ns/event'] for r in runs):9.0f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
