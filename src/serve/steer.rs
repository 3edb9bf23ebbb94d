//! Steering from the page: the analyst's marks on moves (exclude, include, see [`crate::store::marks`]) and tasks
//! (see [`crate::store::tasks`]).
//! The routes call only these functions, so that the store's steering API is met in one place.
//!
//! Every field of a steering request's body is checked before anything is written: the body is one JSON object
//! whose keys are each given once ([`Body::parse`]: serde_json alone keeps the last of two), every key is one the
//! request reads, and every field has its type ([`MarkRequest`], [`TaskRequest`]). A field given as `null` is a
//! field not given. Anything else is a 400 naming the field.

use serde::{
    Deserialize, Deserializer,
    de::{Error as _, MapAccess, SeqAccess, Visitor},
};
use serde_json::{Map, Number, Value, json};
use shakmaty::uci::UciMove;

use crate::{
    game::Line,
    store::{
        Store,
        marks::{MarkError, MarkKind, MarkSource},
        tasks::{NewTask, TaskError},
    },
};

/// A steering request's body: a JSON object, each key given once and known to the request.
#[derive(Debug, Clone, PartialEq)]
pub struct Body(Map<String, Value>);

impl Body {
    /// Reads `bytes` as a JSON object whose keys are all among `fields` (named in the refusal as `what` takes
    /// them), each once, at any depth.
    pub fn parse(bytes: &[u8], what: &str, fields: &[&str]) -> Result<Body, String> {
        let value = match serde_json::from_slice::<Unique>(bytes) {
            Ok(Unique(value)) => value,
            Err(e) if e.is_data() => return Err(format!("the body is refused: {e}")),
            Err(e) => return Err(format!("the body is not JSON: {e}")),
        };
        let Value::Object(map) = value else { return Err("the body must be a JSON object".to_owned()) };
        if let Some(unknown) = map.keys().find(|key| !fields.contains(&key.as_str())) {
            return Err(format!("unknown field {}: {what} takes {}", crate::game::quote(unknown), fields.join(", ")));
        }
        Ok(Body(map))
    }

    /// The field `name`, unless it is absent or `null`.
    fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name).filter(|v| !v.is_null())
    }

    /// A text field; `expected` says what it holds, for the refusal of another type.
    pub fn text(&self, name: &str, expected: &str) -> Result<Option<String>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(other) => Err(wrong_type(name, expected, other)),
        }
    }

    /// A field of `true` or `false`.
    pub fn flag(&self, name: &str) -> Result<Option<bool>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(wrong_type(name, "true or false", other)),
        }
    }

    /// A number field; `expected` says what it holds.
    pub fn number(&self, name: &str, expected: &str) -> Result<Option<f64>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Number(n)) => n.as_f64().map(Some).ok_or_else(|| wrong_type(name, expected, &Value::Null)),
            Some(other) => Err(wrong_type(name, expected, other)),
        }
    }

    /// A whole number from 0 to 255 (a fraction, a negative number or a larger one is refused).
    pub fn small(&self, name: &str) -> Result<Option<u8>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Number(n)) => n
                .as_u64()
                .and_then(|n| u8::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| format!("{name} must be a small whole number (0 to 255), not {n}")),
            Some(other) => Err(wrong_type(name, "a small whole number (0 to 255)", other)),
        }
    }
}

/// The refusal of field `name` holding `found` where `expected` is read.
fn wrong_type(name: &str, expected: &str, found: &Value) -> String {
    let found = match found {
        Value::Null => "null",
        Value::Bool(_) => "true or false",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    };
    format!("{name} must be {expected}, not {found}")
}

/// A JSON value read with every object's keys checked to be given once.
struct Unique(Value);

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Unique, D::Error> {
        deserializer.deserialize_any(UniqueVisitor).map(Unique)
    }
}

struct UniqueVisitor;

