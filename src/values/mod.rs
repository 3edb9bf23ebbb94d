//! Values: what the stored tree is worth, kept up to date as it grows.
//!
//! ```
//! use deeptree::score::{Bound, Score};
//! use deeptree::store::{Change, Store, StoreOptions, key::PositionKey, node::{Edge, Eval, Node, PackedPosition}};
//! use shakmaty::{Chess, Position, uci::UciMove};
//!
//! let dir = tempfile::tempdir()?;
//! // `Store::open` opens the store with this layer's upkeep: every write brings idea values up to date.
//! let store = Store::open(dir.path(), &StoreOptions::default())?;
//! let start = Chess::default();
//! let e4: UciMove = "e2e4".parse()?;
//! let after = start.clone().play(e4.to_move(&start)?)?;
//! let eval = |score, best| Some(Eval { score, bound: Bound::Exact, depth: 18, best, nodes: 0, engine: None });
//! let mut root = Node::new(PackedPosition::of(&start));
//! root.edges.push(Edge::new(e4, Score::cp(30), Bound::Exact, 18));
//! root.eval = eval(Score::cp(30), Some(e4));
//! let e5: UciMove = "e7e5".parse()?;
//! let mut reply = Node::new(PackedPosition::of(&after));
//! reply.edges.push(Edge::new(e5, Score::cp(-10), Bound::Exact, 18));
//! reply.eval = eval(Score::cp(-10), Some(e5));
//! store.writer().submit(vec![Change::merge(&start, root)?, Change::merge(&after, reply)?]).wait()?;
//!
//! let view = store.read()?;
//! // Sign flip: the reply scores -10 for Black, so 1.e4 is worth +10 to White.
//! assert_eq!(view.node(PositionKey::of(&start))?.unwrap().idea, Some(Score::cp(10)));
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! - [`graph`]: the stored tree seen as a graph of positions (over the store, over a read view, or in memory).
//! - [`idea`]: the path-independent idea value of every node, its cycle handling, and its propagation upward
//!   through the parent links.
//! - [`upkeep`]: the [`Upkeep`](crate::store::upkeep::Upkeep) this layer hands the store's writer, which runs it
//!   inside every transaction; and `Store::open`, which opens a store with it.

pub mod graph;
pub mod idea;
pub mod upkeep;
