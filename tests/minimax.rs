//! Idea and alpha values on small random graphs with transpositions and cycles: the incremental values, a
//! from-scratch recomputation and a brute-force reference that unrolls every simple path all agree.

use deeptree::{
    score::Score,
    search::alpha::{alpha_brute, alpha_brute_no_progress, alpha_of_edges, alpha_of_edges_no_progress},
    store::key::PositionKey,
    values::{
        graph::{Graph, GraphEdge, GraphNode, MemGraph},
        idea::{idea_brute, propagate, recompute_all, recompute_in_one_pass},
    },
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct RandomNode {
    evaluated: bool,
    eval: Score,
    edges: Vec<(u64, Score)>,
}

fn arb_score() -> impl Strategy<Value = Score> {
    prop_oneof![8 => (-300i32..300).prop_map(Score::cp), 1 => (-4i32..=4).prop_map(Score::from_uci_mate)]
}

/// Up to 9 positions; edges point at positions 0..12, so some lead to positions that are not stored.
fn arb_graph() -> impl Strategy<Value = Vec<RandomNode>> {
    let node = (prop::bool::weighted(0.85), arb_score(), prop::collection::vec((0u64..12, arb_score()), 0..4))
        .prop_map(|(evaluated, eval, mut edges)| {
            edges.sort_by_key(|e| e.0);
            edges.dedup_by_key(|e| e.0);
            RandomNode { evaluated, eval, edges }
        });
    prop::collection::vec(node, 1..10)
}

fn graph_node(key: u64, node: &RandomNode) -> GraphNode {
    let edges = node
        .edges
        .iter()
        .filter(|(child, _)| *child != key)
        .map(|(child, score)| GraphEdge::new(PositionKey(*child), *score, true))
        .collect::<Vec<_>>();
    let mut g = GraphNode::leaf(PositionKey(key), edges);
    g.evaluated = node.evaluated;
    g.eval_score = Some(node.eval);
    g
}

/// Builds the graph node by node in `order`, bringing cached values up to date after each insertion, as the
/// writer does after each batch.
fn incremental(nodes: &[RandomNode], order: &[usize]) -> MemGraph {
    let mut g = MemGraph::default();
    for &i in order {
        g.insert(graph_node(i as u64, &nodes[i]));
        // Keep the cached values the node had (an update of a stored node keeps them until recomputed).
        propagate(&mut g, [PositionKey(i as u64)]);
    }
    g
}

/// A game history of up to `len` positions that leads to `root`: a line of stored moves, walked back through the
/// parent links at random.
fn history_to(g: &MemGraph, root: PositionKey, len: usize, seed: u64) -> Vec<PositionKey> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut history = Vec::new();
    let mut current = root;
    for _ in 0..len {
        let parents = g.parents(current);
        if parents.is_empty() {
            break;
        }
        let parent = parents[rng.usize(..parents.len())];
        if parent == root || history.contains(&parent) {
            break;
        }
        history.insert(0, parent);
        current = parent;
    }
    history
}

