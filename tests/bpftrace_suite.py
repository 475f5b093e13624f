#!/usr/bin/env python3
"""Run bpftrace's own runtime suite (tests/runtime of its repository) against steadytrace.

The selection is the suite's self-contained cases: a PROG (not a RUN command line), no BEFORE/AFTER/SETUP
commands, no REQUIRES, and only probes that need no workload: begin/end, interval and profile; `percpu_kaddr`
cases only where /proc/kallsyms lists variables (bpftrace needs that too). Each case runs as
bpftrace's runner would run it (`-e PROG`, `-q -f json` for EXPECT_JSON, its TIMEOUT, then SIGTERM), and its
EXPECT lines are checked with bpftrace's own rules.

    tests/bpftrace_suite.py [--source DIR] [--steadytrace BIN] [--only SUBSTRING] [--failures FILE]
                            [--expected-failures FILE] [--jobs N]

DIR is bpftrace's source (the project keeps no copy): the cases are DIR/tests/runtime. By default the directory
scripts/bpftrace-source prints (STEADYTRACE_BPFTRACE_SOURCE, else ../shared/upstream/bpftrace, else a clone).
Prints one line per failing case and a summary `passed N of M (P%)`. With --expected-failures, exits 1 when a case fails that the file
does not list (a regression); cases the file lists that now pass are named so the list can shrink.
"""

import argparse
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import shutil
import sys
import tempfile
import time

WORKLOAD_FREE_PROBES = re.compile(r"^(begin|end|BEGIN|END|interval|i|profile|p)$")
ATTACH_POINT = re.compile(r"(?:^|[}\n;])\s*([A-Za-z_]+)(?::[^\s{,/]*)?\s*(?=[{,/])")


class Case:
    def __init__(self, suite, lines):
        self.suite = suite
        self.name = ""
        self.run = ""
        self.prog = ""
        self.expects = []  # (mode, text)
        self.timeout = 5
        self.excluded = None
        self.will_fail = False
        self.return_code = 0
        self.env = {}
        # bpftrace's runner fills the expected file's `%H`... in with this moment's local time.
        self.localize_ts = None
        self.parse(lines)

    def parse(self, lines):
        prev = ""
        for raw in lines:
            if prev and raw[: len(prev) + 1].isspace():
                continuation = raw[len(prev) + 1 :].rstrip("\n")
                if prev == "PROG":
                    self.prog += "\n" + continuation
                    continue
                if prev in ("EXPECT", "EXPECT_REGEX"):
                    mode, text = self.expects[-1]
                    self.expects[-1] = (mode, text + "\n" + continuation)
                    continue
            parts = raw.strip().split(maxsplit=1)
            key, value = parts[0], (parts[1] if len(parts) > 1 else "")
            prev = key
            if key == "NAME":
                self.name = value
            elif key == "RUN":
                self.run = value
            elif key == "PROG":
                self.prog = value
            elif key in ("EXPECT", "EXPECT_NONE", "EXPECT_REGEX", "EXPECT_REGEX_NONE", "EXPECT_FILE", "EXPECT_JSON"):
                self.expects.append((key, value))
            elif key == "TIMEOUT":
                self.timeout = int(value.strip())
            elif key == "WILL_FAIL":
                self.will_fail = True
            elif key == "RETURN_CODE":
                self.return_code = int(value.strip())
            elif key == "ENV":
                for pair in value.split():
                    k, v = pair.split("=", 1)
                    self.env[k] = v
            elif key == "LOCALIZE_TIMESTAMPS":
                self.localize_ts = int(value.strip())
            elif key in ("BEFORE", "AFTER", "SETUP", "CLEANUP", "NEW_PIDNS"):
                self.excluded = self.excluded or f"needs {key}"
            elif key in ("REQUIRES", "REQUIRES_FEATURE"):
                self.excluded = self.excluded or f"needs {key}"
            elif key == "ARCH":
                archs = [a.strip() for a in value.split("|")]
                if not any(a in ("x86_64", "le") for a in archs if not a.startswith("!")):
                    self.excluded = self.excluded or "other architecture"
            # MIN_KERNEL, MAX_KERNEL, SKIP_IF_ENV_HAS: no effect on this selection
        if not self.excluded and "percpu_kaddr" in self.prog and not kallsyms_lists_variables():
            # bpftrace fails these too on such a kernel; tests/guest.rs runs percpu_kaddr where it can.
            self.excluded = "needs per-CPU variables in /proc/kallsyms (CONFIG_KALLSYMS_ALL)"
        if not self.excluded:
            if not self.prog:
                self.excluded = "RUN command line"
            else:
                probes = {m for m in ATTACH_POINT.findall(strip_comments(self.prog))}
                other = [p for p in probes if not WORKLOAD_FREE_PROBES.match(p) and p not in KEYWORDS]
                if other:
                    self.excluded = "probes needing a workload: " + ",".join(sorted(other))

    @property
    def full_name(self):
        return f"{self.suite}.{self.name}"


