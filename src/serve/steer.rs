//! Steering from the page: the analyst's marks on moves (exclude, include) and tasks. The routes call only these
//! functions, so that the store's steering API is met in one place.

use serde_json::Value;
use shakmaty::uci::UciMove;

use crate::{
    game::Line,
    store::{ReadView, Store, StoreError, key::PositionKey},
};

/// How a mark steers its move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Exclude,
    Include,
}

impl Kind {
    pub fn parse(text: &str) -> Option<Kind> {
        match text {
            "exclude" => Some(Kind::Exclude),
            "include" => Some(Kind::Include),
            _ => None,
        }
    }
}

/// A request the store could not carry out: the status and why.
pub type Refusal = (u16, String);

/// The marks on the moves of the position `key`, as JSON objects with at least `move` and `kind`.
pub fn marks_at(_view: &ReadView<'_>, _key: PositionKey) -> Result<Vec<Value>, StoreError> {
    Ok(Vec::new())
}

/// Marks `uci` (legal at `line`'s root) as `kind`, or lifts its mark when `undo`; the mark made or lifted.
pub fn mark(_store: &Store, _line: &Line, _uci: UciMove, _kind: Kind, _undo: bool) -> Result<Value, Refusal> {
    Err((501, "marks are not in this build of deeptree yet".to_owned()))
}

/// Adds the task `body` describes.
pub fn task(_store: &Store, _line: &Line, _body: &Value) -> Result<Value, Refusal> {
    Err((501, "tasks are not in this build of deeptree yet".to_owned()))
}
