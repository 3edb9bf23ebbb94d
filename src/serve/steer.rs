//! Steering from the page: the analyst's marks on moves (exclude, include, see [`crate::store::marks`]) and tasks.
//! The routes call only these functions, so that the store's steering API is met in one place.

use serde_json::{Value, json};
use shakmaty::uci::UciMove;

use crate::{
    game::Line,
    store::{
        Store,
        marks::{MarkError, MarkKind, MarkSource},
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
        Err(MarkError::Store(e)) => Err(internal(e)),
        Err(e @ (MarkError::IllegalMove { .. } | MarkError::UnknownKind(_))) => Err((400, e.to_string())),
        Err(e) => Err((409, e.to_string())),
    }
}

fn internal(e: crate::store::StoreError) -> Refusal {
    (500, format!("cannot write the store: {e}"))
}

/// Adds the task `body` describes.
pub fn task(_store: &Store, _line: &Line, _body: &Value) -> Result<Value, Refusal> {
    Err((501, "tasks are not in this build of deeptree yet".to_owned()))
}
