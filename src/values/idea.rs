//! Idea values: the path-independent negamax over the stored graph, cached in every node and kept up to date.
//!
//! ```
//! use deeptree::score::Score;
//! use deeptree::store::key::PositionKey;
//! use deeptree::values::graph::{Graph, GraphEdge, GraphNode, MemGraph};
//! use deeptree::values::idea::propagate;
//!
//! // A (to move) can go to B, and B back to A: a cycle.
//! let (a, b) = (PositionKey(1), PositionKey(2));
//! let mut g = MemGraph::default();
//! g.insert(GraphNode::leaf(a, vec![GraphEdge::new(b, Score::cp(-30), true)]));
//! g.insert(GraphNode::leaf(b, vec![GraphEdge::new(a, Score::cp(40), true)]));
//! propagate(&mut g, [a, b]);
//! // B's move back to A is valued by its engine score (+40 for B), so A's move scores -40.
//! assert_eq!(g.node(a).unwrap().idea, Some(Score::cp(-40)));
//! assert!(g.node(a).unwrap().cyclic);
//! ```
//!
//! **Idea** value of a node `X` (docs/design.md §3.6): negamax over the stored graph, unrolled from `X`, where an edge
//! into a position that is already on the path being unrolled is valued by its own engine score (never as a draw); an
//! edge into a position without evaluation is valued by its engine score too. It depends only on `X` and the graph, so
//! it is cached in the node and kept up to date by [`propagate`] through the parent links. The root-relative **alpha**
//! value, where a repetition is a draw, belongs to the search (`search::alpha`): it starts from these values.
//!
//! Sign flips: every value is from the side to move at its node; an edge's value is its child's value backed up
//! ([`Score::back_up`]: negated, mate one ply further).

use std::{collections::VecDeque, sync::Arc};

use crate::{
    score::Score,
    store::key::{KeyMap, KeySet, PositionKey},
};

use super::graph::{Graph, GraphMut, GraphNode};

/// Most nodes one cyclic-region walk may visit before it falls back to cached values for what remains.
pub const UNROLL_BUDGET: usize = 200_000;

/// Most nodes the idea walks of all members of one cycle component may visit together, at one change inside it;
/// each member's walk gets its share, and at least [`MEMBER_BUDGET_FLOOR`].
const COMPONENT_BUDGET: usize = 200_000;
const MEMBER_BUDGET_FLOOR: usize = 256;

/// Most nodes the backward search for a node's cycle may visit.
const CYCLE_SEARCH_BUDGET: usize = 50_000;

/// Brute-force idea value: unrolls every simple path from `key` (exponential; the test reference).
pub fn idea_brute<G: Graph>(g: &G, key: PositionKey) -> Option<Score> {
    let node = g.node(key).filter(|n| n.evaluated)?;
    let mut path = vec![key];
    Some(unroll_idea_brute(g, &node, &mut path))
}

fn unroll_idea_brute<G: Graph>(g: &G, node: &GraphNode, path: &mut Vec<PositionKey>) -> Score {
    if node.edges.is_empty() {
        return node.eval_score.unwrap_or(Score::DRAW);
    }
    let mut best: Option<Score> = None;
    for edge in &node.edges {
        let value = match g.node(edge.child).filter(|c| c.evaluated && !path.contains(&edge.child)) {
            Some(child) => {
                path.push(edge.child);
                // Sign flip: the child's value is from the opponent's side.
                let v = unroll_idea_brute(g, &child, path).back_up();
                path.pop();
                v
            }
            None => edge.score,
        };
        best = Some(best.map_or(value, |b| b.max(value)));
    }
    best.unwrap_or(Score::DRAW)
}

