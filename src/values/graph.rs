//! The stored tree seen as a graph of positions, for minimaxing.
//!
//! ```
//! use deeptree::values::graph::{Graph, GraphEdge, GraphNode, MemGraph};
//! use deeptree::score::Score;
//! use deeptree::store::key::PositionKey;
//!
//! let mut g = MemGraph::default();
//! g.insert(GraphNode::leaf(PositionKey(1), vec![GraphEdge::new(PositionKey(2), Score::cp(10), true)]));
//! assert_eq!(g.node(PositionKey(1)).unwrap().edges.len(), 1);
//! assert!(g.node(PositionKey(2)).is_none());
//! ```
//!
//! A position takes part in values only once it has an evaluation ([`GraphNode::evaluated`]); an edge into a
//! position without one is valued by its own engine score. Cycles can only run through reversible moves (no capture,
//! pawn move, castling, change of castling rights, or en passant square left behind), which is what
//! [`GraphEdge::reversible`] records; the minimax uses it to keep cycle searches small.

use std::{collections::HashMap, sync::Arc};

use shakmaty::{Chess, EnPassantMode, Position, uci::UciMove};

use crate::{
    score::Score,
    store::{
        ReadView, StoreError,
        key::{KeyMap, PositionKey},
        node::Node,
    },
};

/// A move of a node, resolved to its child's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphEdge {
    pub uci: Option<UciMove>,
    pub child: PositionKey,
    /// The engine score of the move, from the node's side to move.
    pub score: Score,
    /// Could the move be part of a cycle?
    pub reversible: bool,
}

impl GraphEdge {
    pub fn new(child: PositionKey, score: Score, reversible: bool) -> GraphEdge {
        GraphEdge { uci: None, child, score, reversible }
    }
}

/// A node as the minimax sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphNode {
    pub key: PositionKey,
    /// Has its own engine evaluation: its value replaces the engine score of edges into it.
    pub evaluated: bool,
    /// Its own evaluation's score: the value of a position that has no edge (mate, stalemate).
    pub eval_score: Option<Score>,
    pub edges: Vec<GraphEdge>,
    /// Cached idea value, if computed.
    pub idea: Option<Score>,
    /// Cached: a cycle is reachable from this node.
    pub cyclic: bool,
}

impl GraphNode {
    /// An evaluated node with these edges and no cached values.
    pub fn leaf(key: PositionKey, edges: Vec<GraphEdge>) -> GraphNode {
        let eval_score = edges.iter().map(|e| e.score).max();
        GraphNode { key, evaluated: true, eval_score, edges, idea: None, cyclic: false }
    }

    /// The value of the node before looking below it: its best edge score, or its own score when it has no edge.
    pub fn static_value(&self) -> Option<Score> {
        self.edges.iter().map(|e| e.score).max().or(self.eval_score)
    }

    /// Builds the graph view of a stored node at `key`: resolves every edge's child key and reversibility. A move
    /// the analyst excluded is no part of the graph: the position is worth what its other moves are worth.
    pub fn from_node(key: PositionKey, node: &Node) -> GraphNode {
        let position = node.position.to_position();
        let edges = node
            .edges
            .iter()
            .filter(|edge| !edge.is_excluded())
            .filter_map(|edge| {
                let pos = position.as_ref()?;
                let (child, reversible) = child_of(pos, &edge.uci)?;
                Some(GraphEdge { uci: Some(edge.uci), child, score: edge.score, reversible })
            })
            .collect();
        GraphNode {
            key,
            evaluated: node.eval.is_some(),
            eval_score: node.eval.as_ref().map(|e| e.score),
            edges,
            idea: node.idea,
            cyclic: node.cyclic,
        }
    }
}

/// The child of a legal move and whether the move could lie on a cycle.
pub fn child_of(pos: &Chess, uci: &UciMove) -> Option<(PositionKey, bool)> {
    let m = uci.to_move(pos).ok()?;
    let mut child = pos.clone();
    child.play_unchecked(m);
    let reversible = !m.is_zeroing()
        && !m.is_castle()
        && pos.castles().castling_rights() == child.castles().castling_rights()
        && pos.ep_square(EnPassantMode::Legal).is_none();
    Some((PositionKey::of(&child), reversible))
}

