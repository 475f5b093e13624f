//! Which container and pod a series is about, with real processes in real cgroups named as the kubelet names
//! them (under the cgroup v2 hierarchy's root, found in /proc/mounts): the systemd driver's
//! `kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid with _>.slice/cri-containerd-<id>.scope`
//! and the cgroupfs driver's `kubepods/besteffort/pod<uid>/<id>`. Each runs the workload a known number of times;
//! the tracer's `--metrics` label the counts with `container_id`, `pod_uid` and `cgroup`, `container_id()` prints
//! the id, and a map keyed by `cgroup` still prints the number. The cgroups are removed afterwards, also when the
//! test fails.

mod common;

use common::*;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on a hybrid host).
fn cgroup2_root() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    mounts.lines().find_map(|line| {
        let mut fields = line.split(' ');
        let (_, dir, kind) = (fields.next()?, fields.next()?, fields.next()?);
        (kind == "cgroup2").then(|| PathBuf::from(dir))
    })
}

/// Cgroups this test made: removed when dropped, deepest first, once the processes in them have gone.
struct Made(Vec<PathBuf>);

impl Made {
    /// Makes `path` below `root`, each missing directory on the way; `Err` when one exists already (a kubelet's,
    /// or another run's: not ours to touch).
    fn make(&mut self, root: &Path, path: &str) -> std::io::Result<PathBuf> {
        let mut dir = root.to_path_buf();
        for part in path.split('/') {
            dir.push(part);
            if !self.0.contains(&dir) {
                std::fs::create_dir(&dir)?;
                self.0.push(dir.clone());
            }
        }
        Ok(dir)
    }
}

impl Drop for Made {
    fn drop(&mut self) {
        for dir in self.0.iter().rev() {
            let deadline = Instant::now() + Duration::from_secs(5);
            while std::fs::remove_dir(dir).is_err() && dir.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// Hex digits made from this process's id and the time, `len` of them, so that two runs never share a name.
fn unique_hex(len: usize, salt: u64) -> String {
    let mut state =
        (u64::from(std::process::id()) << 32) ^ monotonic_ns() ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from_digit((state % 16) as u32, 16).unwrap()
        })
        .collect()
}

/// One pod's container as a kubelet driver names its cgroup.
struct Case {
    path: String,
    uid: String,
    id: String,
    calls: u32,
}

#[test]
fn kubelet_cgroups_label_the_series_with_pod_and_container() {
    let test = "kubelet_cgroups_label_the_series_with_pod_and_container";
    if !can_trace(test) {
        return;
    }
    if tracefs().is_none() {
        skip(test, "needs tracefs");
        return;
    }
    let Some(root) = cgroup2_root() else {
        skip(test, "no cgroup2 hierarchy is mounted");
        return;
    };
    let uid = |salt| {
        let hex = unique_hex(32, salt);
        format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
    };
    let (systemd_uid, cgroupfs_uid) = (uid(1), uid(2));
    let (systemd_id, cgroupfs_id) = (unique_hex(64, 3), unique_hex(64, 4));
    let cases = [
        Case {
            path: format!(
                "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{systemd_id}.scope",
                systemd_uid.replace('-', "_")
            ),
            uid: systemd_uid,
            id: systemd_id,
            calls: 3,
        },
        Case {
            path: format!("kubepods/besteffort/pod{cgroupfs_uid}/{cgroupfs_id}"),
            uid: cgroupfs_uid,
            id: cgroupfs_id,
            calls: 5,
        },
    ];
    let mut made = Made(vec![]);
    let mut dirs = vec![];
    for case in &cases {
        match made.make(&root, &case.path) {
            Ok(dir) => dirs.push(dir),
            Err(e) => {
                skip(test, &format!("cannot make the cgroup {} under {}: {e}", case.path, root.display()));
                return;
            }
        }
    }

    // The workload under a name of its own (its comm), so that no other process's calls count.
    let name = format!("kc{}", std::process::id());
    let program = Path::new(env!("CARGO_TARGET_TMPDIR")).join(&name);
    std::fs::copy(workload(), &program).expect("copy the workload");
    let script = format!(
        r#"tracepoint:syscalls:sys_enter_getppid /comm == "{name}"/ {{ @calls[cgroup] = count(); @ids[container_id()] = count(); }}
           tracepoint:syscalls:sys_enter_exit_group /comm == "{name}"/ {{ printf("exit %s %s\n", container_id(), container_id(cgroup)); }}"#
    );
    let (tracer, port, _stderr) = serving_metrics(&["-e", &script], Stdio::piped());
    for (case, dir) in cases.iter().zip(&dirs) {
        // Joins the cgroup, then becomes the workload: every call is made from inside it.
        let procs = dir.join("cgroup.procs");
        let shell = format!(
            "echo $$ > '{}' && exec '{}' getppid {} 1",
            procs.display(),
            program.display(),
            case.calls
        );
        let ran = Command::new("sh").args(["-c", &shell]).status().expect("run sh");
        assert!(ran.success(), "{shell}");
    }
    let _ = std::fs::remove_file(&program);

    let wanted: Vec<String> = cases
        .iter()
        .flat_map(|case| {
            let labels =
                format!(r#"container_id="{}",pod_uid="{}",cgroup="/{}""#, case.id, case.uid, case.path);
            [
                format!("steadytrace_map_calls_total{{{labels}}} {}", case.calls),
                format!("steadytrace_map_ids_total{{{labels}}} {}", case.calls),
            ]
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut text = scrape_metrics(port);
    while !wanted.iter().all(|line| text.lines().any(|l| l == line)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        text = scrape_metrics(port);
    }
    for line in &wanted {
        assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");
    }

    // SIGINT: the tracer prints its maps and exits.
    // SAFETY: kill(2) of our own child's pid.
    assert_eq!(unsafe { libc::kill(tracer.id() as i32, libc::SIGINT) }, 0);
    let output = wait_output(tracer, Duration::from_secs(20));
    let out = stdout(&output);
    for (case, dir) in cases.iter().zip(&dirs) {
        let inode = std::fs::metadata(dir).expect("the cgroup").ino();
        for line in [
            format!("exit {} {}", case.id, case.id),
            format!("@calls[{inode}]: {}", case.calls),
            format!("@ids[{}]: {}", case.id, case.calls),
        ] {
            assert!(out.lines().any(|l| l == line), "no `{line}` in\n{out}");
        }
    }
    println!("{test}: {}", wanted.join("\n"));
    drop(made);
}