fn permutation(len: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    fastrand::Rng::with_seed(seed).shuffle(&mut order);
    order
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn incremental_scratch_and_brute_force_idea_values_agree(nodes in arb_graph(), seed: u64) {
        let g = incremental(&nodes, &permutation(nodes.len(), seed));
        let keys: Vec<PositionKey> = (0..nodes.len() as u64).map(PositionKey).collect();
        let mut scratch = g.clone();
        recompute_all(&mut scratch, &keys);
        for key in &keys {
            let brute = idea_brute(&g, *key);
            prop_assert_eq!(g.node(*key).unwrap().idea, brute, "incremental idea of {}", key);
            prop_assert_eq!(scratch.node(*key).unwrap().idea, brute, "from-scratch idea of {}", key);
        }
    }

    #[test]
    fn the_one_pass_recomputation_of_a_bulk_load_agrees_with_brute_force(nodes in arb_graph(), seed: u64) {
        // The nodes stored with no cached values, or stale ones, as a bulk load leaves them.
        let mut g = MemGraph::default();
        let mut rng = fastrand::Rng::with_seed(seed);
        for (i, node) in nodes.iter().enumerate() {
            let mut stale = graph_node(i as u64, node);
            if rng.bool() {
                stale.idea = Some(Score::cp(rng.i32(-500..500)));
                stale.cyclic = rng.bool();
            }
            g.insert(stale);
        }
        let keys: Vec<PositionKey> = permutation(nodes.len(), seed).into_iter().map(|i| PositionKey(i as u64)).collect();
        recompute_in_one_pass(&mut g, &keys);
        let mut scratch = g.clone();
        recompute_all(&mut scratch, &keys);
        for key in &keys {
            prop_assert_eq!(g.node(*key).unwrap().idea, idea_brute(&g, *key), "one-pass idea of {}", key);
            prop_assert_eq!(g.node(*key).unwrap().cyclic, scratch.node(*key).unwrap().cyclic, "cyclic flag of {}", key);
        }
    }

    #[test]
    fn alpha_values_agree_with_brute_force_from_random_roots_and_histories(
        nodes in arb_graph(), seed: u64, root_pick: prop::sample::Index, history_len in 0usize..5,
    ) {
        let g = incremental(&nodes, &permutation(nodes.len(), seed));
        let root = PositionKey(root_pick.index(nodes.len()) as u64);
        let history = history_to(&g, root, history_len, seed ^ 0xa1fa);
        prop_assert_eq!(alpha_of_edges(&g, root, &history), alpha_brute(&g, root, &history));
    }

    #[test]
    fn no_progress_alpha_values_agree_with_a_reference_that_enumerates_the_paths(
        nodes in arb_graph(), seed: u64, root_pick: prop::sample::Index, history_len in 0usize..4, plies in 0u8..6,
    ) {
        let g = incremental(&nodes, &permutation(nodes.len(), seed));
        let root = PositionKey(root_pick.index(nodes.len()) as u64);
        let history = history_to(&g, root, history_len, seed ^ 0x7e40);
        prop_assert_eq!(
            alpha_of_edges_no_progress(&g, root, &history, plies),
            alpha_brute_no_progress(&g, root, &history, plies)
        );
        // Within no plies the rule changes nothing.
        prop_assert_eq!(alpha_of_edges_no_progress(&g, root, &history, 0), alpha_of_edges(&g, root, &history));
    }
}

#[test]
fn no_progress_refuses_a_move_the_same_side_could_have_played_earlier() {
    // The root r (White to move) can play into c at once, or go r -> a -> b and play into c from b, two plies
    // later: White lost a tempo, so b -> c is refused and b is valued by its other move, into d.
    let (r, a, b, c, d) = (PositionKey(1), PositionKey(2), PositionKey(3), PositionKey(4), PositionKey(5));
    let mut g = MemGraph::default();
    g.insert(GraphNode::leaf(r, vec![GraphEdge::new(a, Score::cp(10), true), GraphEdge::new(c, Score::cp(-50), true)]));
    g.insert(GraphNode::leaf(a, vec![GraphEdge::new(b, Score::cp(-10), true)]));
    g.insert(GraphNode::leaf(b, vec![GraphEdge::new(c, Score::cp(100), true), GraphEdge::new(d, Score::cp(5), true)]));
    propagate(&mut g, [a, b, r]);
    // Without the rule: b is worth +100 (its move into c), so a is worth -100 and r's move into a +100.
    assert_eq!(alpha_of_edges(&g, r, &[]), vec![Score::cp(100), Score::cp(-50)]);
    // With it, within 3 plies: b is worth +5 (its move into d), and r's move into a +5.
    assert_eq!(alpha_of_edges_no_progress(&g, r, &[], 3), vec![Score::cp(5), Score::cp(-50)]);
    assert_eq!(alpha_brute_no_progress(&g, r, &[], 3), vec![Score::cp(5), Score::cp(-50)]);
    // Seen from a root after r -> a (r in the history), the rule does not look into the history.
    assert_eq!(alpha_of_edges_no_progress(&g, a, &[r], 3), alpha_of_edges(&g, a, &[r]));
    // A node whose every move is refused keeps its value: with b's move into d gone, b is worth +100 again.
    let mut only_c = g.clone();
    only_c.insert(GraphNode::leaf(b, vec![GraphEdge::new(c, Score::cp(100), true)]));
    propagate(&mut only_c, [b]);
    assert_eq!(alpha_of_edges_no_progress(&only_c, r, &[], 3), vec![Score::cp(100), Score::cp(-50)]);
}

