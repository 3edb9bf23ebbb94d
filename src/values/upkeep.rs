//! The values layer's upkeep, run by the store's writer inside its transaction, and the store's usual constructors.

use std::{cell::RefCell, path::Path, sync::Arc};

use crate::{
    score::Score,
    store::{
        Store, StoreError, StoreOptions,
        key::{KeyMap, KeySet, PositionKey},
        upkeep::{CachedValues, TxnRecords, Upkeep},
    },
};

use super::{
    graph::{Graph, GraphMut, GraphNode},
    idea::{propagate, recompute_in_one_pass},
};

/// Keeps idea values and cyclic flags up to date: carries each change upward through the parent links
/// ([`propagate`]), the changed records taken children first so that each is computed once.
pub struct IdeaUpkeep;

impl Upkeep for IdeaUpkeep {
    fn update(&self, records: &TxnRecords<'_, '_>, changed: &[PositionKey]) -> KeyMap<CachedValues> {
        // A change to a large part of the store (a bulk load's settle) reads every record in one sequential pass
        // instead of one lookup each, and recomputes every value once, children first: together about what a few
        // lookups per changed record would cost.
        if changed.len() as u64 * 4 >= records.stored_len().max(1) && changed.len() > 1_000 {
            let started = std::time::Instant::now();
            let mut graph = LoadedGraph::load(records);
            let loaded = started.elapsed();
            let keys: Vec<PositionKey> = graph.nodes.keys().copied().collect();
            recompute_in_one_pass(&mut graph, &keys);
            log::debug!(
                "idea values of {} records: graph loaded in {:.2} s, computed in {:.2} s",
                changed.len(),
                loaded.as_secs_f64(),
                (started.elapsed() - loaded).as_secs_f64()
            );
            return graph.updated;
        }
        let mut graph = TxnGraph { records, cache: RefCell::default(), updated: KeyMap::default() };
        let order = children_first(&graph, changed);
        propagate(&mut graph, order);
        graph.updated
    }
}

impl Store {
    /// Opens (creating when absent) the store in directory `dir`, its writer keeping idea values up to date.
    pub fn open(dir: &Path, options: &StoreOptions) -> Result<Store, StoreError> {
        Store::open_with(dir, options, Arc::new(IdeaUpkeep))
    }

    /// Opens the store in directory `dir` only if one is there: [`StoreError::Missing`] otherwise, with nothing
    /// created, so that a command that only reads never leaves a directory behind a mistyped path.
    pub fn open_existing(dir: &Path, options: &StoreOptions) -> Result<Store, StoreError> {
        Store::open_existing_with(dir, options, Arc::new(IdeaUpkeep))
    }

    /// Opens the store in directory `dir` to read it only, creating, initialising and migrating nothing (see
    /// [`Store::open_read_only_with`]): for the commands that only read.
    pub fn open_read_only(dir: &Path, options: &StoreOptions) -> Result<Store, StoreError> {
        Store::open_read_only_with(dir, options, Arc::new(IdeaUpkeep))
    }

    /// Copies every intact record of the store in `dir` into a new store in `out`, its idea values recomputed (see
    /// [`Store::repair_with`]).
    pub fn repair(dir: &Path, out: &Path) -> Result<crate::store::check::Repair, StoreError> {
        Store::repair_with(dir, out, Arc::new(IdeaUpkeep))
    }
}

/// `keys` ordered so that a key comes after every key of the set that it reaches (a post-order of the set's own
/// subgraph; inside a cycle the order is arbitrary, and [`propagate`] settles it). Values computed in this order
/// find their children's already final.
fn children_first<G: Graph>(g: &G, keys: &[PositionKey]) -> Vec<PositionKey> {
    if keys.len() < 2 {
        return keys.to_vec();
    }
    let members: KeySet = keys.iter().copied().collect();
    let mut done: KeySet = KeySet::default();
    let mut order = Vec::with_capacity(keys.len());
    // (key, index of the next edge to follow)
    let mut stack: Vec<(PositionKey, Arc<GraphNode>, usize)> = Vec::new();
    for &start in keys {
        if !done.insert(start) {
            continue;
        }
        let Some(node) = g.node(start) else {
            order.push(start);
            continue;
        };
        stack.push((start, node, 0));
        while let Some((key, node, next)) = stack.last_mut() {
            match node.edges.get(*next) {
                Some(edge) => {
                    *next += 1;
                    let child = edge.child;
                    if members.contains(&child) && done.insert(child) {
                        match g.node(child) {
                            Some(child_node) => stack.push((child, child_node, 0)),
                            None => order.push(child),
                        }
                    }
                }
                None => {
                    order.push(*key);
                    stack.pop();
                }
            }
        }
    }
    order
}

