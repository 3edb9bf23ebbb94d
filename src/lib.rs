//! deeptree: a UCI meta-engine that keeps a persistent deep-analysis tree of chess positions.
//!
//! A chess GUI loads deeptree like any UCI engine. Behind that face it keeps a tree of positions in LMDB
//! ([`store`]), answers from it, hands leaf evaluation to a pool of inner UCI engines and keeps growing the tree.
//!
//! docs/design.md says what the project's words mean (software and engine depth, move distance, idea and alpha
//! scores, settling, the host, claims) and how the search works; the comments cite it by section (`§3.3`).
//!
//! # Layers
//!
//! From the bottom up; each module uses only those above it in this list (tests/layers.rs checks it). The parts are
//! described in docs/design.md §8.
//!
//! - [`score`], [`notation`], [`logger`]: scores and bounds, the stored and written forms of moves (castling,
//!   Chess960), logging, and the status line a command shows on stderr (handed to the search as a `Progress`,
//!   so the search writes no terminal codes). No chess engine, no store.
//! - [`model`]: the records the tree is made of: the key of a position (`model::key`), and the node and edge records
//!   with their byte layout (`model::node`). No LMDB: the store reads, seals and writes them (and re-exports both
//!   modules as `store::key` and `store::node`).
//! - [`game`]: a game as UCI and PGN give it: a start position and moves ([`Line`](game::Line)), the errors of
//!   setting one up, playing a move, quoting user input in messages.
//! - [`engine`]: inner-engine processes. `process` owns one engine (the handle and its watchdog), `jobs` is the job
//!   board, `worker` runs one engine's loop, `pool` hands jobs to workers. Takes its options as an `EngineConfig`.
//! - [`store`]: the LMDB environment over the records of [`model`], the checksums that seal them, its transactions
//!   and the one writer. It knows bytes and records, not what they are worth: the writer runs an
//!   [`Upkeep`](store::upkeep::Upkeep) handed to it at open inside every transaction, over the records the
//!   transaction changed; a bulk load's records wait in memory and are committed with their values by one pass. Takes
//!   its options as a `StoreOptions`.
//! - [`values`]: what the tree is worth. The graph view of the store (`values::graph`), the path-independent idea
//!   value of every node with its cycle handling and its propagation up the parent links (`values::idea`), and the
//!   upkeep the store's writer runs (`values::upkeep`), where `Store::open` is defined: it opens a store with that
//!   upkeep.
//! - [`search`]: the deep-analysis search over the store, the values and an evaluator (the engine pool, or a
//!   scripted one): root-relative alpha values (`search::alpha`), passes, settling, the tree's view of a position
//!   (`search::show`), and the host's benchmark. The host's book of searches (`search::host`) and the answers laid
//!   over the store for looking ahead (`search::overlay`, memory only: nothing in it is written) belong here too,
//!   and growth (`search::growth`): the frontier, the one priority and the one loop every source of growth feeds
//!   (the commands, the UCI session). Takes its options as `Params`.
//! - [`interop`]: PGN, EPD, Polyglot and HTML in and out, and `merge`.
//! - [`config`]: the settings file, read into one `Config`, and the typed options of the layers above it
//!   (`EngineConfig`, `StoreOptions`, `Params`) made from it.
//! - [`uci`]: the GUI's face: the protocol loop, the `go` policy (tree against search), the direct engine's
//!   relay, tree growth.
//! - [`serve`]: the tree in a browser (`deeptree serve`): a small HTTP server, its safety rules, the JSON API over the
//!   store and the search's view of a position, steering with marks, and the page served from memory.
//! - [`commands`], [`bench`](mod@bench): the bodies of the `deeptree` commands and the measurements; `main.rs` parses
//!   the command line and dispatches to them.

pub mod bench;
pub mod commands;
pub mod config;
pub mod engine;
pub mod game;
pub mod interop;
pub mod logger;
pub mod model;
pub mod notation;
pub mod score;
pub mod search;
pub mod serve;
pub mod store;
pub mod uci;
pub mod values;
