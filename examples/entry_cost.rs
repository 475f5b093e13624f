//! Where the cost of entering BPF from a thread that just woke goes (docs/TIMER-BENCHMARK.md, "Entry
//! cost"). A thread at SCHED_FIFO 1 with 1 ns of timer slack, as the timer thread, wakes at absolute
//! deadlines every PERIOD and times, in turn (one variant per deadline, so that all share the machine's
//! moments), what follows its wake-up:
//!
//! - `bpf,bpf`: `BPF_PROG_TEST_RUN` of an empty raw tracepoint program with an 8-byte context, twice;
//! - `getppid,bpf`: a cheap system call, then the same run;
//! - `bpf-noctx`: the run without a context (nothing copied in);
//! - `ktime`: a program returning the low 32 bits of `bpf_ktime_get_ns()`: the time to the program's
//!   first instructions, and from them back to userspace;
//! - `warm,sleep,bpf`: woken LEAD early, one run to warm the path, asleep again until the deadline, then
//!   the run;
//! - `warm,spin,bpf`: woken LEAD early, one run, then spinning on the clock until the deadline, then the run.
//!
//! Medians (and p90) per step, in ns, and the wake-up's lateness. Root (or CAP_BPF), a quiet machine:
//!
//!     cargo run --release --example entry_cost [PERIOD_US=10000] [FIRINGS_PER_VARIANT=200] [LEAD_US=100]

use bpf::{Asm, AttachMode, Helper, ProgType, Program, Reg};

fn now() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn sleep_until(deadline: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: a valid timespec; no remaining time asked for.
    while unsafe {
        libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut())
    } == libc::EINTR
    {}
}

fn program(ktime: bool) -> Program {
    let mut asm = Asm::new();
    if ktime {
        asm.call(Helper::KtimeGetNs.id());
    } else {
        asm.mov64_imm(Reg::R0, 0);
    }
    asm.exit();
    let code = asm.finish().expect("no labels");
    bpf::load("entry_cost", ProgType::RawTracepoint, AttachMode::PerfEvent, &code, &[])
        .unwrap_or_else(|e| panic!("cannot load a program: {} ({})", e.reason, e.error))
}

const VARIANTS: [&str; 6] =
    ["bpf,bpf", "getppid,bpf", "bpf-noctx", "ktime", "warm,sleep,bpf", "warm,spin,bpf"];

fn main() {
    let arg =
        |i: usize, default: u64| std::env::args().nth(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (period, per_variant, lead) = (arg(1, 10_000) * 1000, arg(2, 200), arg(3, 100) * 1000);
    // SAFETY: plain calls on this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1);
        let param = libc::sched_param { sched_priority: 1 };
        if libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) != 0 {
            eprintln!("entry_cost: SCHED_FIFO refused; measuring at SCHED_OTHER");
        }
    }
    let empty = program(false);
    let ktime = program(true);
    let ctx = [0u8; 8];
    let run = |p: &Program, ctx: &[u8]| {
        let _ = p.run_with_context(ctx);
    };
    // steps[variant] = per firing: (wake lateness, step durations...)
    let mut steps: Vec<Vec<Vec<u64>>> = vec![vec![]; VARIANTS.len()];
    let start = now() + period;
    let total = per_variant * VARIANTS.len() as u64;
    for k in 1..=total {
        let deadline = start + k * period;
        let variant = (k % VARIANTS.len() as u64) as usize;
        let early = VARIANTS[variant].starts_with("warm");
        sleep_until(if early { deadline - lead } else { deadline });
        let t0 = now();
        let mut row = vec![];
        match variant {
            0 => {
                run(&empty, &ctx);
                let t1 = now();
                run(&empty, &ctx);
                let t2 = now();
                row.extend([t0.saturating_sub(deadline), t1 - t0, t2 - t1]);
            }
            1 => {
                // SAFETY: no arguments.
                unsafe { libc::syscall(libc::SYS_getppid) };
                let t1 = now();
                run(&empty, &ctx);
                let t2 = now();
                row.extend([t0.saturating_sub(deadline), t1 - t0, t2 - t1]);
            }
            2 => {
                run(&empty, &[]);
                let t1 = now();
                row.extend([t0.saturating_sub(deadline), t1 - t0]);
            }
            3 => {
                let low = ktime.run_with_context(&ctx).unwrap_or(0) as u64;
                let t1 = now();
                // The program's time from its low 32 bits: the one nearest before t1.
                let mut at = (t1 & !0xffff_ffff) | low;
                if at > t1 {
                    at -= 1 << 32;
                }
                row.extend([t0.saturating_sub(deadline), at.saturating_sub(t0), t1.saturating_sub(at)]);
            }
            4 | 5 => {
                run(&empty, &ctx);
                let t1 = now();
                if variant == 4 {
                    sleep_until(deadline);
                } else {
                    while now() < deadline {
                        std::hint::spin_loop();
                    }
                }
                let t2 = now();
                run(&empty, &ctx);
                let t3 = now();
                row.extend([
                    t0.saturating_sub(deadline - lead),
                    t1 - t0,
                    t2.saturating_sub(deadline),
                    t3 - t2,
                ]);
            }
            _ => unreachable!(),
        }
        if k > VARIANTS.len() as u64 {
            steps[variant].push(row);
        }
    }
    let names: [&[&str]; 6] = [
        &["woke late", "1st bpf", "2nd bpf"],
        &["woke late", "getppid", "bpf after"],
        &["woke late", "bpf, no ctx"],
        &["woke late", "to program", "from program"],
        &["woke late", "warm-up bpf", "woke late again", "bpf"],
        &["woke late", "warm-up bpf", "spun past deadline", "bpf"],
    ];
    println!(
        "period {} us, {} firings per variant, lead {} us; medians (p90) in ns",
        period / 1000,
        per_variant - 1,
        lead / 1000
    );
    for (v, rows) in steps.iter().enumerate() {
        let mut line = format!("{:<16}", VARIANTS[v]);
        for (s, name) in names[v].iter().enumerate() {
            let mut column: Vec<u64> = rows.iter().map(|r| r[s]).collect();
            column.sort_unstable();
            let at = |q: f64| column.get(((column.len() as f64 * q) as usize).min(column.len() - 1)).copied();
            line += &format!("  {name} {} ({})", at(0.5).unwrap_or(0), at(0.9).unwrap_or(0));
        }
        println!("{line}");
    }
}
