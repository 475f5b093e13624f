#!/usr/bin/env python3
"""Per-event cost of the generated BPF: steadytrace side by side with bpftrace, in one run, as root.

For each script, each tracer runs it on the same workload (examples/workload.rs: `getppid N THREADS`, N getppid
system calls as fast as they go; or `sleep N`, N sleeps of 1 ms, for a probe that fires at 1 kHz on a cold
cache), and the kernel's own BPF statistics (kernel.bpf_stats_enabled, switched on for the run and restored
after, also on failure) give the run time of the script's programs:
  ns/event  run_time_ns / run_cnt of each of the tracer's tracepoint programs over the workload, summed over the
            script's programs (a script with an enter and an exit probe costs both per call, shown in brackets);
            median of N runs; ratio: steadytrace's over bpftrace's
  insns     the programs' size after the verifier (bytes_xlated / 8), summed
  jited     the programs' machine code in bytes (bytes_jited), summed
  events    run_cnt over the workload, per program, over all runs (more than N: another process made the call)
and, after the table, the output records each tracer reported lost, for the scripts that print, and the map
updates steadytrace reported dropped because a map was full. Scripts that bpftrace does not know (STEADYTRACE_ONLY:
`dw_ustack`) run on steadytrace only, "—" in the bpftraces' columns.

The programs are found through the tracer's own file descriptors (/proc/PID/fdinfo: prog_id, run_time_ns,
run_cnt; bpftool for the sizes); the tracer counts as attached once each of them has run (this process calls
getppid and sleeps until they have), and the counters are read just before the workload starts and just after
it ends. The workload waits
in a shell for a line on stdin, so its pid is known and written into the script (`$PID`) before the tracer
starts: the same filter as `pid == cpid`, without the tracer's lifetime being the command's. The tracer's output
goes to a grep that keeps only bpftrace's "Lost N events" lines. run_time_ns includes the kernel's own
sched_clock() reads around each run: the empty probe shows that floor, the same for both tracers. A run is
done again when the machine was disturbed (see checked_run).

    cargo build --release && cargo build --release --examples
    python3 benches/event_cost.py [--runs N] [--calls N] [--threads N] [--sleeps N] [--only TEXT] [--dump DIR]
                                  [--variants [PATH]] [--steadytrace PATH] [--before PATH] [--bpftrace PATH]
                                  [--bpftrace-chroot DIR] [--workload PATH] [--tracer-cpu N] [--workload-cpu N]

Two bpftraces run beside steadytrace when both are there: the host's (`--bpftrace`, Debian 12's 0.17) and a
current one run from a Debian sid chroot (`--bpftrace-chroot`, by default /var/cache/steadytrace/sid-bpftrace
when it holds usr/bin/bpftrace: 0.27.1; see FACTS.md for making it, with /proc, /sys and /dev bound into it);
each is named by its `--version`, and the table has a ratio column for each (steadytrace's cost over its).
`--bpftrace ''` or `--bpftrace-chroot ''` leaves one out. --tracer-cpu N runs every tracer on CPU N: a printing
script's records cost its program 3 times more when the tracer reads the ring buffer from another CPU than the
workload's (measured with libbpf's reader, which published its position per record: 54 ns on the workload's CPU,
175-180 on the other; with steadytrace's own, 55 on either), and where the scheduler puts each tracer's reader
otherwise moves the printf rows. --workload-cpu N runs the workload on CPU N: with --tracer-cpu on another, no run
depends on the scheduler's placement.

--only runs the scripts whose name contains TEXT, or is TEXT written as `=TEXT` (given several times: any of them). --before PATH runs another
build of steadytrace too (the one before a codegen change), in a column of its own. --dump DIR writes each program's instructions after the verifier
(`bpftool prog dump xlated`: the same view for both tracers) to DIR/<script number>-<tracer>-<program id>.txt.
--variants measures, instead of bpftrace, hand-assembled variants of steadytrace's programs with one codegen
change each (examples/codegen_variants.rs), on the scripts of VARIANTS.
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

BPF_PROG_TYPE_TRACEPOINT = 5
# steadytrace serves syscall tracepoints from raw_syscalls raw tracepoints with STEADYTRACE_SYSCALL_ATTACH=raw
# (or where perf_event_open is denied): its programs are then of this type.
BPF_PROG_TYPE_RAW_TRACEPOINT = 17
ENTER = "tracepoint:syscalls:sys_enter_getppid"
EXIT = "tracepoint:syscalls:sys_exit_getppid"
SLEEP = "tracepoint:syscalls:sys_enter_clock_nanosleep"

# (name, script, workload): "calls" is --calls getppid system calls on --threads threads, "sleeps" --sleeps
# sleeps of 1 ms (clock_nanosleep) on one thread.
SCRIPTS = [
    ("empty probe (the floor)", f"{ENTER} {{ }}", "calls"),
    ("filter that rejects", f"{ENTER} /pid == 1/ {{ @ = count(); }}", "calls"),
    ("count", f"{ENTER} /pid == $PID/ {{ @ = count(); }}", "calls"),
    ("count by comm", f"{ENTER} /pid == $PID/ {{ @[comm] = count(); }}", "calls"),
    ("count by pid, comm", f"{ENTER} /pid == $PID/ {{ @[pid, comm] = count(); }}", "calls"),
    ("hist", f"{ENTER} /pid == $PID/ {{ @h = hist(nsecs & 0xffff); }}", "calls"),
    ("lhist and stats",
     f"{ENTER} /pid == $PID/ {{ @l = lhist(nsecs & 0xff, 0, 256, 16); @s = stats(nsecs & 0xff); }}", "calls"),
    ("scratch variables",
     f"{ENTER} /pid == $PID/ {{ $t = tid; $n = nsecs; $d = $n - $t; @v = sum($d & 0xff); @m = max($t); }}",
     "calls"),
    ("sum of a field", f"{EXIT} /pid == $PID/ {{ @s = sum(args->ret); }}", "calls"),
    ("assign by tid", f"{ENTER} /pid == $PID/ {{ @t[tid] = nsecs; }}", "calls"),
    ("latency (enter + exit)",
     f"{ENTER} /pid == $PID/ {{ @start[tid] = nsecs; }} "
     f"{EXIT} /@start[tid]/ {{ @lat = hist(nsecs - @start[tid]); delete(@start[tid]); }}", "calls"),
    ("printf", f'{ENTER} /pid == $PID/ {{ printf("%s %d\\n", comm, tid); }}', "calls"),
    ("count by kstack", f"{ENTER} /pid == $PID/ {{ @[kstack] = count(); }}", "calls"),
    ("count by ustack", f"{ENTER} /pid == $PID/ {{ @[ustack] = count(); }}", "calls"),
    ("count by dw_ustack", f"{ENTER} /pid == $PID/ {{ @[dw_ustack] = count(); }}", "calls"),
    ("empty probe at 1 kHz (the floor)", f"{SLEEP} {{ }}", "sleeps"),
    ("printf at 1 kHz", f'{SLEEP} /pid == $PID/ {{ printf("%s %d\\n", comm, tid); }}', "sleeps"),
    ("count by ustack at 1 kHz", f"{SLEEP} /pid == $PID/ {{ @[ustack] = count(); }}", "sleeps"),
    ("count by dw_ustack at 1 kHz", f"{SLEEP} /pid == $PID/ {{ @[dw_ustack] = count(); }}", "sleeps"),
]

# Scripts of SCRIPTS (by name) that bpftrace does not know: only steadytrace runs them, the bpftraces' columns
# show "—" and there is no ratio.
STEADYTRACE_ONLY = {"count by dw_ustack", "count by dw_ustack at 1 kHz"}

# --fallbacks: scripts whose code differs on a kernel without bpf_loop (5.17) or bpf_map_lookup_percpu_elem
# (5.19), run as generated for this kernel and as generated without those features (docs/KERNELS.md).
FALLBACK_FEATURES = "bpf_loop,percpu_lookup"
FALLBACK_SCRIPTS = [
    ("count read in an expression",
     f'{ENTER} /pid == $PID/ {{ @n = count(); if (@n < 0) {{ printf("never\\n"); }} }}', "calls"),
    ("sum read in an expression", f"{ENTER} /pid == $PID/ {{ @s = sum(2); @last = @s; }}", "calls"),
    ("max read in an expression", f"{ENTER} /pid == $PID/ {{ @m = max(nsecs); @last = @m; }}", "calls"),
    ("count, not read (unchanged)", f"{ENTER} /pid == $PID/ {{ @n = count(); }}", "calls"),
    ("range loop of 8", f"{ENTER} /pid == $PID/ {{ $s = 0; for ($i : 0..8) {{ $s += $i; }} @t = sum($s); }}",
     "calls"),
]

# --variants: scripts of SCRIPTS (by name) and the variants of examples/codegen_variants.rs to run them as;
# TODAY are today's code reassembled, to check that the harness measures like steadytrace.
TODAY = {"count_hash", "hist_key16", "assign_update", "lat_now"}
VARIANTS = [
    ("count", ["count_hash", "count_array"]),
    ("hist", ["hist_key16", "hist_key8", "hist_array"]),
    ("assign by tid", ["assign_update", "assign_inplace"]),
    ("latency (enter + exit)", ["lat_now", "lat_cse"]),
    ("printf", ["printf_nowakeup"]),
    ("printf at 1 kHz", ["printf_nowakeup"]),
]

STATS = "/proc/sys/kernel/bpf_stats_enabled"
# Seconds between one tracer's run and the next one's start.
SETTLE = 0.5
# Where a current bpftrace is, by default: Debian sid's, in a chroot (FACTS.md says how it is made).
CHROOT = "/var/cache/steadytrace/sid-bpftrace"


def bpftrace_name(command):
    """`bpftrace 0.27.1`: the bpftrace that `command` runs, by its `--version`."""
    said = subprocess.run(command + ["--version"], capture_output=True, text=True).stdout
    version = re.search(r"v?(\d+\.\d+\.\d+)", said)
    return f"bpftrace {version.group(1)}" if version else "bpftrace"


def read_stats_enabled():
    with open(STATS) as f:
        return f.read().strip()


def write_stats_enabled(value):
    """sysctl -w kernel.bpf_stats_enabled=VALUE"""
    with open(STATS, "w") as f:
        f.write(f"{value}\n")


def programs(pid):
    """{prog_id: (run_time_ns, run_cnt)} of the tracepoint programs among the process's file descriptors."""
    found = {}
    try:
        fds = os.listdir(f"/proc/{pid}/fdinfo")
    except OSError:
        return found
    for fd in fds:
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        except OSError:
            continue
        info = {k.strip(): v.strip() for k, v in info.items()}
        if "prog_id" in info and info.get("prog_type") in (str(BPF_PROG_TYPE_TRACEPOINT), str(BPF_PROG_TYPE_RAW_TRACEPOINT)):
            found[int(info["prog_id"])] = (int(info["run_time_ns"]), int(info["run_cnt"]))
    return found


