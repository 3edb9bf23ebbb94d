//! Generated stores and the measurements of `deeptree bench`.
//!
//! Every figure is reported next to a baseline measured in the same run, so the numbers can be compared across
//! machines as ratios.

use std::{
    collections::{HashSet, VecDeque},
    time::{Duration, Instant},
};

use shakmaty::{Chess, Position, uci::UciMove};

use crate::{
    score::{Bound, Score},
    store::{
        Change, Receipt, Store, StoreError,
        key::PositionKey,
        node::{Edge, Eval, Node, PackedPosition},
    },
};

/// A node for `pos` with an evaluation and up to `edges` random legal moves, as an analysis would store it.
fn random_node(pos: &Chess, rng: &mut fastrand::Rng, edges: usize) -> (Node, Vec<Chess>) {
    let mut moves: Vec<_> = pos.legal_moves().into_iter().collect();
    rng.shuffle(&mut moves);
    moves.truncate(edges);
    let mut node = Node::new(PackedPosition::of(pos));
    let best = rng.i32(-80..80);
    let mut children = Vec::with_capacity(moves.len());
    for (i, m) in moves.iter().enumerate() {
        let uci = UciMove::from_standard(*m);
        let score = Score::cp(best - 7 * i as i32);
        let bound = if i + 1 == moves.len() && i > 0 { Bound::Upper } else { Bound::Exact };
        node.edges.push(Edge::new(uci, score, bound, 18));
        let mut child = pos.clone();
        child.play_unchecked(*m);
        children.push(child);
    }
    node.eval = Some(Eval {
        score: Score::cp(best),
        bound: Bound::Exact,
        depth: 18,
        best: node.edges.first().map(|e| e.uci),
        nodes: rng.u64(100_000..5_000_000),
        engine: None,
    });
    (node, children)
}

/// A breadth-first tree of `count` distinct positions from the start position, each with three edges (fewer only
/// where the position has fewer legal moves). Deterministic for a seed.
pub fn generated_tree(seed: u64, count: usize) -> Vec<Change> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut seen = HashSet::with_capacity(count * 4);
    let mut queue = VecDeque::new();
    let start = Chess::default();
    seen.insert(PositionKey::of(&start));
    queue.push_back(start);
    let mut out = Vec::with_capacity(count);
    while let Some(pos) = queue.pop_front() {
        if out.len() == count {
            break;
        }
        let (node, children) = random_node(&pos, &mut rng, 3);
        for child in children {
            if seen.insert(PositionKey::of(&child)) {
                queue.push_back(child);
            }
        }
        if let Ok(change) = Change::merge(&pos, node) {
            out.push(change);
        }
    }
    out
}

/// `count` distinct positions from random games (12 to 40 plies), each with up to three edges. Different seeds give
/// (with overwhelming likelihood) disjoint sets: used to fill one store from several processes.
pub fn random_positions(seed: u64, count: usize) -> Vec<Change> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut seen = HashSet::with_capacity(count);
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let mut pos = Chess::default();
        let plies = rng.usize(12..40);
        for _ in 0..plies {
            let moves = pos.legal_moves();
            if moves.is_empty() {
                break;
            }
            let m = moves[rng.usize(..moves.len())];
            pos.play_unchecked(m);
        }
        if !seen.insert(PositionKey::of(&pos)) {
            continue;
        }
        let (node, _) = random_node(&pos, &mut rng, 3);
        if let Ok(change) = Change::merge(&pos, node) {
            out.push(change);
        }
    }
    out
}

/// The key a change writes.
pub fn change_key(change: &Change) -> Option<PositionKey> {
    match change {
        Change::Merge { key, .. } => Some(*key),
        Change::Mark(mark) => Some(mark.key),
        Change::SetEngine(_) | Change::AddEngines(_) | Change::Task(_) | Change::Clock(_) => None,
    }
}

