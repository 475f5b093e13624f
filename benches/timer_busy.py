#!/usr/bin/env python3
"""The timer engine on a busy machine (docs/TIMER-BENCHMARK.md, issue 22): two processes spin on the CPUs
while `steadytrace bench interval` runs with no options, RUNS times. For each run it prints whether the
timer engine missed nothing and whether its lateness p99 stayed within 1.5x the plain-sleep floor's p99
of the same run, with cyclictest's p99 beside them when installed.

    python3 benches/timer_busy.py [TRACER] [RUNS]     (default target/release/steadytrace, 3)

Exits 1 when a run missed the bar: a benchmark, not a test (timing belongs here, not in tests/)."""
import json
import subprocess
import sys

tracer = sys.argv[1] if len(sys.argv) > 1 else "target/release/steadytrace"
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
spinners = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(2)]
failed = 0
try:
    for run in range(1, runs + 1):
        out = subprocess.run([tracer, "bench", "interval", "-f", "json"], capture_output=True, text=True, check=True)
        report = json.loads(out.stdout.strip().splitlines()[-1])
        engines = {e["engine"]: e for e in report["engines"]}
        timer, sleep = engines["timer"], engines["sleep"]
        ratio = timer["lateness_us"]["p99"] / sleep["lateness_us"]["p99"]
        cyclic = engines.get("cyclictest", {}).get("lateness_us") or {}
        ok = timer["missed"] == 0 and ratio <= 1.5
        failed += not ok
        machine = report["machine"]
        print(
            f"run {run}: timer {timer['scheduling']['policy']} {timer['scheduling'].get('priority')}: "
            f"fired {timer['fired']}/{timer['expected']}, p99 {timer['lateness_us']['p99']:.1f} us; "
            f"sleep p99 {sleep['lateness_us']['p99']:.1f} us; ratio {ratio:.2f}; "
            f"cyclictest p99 {cyclic.get('p99', float('nan')):.1f} us; "
            f"others used {machine['others_cpu_share'] * 100:.0f}% of {len(machine['online_cpus'])} CPUs, steal {(machine['steal_share'] or 0) * 100:.1f}%, "
            f"load {machine['before']['load_average'][0]:.2f} -> {machine['after']['load_average'][0]:.2f}: "
            f"{'ok' if ok else 'MISSED THE BAR'}",
            flush=True,
        )
finally:
    for spinner in spinners:
        spinner.kill()
sys.exit(1 if failed else 0)
