//! Functions about the kernel and the registers a probe saw: `reg`, `is_err`, `kfunc_exist`, `kfunc_allowed`,
//! `path`, `socket_cookie`.

use super::{Call, Emit, Function};
use crate::codegen::frame::Val;
use crate::kernel::MemberKind;
use crate::lang::ast::{BinOp, ExprKind, UnOp};
use crate::lang::Diagnostic;
use crate::sema::typed::Resolved;
use crate::sema::types::Type;
use bpf::Reg;

pub const FUNCTIONS: &[Function] = &[
    Function {
        name: "path",
        check: |env, call| {
            call.arity(1, 2)?;
            let ty = env.type_of(&call.args[0])?;
            let named = match &ty {
                Type::Ptr { to, .. } | Type::Record { record: to, .. } => to.name.to_string(),
                _ => String::new(),
            };
            if named != "struct path" {
                return Err(Diagnostic::error(
                    call.args[0].span,
                    format!("`path()` takes a `struct path` (e.g. `args.file->f_path`), not {ty}"),
                ));
            }
            if let Some(point) =
                env.points.iter().find(|p| !p.provider.on_trampoline() && !p.provider.iterates())
            {
                return Err(Diagnostic::error(
                    call.span,
                    format!("`path()` (the kernel's bpf_d_path) works in fentry, fexit and iter probes only, not in `{}`", point.name),
                )
                .with_help("the kernel allows it for the functions listed in its btf_allowlist_d_path, such as security_file_open or vfs_open"));
            }
            Ok(Type::Str { size: path_size(call)? })
        },
        check_statement: None,
        emit: Emit::Into(|gen, args, offset, _, span| {
            let size = path_size(&Call { name: "path", args, span })?;
            // The kernel checks that the pointer is a `struct path` it handed over (a trampoline
            // argument or a member of one), so the address is computed, never read through.
            let address = match (gen.ty(&args[0])?, &args[0].kind) {
                _ if iterator_path(gen, &args[0]).is_some() => {
                    // An iterator's object, loaded from its context as the kernel hands it over (a NULL
                    // checked before use), and the member's place in it.
                    let (object_at, member_at) = iterator_path(gen, &args[0]).expect("just checked");
                    let object = gen.load_into_fresh(Reg::R9, object_at, bpf::Size::DW, false, span)?;
                    let reg = gen.reg_of(object, Reg::R1);
                    gen.exit_if_zero(reg);
                    gen.asm.alu64_imm(bpf::Alu::Add, reg, member_at as i32);
                    object
                }
                (Type::Record { .. }, ExprKind::Unary { op: UnOp::Deref, operand }) => gen.int(operand)?,
                (Type::Record { .. }, _) => gen.member_address(&args[0])?.0,
                _ => gen.int(&args[0])?,
            };
            gen.zero(offset, size.div_ceil(8) * 8);
            let reg = gen.reg_of(address, Reg::R1);
            if reg != Reg::R1 {
                gen.asm.mov64_reg(Reg::R1, reg);
            }
            gen.frame.release(address);
            gen.asm.mov64_reg(Reg::R2, Reg::FP);
            gen.asm.alu64_imm(bpf::Alu::Add, Reg::R2, offset as i32);
            gen.asm.mov64_imm(Reg::R3, size as i32);
            gen.asm.call(bpf::Helper::DPath.id());
            Ok(())
        }),
    },
    Function {
        name: "socket_cookie",
        check: |env, call| {
            call.arity(1, 1)?;
            let ty = env.type_of(&call.args[0])?;
            let named = match &ty {
                Type::Ptr { to, .. } => to.name.to_string(),
                _ => String::new(),
            };
            if let Some(point) = env.points.iter().find(|p| !p.provider.on_trampoline()) {
                return Err(Diagnostic::error(
                    call.span,
                    format!("`socket_cookie()` (the kernel's bpf_get_socket_cookie) works in fentry and fexit probes only, not in `{}`", point.name),
                )
                .with_help("the kernel takes only a socket it handed over: `fentry:tcp_rcv_established { socket_cookie(args.sk) }`"));
            }
            if !["struct sock", "struct sock_common"].contains(&named.as_str()) {
                return Err(Diagnostic::error(
                    call.args[0].span,
                    format!("`socket_cookie()` takes a `struct sock *` (e.g. `args.sk`), not {ty}"),
                ));
            }
            Ok(Type::U64)
        },
        check_statement: None,
        // The socket as the trampoline handed it over (the kernel checks its type), never a copy.
        emit: Emit::Int(|gen, args, span| {
            let socket = gen.int(&args[0])?;
            let reg = gen.reg_of(socket, Reg::R1);
            if reg != Reg::R1 {
                gen.asm.mov64_reg(Reg::R1, reg);
            }
            gen.frame.release(socket);
            gen.asm.call(bpf::Helper::GetSocketCookie.id());
            gen.take_r0(span)
        }),
    },
    Function {
        name: "reg",
        check: |env, call| {
            let offset = register_offset(call)?;
            env.resolved(&call.args[0], || Resolved::Register(offset));
            // A perf event's context starts with the registers it interrupted (`struct bpf_perf_event_data`).
            let saves_registers = |p: &&crate::probes::AttachPoint| {
                p.provider.context().is_registers() || p.provider.prog_type() == bpf::ProgType::PerfEvent
            };
            if let Some(point) = env.points.iter().find(|p| !saves_registers(p)) {
                return Err(Diagnostic::error(
                    call.span,
                    format!(
                        "`reg()` reads the registers kprobes, uprobes, usdt and perf-event probes (profile, software, hardware, watchpoint) save; `{}` has none",
                        point.name
                    ),
                ));
            }
            Ok(Type::U64)
        },
        check_statement: None,
        emit: Emit::Int(|gen, args, span| {
            let Resolved::Register(offset) = gen.resolved(&args[0])? else {
                return Err(Diagnostic::error(span, "internal error: reg() without its register"));
            };
            gen.load_into_fresh(Reg::R9, offset, bpf::Size::DW, false, span)
        }),
    },
    Function {
        name: "is_err",
        check: |env, call| {
            call.arity(1, 1)?;
            let ty = env.type_of(&call.args[0])?;
            if !ty.is_int() {
                return Err(Diagnostic::error(
                    call.args[0].span,
                    format!("`is_err()` takes a pointer (or an integer), not {ty}"),
                ));
            }
            Ok(Type::Bool)
        },
        check_statement: None,
        emit: Emit::Int(|gen, args, span| {
            // The kernel's IS_ERR(): the top 4095 addresses encode -errno.
            let value = gen.int(&args[0])?;
            let home = gen.writable(value, span)?;
            let reg = gen.reg_of(home, Reg::R0);
            gen.apply(BinOp::Ge, reg, Val::Imm(-4095i64 as u64), false, span)?;
            gen.put(home, reg);
            Ok(home)
        }),
    },
    Function {
        name: "kfunc_exist",
        check: |env, call| {
            let name = kfunc_named(call)?;
            let exists = || env.kernel.vmlinux.kernel_function(name).is_ok();
            env.resolved(&call.args[0], || Resolved::Constant(exists() as u64));
            Ok(Type::Bool)
        },
        check_statement: None,
        emit: Emit::Int(|gen, args, _| gen.probe_constant(&args[0]).map(Val::Imm)),
    },
    Function {
        name: "kfunc_allowed",
        // Asked of the kernel for the program types of the probe's attach points, as bpftrace asks it for
        // its program: true where every one of them may call the function.
        check: |env, call| {
            let name = kfunc_named(call)?;
            let allowed = || {
                env.kernel.vmlinux.kernel_function(name).is_ok_and(|f| {
                    env.points
                        .iter()
                        .all(|p| bpf::features::kfunc_allowed(name, f.btf_id, p.provider.prog_type()))
                })
            };
            env.resolved(&call.args[0], || Resolved::Constant(allowed() as u64));
            Ok(Type::Bool)
        },
        check_statement: None,
        emit: Emit::Int(|gen, args, _| gen.probe_constant(&args[0]).map(Val::Imm)),
    },
];