/// The strongly connected component of `key` in the graph of stored positions (edges into stored nodes, reversible
/// moves only: no cycle can use another). Returns just `[key]` when the node lies on no cycle.
pub fn cycle_component<G: Graph>(g: &G, key: PositionKey) -> Vec<PositionKey> {
    // A cycle through `key` leaves it by a reversible move into a stored position.
    let leaves_reversibly =
        g.node(key).is_some_and(|node| node.edges.iter().any(|e| e.reversible && g.node(e.child).is_some()));
    if !leaves_reversibly {
        return vec![key];
    }
    // Backward: every stored node that reaches `key` through reversible moves.
    let mut reaches: KeySet = KeySet::from_iter([key]);
    let mut queue = VecDeque::from([key]);
    while let Some(current) = queue.pop_front() {
        if reaches.len() > CYCLE_SEARCH_BUDGET {
            log::warn!("cycle search from {key} stopped after {CYCLE_SEARCH_BUDGET} positions");
            break;
        }
        for parent in g.parents(current) {
            if reaches.contains(&parent) {
                continue;
            }
            let Some(node) = g.node(parent) else { continue };
            if node.edges.iter().any(|e| e.child == current && e.reversible) {
                reaches.insert(parent);
                queue.push_back(parent);
            }
        }
    }
    if reaches.len() == 1 {
        return vec![key];
    }
    // Forward within that set: the nodes both reachable from `key` and reaching it.
    let mut component = vec![key];
    let mut seen: KeySet = KeySet::from_iter([key]);
    let mut stack = vec![key];
    while let Some(current) = stack.pop() {
        let Some(node) = g.node(current) else {
            continue;
        };
        for edge in node.edges.iter().filter(|e| e.reversible) {
            if reaches.contains(&edge.child) && seen.insert(edge.child) {
                component.push(edge.child);
                stack.push(edge.child);
            }
        }
    }
    component
}

/// Idea value of a member of a cycle component: unrolls inside the component, uses cached values outside it
/// (a node outside cannot reach the path, which lies inside).
fn unroll_idea_in_component<G: Graph>(
    g: &G,
    node: &GraphNode,
    component: &KeySet,
    path: &mut Vec<PositionKey>,
    budget: &mut usize,
) -> Score {
    if node.edges.is_empty() {
        return node.eval_score.unwrap_or(Score::DRAW);
    }
    *budget = budget.saturating_sub(1);
    let mut best: Option<Score> = None;
    for edge in &node.edges {
        let value = match g.node(edge.child).filter(|c| c.evaluated) {
            None => edge.score,
            Some(_) if path.contains(&edge.child) => edge.score,
            Some(child) if component.contains(&edge.child) && *budget > 0 => {
                path.push(edge.child);
                // Sign flip: the child's value is from the opponent's side.
                let v = unroll_idea_in_component(g, &child, component, path, budget).back_up();
                path.pop();
                v
            }
            Some(child) => child.idea.map_or(edge.score, Score::back_up),
        };
        best = Some(best.map_or(value, |b| b.max(value)));
    }
    best.unwrap_or(Score::DRAW)
}

/// The idea value and cyclic flag of every member of `key`'s cycle component, from cached values below it.
fn recompute<G: Graph>(g: &G, key: PositionKey) -> Vec<(PositionKey, Option<Score>, bool)> {
    values_of_component(g, &cycle_component(g, key))
}

/// What the value of a node on no cycle needs to know of one child.
#[derive(Debug, Clone, Copy)]
struct ChildValues {
    evaluated: bool,
    idea: Option<Score>,
    cyclic: bool,
}

impl ChildValues {
    fn of(node: &GraphNode) -> ChildValues {
        ChildValues { evaluated: node.evaluated, idea: node.idea, cyclic: node.cyclic }
    }
}