/// The graph as the writer's transaction sees it, with decoded nodes cached and the values computed so far laid
/// over them.
struct TxnGraph<'r, 't, 'e> {
    records: &'r TxnRecords<'t, 'e>,
    cache: RefCell<KeyMap<Option<Arc<GraphNode>>>>,
    updated: KeyMap<CachedValues>,
}

impl Graph for TxnGraph<'_, '_, '_> {
    fn node(&self, key: PositionKey) -> Option<Arc<GraphNode>> {
        if let Some(hit) = self.cache.borrow().get(&key) {
            return hit.clone();
        }
        let loaded = self.records.record(key).map(|node| Arc::new(GraphNode::from_node(key, &node)));
        self.cache.borrow_mut().insert(key, loaded.clone());
        loaded
    }

    fn parents(&self, key: PositionKey) -> Vec<PositionKey> {
        self.records.parents(key)
    }
}

impl GraphMut for TxnGraph<'_, '_, '_> {
    fn set_cached(&mut self, key: PositionKey, idea: Option<Score>, cyclic: bool) {
        if let Some(Some(node)) = self.cache.get_mut().get_mut(&key) {
            let node = Arc::make_mut(node);
            node.idea = idea;
            node.cyclic = cyclic;
        }
        self.updated.insert(key, CachedValues { idea, cyclic });
    }
}

/// The whole graph of the transaction, loaded in memory by one sequential pass over the records, with the values
/// computed so far laid over it. Parent links are read from the transaction when asked for (the one-pass
/// recomputation needs none).
struct LoadedGraph<'r, 't, 'e> {
    records: &'r TxnRecords<'t, 'e>,
    nodes: KeyMap<Arc<GraphNode>>,
    updated: KeyMap<CachedValues>,
}

impl<'r, 't, 'e> LoadedGraph<'r, 't, 'e> {
    fn load(records: &'r TxnRecords<'t, 'e>) -> LoadedGraph<'r, 't, 'e> {
        // The stored count only sizes the first allocation: a damaged count must not ask for more than a store holds.
        let mut read = Vec::with_capacity((records.stored_len() as usize).min(1 << 20));
        records.for_each_record(|key, node| read.push((key, node)));
        // Resolving every move to its child's key is most of the work: it is shared among the cores.
        let threads = std::thread::available_parallelism().map_or(1, usize::from).clamp(1, 8);
        let chunk = read.len().div_ceil(threads).max(1);
        let resolved: Vec<Vec<GraphNode>> = std::thread::scope(|scope| {
            let handles: Vec<_> = read
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || part.iter().map(|(key, node)| GraphNode::from_node(*key, node)).collect())
                })
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
                .collect()
        });
        drop(read);
        let mut nodes = KeyMap::default();
        nodes.reserve(resolved.iter().map(Vec::len).sum());
        for node in resolved.into_iter().flatten() {
            nodes.insert(node.key, Arc::new(node));
        }
        // Most values change in a bulk load: room for all of them at once.
        let mut updated = KeyMap::default();
        updated.reserve(nodes.len());
        LoadedGraph { records, nodes, updated }
    }
}

impl Graph for LoadedGraph<'_, '_, '_> {
    fn node(&self, key: PositionKey) -> Option<Arc<GraphNode>> {
        self.nodes.get(&key).cloned()
    }

    fn parents(&self, key: PositionKey) -> Vec<PositionKey> {
        self.records.parents(key)
    }
}

impl GraphMut for LoadedGraph<'_, '_, '_> {
    fn set_cached(&mut self, key: PositionKey, idea: Option<Score>, cyclic: bool) {
        if let Some(node) = self.nodes.get_mut(&key) {
            let node = Arc::make_mut(node);
            node.idea = idea;
            node.cyclic = cyclic;
        }
        self.updated.insert(key, CachedValues { idea, cyclic });
    }
}
