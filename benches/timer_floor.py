#!/usr/bin/env python3
"""The timer engine against the sleep floor, run after run (docs/TIMER-BENCHMARK.md, issue 41): RUNS runs of
`steadytrace bench interval -f json --engines ENGINES`, on the machine as it is (quiet) or with two processes
spinning on the CPUs (--busy). Per run, one row of a Markdown table: the lateness p50 and p99 of `timer` and
`sleep`, the difference of the medians, the ratio of the p99s, the entry cost, and whether the run met the bar:
timer p50 - sleep p50 <= 3 us and timer p99 <= 1.2 x sleep p99 (and nothing missed).

    python3 benches/timer_floor.py [--tracer PATH] [--runs 5] [--busy] [--engines timer,trigger,sleep]

Exits 1 when fewer than RUNS - 1 runs met the bar: a benchmark, not a test (timing belongs here, not in tests/)."""
import argparse
import json
import subprocess
import sys

P50_BAR_US = 3.0
P99_BAR = 1.2

parser = argparse.ArgumentParser()
parser.add_argument("--tracer", default="target/release/steadytrace")
parser.add_argument("--runs", type=int, default=5)
parser.add_argument("--busy", action="store_true", help="two processes spin on the CPUs meanwhile")
parser.add_argument("--engines", default="timer,trigger,sleep")
args = parser.parse_args()

spinners = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(2)] if args.busy else []
passed = 0
print(f"{'busy' if args.busy else 'quiet'}: {args.tracer} bench interval -f json --engines {args.engines}")
print("| run | timer p50 | sleep p50 | p50 diff | timer p99 | sleep p99 | p99 ratio | entry ns | to program ns "
      "| timer thread CPU | trigger p50 / entry ns | others' CPU, steal, load | bar |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
try:
    for run in range(1, args.runs + 1):
        out = subprocess.run([args.tracer, "bench", "interval", "-f", "json", "--engines", args.engines],
                             capture_output=True, text=True, check=True)
        report = json.loads(out.stdout.strip().splitlines()[-1])
        engines = {e["engine"]: e for e in report["engines"]}
        timer, sleep = engines["timer"], engines["sleep"]
        t, s = timer["lateness_us"], sleep["lateness_us"]
        diff, ratio = t["p50"] - s["p50"], t["p99"] / s["p99"]
        ok = timer["missed"] == 0 and diff <= P50_BAR_US and ratio <= P99_BAR
        passed += ok
        trigger = engines.get("trigger")
        trig = f"{trigger['lateness_us']['p50']:.1f} / {trigger['entry_cost_ns']:.0f}" if trigger else "-"
        to_program = timer.get("to_program_ns")
        cpu = timer.get("thread_cpu_share")
        m = report["machine"]
        print(f"| {run} | {t['p50']:.1f} | {s['p50']:.1f} | {diff:+.1f} | {t['p99']:.1f} | {s['p99']:.1f} | {ratio:.2f} "
              f"| {timer['entry_cost_ns']:.0f} | {'-' if to_program is None else f'{to_program:.0f}'} "
              f"| {'-' if cpu is None else f'{cpu * 100:.2f}%'} | {trig} "
              f"| {m['others_cpu_share'] * 100:.0f}%, {(m['steal_share'] or 0) * 100:.1f}%, "
              f"{m['before']['load_average'][0]:.2f} -> {m['after']['load_average'][0]:.2f} "
              f"| {'pass' if ok else 'FAIL'} |", flush=True)
finally:
    for spinner in spinners:
        spinner.kill()
print(f"{passed} of {args.runs} runs met the bar (p50 diff <= {P50_BAR_US} us, p99 ratio <= {P99_BAR})")
sys.exit(0 if passed >= args.runs - 1 else 1)