/// The value of a node on no cycle: negamax one level deep over its children's cached values, from its `edges`
/// (child, engine score, what is known of the child: `None` when it is not stored). Also says whether a child other
/// than the node itself reaches a cycle.
fn value_over_children(
    key: PositionKey,
    eval_score: Option<Score>,
    edges: impl Iterator<Item = (PositionKey, Score, Option<ChildValues>)>,
) -> (Score, bool) {
    let mut best: Option<Score> = None;
    let mut reaches_cycle = false;
    for (child_key, score, known) in edges {
        let known = known.filter(|_| child_key != key);
        reaches_cycle |= known.is_some_and(|c| c.cyclic);
        let value = match known.filter(|c| c.evaluated).and_then(|c| c.idea) {
            // Sign flip: the child's value is from the opponent's side.
            Some(value) => value.back_up(),
            None => score,
        };
        best = Some(best.map_or(value, |b| b.max(value)));
    }
    (best.or(eval_score).unwrap_or(Score::DRAW), reaches_cycle)
}

/// Brings cached idea values and cyclic flags up to date after `changed` nodes changed, carrying every change
/// upward through the parent links. Returns how many nodes were recomputed.
pub fn propagate<G: GraphMut>(g: &mut G, changed: impl IntoIterator<Item = PositionKey>) -> usize {
    let mut queue: VecDeque<PositionKey> = VecDeque::new();
    // When each queued key was queued, and when each key was last computed (steps of this loop).
    let mut queued: KeyMap<u64> = KeyMap::default();
    let mut computed: KeyMap<u64> = KeyMap::default();
    for key in changed {
        if let std::collections::hash_map::Entry::Vacant(entry) = queued.entry(key) {
            entry.insert(0);
            queue.push_back(key);
        }
    }
    let mut recomputed = 0;
    let mut step = 0u64;
    // Guards against endless ping-pong should cached values ever disagree inside a budget-cut component.
    let mut visits: KeyMap<u32> = KeyMap::default();
    while let Some(key) = queue.pop_front() {
        let queued_at = queued.remove(&key).unwrap_or(0);
        // Computed with its whole cycle since it was queued: already up to date with what queued it.
        if computed.get(&key).is_some_and(|&at| at > queued_at) {
            continue;
        }
        let count = visits.entry(key).or_default();
        *count += 1;
        if *count > 64 {
            continue;
        }
        step += 1;
        let values = recompute(g, key);
        // A cycle is computed whole: a change of one member queues the parents outside it, not the other members.
        let members: KeySet =
            if values.len() > 1 { values.iter().map(|(member, ..)| *member).collect() } else { KeySet::default() };
        for (member, idea, cyclic) in values {
            recomputed += 1;
            computed.insert(member, step);
            let unchanged = g.node(member).is_none_or(|node| node.idea == idea && node.cyclic == cyclic);
            if unchanged {
                continue;
            }
            // The node is no longer held here, so the graph can update it in place.
            g.set_cached(member, idea, cyclic);
            for parent in g.parents(member) {
                // A parent already queued is queued again from now: this change, too, must reach it.
                if !members.contains(&parent) && queued.insert(parent, step).is_none() {
                    queue.push_back(parent);
                }
            }
        }
    }
    recomputed
}

/// Recomputes every cached value from scratch (all nodes of the graph), for checks and repairs.
pub fn recompute_all<G: GraphMut>(g: &mut G, keys: &[PositionKey]) {
    for key in keys {
        g.set_cached(*key, None, false);
    }
    propagate(g, keys.iter().copied());
}