def wait_attached(tracer, probes, timeout=60.0):
    """Calls getppid until each of the tracer's `probes` tracepoint programs has run; their ids."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if tracer.poll() is not None:
            raise RuntimeError(f"the tracer exited ({tracer.returncode}) before attaching")
        os.getppid()
        progs = programs(tracer.pid)
        if len(progs) >= probes and all(cnt > 0 for _, cnt in progs.values()):
            return sorted(progs)
        time.sleep(0.01)
    raise RuntimeError("the tracer did not attach in time")


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run(prefix, script, workload, args, dump=None):
    """([ns/event per program], [events per program], xlated insns, jited bytes, output records lost, map updates
    dropped) of one run; the programs in the order they were loaded (of their ids), which is the script's order
    for both. Dropped updates are steadytrace's report at exit of a full map (bpftrace 0.17 says nothing)."""
    command = ["getppid", str(args.calls), str(args.threads)] if workload == "calls" else ["sleep", str(args.sleeps)]
    pin = ["taskset", "-c", args.workload_cpu] if args.workload_cpu is not None else []
    holder = subprocess.Popen(pin + ["sh", "-c", 'read _ && exec "$0" "$@"', args.workload] + command,
                              stdin=subprocess.PIPE)
    text = script.replace("$PID", str(holder.pid))
    probes = text.count("tracepoint:")
    with tempfile.TemporaryFile("w+") as errors, tempfile.TemporaryFile("w+") as kept:
        tracer = subprocess.Popen(prefix + [text], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=errors)
        # The output is thrown away but for bpftrace's "Lost N events" lines (it prints them on stdout).
        sink = subprocess.Popen(["grep", "-a", "-E", "^Lost [0-9]+ events"], stdin=tracer.stdout, stdout=kept)
        tracer.stdout.close()
        try:
            ids = wait_attached(tracer, probes)
            before = programs(tracer.pid)
            holder.stdin.write(b"go\n")
            holder.stdin.close()
            if holder.wait() != 0:
                raise RuntimeError(f"the workload failed ({holder.returncode})")
            after = programs(tracer.pid)
            shown = [json.loads(subprocess.run(["bpftool", "prog", "show", "id", str(i), "-j"], check=True,
                                               capture_output=True, text=True).stdout) for i in ids]
            if dump:
                for i in ids:
                    with open(f"{dump}-{i}.txt", "w") as f:
                        f.write(f"# {text}\n")
                        f.write(subprocess.run(["bpftool", "prog", "dump", "xlated", "id", str(i)], check=True,
                                               capture_output=True, text=True).stdout)
        except BaseException:
            errors.seek(0)
            print(errors.read()[-2000:], file=sys.stderr)
            raise
        finally:
            holder.kill()
            holder.wait()
            stop(tracer)
            sink.wait()
        kept.seek(0)
        errors.seek(0)
        lost = sum(int(n) for n in re.findall(r"^Lost (\d+) events", kept.read(), re.M))
        said = errors.read()
        # Current bpftrace says its losses on stderr (0.17 on stdout, kept above).
        lost += sum(int(n) for n in re.findall(r"^Lost (\d+) events", said, re.M))
        lost += sum(int(n) for n in re.findall(r"(\d+) output records? lost", said))
        dropped = sum(int(n) for n in re.findall(r"(\d+) updates? dropped", said))
    ns, events = [], []
    for i in ids:
        time_ns, cnt = (a - b for a, b in zip(after[i], before[i]))
        ns.append(time_ns / cnt if cnt else float("nan"))
        events.append(cnt)
    insns = sum(s["bytes_xlated"] // 8 for s in shown)
    jited = sum(s.get("bytes_jited", 0) for s in shown)
    return ns, events, insns, jited, lost, dropped


def all_cpus_online():
    with open("/sys/devices/system/cpu/online") as f, open("/sys/devices/system/cpu/possible") as g:
        return f.read() == g.read()


def checked_run(prefix, script, workload, args, dump):
    """run(), again when the machine was disturbed: a CPU offline (a hotplug test elsewhere: bpftrace cannot
    open its per-CPU buffers), a tracer that failed, or more than 1% more getppid calls than the workload made
    (another process tracing or testing at the same time, whose calls would be counted too)."""
    for attempt in range(5):
        while not all_cpus_online():
            time.sleep(1)
        try:
            result = run(prefix, script, workload, args, dump)
        except RuntimeError as error:
            print(f"{' '.join(prefix[:3])}: {error}; again", file=sys.stderr)
            continue
        if workload != "calls" or max(result[1]) <= args.calls * 1.01:
            return result
        print(f"{' '.join(prefix[:3])}: {max(result[1])} events for {args.calls} calls; again", file=sys.stderr)
    raise SystemExit("the machine is too busy to measure: see the messages above")


def shown_ns(runs):
    """The median over runs of the summed ns/event, and of each program's when there are several."""
    total = f"{statistics.median(sum(r) for r in runs):.1f}"
    if len(runs[0]) == 1:
        return total
    parts = " + ".join(f"{statistics.median(r[i] for r in runs):.1f}" for i in range(len(runs[0])))
    return f"{total} ({parts})"


def measure(script, workload, tracers, args, dump=None):
    """{tracer: [run() results]}, the tracers interleaved run by run, so that a drift of the machine's speed
    falls on all of them; their order turns by one each run, so that none always runs first or right after
    the same other (a tracer's exit leaves the kernel work to do, freeing its maps, while the next one runs),
    and each run starts SETTLE seconds after the last ended."""
    results = {name: [] for name, _ in tracers}
    for rep in range(args.runs):
        turned = tracers[rep % len(tracers):] + tracers[:rep % len(tracers)]
        for name, prefix in turned:
            time.sleep(SETTLE)
            where = f"{dump}-{name.replace(' ', '-')}" if dump and rep == 0 else None
            results[name].append(checked_run(prefix, script, workload, args, where))
    return results


def median_total(runs):
    return statistics.median(sum(r[0]) for r in runs)


def chosen(args, name):
    """Whether --only chooses the script named `name`: its name contains one of the texts, or is one written
    after `=`."""
    return not args.only or any(name == t[1:] if t.startswith("=") else t in name for t in args.only)


def runs_script(tracer, name):
    """Whether `tracer` (its name in the table) runs the script of SCRIPTS named `name`."""
    return not tracer.startswith("bpftrace") or name not in STEADYTRACE_ONLY


def compare(args, tracers, scripts=SCRIPTS):
    """The table of each script on each tracer; "—" where a tracer does not run the script."""
    names = [name for name, _ in tracers]
    # A ratio for each tracer after the first: the first's cost over its.
    others = names[1:]
    ratios = " | ".join("ratio" if len(others) == 1 else f"ratio to {n}" for n in others)
    print("| script | " + " | ".join(f"{n} ns/event" for n in names) + (f" | {ratios}" if others else "")
          + " | " + " | ".join(f"{n} insns / jited bytes" for n in names) + " | events |")
    print("|---|" + "---:|" * (len(names) * 2 + len(others)) + "---|")
    notes = []
    for number, (name, script, workload) in enumerate(scripts, 1):
        if not chosen(args, name):
            continue
        running = [(n, prefix) for n, prefix in tracers if runs_script(n, name)]
        ran = [n for n, _ in running]
        results = measure(script, workload, running, args, args.dump and f"{args.dump}/{number}")
        ns = " | ".join(shown_ns([r[0] for r in results[n]]) if n in results else "—" for n in names)
        for other in others:
            ns += (f" | {median_total(results[names[0]]) / median_total(results[other]):.2f}"
                   if names[0] in results and other in results else " | —")
        size = " | ".join(f"{results[n][0][2]} / {results[n][0][3]}" if n in results else "—" for n in names)
        events = sorted({e for n in ran for r in results[n] for e in r[1]})
        shown = f"{events[0]}" if len(events) == 1 else f"{events[0]}–{events[-1]}"
        print(f"| {name}: `{script}` | {ns} | {size} | {shown} |", flush=True)
        of = f" of {args.calls if workload == 'calls' else args.sleeps}"
        lost = {n: statistics.median(r[4] for r in results[n]) for n in ran}
        if any(lost.values()):
            notes.append(f"- {name}: output records lost per run (median): "
                         + ", ".join(f"{n} {lost[n]:.0f}" for n in ran) + of)
        dropped = {n: statistics.median(r[5] for r in results[n]) for n in ran}
        if any(dropped.values()):
            notes.append(f"- {name}: map updates dropped (the map was full) per run (median): "
                         + ", ".join(f"{n} {dropped[n]:.0f}" for n in ran) + of)
    print("\n".join(notes))


def variants(args, steadytrace):
    """steadytrace's program against hand-assembled variants of it (examples/codegen_variants.rs)."""
    print("| script | program | ns/event | insns / jited bytes |")
    print("|---|---|---:|---:|")
    scripts = {name: (script, workload) for name, script, workload in SCRIPTS}
    for name, names in VARIANTS:
        if not chosen(args, name):
            continue
        script, workload = scripts[name]
        tracers = [("steadytrace", steadytrace)] + [(v, [args.variants, v]) for v in names]
        results = measure(script, workload, tracers, args)
        for i, (program, _) in enumerate(tracers):
            runs = results[program]
            where = f"{name}: `{script}`" if i == 0 else ""
            shown = f"{program} (today)" if program in TODAY else program
            print(f"| {where} | {shown} | {shown_ns([r[0] for r in runs])} | {runs[0][2]} / {runs[0][3]} |",
                  flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sleeps", type=int, default=2000)
    parser.add_argument("--dump", help="directory for the programs' xlated instructions")
    parser.add_argument("--only", action="append", help="only the scripts whose name contains this text")
    parser.add_argument("--variants", nargs="?", const="target/release/examples/codegen_variants",
                        help="measure steadytrace against the codegen variants of this program instead")
    parser.add_argument("--fallbacks", action="store_true",
                        help=f"compare steadytrace with itself without {FALLBACK_FEATURES} instead of bpftrace")
    parser.add_argument("--steadytrace", default="target/release/steadytrace")
    parser.add_argument("--before", help="another steadytrace build to run beside it (before a change)")
    parser.add_argument("--bpftrace", default=shutil.which("bpftrace"),
                        help="the host's bpftrace ('' for none)")
    parser.add_argument("--bpftrace-chroot", default=CHROOT if os.access(f"{CHROOT}/usr/bin/bpftrace", os.X_OK) else "",
                        help="a root holding a current bpftrace, run with chroot ('' for none)")
    parser.add_argument("--workload", default="target/release/examples/workload")
    parser.add_argument("--tracer-cpu", help="run every tracer on this CPU (taskset): where a printing tracer's "
                        "reader runs decides what its records cost the programs")
    parser.add_argument("--workload-cpu", help="run the workload on this CPU (taskset)")
    args = parser.parse_args()
    for path in [args.steadytrace, args.workload] + ([args.variants] if args.variants else []):
        if not os.access(path, os.X_OK):
            raise SystemExit(f"{path} missing: cargo build --release && cargo build --release --examples")
    if shutil.which("bpftool") is None:
        raise SystemExit("needs bpftool")
    if args.dump:
        os.makedirs(args.dump, exist_ok=True)
    steadytrace = [args.steadytrace, "-q", "-e"]
    tracers = [("steadytrace", steadytrace)]
    if args.fallbacks:
        without = ["env", f"STEADYTRACE_KERNEL_WITHOUT={FALLBACK_FEATURES}"] + steadytrace
        tracers.append(("fallback", without))
    else:
        if args.before:
            tracers.append(("before", [args.before, "-q", "-e"]))
        bpftraces = [[args.bpftrace]] if args.bpftrace else []
        if args.bpftrace_chroot:
            bpftraces.append(["chroot", args.bpftrace_chroot, "bpftrace"])
        for command in bpftraces:
            tracers.append((bpftrace_name(command), command + ["-q", "-e"]))
    if args.tracer_cpu is not None:
        tracers = [(name, ["taskset", "-c", args.tracer_cpu] + prefix) for name, prefix in tracers]
    old = read_stats_enabled()
    # SIGTERM too goes through the finally below, which puts the old value back.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    write_stats_enabled(1)
    try:
        print(f"median of {args.runs} runs of {args.calls} getppid calls on {args.threads} thread(s) "
              f"(at 1 kHz: {args.sleeps} sleeps of 1 ms); kernel {os.uname().release}; {os.cpu_count()} CPUs")
        if args.variants:
            variants(args, steadytrace)
        elif args.fallbacks:
            compare(args, [tracers[1], tracers[0]], FALLBACK_SCRIPTS)
        else:
            compare(args, tracers)
    finally:
        write_stats_enabled(old)


if __name__ == "__main__":
    main()
