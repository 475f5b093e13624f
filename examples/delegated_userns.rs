//! Runs a command as root of an unprivileged user namespace that has a delegated BPF filesystem on /sys/fs/bpf,
//! the way systemd 258 (PrivateBPF=yes), LXD and Incus start a rootless container, for tests/rootless.rs:
//!
//!     delegated_userns [--no-delegate] [--uid-base N] [--delegate OPTION=LIST]... -- COMMAND [ARGS...]
//!
//! Run as root on the host. The command runs in a new user namespace (uid and gid 0 inside are N outside,
//! default 100000: no capability in the initial namespace, no access to root's files such as tracefs) and a new
//! mount namespace with private propagation, so nothing it mounts reaches the host. Unless --no-delegate, a BPF
//! filesystem owned by that user namespace, with every command, map, program and attach type delegated, is on
//! /sys/fs/bpf: a BPF token can be made from it inside (Linux 6.9 and later).
//!
//! Exit status: the command's, 128+N when signal N killed it; 125 when a setup step failed (one line on stderr
//! names the step and the errno), 126 or 127 when COMMAND cannot be executed (as env(1)). SIGINT, SIGTERM,
//! SIGHUP and SIGQUIT sent to this process are passed on to the command.

use std::ffi::{CStr, CString};
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};

use nix::errno::Errno;
use nix::sys::socket::{self, ControlMessage, ControlMessageOwned, MsgFlags};

/// linux/mount.h: fsopen flags.
const FSOPEN_CLOEXEC: libc::c_uint = 0x1;
/// linux/mount.h: fsmount flags.
const FSMOUNT_CLOEXEC: libc::c_uint = 0x1;
/// linux/mount.h: `enum fsconfig_command`.
const FSCONFIG_SET_STRING: libc::c_uint = 1;
const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
/// linux/mount.h: move_mount flags.
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;

/// The bpffs options that delegate BPF commands, map types, program types and attach types to tokens made
/// from the filesystem (kernel/bpf/inode.c). Only a process with CAP_SYS_ADMIN in the initial user namespace
/// may set them, which is why the host side of this program does.
const DELEGATE_OPTIONS: [&CStr; 4] =
    [c"delegate_cmds", c"delegate_maps", c"delegate_progs", c"delegate_attachs"];

/// Setup failed: the caller can tell this from the command's own exit statuses.
const SETUP_FAILED: i32 = 125;

/// The child, in the parent once forked: killed when the parent fails, the target of forwarded signals.
static CHILD: AtomicI32 = AtomicI32::new(0);

/// One line naming the failed step and its errno, then exit 125; in the parent, the child is killed first so
/// that it does not wait forever for the parent's next message.
fn fail(step: &str, errno: Errno) -> ! {
    eprintln!("delegated_userns: {step}: {errno}");
    let child = CHILD.load(Ordering::Relaxed);
    if child > 0 {
        // SAFETY: kill and waitpid have no memory preconditions; the pid is our unreaped child.
        unsafe {
            libc::kill(child, libc::SIGKILL);
            libc::waitpid(child, std::ptr::null_mut(), 0);
        }
    }
    std::process::exit(SETUP_FAILED);
}

fn check<T>(step: &str, result: nix::Result<T>) -> T {
    result.unwrap_or_else(|errno| fail(step, errno))
}

/// A raw system call's result: the errno when it returned -1.
fn sys(result: libc::c_long) -> nix::Result<libc::c_long> {
    Errno::result(result)
}

fn usage() -> ! {
    eprintln!(
        "usage: delegated_userns [--no-delegate] [--uid-base N] [--delegate OPTION=LIST]... -- COMMAND [ARGS...]"
    );
    std::process::exit(2);
}

struct Options {
    delegate: bool,
    uid_base: u32,
    /// `--delegate delegate_progs=raw_tracepoint:tracing`: what one option delegates instead of `any`.
    narrower: Vec<(CString, CString)>,
    command: Vec<CString>,
}

fn parse_args() -> Options {
    let mut args = std::env::args().skip(1);
    let mut options = Options { delegate: true, uid_base: 100_000, narrower: vec![], command: vec![] };
    loop {
        match args.next().as_deref() {
            Some("--no-delegate") => options.delegate = false,
            Some("--uid-base") => {
                // 0 would map root inside to the host's root: the point is an unprivileged namespace.
                match args.next().and_then(|n| n.parse::<u32>().ok()) {
                    Some(n) if n > 0 && n < u32::MAX => options.uid_base = n,
                    _ => usage(),
                }
            }
            Some("--delegate") => {
                let arg = args.next().unwrap_or_else(|| usage());
                let Some((option, list)) = arg.split_once('=') else { usage() };
                if !DELEGATE_OPTIONS.iter().any(|known| known.to_bytes() == option.as_bytes()) {
                    usage();
                }
                let (Ok(option), Ok(list)) = (CString::new(option), CString::new(list)) else { usage() };
                options.narrower.push((option, list));
            }
            Some("--") => break,
            _ => usage(),
        }
    }
    options.command = args.map(|a| CString::new(a).unwrap_or_else(|_| usage())).collect();
    if options.command.is_empty() {
        usage();
    }
    options
}

