//! How an engine's firings were scheduled, as the kernel says after the fact: the policy, priority and
//! timer slack of the thread that slept until the deadlines, or the kernel context that fired.

#[derive(Clone, Debug, PartialEq)]
pub enum Scheduling {
    /// A thread sleeping until deadlines (ours, or cyclictest's).
    Thread {
        policy: &'static str,
        priority: u32,
        /// Unknown for another program's thread; the kernel ignores it for real-time threads anyway.
        slack_ns: Option<u64>,
    },
    /// Fired by the kernel itself: what fires.
    Kernel(&'static str),
}

impl Scheduling {
    /// The calling thread's.
    pub fn of_this_thread() -> Scheduling {
        let (policy, priority) = std::fs::read_to_string("/proc/thread-self/stat")
            .ok()
            .and_then(|stat| policy_and_priority(&stat))
            .unwrap_or(("unknown", 0));
        let slack_ns = nix::sys::prctl::get_timerslack().ok().and_then(|s| u64::try_from(s).ok());
        Scheduling::Thread { policy, priority, slack_ns }
    }

    /// Another process's thread, from its `/proc/PID/task/TID/stat`.
    pub fn of_task(stat: &str) -> Option<Scheduling> {
        let (policy, priority) = policy_and_priority(stat)?;
        Some(Scheduling::Thread { policy, priority, slack_ns: None })
    }

    /// For the table: `FIFO 1`, `OTHER`, `kernel`.
    pub fn short(&self) -> String {
        match self {
            Scheduling::Thread { policy, priority, .. } => {
                let name = policy.trim_start_matches("SCHED_");
                if *priority > 0 {
                    format!("{name} {priority}")
                } else {
                    name.to_string()
                }
            }
            Scheduling::Kernel(_) => "kernel".into(),
        }
    }

    /// For a note or a legend: `SCHED_FIFO 1`, `kernel: perf sample interrupt`.
    pub fn long(&self) -> String {
        match self {
            Scheduling::Thread { policy, priority, .. } if *priority > 0 => format!("{policy} {priority}"),
            Scheduling::Thread { policy, .. } => policy.to_string(),
            Scheduling::Kernel(what) => format!("kernel: {what}"),
        }
    }

    pub fn json(&self) -> String {
        match self {
            Scheduling::Thread { policy, priority, slack_ns } => format!(
                "{{\"policy\": \"{policy}\", \"priority\": {priority}, \"timer_slack_ns\": {}}}",
                slack_ns.map_or("null".into(), |s| s.to_string())
            ),
            Scheduling::Kernel(what) => format!("{{\"policy\": \"kernel\", \"context\": \"{what}\"}}"),
        }
    }
}

/// The policy (field 41) and real-time priority (field 40) of a `/proc/.../stat` line. The command name
/// in parentheses may hold spaces, so fields are counted from the last `)`, which ends field 2.
fn policy_and_priority(stat: &str) -> Option<(&'static str, u32)> {
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 1..)?.split_whitespace().collect();
    let priority = fields.get(40 - 3)?.parse().ok()?;
    let policy = match fields.get(41 - 3)?.parse::<u32>().ok()? {
        0 => "SCHED_OTHER",
        1 => "SCHED_FIFO",
        2 => "SCHED_RR",
        3 => "SCHED_BATCH",
        5 => "SCHED_IDLE",
        6 => "SCHED_DEADLINE",
        _ => "unknown",
    };
    Some((policy, priority))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_reads_back_what_it_was_given() {
        let given = std::thread::spawn(|| {
            crate::runtime::timer::prepare_timer_thread(0);
            Scheduling::of_this_thread()
        })
        .join()
        .unwrap();
        assert_eq!(given, Scheduling::Thread { policy: "SCHED_OTHER", priority: 0, slack_ns: Some(1) });
        assert_eq!(given.short(), "OTHER");
    }

    #[test]
    fn stat_fields_are_counted_from_the_command_name() {
        let rest = (3..=52).map(|n| match n {
            40 => "1".to_string(),
            41 => "1".to_string(),
            n => n.to_string(),
        });
        let stat = format!("77 (odd (name) x) {}", rest.collect::<Vec<_>>().join(" "));
        let parsed = Scheduling::of_task(&stat).unwrap();
        assert_eq!(parsed.long(), "SCHED_FIFO 1");
        assert_eq!(parsed.short(), "FIFO 1");
        assert!(Scheduling::of_task("77 (short) R 1").is_none());
    }
}