def kallsyms_lists_variables():
    """Whether /proc/kallsyms names the kernel's variables (a per-CPU one: `runqueues`), not only functions."""
    try:
        with open("/proc/kallsyms") as kallsyms:
            return any(line.rstrip().endswith(" runqueues") for line in kallsyms)
    except OSError:
        return False


KEYWORDS = {"if", "else", "unroll", "while", "for", "config", "macro", "let", "return", "import"}


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return re.sub(r"//[^\n]*", "", text)


def read_cases(runtime_dir):
    for root, dirs, files in os.walk(runtime_dir):
        dirs[:] = [d for d in dirs if d not in ("engine", "scripts", "outputs")]
        for name in sorted(files):
            if name.startswith(".") or name.endswith((".py", ".txt", ".md")):
                continue
            path = os.path.join(root, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.readlines()
            block = []
            for number, line in enumerate(lines, 1):
                if line.startswith("#"):
                    continue
                if line != "\n":
                    block.append(line)
                if (line == "\n" or number == len(lines)) and block:
                    yield Case(name, block)
                    block = []


def expect_holds(mode, text, output, tests_dir, localize_ts=None):
    if mode == "EXPECT":
        return re.search(rf"^\s*{re.escape(text)}\s*$", output, re.M) is not None
    if mode == "EXPECT_NONE":
        return re.search(rf"^\s*{re.escape(text)}\s*$", output, re.M) is None
    if mode == "EXPECT_REGEX":
        return re.search(text, output, re.M) is not None
    if mode == "EXPECT_REGEX_NONE":
        return re.search(text, output, re.M) is None
    with open(os.path.join(tests_dir, text)) as f:
        expected = f.read()
    if mode == "EXPECT_FILE":
        if localize_ts is not None:
            expected = time.strftime(expected, time.localtime(localize_ts))
        return output.strip() == expected.strip()
    lines = output.strip().splitlines()
    try:
        if text.endswith(".ndjson"):
            want = expected.strip().splitlines()
            return len(want) == len(lines) and all(json.loads(a) == json.loads(b) for a, b in zip(want, lines))
        return len(lines) == 1 and json.loads(lines[0]) == json.loads(expected)
    except json.JSONDecodeError:
        return False


def run_case(case, binary, tests_dir):
    modes = [m for m, _ in case.expects]
    exact = any(m in ("EXPECT_FILE", "EXPECT_JSON") for m in modes)
    args = [binary]
    if "EXPECT_JSON" in modes:
        args += ["-q", "-f", "json"]
    args += ["-e", case.prog]
    env = dict(os.environ)
    env.update(case.env)
    # bpftrace's runner merges stderr into the output; exact comparisons start after attaching, which puts
    # bpftrace's "Attaching N probes" (and steadytrace's) out of the compared text: here, stdout only.
    proc = subprocess.Popen(
        args,
        cwd=tests_dir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if exact else subprocess.STDOUT,
        start_new_session=True,
    )
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=case.timeout + 2)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=2)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
    output = out.decode("utf-8", errors="backslashreplace")
    failed = [(m, t) for m, t in case.expects if not expect_holds(m, t, output, tests_dir, case.localize_ts)]
    problem = None
    if failed:
        problem = "expected " + " / ".join(f"{m} {t!r}" for m, t in failed)
    elif not timed_out:
        if case.will_fail and proc.returncode == 0:
            problem = "exit 0 where a failure was expected"
        elif not case.will_fail and proc.returncode != case.return_code:
            problem = f"exit {proc.returncode}, expected {case.return_code}"
    return problem, output


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--source", help="bpftrace's source (default: what scripts/bpftrace-source prints)")
    parser.add_argument("--steadytrace", default=os.path.join(here, "../target/debug/steadytrace"))
    parser.add_argument("--only", help="run only cases whose suite.name contains this")
    parser.add_argument("--failures", help="write each failing case with its output to this file")
    parser.add_argument("--expected-failures", help="file listing the cases known to fail, one suite.name per line")
    parser.add_argument("--differences", help="file of the cases steadytrace differs from by design (suite.name, tab, why): left out")
    parser.add_argument("--jobs", type=int, default=8, help="cases run at once (default 8)")
    parser.add_argument("--list", action="store_true", help="list the selected cases and stop")
    opts = parser.parse_args()

    source = opts.source
    if source is None:
        found = subprocess.run([os.path.join(here, "../scripts/bpftrace-source")], capture_output=True, text=True)
        if found.returncode != 0:
            print(found.stderr.strip(), file=sys.stderr)
            return 2
        source = found.stdout.strip()
    tests_dir = os.path.join(os.path.abspath(source), "tests")
    # Cases that print `comm` in begin expect the tracer's own name: run steadytrace under the name bpftrace.
    named = tempfile.mkdtemp(prefix="steadytrace-suite-")
    binary = os.path.join(named, "bpftrace")
    os.symlink(os.path.abspath(opts.steadytrace), binary)
    cases = [c for c in read_cases(os.path.join(tests_dir, "runtime")) if not c.excluded]
    differences = {}
    if opts.differences:
        with open(opts.differences) as f:
            for line in f:
                if line.strip() and not line.startswith("#"):
                    name, _, why = line.rstrip("\n").partition("\t")
                    differences[name] = why
        cases = [c for c in cases if c.full_name not in differences]
    if opts.only:
        cases = [c for c in cases if opts.only in c.full_name]
    if opts.list:
        for c in cases:
            print(c.full_name)
        return 0

    known = set()
    if opts.expected_failures:
        with open(opts.expected_failures) as f:
            known = {line.strip() for line in f if line.strip() and not line.startswith("#")}

    report = open(opts.failures, "w") if opts.failures else None
    failing = []
    started = time.time()
    # Most cases wait for their timeout or an interval: run several at once.
    with concurrent.futures.ThreadPoolExecutor(max_workers=opts.jobs) as pool:
        results = list(pool.map(lambda case: run_case(case, binary, tests_dir), cases))
    for case, (problem, output) in zip(cases, results):
        if problem:
            failing.append(case.full_name)
            print(f"FAIL {case.full_name}: {problem}", flush=True)
            if report:
                report.write(f"=== {case.full_name}\n--- PROG\n{case.prog}\n--- {problem}\n--- output\n{output[:3000]}\n\n")
    shutil.rmtree(named)
    passed = len(cases) - len(failing)
    share = 100.0 * passed / len(cases) if cases else 0.0
    print(f"passed {passed} of {len(cases)} ({share:.1f}%) in {time.time() - started:.0f} s")
    if differences:
        print(f"left out as deliberate differences: {len(differences)} ({', '.join(sorted(differences))})")
    if report:
        report.close()
    if opts.expected_failures and not opts.only:
        regressions = [n for n in failing if n not in known]
        fixed = sorted(known - set(failing))
        for name in fixed:
            print(f"now passes (remove from the expected failures): {name}")
        for name in regressions:
            print(f"REGRESSION: {name}")
        return 1 if regressions else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