impl<'de> Visitor<'de> for UniqueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<Value, E> {
        Number::from_f64(n).map(Value::Number).ok_or_else(|| E::custom("a number that is not finite"))
    }

    fn visit_str<E>(self, text: &str) -> Result<Value, E> {
        Ok(Value::String(text.to_owned()))
    }

    fn visit_string<E>(self, text: String) -> Result<Value, E> {
        Ok(Value::String(text))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(UniqueVisitor)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Unique(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(A::Error::custom(format!("key {} is given twice", crate::game::quote(&key))));
            }
            let Unique(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// The position a steering request is about: `fen` (absent or empty: the served root's start) and `moves` from it
/// (UCI, separated by spaces), as sent; the route parses them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct At {
    pub fen: Option<String>,
    pub moves: Option<String>,
}

impl At {
    fn read(body: &Body) -> Result<At, String> {
        Ok(At {
            fen: body.text("fen", "text (a FEN)")?,
            moves: body.text("moves", "text (UCI moves separated by spaces)")?,
        })
    }
}

/// `POST /api/mark`: `{"fen", "moves", "move", "kind", "undo"}`; `move` and `kind` are required.
#[derive(Debug, Clone, PartialEq)]
pub struct MarkRequest {
    pub at: At,
    /// The move as sent (UCI); the route checks it is legal where it is played.
    pub uci: String,
    pub kind: MarkKind,
    pub undo: bool,
}

impl MarkRequest {
    pub const FIELDS: [&str; 5] = ["fen", "moves", "move", "kind", "undo"];

    pub fn parse(bytes: &[u8]) -> Result<MarkRequest, String> {
        let body = Body::parse(bytes, "a mark", &Self::FIELDS)?;
        let at = At::read(&body)?;
        let uci = body.text("move", "text (a UCI move)")?.ok_or("no move given")?;
        let kinds = "\"exclude\" or \"include\"";
        let kind = body.text("kind", kinds)?.ok_or_else(|| format!("kind must be {kinds}: none given"))?;
        let kind =
            kind.parse::<MarkKind>().map_err(|_| format!("kind must be {kinds}, not {}", crate::game::quote(&kind)))?;
        let undo = body.flag("undo")?.unwrap_or(false);
        Ok(MarkRequest { at, uci, kind, undo })
    }
}

/// `POST /api/task`: `{"fen", "moves", "budget_seconds", "priority", "max_depth", "label"}`; `budget_seconds` is
/// required.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRequest {
    pub at: At,
    pub budget_seconds: f64,
    pub priority: u8,
    pub max_depth: Option<u8>,
    /// The label, trimmed; `None` where absent or blank (the task's moves stand for it).
    pub label: Option<String>,
}

impl TaskRequest {
    pub const FIELDS: [&str; 6] = ["fen", "moves", "budget_seconds", "priority", "max_depth", "label"];

    pub fn parse(bytes: &[u8]) -> Result<TaskRequest, String> {
        let body = Body::parse(bytes, "a task", &Self::FIELDS)?;
        let at = At::read(&body)?;
        let budget = "a number of seconds above 0";
        let budget_seconds =
            body.number("budget_seconds", budget)?.ok_or_else(|| format!("budget_seconds ({budget}) is required"))?;
        let priority = body.small("priority")?.unwrap_or(0);
        let max_depth = body.small("max_depth")?;
        let label = body.text("label", "text")?.map(|l| l.trim().to_owned()).filter(|l| !l.is_empty());
        Ok(TaskRequest { at, budget_seconds, priority, max_depth, label })
    }
}

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

