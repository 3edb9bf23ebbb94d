//! Answers laid over the store: the tree as it will be once every answer received so far is stored.
//!
//! The host runs searches ahead of their turn so that no engine waits (docs/design.md §5.2). To choose them, it
//! walks the tree as it would look with every answer already in: the stored records, with the answers of this run
//! merged over them in memory and idea values carried up through the parents, as the store's writer would. Nothing
//! here is ever written to the store: a speculative answer reaches the store only when a pass of the search asks for
//! that very search, so what the search settles does not depend on how far ahead the host looked.
//!
//! ```
//! use deeptree::search::overlay::Overlay;
//! use deeptree::values::graph::{Graph, Records, StoreGraph};
//! use deeptree::score::{Bound, Score};
//! use deeptree::store::{Change, Store, StoreOptions, key::PositionKey, node::{Edge, Node, PackedPosition}};
//! use shakmaty::Chess;
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path(), &StoreOptions::default())?;
//! let start = Chess::default();
//! let mut node = Node::new(PackedPosition::of(&start));
//! node.edges.push(Edge::new("e2e4".parse()?, Score::cp(30), Bound::Exact, 10));
//!
//! let mut overlay = Overlay::default();
//! let view = store.read()?;
//! overlay.apply(&view, &[Change::merge(&start, node)?])?;
//! let graph = StoreGraph::new(&view);
//! let tree = overlay.over(&graph);
//! assert_eq!(tree.record(PositionKey::of(&start))?.map(|n| n.edges.len()), Some(1));
//! assert!(view.node(PositionKey::of(&start))?.is_none()); // the store is untouched
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```

use std::sync::Arc;

use crate::{
    score::Score,
    store::{
        Change, ReadView, StoreError,
        key::{KeyMap, PositionKey},
        node::Node,
    },
};

use crate::values::{
    graph::{Graph, GraphMut, GraphNode, Records, StoreGraph},
    idea::propagate,
};

/// Records changed by answers not yet stored, with their idea values brought up to date.
#[derive(Default)]
pub struct Overlay {
    /// Every record an answer changed, or whose idea value changed with it: the stored record (as read when it was
    /// first needed) with the answers merged in.
    nodes: KeyMap<Node>,
    /// Parent links the answers added.
    parents: KeyMap<Vec<PositionKey>>,
    /// Graph views of `nodes`, built when first asked for.
    graph: parking_lot::Mutex<KeyMap<Arc<GraphNode>>>,
    /// Counts the changes applied, so a walk of an unchanged overlay can be skipped.
    generation: u64,
    /// The store's count of mark changes when the held records' marks were last read ([`Overlay::refresh_marks`]).
    marks_version: Option<u64>,
}

impl Overlay {
    /// Merges `changes` over the records read through `view`, then carries idea values up from them.
    pub fn apply(&mut self, view: &ReadView<'_>, changes: &[Change]) -> Result<(), StoreError> {
        // The marks of the records read from here on are those of this count of mark changes.
        if self.marks_version.is_none() {
            self.marks_version = Some(view.marks_version()?);
        }
        let mut changed = Vec::new();
        for change in changes {
            let Change::Merge { key, node, children } = change else { continue };
            if !self.nodes.contains_key(key) {
                let stored = view.node(*key)?.unwrap_or_else(|| Node::new(node.position.clone()));
                self.nodes.insert(*key, stored);
            }
            if let Some(record) = self.nodes.get_mut(key) {
                record.merge(node);
            }
            self.graph.get_mut().remove(key);
            for child in children {
                let parents = self.parents.entry(*child).or_default();
                if !parents.contains(key) {
                    parents.push(*key);
                }
            }
            changed.push(*key);
        }
        if changed.is_empty() {
            return Ok(());
        }
        let store = StoreGraph::new(view);
        propagate(&mut Propagation { store: &store, overlay: self }, changed);
        self.generation += 1;
        match store.take_error() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Reads the analyst's marks of the held records again where marks changed in the store since they were read
    /// (another process marked a move while this run went on): a held record keeps its answers but takes the
    /// store's marks, so that no walk over it goes below a move excluded since.
    pub fn refresh_marks(&mut self, view: &ReadView<'_>) -> Result<(), StoreError> {
        let version = view.marks_version()?;
        let seen = self.marks_version.replace(version);
        if seen.is_none_or(|seen| seen == version) {
            return Ok(());
        }
        for (key, record) in &mut self.nodes {
            let stored = view.node(*key)?;
            for edge in &mut record.edges {
                edge.steering = stored.as_ref().and_then(|s| s.edge(&edge.uci)).and_then(|e| e.steering);
            }
            // A move marked since that the held record lacks: its placeholder, as the store has it.
            for edge in stored.iter().flat_map(|s| s.edges.iter()).filter(|e| e.steering.is_some()) {
                if record.edge(&edge.uci).is_none() {
                    record.edges.push(edge.clone());
                }
            }
        }
        self.graph.get_mut().clear();
        self.generation += 1;
        Ok(())
    }

    /// The tree seen through `store` with this overlay laid over it.
    pub fn over<'a, 'v, 's>(&'a self, store: &'a StoreGraph<'v, 's>) -> OverlaidTree<'a, 'v, 's> {
        OverlaidTree { store, overlay: self }
    }

    /// Changes applied so far.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Records held.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    fn graph_node(&self, store: &StoreGraph<'_, '_>, key: PositionKey) -> Option<Arc<GraphNode>> {
        let Some(record) = self.nodes.get(&key) else { return store.node(key) };
        let mut cache = self.graph.lock();
        Some(cache.entry(key).or_insert_with(|| Arc::new(GraphNode::from_node(key, record))).clone())
    }

    fn parents_of(&self, store: &StoreGraph<'_, '_>, key: PositionKey) -> Vec<PositionKey> {
        let mut parents = store.parents(key);
        for parent in self.parents.get(&key).into_iter().flatten() {
            if !parents.contains(parent) {
                parents.push(*parent);
            }
        }
        parents
    }
}

/// The store with an overlay laid over it, for walking.
pub struct OverlaidTree<'a, 'v, 's> {
    store: &'a StoreGraph<'v, 's>,
    overlay: &'a Overlay,
}

impl Graph for OverlaidTree<'_, '_, '_> {
    fn node(&self, key: PositionKey) -> Option<Arc<GraphNode>> {
        self.overlay.graph_node(self.store, key)
    }

    fn parents(&self, key: PositionKey) -> Vec<PositionKey> {
        self.overlay.parents_of(self.store, key)
    }
}

impl Records for OverlaidTree<'_, '_, '_> {
    fn record(&self, key: PositionKey) -> Result<Option<Node>, StoreError> {
        match self.overlay.nodes.get(&key) {
            Some(record) => Ok(Some(record.clone())),
            None => self.store.record(key),
        }
    }
}

/// The overlay while idea values are carried up: a record whose value changes is taken into the overlay.
struct Propagation<'a, 'v, 's> {
    store: &'a StoreGraph<'v, 's>,
    overlay: &'a mut Overlay,
}

impl Graph for Propagation<'_, '_, '_> {
    fn node(&self, key: PositionKey) -> Option<Arc<GraphNode>> {
        self.overlay.graph_node(self.store, key)
    }

    fn parents(&self, key: PositionKey) -> Vec<PositionKey> {
        self.overlay.parents_of(self.store, key)
    }
}

impl GraphMut for Propagation<'_, '_, '_> {
    fn set_cached(&mut self, key: PositionKey, idea: Option<Score>, cyclic: bool) {
        if !self.overlay.nodes.contains_key(&key) {
            match self.store.record(key) {
                Ok(Some(stored)) => {
                    self.overlay.nodes.insert(key, stored);
                }
                // Absent or unreadable: nothing to hold a value (a speculative view may then be a little off).
                _ => return,
            }
        }
        if let Some(record) = self.overlay.nodes.get_mut(&key) {
            record.idea = idea;
            record.cyclic = cyclic;
        }
        self.overlay.graph.get_mut().remove(&key);
    }
}