/// Recomputes the idea value and cyclic flag of every node of `keys` in one linear pass, for when most of the graph
/// changed (a bulk load): the strongly connected components of the nodes (Tarjan's algorithm) come out children
/// first, and each is computed once, from its children's values. A node on no cycle is valued one level deep over
/// its children's values; the members of a cycle are unrolled inside their component. Nodes outside `keys` keep
/// their cached values and are read as they stand. Only changed values are set. Returns how many nodes were
/// computed.
///
/// Gives what [`propagate`] gives from the same graph, without its per-node cycle search: cycles run through
/// reversible moves only (see [`super::graph`]), so the components over all moves are the cycles.
pub fn recompute_in_one_pass<G: GraphMut>(g: &mut G, keys: &[PositionKey]) -> usize {
    const OUTSIDE: u32 = u32::MAX;
    let mut index: KeyMap<u32> = KeyMap::default();
    index.reserve(keys.len());
    let mut members: Vec<Arc<GraphNode>> = Vec::with_capacity(keys.len());
    for &key in keys {
        if index.contains_key(&key) {
            continue;
        }
        if let Some(node) = g.node(key) {
            index.insert(key, members.len() as u32);
            members.push(node);
        }
    }
    // The members as flat arrays, so that no node of the graph is held here while its values are set: every
    // edge's child as a member's index (or OUTSIDE), with offsets; and the children inside the set alone, for the
    // components.
    let count = members.len();
    let mut edge_offsets: Vec<usize> = Vec::with_capacity(count + 1);
    let mut edges: Vec<(PositionKey, Score, u32)> = Vec::with_capacity(count * 3);
    let mut offsets: Vec<usize> = Vec::with_capacity(count + 1);
    let mut children: Vec<u32> = Vec::with_capacity(count * 3);
    for node in &members {
        edge_offsets.push(edges.len());
        offsets.push(children.len());
        for edge in &node.edges {
            let child = index.get(&edge.child).copied();
            edges.push((edge.child, edge.score, child.unwrap_or(OUTSIDE)));
            children.extend(child);
        }
    }
    edge_offsets.push(edges.len());
    offsets.push(children.len());
    drop(index);
    let member_keys: Vec<PositionKey> = members.iter().map(|node| node.key).collect();
    let evaluated: Vec<bool> = members.iter().map(|node| node.evaluated).collect();
    let eval_score: Vec<Option<Score>> = members.iter().map(|node| node.eval_score).collect();
    // The values as stored, then as computed: children come before their parents.
    let mut idea: Vec<Option<Score>> = members.iter().map(|node| node.idea).collect();
    let mut cyclic: Vec<bool> = members.iter().map(|node| node.cyclic).collect();
    drop(members);
    let mut computed = 0;
    let (order, ends) = components_children_first(&offsets, &children);
    drop((offsets, children));
    let mut start = 0;
    for end in ends {
        let component = &order[start..end];
        start = end;
        if let [i] = *component {
            // A node on no cycle, as `values_of_component` values it, its members' children read from the arrays.
            let i = i as usize;
            let key = member_keys[i];
            let own = edges[edge_offsets[i]..edge_offsets[i + 1]].iter().map(|&(child, score, index)| {
                let known = if index != OUTSIDE {
                    let c = index as usize;
                    Some(ChildValues { evaluated: evaluated[c], idea: idea[c], cyclic: cyclic[c] })
                } else {
                    g.node(child).map(|node| ChildValues::of(&node))
                };
                (child, score, known)
            });
            let (best, reaches_cycle) = value_over_children(key, eval_score[i], own);
            let value = evaluated[i].then_some(best);
            computed += 1;
            if value != idea[i] || reaches_cycle != cyclic[i] {
                g.set_cached(key, value, reaches_cycle);
            }
            idea[i] = value;
            cyclic[i] = reaches_cycle;
            continue;
        }
        let keys: Vec<PositionKey> = component.iter().map(|&i| member_keys[i as usize]).collect();
        for ((member, value, on_cycle), &i) in values_of_component(g, &keys).into_iter().zip(component) {
            computed += 1;
            let i = i as usize;
            if idea[i] != value || cyclic[i] != on_cycle {
                g.set_cached(member, value, on_cycle);
            }
            idea[i] = value;
            cyclic[i] = on_cycle;
        }
    }
    computed
}