/// One byte to the other side: "go on".
fn send_byte(sock: &OwnedFd, step: &str) {
    check(step, socket::send(sock.as_raw_fd(), b"!", MsgFlags::empty()));
}

/// Waits for the other side's byte; false when the other side ended without sending it.
fn recv_byte(sock: &OwnedFd, step: &str) -> bool {
    let mut byte = [0u8; 1];
    check(step, socket::recv(sock.as_raw_fd(), &mut byte, MsgFlags::empty())) == 1
}

fn send_fd(sock: &OwnedFd, fd: RawFd) {
    let fds = [fd];
    let message = [IoSlice::new(b"!")];
    check(
        "sendmsg of the fs context",
        socket::sendmsg::<()>(
            sock.as_raw_fd(),
            &message,
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::empty(),
            None,
        ),
    );
}

/// The descriptor the child sent; None when the child ended without sending one (it said why).
fn recv_fd(sock: &OwnedFd) -> Option<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut message = [IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let received = check(
        "recvmsg of the fs context",
        socket::recvmsg::<()>(sock.as_raw_fd(), &mut message, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC),
    );
    if received.bytes == 0 {
        return None;
    }
    for cmsg in check("recvmsg of the fs context", received.cmsgs()) {
        if let ControlMessageOwned::ScmRights(fds) = cmsg {
            if let Some(&fd) = fds.first() {
                // SAFETY: the kernel just installed this descriptor in our table; nothing else owns it.
                return Some(unsafe { OwnedFd::from_raw_fd(fd) });
            }
        }
    }
    fail("recvmsg of the fs context: no descriptor", Errno::EPROTO)
}

extern "C" fn forward(signal: libc::c_int) {
    let child = CHILD.load(Ordering::Relaxed);
    if child > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(child, signal) };
    }
}

/// The host side: maps the child's ids, completes its bpffs with the delegate options, waits for it.
fn parent(child: libc::pid_t, sock: OwnedFd, options: &Options) -> ! {
    CHILD.store(child, Ordering::Relaxed);
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        // A signal ignored by whoever started us (SIGINT of a background job) stays ignored, as it is in the child.
        // SAFETY: the handler only loads an atomic and calls kill, both async-signal-safe.
        if unsafe { libc::signal(signal, forward as *const () as libc::sighandler_t) } == libc::SIG_IGN {
            // SAFETY: as above.
            unsafe { libc::signal(signal, libc::SIG_IGN) };
        }
    }
    if recv_byte(&sock, "waiting for the child's unshare") {
        // Only the user namespace's parent with CAP_SETUID/CAP_SETGID there may map ids other than its own euid;
        // with CAP_SETGID it need not deny setgroups first.
        let map = format!("0 {} 1\n", options.uid_base);
        for file in ["uid_map", "gid_map"] {
            let path = format!("/proc/{child}/{file}");
            if let Err(e) = std::fs::write(&path, &map) {
                fail(&format!("writing {path}"), Errno::from_raw(e.raw_os_error().unwrap_or(0)));
            }
        }
        send_byte(&sock, "telling the child its ids are mapped");
        if options.delegate {
            if let Some(context) = recv_fd(&sock) {
                for option in DELEGATE_OPTIONS {
                    let value = options
                        .narrower
                        .iter()
                        .find(|(narrowed, _)| narrowed.as_c_str() == option)
                        .map_or(c"any", |(_, list)| list.as_c_str());
                    let step = format!("fsconfig {}={}", option.to_string_lossy(), value.to_string_lossy());
                    // SAFETY: fsconfig(2) with a string key and value that outlive the call.
                    check(
                        &step,
                        sys(unsafe {
                            libc::syscall(
                                libc::SYS_fsconfig,
                                context.as_raw_fd(),
                                FSCONFIG_SET_STRING,
                                option.as_ptr(),
                                value.as_ptr(),
                                0,
                            )
                        }),
                    );
                }
                // The superblock is made here, by a process with CAP_SYS_ADMIN in the initial namespace, as
                // bpf_fill_super requires for one owned by another user namespace; the child mounts it.
                // SAFETY: fsconfig(2) with no key or value.
                check(
                    "fsconfig FSCONFIG_CMD_CREATE",
                    sys(unsafe {
                        libc::syscall(
                            libc::SYS_fsconfig,
                            context.as_raw_fd(),
                            FSCONFIG_CMD_CREATE,
                            std::ptr::null::<libc::c_char>(),
                            std::ptr::null::<libc::c_void>(),
                            0,
                        )
                    }),
                );
                drop(context);
                send_byte(&sock, "telling the child the bpffs is created");
            }
        }
    }
    drop(sock);
    let mut status = 0;
    loop {
        // SAFETY: status is a valid int to write to.
        if unsafe { libc::waitpid(child, &mut status, 0) } == child {
            break;
        }
        let errno = Errno::last();
        if errno != Errno::EINTR {
            CHILD.store(0, Ordering::Relaxed);
            fail("waitpid", errno);
        }
    }
    if libc::WIFSIGNALED(status) {
        std::process::exit(128 + libc::WTERMSIG(status));
    }
    std::process::exit(libc::WEXITSTATUS(status));
}

