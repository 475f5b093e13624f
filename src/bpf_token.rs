//! Where steadytrace's BPF token comes from (`bpf::token`): `--bpf-token PATH`; else libbpf's
//! `LIBBPF_BPF_TOKEN_PATH` (set but empty: no token, as libbpf reads it); else `/sys/fs/bpf`, when
//! steadytrace runs in a user namespace other than the host's and a BPF filesystem there delegates
//! something. What was found is kept for `--info` and for the error when the kernel refuses `bpf()`.

use crate::privilege::initial_user_namespace;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where libbpf (and so bpftool and bpftrace) look for a delegated BPF filesystem.
pub const PATH_VAR: &str = "LIBBPF_BPF_TOKEN_PATH";
/// Where systemd, LXD and Incus mount the delegated BPF filesystem in a container.
const DEFAULT_PATH: &str = "/sys/fs/bpf";

/// What became of the token.
#[derive(Debug)]
pub enum Token {
    /// None was looked for: steadytrace runs in the host's user namespace.
    NotWanted,
    /// `LIBBPF_BPF_TOKEN_PATH` is set but empty, which asks for none.
    Disabled,
    /// In a user namespace, but no BPF filesystem delegating anything is mounted at `/sys/fs/bpf`.
    NoDelegation,
    /// In use: made from the BPF filesystem at `path`, which delegates `delegates`.
    InUse { path: PathBuf, delegates: String },
    /// The kernel refused to make one from the BPF filesystem at `path` (an implicit one; an explicit
    /// one is an error at start).
    Refused { path: PathBuf, error: String },
}

static TOKEN: OnceLock<Token> = OnceLock::new();

/// Finds the BPF filesystem to make the token from and makes it, once, before anything talks to the
/// kernel (the feature probes included). A path given by `--bpf-token` or `LIBBPF_BPF_TOKEN_PATH` that
/// yields no token is an error; `/sys/fs/bpf` taken by default is only remembered.
pub fn set_up(flag: Option<&Path>) -> Result<(), String> {
    let from_env = std::env::var_os(PATH_VAR);
    let (path, explicit) = match (flag, &from_env) {
        (Some(path), _) => (path.to_path_buf(), Some("--bpf-token")),
        (None, Some(path)) if path.is_empty() => return remember(Token::Disabled),
        (None, Some(path)) => (PathBuf::from(path), Some(PATH_VAR)),
        (None, None) if initial_user_namespace() => return remember(Token::NotWanted),
        (None, None) => match delegated_at(Path::new(DEFAULT_PATH)) {
            Some(_) => (PathBuf::from(DEFAULT_PATH), None),
            None => return remember(Token::NoDelegation),
        },
    };
    let delegates = delegated_at(&path).unwrap_or_default();
    match bpf::token::create(&path) {
        Ok(()) => remember(Token::InUse { path, delegates }),
        Err(error) => {
            let why = refusal(&error, &path, &delegates);
            match explicit {
                Some(source) => {
                    Err(format!("steadytrace: {source} {}: cannot make a BPF token: {why}\n", path.display()))
                }
                None => remember(Token::Refused { path, error: why }),
            }
        }
    }
}

fn remember(token: Token) -> Result<(), String> {
    let _ = TOKEN.set(token);
    Ok(())
}

/// What became of the token; [`Token::NotWanted`] before [`set_up`].
pub fn state() -> &'static Token {
    TOKEN.get().unwrap_or(&Token::NotWanted)
}

/// The kernel's refusal, in words.
fn refusal(error: &std::io::Error, path: &Path, delegates: &str) -> String {
    if !path.is_dir() {
        return format!("{} is not a directory", path.display());
    }
    match error.raw_os_error() {
        Some(libc::ENOENT) if delegates.is_empty() => format!(
            "the BPF filesystem at {} delegates nothing (no delegate_cmds, delegate_maps, delegate_progs, \
             delegate_attachs among its mount options)",
            path.display()
        ),
        Some(libc::EOPNOTSUPP) => "steadytrace runs in the host's user namespace, where the kernel makes no \
             tokens (none is needed there: capabilities are)"
            .into(),
        Some(libc::EPERM) => {
            "EPERM: the BPF filesystem belongs to another user namespace than steadytrace's \
             (it must be mounted from inside the container, not bind-mounted from the host), or steadytrace \
             lacks CAP_BPF in its own"
                .into()
        }
        Some(libc::EINVAL) => format!("{} is not a BPF filesystem's root", path.display()),
        Some(libc::ENOSYS) => "the kernel has no BPF tokens (Linux 6.9 brought them)".into(),
        _ => error.to_string(),
    }
}

/// The `delegate_*` options of the BPF filesystem mounted at `path`, comma-separated; `None` when no BPF
/// filesystem is mounted there or it delegates nothing.
pub fn delegated_at(path: &Path) -> Option<String> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    // The last mount on a path is the one seen there.
    let line = mounts.lines().rev().find(|line| mount_point(line) == Some(path))?;
    let (_, after) = line.split_once(" - ")?;
    let mut fields = after.split(' ');
    if fields.next() != Some("bpf") {
        return None;
    }
    let options = fields.nth(1)?;
    let delegated: Vec<&str> = options.split(',').filter(|option| option.starts_with("delegate_")).collect();
    (!delegated.is_empty()).then(|| delegated.join(","))
}

/// The mount point of a `/proc/self/mountinfo` line (its fifth field; spaces in it are escaped).
fn mount_point(line: &str) -> Option<&Path> {
    line.split(' ').nth(4).map(Path::new)
}

/// For the error when the kernel refuses `bpf()` in a user namespace: what became of the token, and
/// what the host must do.
pub fn user_namespace_advice() -> String {
    let how =
        "the host must delegate BPF to the container: a BPF filesystem created in the container's user \
               namespace and mounted with delegate_cmds, delegate_maps, delegate_progs and delegate_attachs \
               (Linux 6.9 or later; systemd 258: PrivateBPF=yes with BPFDelegateCommands=, BPFDelegateMaps=, \
               BPFDelegatePrograms=, BPFDelegateAttachments=; LXD: security.delegate_bpf=true; Incus: \
               security.bpffs.delegate_cmds= ...; by hand: see docs/CONTAINERS.md), then steadytrace makes a \
               BPF token from it (--bpf-token PATH, else LIBBPF_BPF_TOKEN_PATH, else /sys/fs/bpf)";
    match state() {
        Token::InUse { path, delegates } => format!(
            "steadytrace uses a BPF token from {} ({delegates}), and the kernel refused the call all the \
             same: the delegation may not cover it (delegate_cmds, delegate_maps, delegate_progs and \
             delegate_attachs say what is delegated; =any delegates everything)",
            path.display()
        ),
        Token::Refused { path, error } => {
            format!("the BPF filesystem at {} gave no BPF token: {error}; {how}", path.display())
        }
        Token::Disabled => format!(
            "steadytrace runs in a user namespace other than the host's, where the kernel allows BPF only through \
             a BPF token, and {PATH_VAR} is set but empty, which asks for none: unset it, or name the delegated \
             BPF filesystem with --bpf-token PATH"
        ),
        Token::NoDelegation | Token::NotWanted => format!(
            "steadytrace runs in a user namespace other than the host's (a rootless container?), where the \
             kernel allows BPF only through a BPF token, and no BPF filesystem at /sys/fs/bpf delegates \
             anything: {how}; or run it in the host's user namespace (docker: --userns=host; podman: rootful)"
        ),
    }
}