/// `ctx.OBJECT.MEMBER` in an iterator: where OBJECT is in the context, and MEMBER in OBJECT.
fn iterator_path(gen: &crate::codegen::Gen, e: &crate::lang::ast::Expr) -> Option<(i16, u32)> {
    let ExprKind::Field { base, .. } = &e.kind else { return None };
    let ExprKind::Field { base: ctx, .. } = &base.kind else { return None };
    if !matches!(&ctx.kind, ExprKind::Ident(name) if name == "ctx") {
        return None;
    }
    let Ok(Type::Ptr { to: context, .. }) = gen.ty(ctx) else { return None };
    if !context.name.starts_with("struct bpf_iter__") {
        return None;
    }
    let object = gen.member_read(base).ok()?;
    let MemberKind::Pointer { .. } = object.kind else { return None };
    let member = gen.member_read(e).ok()?;
    Some((i16::try_from(object.offset).ok()?, member.offset))
}

/// The byte offset in `struct pt_regs` of the register `reg()` names.
fn register_offset(call: &Call) -> Result<i16, Diagnostic> {
    call.arity(1, 1)?;
    let arg = &call.args[0];
    let ExprKind::Str(name) = &arg.kind else {
        return Err(Diagnostic::error(
            arg.span,
            "`reg()` takes a register's name as a string literal, e.g. \"ip\"",
        ));
    };
    let arch = bpf::arch::HOST;
    arch.register(name).ok_or_else(|| {
        let names: Vec<&str> = arch.registers.iter().map(|(n, _)| *n).collect();
        Diagnostic::error(arg.span, format!("{} has no register `{name}`", arch.name))
            .with_help(format!("the registers are: {}", names.join(", ")))
    })
}

/// The kernel function `kfunc_exist()` or `kfunc_allowed()` asks about, a string literal.
fn kfunc_named<'c>(call: &Call<'c>) -> Result<&'c str, Diagnostic> {
    call.arity(1, 1)?;
    match &call.args[0].kind {
        ExprKind::Str(name) => Ok(name),
        _ => Err(Diagnostic::error(
            call.args[0].span,
            format!("`{}()` takes a kernel function's name as a string literal", call.name),
        )),
    }
}

/// The bytes `path(p, size)` gives: `size` (a literal), or the usual string length.
fn path_size(call: &Call) -> Result<usize, Diagnostic> {
    let Some(arg) = call.args.get(1) else { return Ok(crate::sema::STR_SIZE) };
    match crate::sema::constant(arg) {
        Some(n) if (1..=4096).contains(&n) => Ok(n as usize),
        _ => Err(Diagnostic::error(arg.span, "the size of `path()` is a number from 1 to 4096")),
    }
}
