//! An aggregation as a block expression's value, `@ = { let $a = 100; avg($a) };` (current bpftrace): the
//! block's statements run first, then the aggregation takes its argument, in the block's scope. Rewritten
//! here into `{ let $a = 100; @ = avg($a); }`, the form the rest of the compiler knows.

use super::map_access::is_aggregation;
use crate::lang::ast::{Block, Expr, ExprKind, Stmt, StmtKind};

pub fn rewrite(body: &mut Block) {
    for stmt in &mut body.stmts {
        match &mut stmt.kind {
            StmtKind::Assign { target, op: None, value } if is_aggregated_block(target, value) => {
                let ExprKind::Block { block, value: Some(aggregation) } = &mut value.kind else { continue };
                let mut block = std::mem::replace(block, Block { stmts: vec![], span: stmt.span });
                let assign =
                    StmtKind::Assign { target: target.clone(), op: None, value: (**aggregation).clone() };
                block.stmts.push(Stmt { kind: assign, span: aggregation.span });
                rewrite(&mut block);
                stmt.kind = StmtKind::Block(block);
            }
            StmtKind::If { then, otherwise, .. } => {
                rewrite(then);
                if let Some(otherwise) = otherwise {
                    rewrite(otherwise);
                }
            }
            StmtKind::Unroll { body, .. } | StmtKind::While { body, .. } | StmtKind::For { body, .. } => {
                rewrite(body)
            }
            StmtKind::Block(block) => rewrite(block),
            _ => {}
        }
    }
}

/// `@m[...] = { ...; agg(...) }`
fn is_aggregated_block(target: &Expr, value: &Expr) -> bool {
    let ExprKind::Block { value: Some(last), .. } = &value.kind else { return false };
    matches!(target.kind, ExprKind::Map { .. })
        && matches!(&last.kind, ExprKind::Call { name, .. } if is_aggregation(name))
}
