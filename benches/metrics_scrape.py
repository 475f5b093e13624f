#!/usr/bin/env python3
"""What `--metrics` costs: the time of a scrape of large maps, and the effect of scraping on the per-event cost
of the programs. As root; steadytrace only (bpftrace has no metrics endpoint to compare with).

Scrape time. steadytrace runs a script whose map a workload fills (examples/workload.rs `getppid N 1`: N getppid
calls on one thread), then this script GETs /metrics --scrapes times in a row (as Prometheus does, asking for
OpenMetrics) and reports min/median/max of the whole HTTP exchange, the exposition's size and series, and the
tracer's own `steadytrace_scrape_duration_seconds` (the part spent reading the maps). Two maps:
  10,000 keys      `let @m = percpuhash(10000)`, one count() per key (a per-CPU map: every CPU's value is read)
  1,000 buckets    `@h[k % 20] = lhist(k % 1000, 0, 1000, 20)`: 20 histograms of 50 buckets each

Per-event cost under scraping. The count script of benches/event_cost.py on getppid calls (plus the 10,000-key
map, so that each scrape has real work), measured by the kernel's BPF statistics (run_time_ns / run_cnt of the
tracer's programs, kernel.bpf_stats_enabled switched on for the run and restored after) with no scraper,
a scrape every second, and a scraper GETting /metrics back to back for the whole workload; runs interleaved, median of --runs.

    cargo build --release && cargo build --release --examples
    python3 benches/metrics_scrape.py [--scrapes N] [--runs N] [--calls N] [--steadytrace PATH] [--workload PATH]
"""
import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from event_cost import programs, read_stats_enabled, stop, write_stats_enabled  # noqa: E402

PORT = 9437
OPENMETRICS = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
FILL_KEYS = ('let @m = percpuhash(10000); tracepoint:syscalls:sys_enter_getppid /comm == "workload" && @k < 10000/ '
             '{ @m[@k] = count(); @k = @k + 1; }')
FILL_BUCKETS = ('tracepoint:syscalls:sys_enter_getppid /comm == "workload"/ '
                '{ @h[@k % 20] = lhist(@k % 1000, 0, 1000, 20); @k = @k + 1; }')
COUNT = 'tracepoint:syscalls:sys_enter_getppid /comm == "workload"/ { @calls = count(); }'


def scrape(accept=OPENMETRICS):
    request = urllib.request.Request(f"http://127.0.0.1:{PORT}/metrics", headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return reply.read().decode()


def start(args, script):
    """The tracer serving --metrics, once /metrics answers."""
    tracer = subprocess.Popen([args.steadytrace, "--metrics", f"127.0.0.1:{PORT}", "-e", script],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            scrape()
            return tracer
        except OSError:
            time.sleep(0.05)
    stop(tracer)
    raise SystemExit("the tracer did not serve /metrics within 30 s")


def sample(text, prefix):
    return next(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix))


def scrape_time(args, name, script, calls, family, series_wanted):
    tracer = start(args, script)
    try:
        subprocess.run([args.workload, "getppid", str(calls), "1"], check=True)
        text = scrape()
        series = sum(1 for line in text.splitlines() if line.startswith(family))
        if series != series_wanted:
            raise SystemExit(f"{name}: {series} series of {family}, not {series_wanted}")
        wall, read = [], []
        for _ in range(args.scrapes):
            started = time.perf_counter()
            text = scrape()
            wall.append(time.perf_counter() - started)
            read.append(sample(text, "steadytrace_scrape_duration_seconds"))
    finally:
        stop(tracer)
    ms = lambda xs: f"{min(xs) * 1e3:.1f} / {statistics.median(xs) * 1e3:.1f} / {max(xs) * 1e3:.1f}"
    print(f"{name:<14} {series:>7} {len(text.encode()) / 1024:>9.0f} {ms(wall):>22} {ms(read):>22}")


def event_cost(args, scrape_every):
    """ns/event of the count program over --calls getppid calls, and the scrapes made meanwhile: with no scraper
    (scrape_every None), or one scraping every `scrape_every` seconds (0: back to back)."""
    tracer = start(args, COUNT + " " + FILL_KEYS)
    done, scrapes = threading.Event(), [0]

    def scraper():
        while not done.is_set():
            scrape()
            scrapes[0] += 1
            done.wait(scrape_every)

    try:
        subprocess.run([args.workload, "getppid", "10000", "1"], check=True)  # the 10,000 keys
        before = programs(tracer.pid)
        thread = threading.Thread(target=scraper) if scrape_every is not None else None
        if thread:
            thread.start()
        subprocess.run([args.workload, "getppid", str(args.calls), "1"], check=True)
        after = programs(tracer.pid)
        done.set()
        if thread:
            thread.join()
    finally:
        stop(tracer)
    # The count program is the script's first, loaded first: the lower id.
    count_program = min(after)
    time_ns, count = (a - b for a, b in zip(after[count_program], before[count_program]))
    return time_ns / count, scrapes[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scrapes", type=int, default=30)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2_000_000)
    parser.add_argument("--steadytrace", default="target/release/steadytrace")
    parser.add_argument("--workload", default="target/release/examples/workload")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (BPF, and the kernel's BPF statistics)")

    print(f"# scrape time: {args.scrapes} scrapes in a row (OpenMetrics), min / median / max")
    print(f"{'map':<14} {'series':>7} {'size KiB':>9} {'whole scrape ms':>22} {'reading the maps ms':>22}")
    scrape_time(args, "10,000 keys", FILL_KEYS, 10_000, "steadytrace_map_m_total{", 10_000)
    # 20 histograms of 50 buckets, each served with its +Inf bucket and a bucket below min.
    scrape_time(args, "1,000 buckets", FILL_BUCKETS, 20_000, "steadytrace_map_h_bucket{", 20 * 52)

    saved = read_stats_enabled()
    write_stats_enabled(1)
    try:
        settings = ((None, "no scraper"), (1.0, "a scrape every second"), (0, "scraping back to back"))
        runs = {every: [] for every, _ in settings}
        for _ in range(args.runs):
            for every, _ in settings:
                runs[every].append(event_cost(args, every))
    finally:
        write_stats_enabled(saved)
    print(f"\n# per-event cost of `@calls = count()` on {args.calls} getppid calls, median of {args.runs} runs")
    print(f"{'':<28} {'ns/event':>9} {'scrapes':>8}")
    for every, label in settings:
        ns = statistics.median(r[0] for r in runs[every])
        scrapes = statistics.median(r[1] for r in runs[every])
        print(f"{label:<28} {ns:>9.1f} {scrapes:>8.0f}")


if __name__ == "__main__":
    main()