/// Writes `changes` in submissions of `batch`, all queued at once (the writer batches across them), as a bulk
/// load: records and values committed together by a settle, at the end and (with `settle_every`) after every so
/// many submissions. Calls `on_commit` with the number of changes known committed after each settle.
pub fn write_all(
    store: &Store,
    changes: Vec<Change>,
    batch: usize,
    settle_every: Option<usize>,
    mut on_commit: impl FnMut(usize),
) -> Result<(), StoreError> {
    let writer = store.writer();
    let mut receipts = Vec::new();
    let mut chunk = Vec::with_capacity(batch);
    let (mut submitted, mut submissions) = (0, 0usize);
    let every = settle_every.unwrap_or(usize::MAX).max(1);
    let mut submit = |chunk: Vec<Change>, receipts: &mut Vec<(Receipt, usize)>| {
        submitted += chunk.len();
        submissions += 1;
        receipts.push((writer.submit_deferred(chunk), 0));
        if submissions.is_multiple_of(every) {
            receipts.push((writer.settle(), submitted));
        }
    };
    for change in changes {
        chunk.push(change);
        if chunk.len() == batch {
            submit(std::mem::take(&mut chunk), &mut receipts);
        }
    }
    if !chunk.is_empty() {
        submit(chunk, &mut receipts);
    }
    let total = submitted;
    receipts.push((writer.settle(), total));
    for (receipt, committed) in receipts {
        receipt.wait()?;
        if committed > 0 {
            on_commit(committed);
        }
    }
    Ok(())
}

/// Results of the store benchmark.
#[derive(Debug, serde::Serialize)]
pub struct StoreBench {
    pub positions: u64,
    pub edges: u64,
    pub generate_seconds: f64,
    pub inserts_per_second: f64,
    pub reads_per_second: f64,
    /// Baseline: raw LMDB lookups of the same keys without decoding, same transaction, same run.
    pub raw_reads_per_second: f64,
    pub decode_cost_ratio: f64,
    /// Baseline: the same reads decoded without checking their checksums, same transaction, same run.
    pub unchecked_reads_per_second: f64,
    /// What checking the checksums costs a decoded read: unchecked reads a second over checked ones.
    pub checksum_cost_ratio: f64,
    pub parent_lookups_per_second: f64,
    /// Size of the data file.
    pub bytes: u64,
    pub bytes_per_position: f64,
    /// Bytes of the pages that hold nodes and parent links; the rest of the file is LMDB's free list, left by the
    /// copy-on-write of large transactions and reused by later ones.
    pub tree_bytes_per_position: f64,
}

fn per_second(n: usize, elapsed: Duration) -> f64 {
    n as f64 / elapsed.as_secs_f64().max(1e-9)
}

/// Builds a store of `positions` positions with three edges each in `store`, then measures reads.
pub fn store_bench(store: &Store, positions: usize, reads: usize, seed: u64) -> Result<StoreBench, StoreError> {
    let t = Instant::now();
    let changes = generated_tree(seed, positions);
    let generate_seconds = t.elapsed().as_secs_f64();
    let keys: Vec<PositionKey> = changes.iter().filter_map(change_key).collect();
    let parent_probe: Vec<PositionKey> = changes
        .iter()
        .filter_map(|c| match c {
            Change::Merge { children, .. } => children.first().copied(),
            Change::SetEngine(_) | Change::AddEngines(_) | Change::Mark(_) | Change::Task(_) | Change::Clock(_) => None,
        })
        .collect();

    let t = Instant::now();
    write_all(store, changes, 10_000, None, |_| {})?;
    let inserts_per_second = per_second(keys.len(), t.elapsed());
    let stats = store.stats()?;

    let mut rng = fastrand::Rng::with_seed(seed ^ 0x5eed);
    let sample: Vec<PositionKey> = (0..reads).map(|_| keys[rng.usize(..keys.len())]).collect();
    let view = store.read()?;
    // Warm the cache once, then measure.
    for key in &sample {
        std::hint::black_box(view.raw_node(*key)?);
    }
    let t = Instant::now();
    let mut found = 0usize;
    for key in &sample {
        found += usize::from(std::hint::black_box(view.raw_node(*key)?).is_some());
    }
    let raw_reads_per_second = per_second(sample.len(), t.elapsed());
    // Decoded without checking their checksums (the checksum's 4 bytes cut off): what reads cost before schema 5.
    let t = Instant::now();
    let mut unchecked = 0usize;
    for key in &sample {
        if let Some(value) = view.raw_node(*key)? {
            let body = &value[..value.len().saturating_sub(crate::store::checksum::SIZE)];
            unchecked += Node::decode(body).map_or(0, |node| node.edges.len());
        }
    }
    let unchecked_reads_per_second = per_second(sample.len(), t.elapsed());
    let t = Instant::now();
    let mut edges = 0usize;
    for key in &sample {
        if let Some(node) = view.node(*key)? {
            edges += node.edges.len();
        }
    }
    let reads_per_second = per_second(sample.len(), t.elapsed());
    std::hint::black_box((found, edges, unchecked));
    let t = Instant::now();
    let mut links = 0usize;
    for key in parent_probe.iter().take(reads) {
        links += view.parents(*key)?.len();
    }
    let parent_lookups_per_second = per_second(parent_probe.len().min(reads), t.elapsed());
    std::hint::black_box(links);
    Ok(StoreBench {
        positions: stats.positions,
        edges: stats.edges,
        generate_seconds,
        inserts_per_second,
        reads_per_second,
        raw_reads_per_second,
        decode_cost_ratio: raw_reads_per_second / reads_per_second.max(1e-9),
        unchecked_reads_per_second,
        checksum_cost_ratio: unchecked_reads_per_second / reads_per_second.max(1e-9),
        parent_lookups_per_second,
        bytes: stats.bytes,
        bytes_per_position: stats.bytes as f64 / stats.positions.max(1) as f64,
        tree_bytes_per_position: stats.tree_bytes as f64 / stats.positions.max(1) as f64,
    })
}