/// Adds the task `request` asks for at `line` (its start as FEN, its moves), as `deeptree task add` does; answers
/// the task. A budget or priority out of range is 400, with the store's reason.
pub fn task(store: &Store, line: &Line, request: &TaskRequest) -> Result<Value, Refusal> {
    let moves: Vec<String> = line.moves.iter().map(ToString::to_string).collect();
    let label =
        request.label.clone().unwrap_or_else(|| if moves.is_empty() { "root".to_owned() } else { moves.join(" ") });
    let fen = shakmaty::fen::Fen::from_position(&line.start, shakmaty::EnPassantMode::Legal).to_string();
    let new = NewTask {
        fen: Some(fen),
        moves,
        label,
        priority: request.priority,
        budget_seconds: request.budget_seconds,
        max_depth: request.max_depth,
        engine_depth: None,
        source: MarkSource::Serve,
        chess960: line.chess960,
    };
    match store.add_task(new) {
        Ok(task) => Ok(json!({ "task": task })),
        Err(TaskError::Store(e)) => Err(internal(e)),
        Err(e) => Err((400, e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_given_twice_is_refused_at_any_depth() {
        for body in [
            &br#"{"move": "e2e4", "move": "e2e4"}"#[..],
            br#"{"a": {"b": 1, "b": 2}}"#,
            br#"{"a": [{"b": 1}, {"c": 1, "c": 1}]}"#,
        ] {
            let error = Body::parse(body, "this", &["move", "a"]).unwrap_err();
            assert!(error.contains("is given twice"), "{error}");
        }
        assert!(Body::parse(br#"{"a": [{"b": 1}, {"b": 2}]}"#, "this", &["a"]).is_ok(), "one key in each object");
    }

    #[test]
    fn the_body_is_one_object_of_known_fields() {
        assert!(Body::parse(b"[]", "this", &[]).unwrap_err().contains("JSON object"));
        assert!(Body::parse(b"{", "this", &[]).unwrap_err().contains("not JSON"));
        assert!(Body::parse(br#"{} {}"#, "this", &[]).unwrap_err().contains("not JSON"));
        let error = Body::parse(br#"{"moves": "", "undo ": true}"#, "a mark", &MarkRequest::FIELDS).unwrap_err();
        assert_eq!(error, "unknown field 'undo ': a mark takes fen, moves, move, kind, undo");
    }

    #[test]
    fn each_field_has_its_type_and_null_is_absent() {
        let mark = MarkRequest::parse(br#"{"fen": null, "moves": "e2e4", "move": "e7e5", "kind": "Include"}"#).unwrap();
        assert_eq!(
            mark,
            MarkRequest {
                at: At { fen: None, moves: Some("e2e4".into()) },
                uci: "e7e5".into(),
                kind: MarkKind::Include,
                undo: false
            }
        );
        let wrong = MarkRequest::parse(br#"{"moves": ["e2e4"], "move": "e7e5", "kind": "exclude"}"#).unwrap_err();
        assert_eq!(wrong, "moves must be text (UCI moves separated by spaces), not a list");
        let wrong = MarkRequest::parse(br#"{"move": "e2e4", "kind": "exclude", "undo": null, "fen": {}}"#);
        assert_eq!(wrong.unwrap_err(), "fen must be text (a FEN), not an object");

        let task = TaskRequest::parse(br#"{"budget_seconds": 1.5, "priority": 16, "label": "  "}"#).unwrap();
        assert_eq!((task.budget_seconds, task.priority, task.max_depth, task.label), (1.5, 16, None, None));
        for (body, error) in [
            (&br#"{"budget_seconds": "1"}"#[..], "budget_seconds must be a number of seconds above 0, not text"),
            (
                br#"{"budget_seconds": 1, "priority": true}"#,
                "priority must be a small whole number (0 to 255), not true or false",
            ),
            (
                br#"{"budget_seconds": 1, "max_depth": 256}"#,
                "max_depth must be a small whole number (0 to 255), not 256",
            ),
            (
                br#"{"budget_seconds": 1, "max_depth": 2.0}"#,
                "max_depth must be a small whole number (0 to 255), not 2.0",
            ),
            (br#"{"budget_seconds": 1, "label": {}}"#, "label must be text, not an object"),
        ] {
            assert_eq!(TaskRequest::parse(body).unwrap_err(), error);
        }
    }
}