#[test]
fn a_knight_shuffle_repetition_is_a_draw_for_alpha_and_an_engine_score_for_idea() {
    // 1. Nf3 Nf6 2. Ng1 Ng8: s -> a -> b -> c -> s.
    let (s, a, b, c) = (PositionKey(10), PositionKey(11), PositionKey(12), PositionKey(13));
    let mut g = MemGraph::default();
    g.insert(GraphNode::leaf(s, vec![GraphEdge::new(a, Score::cp(25), true)]));
    g.insert(GraphNode::leaf(a, vec![GraphEdge::new(b, Score::cp(-20), true)]));
    g.insert(GraphNode::leaf(b, vec![GraphEdge::new(c, Score::cp(10), true)]));
    g.insert(GraphNode::leaf(c, vec![GraphEdge::new(s, Score::cp(-30), true)]));
    propagate(&mut g, [s, a, b, c]);
    // From c, the idea of Ng8 unrolls s -> a -> b, whose move back to c is valued by its engine score (+10):
    // b = 10, a = -10, s = 10, so Ng8 is worth -10 for Black.
    assert_eq!(g.node(c).unwrap().idea, Some(Score::cp(-10)));
    assert_eq!(idea_brute(&g, c), Some(Score::cp(-10)));
    // From the root c with history s, a, b: Ng8 repeats s.
    assert_eq!(alpha_of_edges(&g, c, &[s, a, b]), vec![Score::DRAW]);
    // From the root s with no history, the line comes back to s: every value on it is a draw.
    assert_eq!(alpha_of_edges(&g, s, &[]), vec![Score::DRAW]);
    assert!(g.node(s).unwrap().cyclic);
}

#[test]
fn a_cyclic_region_longer_than_any_stack_is_walked_within_its_depth() {
    // A ring of 50,000 positions, each with a move to the next and a move out worth -5 to its mover; the last
    // returns to the root. From the root every ring move ends in the root's repetition (a draw), so every position
    // on the ring is worth 0 and the root's moves 0 and -5. Before the walk bounded its depth, it recursed once a
    // ply down the ring and overflowed a thread's 2 MiB stack.
    const RING: u64 = 50_000;
    let mut g = MemGraph::default();
    for i in 0..RING {
        let next = GraphEdge::new(PositionKey((i + 1) % RING), Score::cp(0), true);
        let out = GraphEdge::new(PositionKey(RING + i), Score::cp(-5), false);
        let mut node = GraphNode::leaf(PositionKey(i), vec![next, out]);
        (node.cyclic, node.idea) = (true, Some(Score::cp(0)));
        g.insert(node);
    }
    let walk = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            (alpha_of_edges(&g, PositionKey(0), &[]), alpha_of_edges_no_progress(&g, PositionKey(0), &[], 8))
        })
        .unwrap();
    let (alpha, no_progress) = walk.join().unwrap();
    assert_eq!(alpha, vec![Score::cp(0), Score::cp(-5)]);
    assert_eq!(no_progress, vec![Score::cp(0), Score::cp(-5)]);
}