/// The namespace side: new user and mount namespaces, the bpffs mounted on /sys/fs/bpf, then COMMAND as root
/// of the namespace.
fn child(parent_pid: libc::pid_t, sock: OwnedFd, options: &Options) -> ! {
    // Host root's supplementary groups would stay kernel gid 0 inside (shown as the overflow gid) and pass the
    // group checks of root's files; the namespace cannot drop them once setgroups is subject to its gid map.
    // SAFETY: an empty list.
    check("setgroups([])", Errno::result(unsafe { libc::setgroups(0, std::ptr::null()) }));
    // SAFETY: plain unshare; this process is single-threaded, as CLONE_NEWUSER requires.
    check(
        "unshare(CLONE_NEWUSER|CLONE_NEWNS)",
        Errno::result(unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) }),
    );
    send_byte(&sock, "telling the parent about the unshare");
    if !recv_byte(&sock, "waiting for the id maps") {
        std::process::exit(SETUP_FAILED); // the parent said why
    }
    // SAFETY: NUL-terminated strings; no source, type or data.
    check(
        "mount(/, MS_REC|MS_PRIVATE)",
        Errno::result(unsafe {
            libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
        }),
    );
    if options.delegate {
        // Opened here, the context belongs to this user namespace: so does the superblock made from it.
        // SAFETY: fsopen(2) with a NUL-terminated name.
        let context = check(
            "fsopen(bpf)",
            sys(unsafe { libc::syscall(libc::SYS_fsopen, c"bpf".as_ptr(), FSOPEN_CLOEXEC) }),
        );
        // SAFETY: fsopen returned a new descriptor that nothing else owns.
        let context = unsafe { OwnedFd::from_raw_fd(context as RawFd) };
        send_fd(&sock, context.as_raw_fd());
        if !recv_byte(&sock, "waiting for the bpffs to be created") {
            std::process::exit(SETUP_FAILED);
        }
        // SAFETY: fsmount(2) on our fs context descriptor.
        let mount = check(
            "fsmount",
            sys(unsafe { libc::syscall(libc::SYS_fsmount, context.as_raw_fd(), FSMOUNT_CLOEXEC, 0) }),
        );
        // SAFETY: fsmount returned a new descriptor that nothing else owns.
        let mount = unsafe { OwnedFd::from_raw_fd(mount as RawFd) };
        // SAFETY: move_mount(2) with NUL-terminated paths.
        check(
            "move_mount to /sys/fs/bpf",
            sys(unsafe {
                libc::syscall(
                    libc::SYS_move_mount,
                    mount.as_raw_fd(),
                    c"".as_ptr(),
                    libc::AT_FDCWD,
                    c"/sys/fs/bpf".as_ptr(),
                    MOVE_MOUNT_F_EMPTY_PATH,
                )
            }),
        );
    }
    drop(sock);
    // Kernel uid and gid N from here on: still kernel uid 0, the command would pass the owner checks of root's
    // files (tracefs); and as root of the namespace it keeps its capabilities there across the exec.
    // SAFETY: plain set*id calls.
    check("setresgid(0, 0, 0)", Errno::result(unsafe { libc::setresgid(0, 0, 0) }));
    // SAFETY: as above.
    check("setresuid(0, 0, 0)", Errno::result(unsafe { libc::setresuid(0, 0, 0) }));
    // The command dies with this program (a killed test must not leave it running). Set after the id change,
    // which clears it; the parent may have died before.
    // SAFETY: plain prctl and getppid.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) } != 0
        || unsafe { libc::getppid() } != parent_pid
    {
        std::process::exit(SETUP_FAILED);
    }
    let mut argv: Vec<*const libc::c_char> = options.command.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    // SAFETY: argv is a NULL-terminated array of C strings that live until execvp returns.
    unsafe { libc::execvp(argv[0], argv.as_ptr()) };
    let errno = Errno::last();
    eprintln!("delegated_userns: cannot run {:?}: {errno}", options.command[0]);
    std::process::exit(if errno == Errno::ENOENT { 127 } else { 126 });
}

fn main() {
    let options = parse_args();
    // Datagrams keep the messages apart; SCM_RIGHTS carries the fs context.
    let (host_end, ns_end) = check(
        "socketpair",
        socket::socketpair(
            socket::AddressFamily::Unix,
            socket::SockType::SeqPacket,
            None,
            socket::SockFlag::SOCK_CLOEXEC,
        ),
    );
    // SAFETY: getpid has no preconditions.
    let parent_pid = unsafe { libc::getpid() };
    // SAFETY: no other thread exists yet, so the child may do anything the parent could.
    match unsafe { libc::fork() } {
        -1 => fail("fork", Errno::last()),
        0 => {
            drop(host_end);
            child(parent_pid, ns_end, &options)
        }
        pid => {
            drop(ns_end);
            parent(pid, host_end, &options)
        }
    }
}