/// The strongly connected components of a graph given as flat child lists (`children[offsets[i]..offsets[i + 1]]`
/// are the children of node `i`), each component after every component it reaches (Tarjan's algorithm, without
/// recursion): the members of all components in one list, and where each component ends in it.
fn components_children_first(offsets: &[usize], children: &[u32]) -> (Vec<u32>, Vec<usize>) {
    const UNSEEN: u32 = u32::MAX;
    let count = offsets.len().saturating_sub(1);
    let mut order = vec![UNSEEN; count];
    let mut low = vec![0u32; count];
    let mut on_stack = vec![false; count];
    let mut stack: Vec<u32> = Vec::new();
    let mut members = Vec::with_capacity(count);
    let mut ends = Vec::with_capacity(count);
    let mut next_order = 0u32;
    // (node, position of its next child in `children`)
    let mut calls: Vec<(u32, usize)> = Vec::new();
    for start in 0..count as u32 {
        if order[start as usize] != UNSEEN {
            continue;
        }
        calls.push((start, offsets[start as usize]));
        order[start as usize] = next_order;
        low[start as usize] = next_order;
        next_order += 1;
        stack.push(start);
        on_stack[start as usize] = true;
        while let Some(&mut (node, ref mut next)) = calls.last_mut() {
            let n = node as usize;
            if *next < offsets[n + 1] {
                let child = children[*next];
                *next += 1;
                let c = child as usize;
                if order[c] == UNSEEN {
                    order[c] = next_order;
                    low[c] = next_order;
                    next_order += 1;
                    stack.push(child);
                    on_stack[c] = true;
                    calls.push((child, offsets[c]));
                } else if on_stack[c] {
                    low[n] = low[n].min(order[c]);
                }
                continue;
            }
            calls.pop();
            if let Some(&(parent, _)) = calls.last() {
                low[parent as usize] = low[parent as usize].min(low[n]);
            }
            if low[n] == order[n] {
                while let Some(member) = stack.pop() {
                    on_stack[member as usize] = false;
                    members.push(member);
                    if member == node {
                        break;
                    }
                }
                ends.push(members.len());
            }
        }
    }
    (members, ends)
}

/// The idea value and cyclic flag of every member of a component whose children outside it have their values.
fn values_of_component<G: Graph>(g: &G, component: &[PositionKey]) -> Vec<(PositionKey, Option<Score>, bool)> {
    let on_cycle = component.len() > 1;
    let inside: KeySet = component.iter().copied().filter(|_| on_cycle).collect();
    // The unrolls of one component share one budget: a component of many members (kings and rooks shuffling in
    // an endgame) would otherwise cost members times the budget at every change inside it.
    let member_budget = (COMPONENT_BUDGET / component.len().max(1)).max(MEMBER_BUDGET_FLOOR);
    let mut cut = 0usize;
    let mut out = Vec::with_capacity(component.len());
    for &member in component {
        let Some(node) = g.node(member) else { continue };
        if on_cycle {
            let idea = node.evaluated.then(|| {
                let mut budget = member_budget;
                let mut path = vec![member];
                let value = unroll_idea_in_component(g, &node, &inside, &mut path, &mut budget);
                cut += usize::from(budget == 0);
                value
            });
            out.push((member, idea, true));
            continue;
        }
        let edges =
            node.edges.iter().map(|edge| (edge.child, edge.score, g.node(edge.child).map(|c| ChildValues::of(&c))));
        let (value, reaches_cycle) = value_over_children(member, node.eval_score, edges);
        out.push((member, node.evaluated.then_some(value), reaches_cycle));
    }
    if cut > 0 {
        log::debug!(
            "idea values of a cycle of {} positions: {cut} walks cut at {member_budget} positions, cached values beyond",
            component.len()
        );
    }
    out
}

/// Idea value of one move seen along a displayed line: a move back into a position of the line is valued by its
/// engine score; any other by its child's cached idea value.
pub fn idea_of_edge<G: Graph>(g: &G, child: PositionKey, score: Score, line: &[PositionKey]) -> Score {
    if line.contains(&child) {
        return score;
    }
    match g.node(child).filter(|c| c.evaluated) {
        // Sign flip: the child's value is from the opponent's side.
        Some(node) => node.idea.map_or(score, Score::back_up),
        None => score,
    }
}
