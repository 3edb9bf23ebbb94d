//! Steering from the page: the analyst's marks on moves (exclude, include, see [`crate::store::marks`]) and tasks
//! (see [`crate::store::tasks`]).
//! The routes call only these functions, so that the store's steering API is met in one place.

use serde_json::{Value, json};
use shakmaty::uci::UciMove;

use crate::{
    game::Line,
    store::{
        Store,
        marks::{MarkError, MarkKind, MarkSource},
        tasks::{NewTask, TaskError},
    },
};

/// A request the store could not carry out: the status and why.
pub type Refusal = (u16, String);

/// Marks `uci` (legal at `line`'s root) as `kind` from the page, or lifts its mark of that kind when `undo`; answers
/// `{"mark": ..., "undone": bool}`. A mark the store refuses (the last move not excluded, no such mark to lift) is
/// 409, with the store's reason.
pub fn mark(store: &Store, line: &Line, uci: UciMove, kind: MarkKind, undo: bool) -> Result<Value, Refusal> {
    let pos = line.root();
    let done = if undo {
        let view = store.read().map_err(internal)?;
        let marked = view
            .marks_at(crate::store::key::PositionKey::of(pos))
            .map_err(internal)?
            .into_iter()
            .any(|m| m.uci == uci && m.kind == kind);
        drop(view);
        if !marked {
            return Err((409, format!("{uci} has no {kind} mark here")));
        }
        store.lift_mark(pos, uci)
    } else {
        store.set_mark(pos, uci, kind, MarkSource::Serve)
    };
    match done {
        Ok(mark) => Ok(json!({"mark": mark, "undone": undo})),
        // Another process excluded the position's other moves since the page read it: refused as the store says.
        Err(MarkError::Store(e @ crate::store::StoreError::LastMoveExcluded { .. })) => Err((409, e.to_string())),
        Err(MarkError::Store(e)) => Err(internal(e)),
        Err(e @ (MarkError::IllegalMove { .. } | MarkError::UnknownKind(_))) => Err((400, e.to_string())),
        Err(e) => Err((409, e.to_string())),
    }
}

fn internal(e: crate::store::StoreError) -> Refusal {
    (500, format!("cannot write the store: {e}"))
}

/// Adds a task for `line` (its start as FEN, its moves) from the body's `budget_seconds` (required, above 0),
/// `priority` (0 to 16, default 0), `max_depth` (optional) and `label` (default: the moves, or `root`), as
/// `deeptree task add` does; answers the task. A field of the wrong type, or a budget or priority out of range, is 400.
pub fn task(store: &Store, line: &Line, body: &Value) -> Result<Value, Refusal> {
    let bad = |what: &str| (400, what.to_owned());
    let budget_seconds = body
        .get("budget_seconds")
        .and_then(Value::as_f64)
        .ok_or_else(|| bad("budget_seconds (a number of seconds above 0) is required"))?;
    let small = |name: &str| -> Result<Option<u8>, Refusal> {
        match body.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|n| u8::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| bad(&format!("{name} must be a small whole number"))),
        }
    };
    let priority = small("priority")?.unwrap_or(0);
    let max_depth = small("max_depth")?;
    let moves: Vec<String> = line.moves.iter().map(ToString::to_string).collect();
    let label = match body.get("label") {
        Some(Value::String(label)) if !label.trim().is_empty() => label.trim().to_owned(),
        None | Some(Value::Null) | Some(Value::String(_)) => {
            if moves.is_empty() {
                "root".to_owned()
            } else {
                moves.join(" ")
            }
        }
        Some(_) => return Err(bad("label must be text")),
    };
    let fen = shakmaty::fen::Fen::from_position(&line.start, shakmaty::EnPassantMode::Legal).to_string();
    let new = NewTask {
        fen: Some(fen),
        moves,
        label,
        priority,
        budget_seconds,
        max_depth,
        source: MarkSource::Serve,
        chess960: line.chess960,
    };
    match store.add_task(new) {
        Ok(task) => Ok(json!({ "task": task })),
        Err(TaskError::Store(e)) => Err(internal(e)),
        Err(e) => Err((400, e.to_string())),
    }
}
