#!/usr/bin/env python3
"""Attach at scale, side by side with bpftrace 0.27.1: every function of libc as uprobes, and a kprobe wildcard of
1,000+ kernel functions, in the x86 qemu guest on Debian's 6.12 (this host refuses kprobes).

For each tool, target and run, the program is `TARGET { } BEGIN { printf("ready\\n"); exit(); }`:
  attach   spawn to the `ready` line on stdout (both tools run BEGIN once every probe is attached)
  detach   the `ready` line to the process's end (detaching and exiting)
  functions  the functions each tool lists for the target (`-l`)
  probes said  what each tool says it attaches ("Attached N probes" counts a wildcard as one probe)
The median of N runs. Software emulation (TCG): compare the two tools, not these seconds with the host's.
bpftrace runs from the Debian sid chroot (docs: ../shared/FACTS.md) and is given the very libc file steadytrace
traces, bind-mounted into the chroot.

    python3 benches/attach_scale.py [--runs 3] [--steadytrace PATH] [--kernel 6.12]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CHROOT = "/var/cache/steadytrace/sid-bpftrace"
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
# Wildcards tried in order; the first that matches 1,000 or more functions is measured.
KPROBE_PATTERNS = ["kprobe:security_*", "kprobe:*_sys_*", "kprobe:ext4_*", "kprobe:tcp_*", "kprobe:*_lock*"]


def run_once(command):
    """(attach s, detach s, stderr) of one run of `command`, which prints `ready` once attached."""
    start = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ready = float("nan")
    for line in proc.stdout:
        if line.strip() == "ready" and ready != ready:
            ready = time.monotonic() - start
    stderr = proc.stderr.read()
    proc.wait()
    end = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"{command[:3]} failed ({proc.returncode}): {stderr[-2000:]}")
    return ready, end - ready, stderr


def attached(stderr):
    for line in stderr.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] in ("Attached", "Attaching") and words[1].isdigit():
            return int(words[1])
    return None


def guest(args):
    if not os.path.exists("/dev/fd"):
        os.symlink("/proc/self/fd", "/dev/fd")
    for source, target, how in [("/proc", "proc", "--bind"), ("/sys", "sys", "--rbind"), ("/dev", "dev", "--rbind")]:
        subprocess.run(["mount", how, source, f"{CHROOT}/{target}"], check=True)
    inside_libc = f"{CHROOT}/tmp/traced-libc.so.6"
    open(inside_libc, "w").close()
    subprocess.run(["mount", "--bind", LIBC, inside_libc], check=True)
    listed = {}
    for pattern in KPROBE_PATTERNS:
        out = subprocess.run([args.steadytrace, "-l", pattern], capture_output=True, text=True).stdout
        listed[pattern] = len(out.splitlines())
        if listed[pattern] >= 1000:
            kprobe = pattern
            break
    else:
        kprobe = max(listed, key=listed.get)
    targets = [("uprobe:libc:*", f"uprobe:{LIBC}:*", "uprobe:/tmp/traced-libc.so.6:*"), (kprobe, kprobe, kprobe)]
    rows = []
    for name, ours, theirs in targets:
        for tool, command in [
            ("steadytrace", [args.steadytrace, "-e", f'{ours} {{ }} BEGIN {{ printf("ready\\n"); exit(); }}']),
            # 0.27.1 refuses the whole script when one function cannot take a uprobe; told to warn instead, it
            # attaches the rest, as steadytrace does.
            ("bpftrace 0.27.1", ["chroot", CHROOT, "bpftrace", "-e",
                                 f'config = {{ missing_probes = "warn" }} {theirs} {{ }} '
                                 f'BEGIN {{ printf("ready\\n"); exit(); }}']),
        ]:
            runs = [run_once(command) for _ in range(args.runs)]
            target = ours if tool == "steadytrace" else theirs
            lister = command[:-2]
            listing = subprocess.run([*lister, "-l", target], capture_output=True, text=True).stdout
            rows.append({"target": name, "tool": tool, "listed": len(listing.splitlines()),
                         "probes": attached(runs[-1][2]),
                         "attach": statistics.median(r[0] for r in runs),
                         "detach": statistics.median(r[1] for r in runs)})
    print("RESULT " + json.dumps({"kprobe_listed": listed, "rows": rows}))


def host(args):
    command = [sys.executable, os.path.abspath(__file__), "--guest", "--runs", str(args.runs),
               "--steadytrace", os.path.abspath(args.steadytrace)]
    run = subprocess.run(["tests/vm/run", "--kernel", args.kernel, "--timeout", str(args.timeout), "--", *command],
                         capture_output=True, text=True)
    result = next((json.loads(l[7:]) for l in run.stdout.splitlines() if l.startswith("RESULT ")), None)
    if result is None:
        print(run.stdout[-3000:], run.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"the guest gave no result (exit {run.returncode})")
    print(f"kprobe wildcards listed: {result['kprobe_listed']}")
    print(f"{'target':<22} {'tool':<16} {'functions':>9} {'probes said':>11} {'attach s':>9} {'detach s':>9}")
    for r in result["rows"]:
        print(f"{r['target']:<22} {r['tool']:<16} {r['listed']:>9} {str(r['probes']):>11} "
              f"{r['attach']:>9.2f} {r['detach']:>9.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--guest", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--kernel", default="6.12")
    parser.add_argument("--timeout", type=int, default=3600)
    parser.add_argument("--steadytrace", default="target/release/steadytrace")
    args = parser.parse_args()
    (guest if args.guest else host)(args)


if __name__ == "__main__":
    main()
