//! `percpu_kaddr("name"[, cpu])`: the address of CPU `cpu`'s copy of a per-CPU kernel variable (of this
//! CPU without `cpu`), found by its BTF id (`bpf_per_cpu_ptr`, `bpf_this_cpu_ptr`); 0 for a CPU that
//! does not exist. An integer, read with `*` or cast to a struct pointer.

use super::{Call, Emit, Function};
use crate::lang::ast::{Expr, ExprKind};
use crate::lang::Diagnostic;
use crate::sema::typed::Resolved;
use crate::sema::types::Type;
use crate::sema::Env;
use bpf::{Helper, Reg};

pub const FUNCTIONS: &[Function] = &[Function {
    name: "percpu_kaddr",
    check: |env: &Env, call: &Call| {
        call.arity(1, 2)?;
        let id = variable(&call.args[0], env)?;
        env.resolved(&call.args[0], || Resolved::BtfId(id));
        if let Some(cpu) = call.args.get(1) {
            let ty = env.type_of(cpu)?;
            if !ty.is_int() {
                return Err(Diagnostic::error(
                    cpu.span,
                    format!("the CPU of `percpu_kaddr()` is an integer, not {ty}"),
                ));
            }
        }
        Ok(Type::U64)
    },
    check_statement: None,
    emit: Emit::Int(|gen, args, span| {
        let Resolved::BtfId(id) = gen.resolved(&args[0])? else {
            return Err(Diagnostic::error(span, "internal error: percpu_kaddr() without its variable"));
        };
        match args.get(1) {
            Some(cpu) => {
                let cpu = gen.int(cpu)?;
                let reg = gen.reg_of(cpu, Reg::R2);
                gen.asm.mov64_reg(Reg::R2, reg);
                gen.frame.release(cpu);
                gen.asm.ld_btf_id(Reg::R1, id);
                gen.asm.call(Helper::PerCpuPtr.id());
            }
            None => {
                gen.asm.ld_btf_id(Reg::R1, id);
                gen.asm.call(Helper::ThisCpuPtr.id());
            }
        }
        gen.take_r0(span)
    }),
}];

/// The BTF id of the per-CPU variable `arg` names.
fn variable(arg: &Expr, env: &Env) -> Result<u32, Diagnostic> {
    let ExprKind::Str(name) = &arg.kind else {
        return Err(Diagnostic::error(
            arg.span,
            "`percpu_kaddr()` takes a per-CPU variable's name as a string literal",
        )
        .with_help("for example `percpu_kaddr(\"process_counts\")`"));
    };
    let id = env.kernel.vmlinux.percpu_var_id(name).ok_or_else(|| {
        Diagnostic::error(arg.span, format!("the kernel's BTF has no per-CPU variable `{name}`"))
            .with_help("per-CPU variables are the VARs of the `.data..percpu` section: `bpftool btf dump file /sys/kernel/btf/vmlinux`")
    })?;
    // The kernel finds the variable's address by its name in kallsyms when it loads the program.
    if env.kernel.symbol_address(name).is_none() {
        return Err(Diagnostic::error(
            arg.span,
            format!("this kernel cannot give BPF programs the address of `{name}`: /proc/kallsyms does not list it"),
        )
        .with_help("variables are in kallsyms on kernels built with CONFIG_KALLSYMS_ALL"));
    }
    Ok(id)
}
