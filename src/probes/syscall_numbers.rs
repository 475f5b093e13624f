//! System call numbers by the name their tracepoints carry (`sys_enter_NAME`), for serving
//! `tracepoint:syscalls:*` from the `raw_syscalls` raw tracepoints, which see only the number.

/// The number of the system call whose tracepoints are `sys_enter_NAME` and `sys_exit_NAME`.
pub fn number(name: &str) -> Option<i64> {
    let name = ALIASES.iter().find(|(alias, _)| *alias == name).map_or(name, |(_, real)| real);
    KNOWN.iter().chain(NEWER).find(|(n, _)| *n == name).map(|(_, nr)| *nr)
}

/// Every system call this table knows: its name and number.
pub fn all() -> impl Iterator<Item = (&'static str, i64)> {
    KNOWN.iter().chain(NEWER).copied()
}

/// Tracepoints named after the kernel's function rather than the system call.
const ALIASES: &[(&str, &str)] = &[
    ("newstat", "stat"),
    ("newfstat", "fstat"),
    ("newlstat", "lstat"),
    ("newuname", "uname"),
    ("sendfile64", "sendfile"),
    ("umount", "umount2"),
];

/// Those the C library knows.
#[rustfmt::skip]
const KNOWN: &[(&str, i64)] = &[
    ("read", libc::SYS_read), ("write", libc::SYS_write), ("open", libc::SYS_open), ("close", libc::SYS_close),
    ("stat", libc::SYS_stat), ("fstat", libc::SYS_fstat), ("lstat", libc::SYS_lstat), ("poll", libc::SYS_poll),
    ("lseek", libc::SYS_lseek), ("mmap", libc::SYS_mmap), ("mprotect", libc::SYS_mprotect),
    ("munmap", libc::SYS_munmap), ("brk", libc::SYS_brk), ("rt_sigaction", libc::SYS_rt_sigaction),
    ("rt_sigprocmask", libc::SYS_rt_sigprocmask), ("rt_sigreturn", libc::SYS_rt_sigreturn),
    ("ioctl", libc::SYS_ioctl), ("pread64", libc::SYS_pread64), ("pwrite64", libc::SYS_pwrite64),
    ("readv", libc::SYS_readv), ("writev", libc::SYS_writev), ("access", libc::SYS_access),
    ("pipe", libc::SYS_pipe), ("select", libc::SYS_select), ("sched_yield", libc::SYS_sched_yield),
    ("mremap", libc::SYS_mremap), ("msync", libc::SYS_msync), ("mincore", libc::SYS_mincore),
    ("madvise", libc::SYS_madvise), ("shmget", libc::SYS_shmget), ("shmat", libc::SYS_shmat),
    ("shmctl", libc::SYS_shmctl), ("dup", libc::SYS_dup), ("dup2", libc::SYS_dup2), ("pause", libc::SYS_pause),
    ("nanosleep", libc::SYS_nanosleep), ("getitimer", libc::SYS_getitimer), ("alarm", libc::SYS_alarm),
    ("setitimer", libc::SYS_setitimer), ("getpid", libc::SYS_getpid), ("sendfile", libc::SYS_sendfile),
    ("socket", libc::SYS_socket), ("connect", libc::SYS_connect), ("accept", libc::SYS_accept),
    ("sendto", libc::SYS_sendto), ("recvfrom", libc::SYS_recvfrom), ("sendmsg", libc::SYS_sendmsg),
    ("recvmsg", libc::SYS_recvmsg), ("shutdown", libc::SYS_shutdown), ("bind", libc::SYS_bind),
    ("listen", libc::SYS_listen), ("getsockname", libc::SYS_getsockname), ("getpeername", libc::SYS_getpeername),
    ("socketpair", libc::SYS_socketpair), ("setsockopt", libc::SYS_setsockopt),
    ("getsockopt", libc::SYS_getsockopt), ("clone", libc::SYS_clone), ("fork", libc::SYS_fork),
    ("vfork", libc::SYS_vfork), ("execve", libc::SYS_execve), ("exit", libc::SYS_exit), ("wait4", libc::SYS_wait4),
    ("kill", libc::SYS_kill), ("uname", libc::SYS_uname), ("semget", libc::SYS_semget), ("semop", libc::SYS_semop),
    ("semctl", libc::SYS_semctl), ("shmdt", libc::SYS_shmdt), ("msgget", libc::SYS_msgget),
    ("msgsnd", libc::SYS_msgsnd), ("msgrcv", libc::SYS_msgrcv), ("msgctl", libc::SYS_msgctl),
    ("fcntl", libc::SYS_fcntl), ("flock", libc::SYS_flock), ("fsync", libc::SYS_fsync),
    ("fdatasync", libc::SYS_fdatasync), ("truncate", libc::SYS_truncate), ("ftruncate", libc::SYS_ftruncate),
    ("getdents", libc::SYS_getdents), ("getcwd", libc::SYS_getcwd), ("chdir", libc::SYS_chdir),
    ("fchdir", libc::SYS_fchdir), ("rename", libc::SYS_rename), ("mkdir", libc::SYS_mkdir),
    ("rmdir", libc::SYS_rmdir), ("creat", libc::SYS_creat), ("link", libc::SYS_link), ("unlink", libc::SYS_unlink),
    ("symlink", libc::SYS_symlink), ("readlink", libc::SYS_readlink), ("chmod", libc::SYS_chmod),
    ("fchmod", libc::SYS_fchmod), ("chown", libc::SYS_chown), ("fchown", libc::SYS_fchown),
    ("lchown", libc::SYS_lchown), ("umask", libc::SYS_umask), ("gettimeofday", libc::SYS_gettimeofday),
    ("getrlimit", libc::SYS_getrlimit), ("getrusage", libc::SYS_getrusage), ("sysinfo", libc::SYS_sysinfo),
    ("times", libc::SYS_times), ("ptrace", libc::SYS_ptrace), ("getuid", libc::SYS_getuid),
    ("syslog", libc::SYS_syslog), ("getgid", libc::SYS_getgid), ("setuid", libc::SYS_setuid),
    ("setgid", libc::SYS_setgid), ("geteuid", libc::SYS_geteuid), ("getegid", libc::SYS_getegid),
    ("setpgid", libc::SYS_setpgid), ("getppid", libc::SYS_getppid), ("getpgrp", libc::SYS_getpgrp),
    ("setsid", libc::SYS_setsid), ("setreuid", libc::SYS_setreuid), ("setregid", libc::SYS_setregid),
    ("getgroups", libc::SYS_getgroups), ("setgroups", libc::SYS_setgroups), ("setresuid", libc::SYS_setresuid),
    ("getresuid", libc::SYS_getresuid), ("setresgid", libc::SYS_setresgid), ("getresgid", libc::SYS_getresgid),
    ("getpgid", libc::SYS_getpgid), ("setfsuid", libc::SYS_setfsuid), ("setfsgid", libc::SYS_setfsgid),
    ("getsid", libc::SYS_getsid), ("capget", libc::SYS_capget), ("capset", libc::SYS_capset),
    ("rt_sigpending", libc::SYS_rt_sigpending), ("rt_sigtimedwait", libc::SYS_rt_sigtimedwait),
    ("rt_sigqueueinfo", libc::SYS_rt_sigqueueinfo), ("rt_sigsuspend", libc::SYS_rt_sigsuspend),
    ("sigaltstack", libc::SYS_sigaltstack), ("utime", libc::SYS_utime), ("mknod", libc::SYS_mknod),
    ("uselib", libc::SYS_uselib), ("personality", libc::SYS_personality), ("ustat", libc::SYS_ustat),
    ("statfs", libc::SYS_statfs), ("fstatfs", libc::SYS_fstatfs), ("sysfs", libc::SYS_sysfs),
    ("getpriority", libc::SYS_getpriority), ("setpriority", libc::SYS_setpriority),
    ("sched_setparam", libc::SYS_sched_setparam), ("sched_getparam", libc::SYS_sched_getparam),
    ("sched_setscheduler", libc::SYS_sched_setscheduler), ("sched_getscheduler", libc::SYS_sched_getscheduler),
    ("sched_get_priority_max", libc::SYS_sched_get_priority_max),
    ("sched_get_priority_min", libc::SYS_sched_get_priority_min),
    ("sched_rr_get_interval", libc::SYS_sched_rr_get_interval), ("mlock", libc::SYS_mlock),
    ("munlock", libc::SYS_munlock), ("mlockall", libc::SYS_mlockall), ("munlockall", libc::SYS_munlockall),
    ("vhangup", libc::SYS_vhangup), ("modify_ldt", libc::SYS_modify_ldt), ("pivot_root", libc::SYS_pivot_root),
    ("_sysctl", libc::SYS__sysctl), ("prctl", libc::SYS_prctl), ("arch_prctl", libc::SYS_arch_prctl),
    ("adjtimex", libc::SYS_adjtimex), ("setrlimit", libc::SYS_setrlimit), ("chroot", libc::SYS_chroot),
    ("sync", libc::SYS_sync), ("acct", libc::SYS_acct), ("settimeofday", libc::SYS_settimeofday),
    ("mount", libc::SYS_mount), ("umount2", libc::SYS_umount2), ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff), ("reboot", libc::SYS_reboot), ("sethostname", libc::SYS_sethostname),
    ("setdomainname", libc::SYS_setdomainname), ("iopl", libc::SYS_iopl), ("ioperm", libc::SYS_ioperm),
    ("init_module", libc::SYS_init_module), ("delete_module", libc::SYS_delete_module),
    ("quotactl", libc::SYS_quotactl), ("nfsservctl", libc::SYS_nfsservctl), ("getpmsg", libc::SYS_getpmsg),
    ("putpmsg", libc::SYS_putpmsg), ("afs_syscall", libc::SYS_afs_syscall), ("tuxcall", libc::SYS_tuxcall),
    ("security", libc::SYS_security), ("gettid", libc::SYS_gettid), ("readahead", libc::SYS_readahead),
    ("setxattr", libc::SYS_setxattr), ("lsetxattr", libc::SYS_lsetxattr), ("fsetxattr", libc::SYS_fsetxattr),
    ("getxattr", libc::SYS_getxattr), ("lgetxattr", libc::SYS_lgetxattr), ("fgetxattr", libc::SYS_fgetxattr),
    ("listxattr", libc::SYS_listxattr), ("llistxattr", libc::SYS_llistxattr), ("flistxattr", libc::SYS_flistxattr),
    ("removexattr", libc::SYS_removexattr), ("lremovexattr", libc::SYS_lremovexattr),
    ("fremovexattr", libc::SYS_fremovexattr), ("tkill", libc::SYS_tkill), ("time", libc::SYS_time),
    ("futex", libc::SYS_futex), ("sched_setaffinity", libc::SYS_sched_setaffinity),
    ("sched_getaffinity", libc::SYS_sched_getaffinity), ("set_thread_area", libc::SYS_set_thread_area),
    ("io_setup", libc::SYS_io_setup), ("io_destroy", libc::SYS_io_destroy),
    ("io_getevents", libc::SYS_io_getevents), ("io_submit", libc::SYS_io_submit),
    ("io_cancel", libc::SYS_io_cancel), ("get_thread_area", libc::SYS_get_thread_area),
    ("lookup_dcookie", libc::SYS_lookup_dcookie), ("epoll_create", libc::SYS_epoll_create),
    ("epoll_ctl_old", libc::SYS_epoll_ctl_old), ("epoll_wait_old", libc::SYS_epoll_wait_old),
    ("remap_file_pages", libc::SYS_remap_file_pages), ("getdents64", libc::SYS_getdents64),
    ("set_tid_address", libc::SYS_set_tid_address), ("restart_syscall", libc::SYS_restart_syscall),
    ("semtimedop", libc::SYS_semtimedop), ("fadvise64", libc::SYS_fadvise64),
    ("timer_create", libc::SYS_timer_create), ("timer_settime", libc::SYS_timer_settime),
    ("timer_gettime", libc::SYS_timer_gettime), ("timer_getoverrun", libc::SYS_timer_getoverrun),
    ("timer_delete", libc::SYS_timer_delete), ("clock_settime", libc::SYS_clock_settime),
    ("clock_gettime", libc::SYS_clock_gettime), ("clock_getres", libc::SYS_clock_getres),
    ("clock_nanosleep", libc::SYS_clock_nanosleep), ("exit_group", libc::SYS_exit_group),
    ("epoll_wait", libc::SYS_epoll_wait), ("epoll_ctl", libc::SYS_epoll_ctl), ("tgkill", libc::SYS_tgkill),
    ("utimes", libc::SYS_utimes), ("vserver", libc::SYS_vserver), ("mbind", libc::SYS_mbind),
    ("set_mempolicy", libc::SYS_set_mempolicy), ("get_mempolicy", libc::SYS_get_mempolicy),
    ("mq_open", libc::SYS_mq_open), ("mq_unlink", libc::SYS_mq_unlink), ("mq_timedsend", libc::SYS_mq_timedsend),
    ("mq_timedreceive", libc::SYS_mq_timedreceive), ("mq_notify", libc::SYS_mq_notify),
    ("mq_getsetattr", libc::SYS_mq_getsetattr), ("kexec_load", libc::SYS_kexec_load), ("waitid", libc::SYS_waitid),
    ("add_key", libc::SYS_add_key), ("request_key", libc::SYS_request_key), ("keyctl", libc::SYS_keyctl),
    ("ioprio_set", libc::SYS_ioprio_set), ("ioprio_get", libc::SYS_ioprio_get),
    ("inotify_init", libc::SYS_inotify_init), ("inotify_add_watch", libc::SYS_inotify_add_watch),
    ("inotify_rm_watch", libc::SYS_inotify_rm_watch), ("migrate_pages", libc::SYS_migrate_pages),
    ("openat", libc::SYS_openat), ("mkdirat", libc::SYS_mkdirat), ("mknodat", libc::SYS_mknodat),
    ("fchownat", libc::SYS_fchownat), ("futimesat", libc::SYS_futimesat), ("newfstatat", libc::SYS_newfstatat),
    ("unlinkat", libc::SYS_unlinkat), ("renameat", libc::SYS_renameat), ("linkat", libc::SYS_linkat),
    ("symlinkat", libc::SYS_symlinkat), ("readlinkat", libc::SYS_readlinkat), ("fchmodat", libc::SYS_fchmodat),
    ("faccessat", libc::SYS_faccessat), ("pselect6", libc::SYS_pselect6), ("ppoll", libc::SYS_ppoll),
    ("unshare", libc::SYS_unshare), ("set_robust_list", libc::SYS_set_robust_list),
    ("get_robust_list", libc::SYS_get_robust_list), ("splice", libc::SYS_splice), ("tee", libc::SYS_tee),
    ("sync_file_range", libc::SYS_sync_file_range), ("vmsplice", libc::SYS_vmsplice),
    ("move_pages", libc::SYS_move_pages), ("utimensat", libc::SYS_utimensat),
    ("epoll_pwait", libc::SYS_epoll_pwait), ("signalfd", libc::SYS_signalfd),
    ("timerfd_create", libc::SYS_timerfd_create), ("eventfd", libc::SYS_eventfd),
    ("fallocate", libc::SYS_fallocate), ("timerfd_settime", libc::SYS_timerfd_settime),
    ("timerfd_gettime", libc::SYS_timerfd_gettime), ("accept4", libc::SYS_accept4),
    ("signalfd4", libc::SYS_signalfd4), ("eventfd2", libc::SYS_eventfd2),
    ("epoll_create1", libc::SYS_epoll_create1), ("dup3", libc::SYS_dup3), ("pipe2", libc::SYS_pipe2),
    ("inotify_init1", libc::SYS_inotify_init1), ("preadv", libc::SYS_preadv), ("pwritev", libc::SYS_pwritev),
    ("rt_tgsigqueueinfo", libc::SYS_rt_tgsigqueueinfo), ("perf_event_open", libc::SYS_perf_event_open),
    ("recvmmsg", libc::SYS_recvmmsg), ("fanotify_init", libc::SYS_fanotify_init),
    ("fanotify_mark", libc::SYS_fanotify_mark), ("prlimit64", libc::SYS_prlimit64),
    ("name_to_handle_at", libc::SYS_name_to_handle_at), ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("clock_adjtime", libc::SYS_clock_adjtime), ("syncfs", libc::SYS_syncfs), ("sendmmsg", libc::SYS_sendmmsg),
    ("setns", libc::SYS_setns), ("getcpu", libc::SYS_getcpu), ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev), ("kcmp", libc::SYS_kcmp),
    ("finit_module", libc::SYS_finit_module), ("sched_setattr", libc::SYS_sched_setattr),
    ("sched_getattr", libc::SYS_sched_getattr), ("renameat2", libc::SYS_renameat2), ("seccomp", libc::SYS_seccomp),
    ("getrandom", libc::SYS_getrandom), ("memfd_create", libc::SYS_memfd_create),
    ("kexec_file_load", libc::SYS_kexec_file_load), ("bpf", libc::SYS_bpf), ("execveat", libc::SYS_execveat),
    ("userfaultfd", libc::SYS_userfaultfd), ("membarrier", libc::SYS_membarrier), ("mlock2", libc::SYS_mlock2),
    ("copy_file_range", libc::SYS_copy_file_range), ("preadv2", libc::SYS_preadv2),
    ("pwritev2", libc::SYS_pwritev2), ("pkey_mprotect", libc::SYS_pkey_mprotect),
    ("pkey_alloc", libc::SYS_pkey_alloc), ("pkey_free", libc::SYS_pkey_free), ("statx", libc::SYS_statx),
    ("rseq", libc::SYS_rseq), ("pidfd_send_signal", libc::SYS_pidfd_send_signal),
    ("io_uring_setup", libc::SYS_io_uring_setup), ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register), ("open_tree", libc::SYS_open_tree),
    ("move_mount", libc::SYS_move_mount), ("fsopen", libc::SYS_fsopen), ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount), ("fspick", libc::SYS_fspick), ("pidfd_open", libc::SYS_pidfd_open),
    ("clone3", libc::SYS_clone3), ("close_range", libc::SYS_close_range), ("openat2", libc::SYS_openat2),
    ("pidfd_getfd", libc::SYS_pidfd_getfd), ("faccessat2", libc::SYS_faccessat2),
    ("process_madvise", libc::SYS_process_madvise), ("epoll_pwait2", libc::SYS_epoll_pwait2),
    ("mount_setattr", libc::SYS_mount_setattr), ("quotactl_fd", libc::SYS_quotactl_fd),
    ("landlock_create_ruleset", libc::SYS_landlock_create_ruleset),
    ("landlock_add_rule", libc::SYS_landlock_add_rule),
    ("landlock_restrict_self", libc::SYS_landlock_restrict_self), ("memfd_secret", libc::SYS_memfd_secret),
    ("process_mrelease", libc::SYS_process_mrelease), ("futex_waitv", libc::SYS_futex_waitv),
    ("set_mempolicy_home_node", libc::SYS_set_mempolicy_home_node), ("fchmodat2", libc::SYS_fchmodat2),
    ("mseal", libc::SYS_mseal),
];

/// Those newer than the C library's list (x86_64 numbers, from the kernel's `syscall_64.tbl`).
#[rustfmt::skip]
const NEWER: &[(&str, i64)] = &[
    ("uretprobe", 335), ("uprobe", 336), ("cachestat", 451), ("futex_wake", 454), ("futex_wait", 455),
    ("futex_requeue", 456), ("statmount", 457), ("listmount", 458), ("lsm_get_self_attr", 459),
    ("lsm_set_self_attr", 460), ("lsm_list_modules", 461), ("setxattrat", 463), ("getxattrat", 464),
    ("listxattrat", 465), ("removexattrat", 466), ("open_tree_attr", 467), ("file_getattr", 468),
    ("file_setattr", 469),
];

#[cfg(test)]
mod tests {
    use super::number;

    #[test]
    fn names_and_aliases() {
        assert_eq!(number("getppid"), Some(libc::SYS_getppid));
        assert_eq!(number("newfstat"), Some(libc::SYS_fstat));
        assert_eq!(number("cachestat"), Some(451));
        assert_eq!(number("no_such_call"), None);
    }
}