/// Read access to the graph.
pub trait Graph {
    /// The node at `key`, if stored.
    fn node(&self, key: PositionKey) -> Option<Arc<GraphNode>>;
    /// Keys of the nodes with an edge into `key`.
    fn parents(&self, key: PositionKey) -> Vec<PositionKey>;
}

/// The graph together with the stored records behind it: the walk needs a node's evaluation, rest bound and edge
/// marks, which the graph view leaves out.
pub trait Records: Graph {
    /// The record of `key`, if stored.
    fn record(&self, key: PositionKey) -> Result<Option<Node>, StoreError>;
}

/// Write access for the cached values.
pub trait GraphMut: Graph {
    fn set_cached(&mut self, key: PositionKey, idea: Option<Score>, cyclic: bool);
}

/// An in-memory graph (tests, scripted evaluations).
#[derive(Debug, Default, Clone)]
pub struct MemGraph {
    nodes: HashMap<PositionKey, Arc<GraphNode>>,
    parents: HashMap<PositionKey, Vec<PositionKey>>,
}

impl MemGraph {
    /// Every record of a read view, as a graph in memory with the cached values as stored (for checking them
    /// against a recomputation), and the keys in key order.
    pub fn of_view(view: &ReadView<'_>) -> Result<(MemGraph, Vec<PositionKey>), StoreError> {
        let mut graph = MemGraph::default();
        let mut keys = Vec::new();
        for item in view.nodes()? {
            let (key, node) = item?;
            graph.insert(GraphNode::from_node(key, &node));
            keys.push(key);
        }
        Ok((graph, keys))
    }

    /// Inserts or replaces a node, linking its children back to it.
    pub fn insert(&mut self, node: GraphNode) {
        for edge in &node.edges {
            let parents = self.parents.entry(edge.child).or_default();
            if !parents.contains(&node.key) {
                parents.push(node.key);
            }
        }
        self.nodes.insert(node.key, Arc::new(node));
    }

    pub fn keys(&self) -> impl Iterator<Item = PositionKey> + '_ {
        self.nodes.keys().copied()
    }
}

impl Graph for MemGraph {
    fn node(&self, key: PositionKey) -> Option<Arc<GraphNode>> {
        self.nodes.get(&key).cloned()
    }

    fn parents(&self, key: PositionKey) -> Vec<PositionKey> {
        self.parents.get(&key).cloned().unwrap_or_default()
    }
}

impl GraphMut for MemGraph {
    fn set_cached(&mut self, key: PositionKey, idea: Option<Score>, cyclic: bool) {
        if let Some(node) = self.nodes.get_mut(&key) {
            let node = Arc::make_mut(node);
            node.idea = idea;
            node.cyclic = cyclic;
        }
    }
}

/// The store seen through one read view, with decoded nodes cached.
pub struct StoreGraph<'v, 's> {
    view: &'v ReadView<'s>,
    cache: parking_lot::Mutex<KeyMap<Option<Arc<GraphNode>>>>,
    error: parking_lot::Mutex<Option<StoreError>>,
}

impl<'v, 's> StoreGraph<'v, 's> {
    pub fn new(view: &'v ReadView<'s>) -> Self {
        StoreGraph { view, cache: Default::default(), error: Default::default() }
    }

    /// The read view behind this graph.
    pub fn view(&self) -> &'v ReadView<'s> {
        self.view
    }

    /// The first store error met while reading (records that do not decode are treated as absent meanwhile).
    pub fn take_error(&self) -> Option<StoreError> {
        self.error.lock().take()
    }
}

impl Graph for StoreGraph<'_, '_> {
    fn node(&self, key: PositionKey) -> Option<Arc<GraphNode>> {
        if let Some(hit) = self.cache.lock().get(&key) {
            return hit.clone();
        }
        let loaded = match self.view.node(key) {
            Ok(node) => node.map(|n| Arc::new(GraphNode::from_node(key, &n))),
            Err(e) => {
                self.error.lock().get_or_insert(e);
                None
            }
        };
        self.cache.lock().insert(key, loaded.clone());
        loaded
    }

    fn parents(&self, key: PositionKey) -> Vec<PositionKey> {
        self.view.parents(key).unwrap_or_else(|e| {
            self.error.lock().get_or_insert(e);
            Vec::new()
        })
    }
}

impl Records for StoreGraph<'_, '_> {
    fn record(&self, key: PositionKey) -> Result<Option<Node>, StoreError> {
        self.view.node(key)
    }
}
