//! The constants bpftrace's own tools take from the C headers they `#include`. bpftrace reads the headers
//! with clang; steadytrace takes kernel types from BTF and reads no header, so the macros those tools use
//! (`AF_INET`, `TASK_RUNNING`) come from this table, known only to scripts that include the header, as
//! the C preprocessor would make them known. Values are Linux's, the same on every architecture.

/// Address families, from `<linux/socket.h>` (and `<sys/socket.h>`, `<net/sock.h>` which include it).
const SOCKET: &[(&str, i64)] = &[
    ("AF_UNSPEC", 0),
    ("AF_UNIX", 1),
    ("AF_LOCAL", 1),
    ("AF_INET", 2),
    ("AF_INET6", 10),
    ("AF_NETLINK", 16),
    ("AF_PACKET", 17),
    ("PF_UNSPEC", 0),
    ("PF_UNIX", 1),
    ("PF_INET", 2),
    ("PF_INET6", 10),
];

/// Task states, from `<linux/sched.h>`.
const SCHED: &[(&str, i64)] = &[
    ("TASK_RUNNING", 0),
    ("TASK_INTERRUPTIBLE", 1),
    ("TASK_UNINTERRUPTIBLE", 2),
    ("__TASK_STOPPED", 4),
    ("__TASK_TRACED", 8),
    ("EXIT_DEAD", 16),
    ("EXIT_ZOMBIE", 32),
];

/// The constants header `path` (as written between `<>` or `""`) defines, as far as this table knows.
pub fn constants(path: &str) -> &'static [(&'static str, i64)] {
    match path {
        "linux/socket.h" | "sys/socket.h" | "net/sock.h" | "linux/in.h" | "netinet/in.h" => SOCKET,
        "linux/sched.h" => SCHED,
        _ => &[],
    }
}