/// Results of the search benchmark on a generated store.
#[derive(Debug, serde::Serialize)]
pub struct SearchBench {
    pub positions: u64,
    /// Median time to compute the alpha scores of a root's moves (random roots of the tree, no history).
    pub alpha_median_ms: f64,
    pub alpha_max_ms: f64,
    /// Median time the writer spends carrying one new evaluation's idea value up through the ancestors.
    pub idea_update_median_ms: f64,
    /// Median time from submitting one new evaluation to its commit (including the commit's sync to disk).
    pub commit_median_ms: f64,
    pub samples: usize,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// Measures alpha scores and idea updates on a generated tree of `positions` positions.
pub fn search_bench(store: &Store, positions: usize, samples: usize, seed: u64) -> Result<SearchBench, StoreError> {
    use crate::{search::alpha::alpha_of_edges, values::graph::StoreGraph};

    let changes = generated_tree(seed, positions);
    // Each stored position with the first of its moves.
    let nodes: Vec<(PositionKey, Chess, Option<UciMove>)> = changes
        .iter()
        .filter_map(|c| match c {
            Change::Merge { key, node, .. } => {
                Some((*key, node.position.to_position()?, node.edges.first().map(|e| e.uci)))
            }
            Change::SetEngine(_) | Change::AddEngines(_) | Change::Mark(_) | Change::Task(_) | Change::Clock(_) => None,
        })
        .collect();
    write_all(store, changes, 10_000, None, |_| {})?;
    let mut rng = fastrand::Rng::with_seed(seed ^ 0xa1fa);

    let mut alpha_ms = Vec::with_capacity(samples);
    for i in 0..samples {
        // The start position first, then random roots.
        let (root, _, _) = if i == 0 { &nodes[0] } else { &nodes[rng.usize(..nodes.len())] };
        let view = store.read()?;
        let t = Instant::now();
        let graph = StoreGraph::new(&view);
        std::hint::black_box(alpha_of_edges(&graph, *root, &[]));
        alpha_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }

    // New evaluations of positions one move below the deepest stored ones: each changes its parent's value,
    // which is carried up to the start position.
    let mut update_ms = Vec::with_capacity(samples);
    let mut commit_ms = Vec::with_capacity(samples);
    let writer = store.writer();
    let leaves = &nodes[nodes.len() - nodes.len().min(samples * 10)..];
    for _ in 0..samples {
        let (_, leaf, Some(uci)) = &leaves[rng.usize(..leaves.len())] else { continue };
        let Some(child) = crate::game::play_uci(leaf, uci) else { continue };
        if child.legal_moves().is_empty() || store.read()?.contains(PositionKey::of(&child))? {
            continue;
        }
        let (node, _) = random_node(&child, &mut rng, 1);
        let change = Change::merge(&child, node)?;
        let t = Instant::now();
        writer.submit(vec![change]).wait()?;
        commit_ms.push(t.elapsed().as_secs_f64() * 1e3);
        update_ms.push(store.last_update_time().as_secs_f64() * 1e3);
    }
    Ok(SearchBench {
        positions: store.stats()?.positions,
        alpha_median_ms: median(alpha_ms.clone()),
        alpha_max_ms: alpha_ms.iter().copied().fold(0.0, f64::max),
        idea_update_median_ms: median(update_ms),
        commit_median_ms: median(commit_ms),
        samples,
    })
}
