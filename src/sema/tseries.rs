//! `tseries(value, interval, intervals[, "avg"|"max"|"min"|"sum"])`: the checks of its arguments and what
//! the map keeps (see docs/LANGUAGE.md).

use crate::lang::ast::{Expr, ExprKind};
use crate::lang::constant::constant;
use crate::lang::Diagnostic;

/// A time series: the last `intervals` intervals of `interval` nanoseconds, each one value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tseries {
    pub interval: u64,
    pub intervals: u64,
    pub reduce: Reduce,
    /// Whether the recorded values are signed.
    pub signed: bool,
}

/// How the values recorded in one interval become its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduce {
    /// The last value recorded.
    Last,
    Avg,
    Max,
    Min,
    Sum,
}

impl Tseries {
    /// As an error message shows it: `tseries(_, 1000000ns, 5, "max")`.
    pub fn describe(&self) -> String {
        let reduce = match self.reduce {
            Reduce::Last => "",
            Reduce::Avg => ", \"avg\"",
            Reduce::Max => ", \"max\"",
            Reduce::Min => ", \"min\"",
            Reduce::Sum => ", \"sum\"",
        };
        format!("tseries(_, {}ns, {}{reduce})", self.interval, self.intervals)
    }
}

/// bpftrace's bound on the number of intervals.
const MAX_INTERVALS: i64 = 1_000_000;

/// Reads the constant arguments after the value (whose type is checked by the caller).
pub fn check(args: &[Expr], signed: bool) -> Result<Tseries, Diagnostic> {
    let positive = |arg: &Expr, what: &str, max: i64| match constant(arg) {
        Some(n) if (1..max).contains(&n) => Ok(n as u64),
        Some(n) => Err(Diagnostic::error(
            arg.span,
            format!("the {what} of `tseries()` must be from 1 to {}, not {n}", max - 1),
        )),
        None => {
            Err(Diagnostic::error(arg.span, format!("the {what} of `tseries()` must be a constant integer"))
                .with_help("for example `tseries($x, 100ms, 10)`: 10 intervals of 100 ms"))
        }
    };
    let interval = positive(&args[1], "interval (in nanoseconds)", i64::MAX)?;
    let intervals = positive(&args[2], "number of intervals", MAX_INTERVALS)?;
    let reduce = match args.get(3).map(|a| &a.kind) {
        None => Reduce::Last,
        Some(ExprKind::Str(name)) if name == "avg" => Reduce::Avg,
        Some(ExprKind::Str(name)) if name == "max" => Reduce::Max,
        Some(ExprKind::Str(name)) if name == "min" => Reduce::Min,
        Some(ExprKind::Str(name)) if name == "sum" => Reduce::Sum,
        Some(_) => return Err(Diagnostic::error(
            args[3].span,
            "`tseries()` aggregates an interval's values with one of \"avg\", \"max\", \"min\" and \"sum\"",
        )
        .with_help("without it, each interval keeps the last value recorded in it")),
    };
    Ok(Tseries { interval, intervals, reduce, signed })
}
