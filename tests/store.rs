//! The tree store against real LMDB files in temporary directories.

use std::{
    collections::HashSet,
    io::{BufRead, BufReader},
    path::Path,
    process::{Command, Stdio},
};

use deeptree::{
    bench::{change_key, generated_tree, random_positions, write_all},
    score::{Bound, Score},
    store::{
        Change, Record, SCHEMA_VERSION, Store, StoreError, StoreOptions,
        checksum::{self, Table},
        key::PositionKey,
        node::{Edge, Node, PackedPosition},
    },
};
use heed::{
    EnvOpenOptions,
    types::{Bytes, Str},
};
use shakmaty::{CastlingMode, Chess, fen::Fen};

fn deeptree() -> Command {
    Command::new(env!("CARGO_BIN_EXE_deeptree"))
}

fn position(fen: &str) -> Chess {
    fen.parse::<Fen>().unwrap().into_position(CastlingMode::Standard).unwrap()
}

fn node_with_edge(pos: &Chess, uci: &str, cp: i32, depth: u8) -> Node {
    let mut node = Node::new(PackedPosition::of(pos));
    node.edges.push(Edge::new(uci.parse().unwrap(), Score::cp(cp), Bound::Exact, depth));
    node
}

/// Writes raw bytes into a named database, as damage or an older/newer deeptree would.
fn poke(dir: &Path, db: &str, key: &[u8], value: &[u8]) {
    let env = unsafe { EnvOpenOptions::new().map_size(1 << 30).max_dbs(4).open(dir).unwrap() };
    let mut wtxn = env.write_txn().unwrap();
    let database: heed::Database<Bytes, Bytes> = env.create_database(&mut wtxn, Some(db)).unwrap();
    database.put(&mut wtxn, key, value).unwrap();
    wtxn.commit().unwrap();
    env.prepare_for_closing().wait();
}

#[test]
fn merges_are_stored_with_parent_links_and_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let start = Chess::default();
    let e4 = deeptree::game::play_uci(&start, &"e2e4".parse().unwrap()).unwrap();
    {
        let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
        let writer = store.writer();
        writer.submit(vec![Change::merge(&start, node_with_edge(&start, "e2e4", 30, 10)).unwrap()]).wait().unwrap();
        // A deeper result for the same move and a new move are merged in.
        let mut more = node_with_edge(&start, "e2e4", 25, 12);
        more.edges.push(Edge::new("d2d4".parse().unwrap(), Score::cp(20), Bound::Exact, 12));
        writer.submit(vec![Change::merge(&start, more).unwrap()]).wait().unwrap();
        writer.submit(vec![Change::SetEngine("Stockfish 16".into())]).wait().unwrap();
    }
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    let view = store.read().unwrap();
    let node = view.node(PositionKey::of(&start)).unwrap().unwrap();
    assert_eq!(node.edges.len(), 2);
    assert_eq!(node.edge(&"e2e4".parse().unwrap()).unwrap().score, Score::cp(25));
    assert_eq!(view.parents(PositionKey::of(&e4)).unwrap(), vec![PositionKey::of(&start)]);
    drop(view);
    assert_eq!(store.engine_identity().unwrap().as_deref(), Some("Stockfish 16"));
    let stats = store.stats().unwrap();
    assert_eq!((stats.positions, stats.edges), (1, 2));
}

#[test]
fn illegal_moves_are_refused_before_reaching_the_store() {
    let start = Chess::default();
    let err = Change::merge(&start, node_with_edge(&start, "e2e5", 0, 10)).unwrap_err();
    assert!(matches!(err, StoreError::IllegalMove { .. }), "{err}");
}

/// Stores another position under `start`'s key, as a 64-bit collision would leave it; returns that position.
fn forge_collision(store: &Store, start: &Chess) -> Chess {
    let other = position("4k3/8/8/8/8/8/8/4K2R w K - 0 1");
    let forged =
        Change::Merge { key: PositionKey::of(start), node: Node::new(PackedPosition::of(&other)), children: vec![] };
    store.writer().submit(vec![forged]).wait().unwrap();
    other
}

#[test]
fn key_collision_is_reported_and_the_stored_position_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    let start = Chess::default();
    let other = forge_collision(&store, &start);

    let err = store
        .writer()
        .submit(vec![Change::merge(&start, node_with_edge(&start, "e2e4", 30, 10)).unwrap()])
        .wait()
        .unwrap_err();
    match &err {
        StoreError::Collision { key, stored_fen, .. } => {
            assert_eq!(*key, PositionKey::of(&start));
            assert!(stored_fen.starts_with("4k3/8/8/8/8/8/8/4K2R w K"), "{stored_fen}");
        }
        other => panic!("expected a collision, got {other}"),
    }
    let message = err.to_string();
    assert!(message.contains("data.mdb") && message.contains(&PositionKey::of(&start).to_string()), "{message}");
    let view = store.read().unwrap();
    let kept = view.node(PositionKey::of(&start)).unwrap().unwrap();
    assert_eq!(kept.position, PackedPosition::of(&other));
    assert!(kept.edges.is_empty(), "nothing of the refused change was written");
    drop(view);
    assert_eq!(store.stats().unwrap().edges, 0, "no parent link of the refused change was written");
}

#[test]
fn a_refused_submission_does_not_hold_back_others_in_the_same_batch() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    let start = Chess::default();
    forge_collision(&store, &start);
    let writer = store.writer();
    let good = random_positions(3, 50);
    let keys: Vec<_> = good.iter().filter_map(change_key).collect();
    let refused = writer.submit(vec![Change::merge(&start, node_with_edge(&start, "e2e4", 30, 10)).unwrap()]);
    let accepted = writer.submit(good);
    assert!(refused.wait().is_err());
    accepted.wait().unwrap();
    let view = store.read().unwrap();
    for key in keys {
        assert!(view.node(key).unwrap().is_some());
    }
}

#[test]
fn corrupt_record_is_an_error_naming_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path(), &StoreOptions::default()).unwrap());
    let key = PositionKey(0x0123_4567_89ab_cdef);
    // Its checksum holds, but it does not decode.
    poke(dir.path(), "nodes", &key.to_bytes(), &checksum::sealed(Table::Nodes, &key.to_bytes(), &[1, 0, 30, 1, 2]));
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    let err = store.read().unwrap().node(key).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{message}");
    assert!(message.contains("data.mdb") && message.contains("0123456789abcdef"), "{message}");
    // A write into the corrupt record is refused rather than overwriting it.
    let pos = Chess::default();
    let change = Change::Merge { key, node: Node::new(PackedPosition::of(&pos)), children: vec![] };
    assert!(matches!(store.writer().submit(vec![change]).wait(), Err(StoreError::Corrupt { .. })));
}

/// The stored value of `key` in database `db`, as LMDB holds it.
fn peek(dir: &Path, db: &str, key: &[u8]) -> Option<Vec<u8>> {
    let env = unsafe { EnvOpenOptions::new().map_size(1 << 30).max_dbs(4).open(dir).unwrap() };
    let rtxn = env.read_txn().unwrap();
    let database: heed::Database<Bytes, Bytes> = env.open_database(&rtxn, Some(db)).unwrap().unwrap();
    let value = database.get(&rtxn, key).unwrap().map(<[u8]>::to_vec);
    drop(rtxn);
    env.prepare_for_closing().wait();
    value
}

/// A record changed after it was written (one bit of its settled depth, say), or moved under another key, is a
/// checksum error naming the file and the key: never another value. The writer refuses to merge into it, and a
/// write whose upkeep meets it fails instead of committing values computed without it.
#[test]
fn a_changed_or_moved_record_is_a_checksum_error_naming_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let start = Chess::default();
    let e4 = deeptree::game::play_uci(&start, &"e2e4".parse().unwrap()).unwrap();
    let (root, child) = (PositionKey::of(&start), PositionKey::of(&e4));
    {
        let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
        let mut node = node_with_edge(&start, "e2e4", 30, 10);
        node.settled_depth = Some(4);
        let mut reply = node_with_edge(&e4, "e7e5", -20, 10);
        reply.eval = Some(deeptree::store::node::Eval {
            score: Score::cp(-20),
            bound: Bound::Exact,
            depth: 10,
            best: Some("e7e5".parse().unwrap()),
            nodes: 1,
            engine: None,
        });
        let changes = vec![Change::merge(&start, node).unwrap(), Change::merge(&e4, reply).unwrap()];
        store.writer().submit(changes).wait().unwrap();
    }
    let stored = peek(dir.path(), "nodes", &root.to_bytes()).unwrap();
    let mut changed = stored.clone();
    // The settled depth is the byte before the edge count (1) and the edge (6 bytes) and the checksum (4).
    let at = changed.len() - 4 - 6 - 1 - 1;
    assert_eq!(changed[at], 4, "the settled depth's byte");
    changed[at] = 40;
    poke(dir.path(), "nodes", &root.to_bytes(), &changed);
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    let err = store.read().unwrap().node(root).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, StoreError::Checksum { record: Record::Node(key), .. } if key == root), "{message}");
    assert!(message.contains(&dir.path().join("data.mdb").display().to_string()), "{message}");
    assert!(message.contains("463b96181691fc9c") && message.contains("checksum"), "{message}");
    let err = store.writer().submit(vec![Change::merge(&start, node_with_edge(&start, "d2d4", 20, 10)).unwrap()]);
    assert!(matches!(err.wait(), Err(StoreError::Checksum { .. })), "a merge into a damaged record is refused");
    // A new evaluation of the child carries its value up to the damaged parent: the write fails, naming it.
    let mut deeper = node_with_edge(&e4, "e7e5", -25, 12);
    deeper.eval = None;
    let err = store.writer().submit(vec![Change::merge(&e4, deeper).unwrap()]).wait().unwrap_err();
    assert!(matches!(&err, StoreError::Checksum { record: Record::Node(key), .. } if *key == root), "{err}");
    drop(store);
    // The child's record, intact, stored under the root's key: caught as well.
    let moved = peek(dir.path(), "nodes", &child.to_bytes()).unwrap();
    poke(dir.path(), "nodes", &root.to_bytes(), &moved);
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    assert!(matches!(store.read().unwrap().node(root), Err(StoreError::Checksum { .. })));
    assert!(store.read().unwrap().node(child).unwrap().is_some(), "the intact record reads as before");
    let report = store.check().unwrap();
    assert_eq!(report.damaged.len(), 1, "{report:?}");
    assert_eq!(report.damaged[0].record, Record::Node(root));
}

/// A copy of a store cut short (as a full disk or an interrupted copy leaves it) is refused when it is opened,
/// naming the file, before anything is read from it: reading a page past the end of a mapped file would kill the
/// process.
#[test]
fn a_data_file_cut_short_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
        write_all(&store, generated_tree(3, 3_000), 1_000, None, |_| {}).unwrap();
    }
    let data = dir.path().join("data.mdb");
    let length = std::fs::metadata(&data).unwrap().len();
    assert!(length > 100_000, "{length}");
    std::fs::File::options().write(true).open(&data).unwrap().set_len(50_000).unwrap();
    for err in [
        Store::open(dir.path(), &StoreOptions::default()).err().expect("refused"),
        Store::open_existing(dir.path(), &StoreOptions::default()).err().expect("refused"),
        Store::open_read_only(dir.path(), &StoreOptions::default()).err().expect("refused"),
    ] {
        assert!(matches!(err, StoreError::Truncated { length: 50_000, .. }), "{err}");
        assert!(err.to_string().contains(&data.display().to_string()), "{err}");
    }
}

/// A command that only reads opens a schema 4 store as it is: its bare records read, nothing written, and a write
/// refused; a command that writes upgrades it first, which needs the store alone.
#[test]
fn a_schema_4_store_is_read_as_it_is_and_upgraded_only_by_a_writer_alone() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store-v1/data.mdb");
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(&fixture, dir.path().join("data.mdb")).unwrap();
    let start = PositionKey::of(&Chess::default());
    {
        let store = Store::open_read_only(dir.path(), &StoreOptions::default()).unwrap();
        assert!(store.read().unwrap().node(start).unwrap().is_some());
        assert!(store.check().unwrap().is_clean());
        let change = Change::merge(&Chess::default(), node_with_edge(&Chess::default(), "e2e4", 30, 10)).unwrap();
        let err = store.writer().submit(vec![change]).wait().unwrap_err();
        assert!(matches!(err, StoreError::ReadOnly { .. }), "{err}");
    }
    assert!(std::fs::read(dir.path().join("data.mdb")).unwrap() == std::fs::read(&fixture).unwrap());
    // Another process has it open: no upgrade, and nothing written.
    let lock = dir.path().join("deeptree.lock");
    std::fs::write(&lock, b"").unwrap();
    let other = std::fs::File::open(&lock).unwrap();
    other.lock_shared().unwrap();
    let err = Store::open(dir.path(), &StoreOptions::default()).err().expect("refused while shared");
    assert!(matches!(err, StoreError::UpgradeInUse { found: 4, .. }), "{err}");
    drop(other);
    assert!(std::fs::read(dir.path().join("data.mdb")).unwrap() == std::fs::read(&fixture).unwrap());
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    assert!(store.read().unwrap().node(start).unwrap().is_some());
    assert!(store.check().unwrap().is_clean());
    drop(store);
    let env = unsafe { EnvOpenOptions::new().map_size(1 << 30).max_dbs(4).open(dir.path()).unwrap() };
    let rtxn = env.read_txn().unwrap();
    let meta: heed::Database<Str, Bytes> = env.open_database(&rtxn, Some("meta")).unwrap().unwrap();
    assert_eq!(meta.get(&rtxn, "schema_version").unwrap(), Some(&SCHEMA_VERSION.to_be_bytes()[..]));
}

#[test]
fn newer_schema_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path(), &StoreOptions::default()).unwrap());
    let env = unsafe { EnvOpenOptions::new().map_size(1 << 30).max_dbs(4).open(dir.path()).unwrap() };
    let mut wtxn = env.write_txn().unwrap();
    let meta: heed::Database<Str, Bytes> = env.create_database(&mut wtxn, Some("meta")).unwrap();
    meta.put(&mut wtxn, "schema_version", &(SCHEMA_VERSION + 1).to_be_bytes()).unwrap();
    wtxn.commit().unwrap();
    env.prepare_for_closing().wait();

    let err = Store::open(dir.path(), &StoreOptions::default()).err().expect("a newer schema must be refused");
    assert!(matches!(err, StoreError::NewerSchema { .. }), "{err}");
    assert!(err.to_string().contains(&dir.path().join("data.mdb").display().to_string()), "{err}");
}

/// A store written before engines were recorded (schema 1, version 1 records) opens: it is upgraded to the current
/// schema and its records read as before.
#[test]
fn a_schema_1_store_is_upgraded_and_its_records_read_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let pos = Chess::default();
    let key = deeptree::store::key::PositionKey::of(&pos);
    let mut node = Node::new(PackedPosition::of(&pos));
    node.edges.push(Edge::new("e2e4".parse().unwrap(), Score::cp(25), Bound::Exact, 12));
    let record = node.encode();
    assert_eq!(record[0], 1, "a record with no engine number is written as version 1");
    // As schema 1 held it: the bare record, and the schema version.
    let env = unsafe { EnvOpenOptions::new().map_size(1 << 30).max_dbs(4).open(dir.path()).unwrap() };
    let mut wtxn = env.write_txn().unwrap();
    let meta: heed::Database<Str, Bytes> = env.create_database(&mut wtxn, Some("meta")).unwrap();
    meta.put(&mut wtxn, "schema_version", &1u32.to_be_bytes()).unwrap();
    let nodes: heed::Database<Bytes, Bytes> = env.create_database(&mut wtxn, Some("nodes")).unwrap();
    nodes.put(&mut wtxn, &key.to_bytes(), &record).unwrap();
    wtxn.commit().unwrap();
    env.prepare_for_closing().wait();

    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    let node = store.read().unwrap().node(key).unwrap().unwrap();
    assert_eq!(node.edges.len(), 1);
    assert_eq!(node.edges[0].engine, None);
    drop(store);
    let env = unsafe { EnvOpenOptions::new().map_size(1 << 30).max_dbs(4).open(dir.path()).unwrap() };
    let rtxn = env.read_txn().unwrap();
    let meta: heed::Database<Str, Bytes> = env.open_database(&rtxn, Some("meta")).unwrap().unwrap();
    assert_eq!(meta.get(&rtxn, "schema_version").unwrap(), Some(&SCHEMA_VERSION.to_be_bytes()[..]));
    assert_eq!(SCHEMA_VERSION, 5);
    let nodes: heed::Database<Bytes, Bytes> = env.open_database(&rtxn, Some("nodes")).unwrap().unwrap();
    let sealed = nodes.get(&rtxn, &key.to_bytes()).unwrap().unwrap();
    assert_eq!(checksum::open(Table::Nodes, &key.to_bytes(), sealed), Ok(&record[..]), "sealed, byte for byte");
}

#[test]
fn the_map_grows_on_demand() {
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions { initial_map_size: 64 * 1024, max_batch: 1000 };
    let store = Store::open(dir.path(), &options).unwrap();
    let changes = random_positions(11, 5_000);
    let keys: Vec<_> = changes.iter().filter_map(change_key).collect();
    deeptree::bench::write_all(&store, changes, 700, None, |_| {}).unwrap();
    let stats = store.stats().unwrap();
    assert_eq!(stats.positions, 5_000);
    assert!(stats.map_size > 64 * 1024, "the map grew past its initial size");
    let view = store.read().unwrap();
    for key in keys {
        assert!(view.node(key).unwrap().is_some());
    }
}

#[test]
fn a_long_reader_does_not_block_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    let view = store.read().unwrap();
    let changes = random_positions(5, 2_000);
    let first = change_key(&changes[0]).unwrap();
    deeptree::bench::write_all(&store, changes, 500, None, |_| {}).unwrap();
    // The old snapshot does not see the new positions; a new one does.
    assert!(view.node(first).unwrap().is_none());
    drop(view);
    assert!(store.read().unwrap().node(first).unwrap().is_some());
}

fn expected_keys(seed: u64, count: usize) -> Vec<PositionKey> {
    random_positions(seed, count).iter().filter_map(change_key).collect()
}

#[test]
fn two_processes_write_one_store_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("small-map.toml");
    // A 1 MiB initial map makes both processes grow it and adopt each other's growth.
    std::fs::write(&config, "map_size_mib = 1\n").unwrap();
    let db = dir.path().join("tree");
    let spawn = |seed: &str| {
        deeptree()
            .args(["--db", db.to_str().unwrap(), "--config", config.to_str().unwrap()])
            .args(["fill", "--positions", "10000", "--batch", "250", "--seed", seed])
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut a = spawn("101");
    let mut b = spawn("202");
    assert!(a.wait().unwrap().success());
    assert!(b.wait().unwrap().success());

    let mut expected: HashSet<PositionKey> = expected_keys(101, 10_000).into_iter().collect();
    expected.extend(expected_keys(202, 10_000));
    assert_eq!(expected.len(), 20_000, "the two generators write disjoint positions");
    let store = Store::open(&db, &StoreOptions::default()).unwrap();
    let view = store.read().unwrap();
    for key in &expected {
        let node = view.node(*key).unwrap().unwrap_or_else(|| panic!("position {key} missing"));
        assert_eq!(PositionKey::of(&node.position.to_position().unwrap()), *key);
    }
    drop(view);
    assert_eq!(store.stats().unwrap().positions, 20_000);
}

#[test]
fn a_writer_killed_mid_run_loses_nothing_committed() {
    let dir = tempfile::tempdir().unwrap();
    // Small transactions (a bulk load takes 8 times `write_batch` changes in one), so that the kill lands mid-run.
    let config = dir.path().join("small-batches.toml");
    std::fs::write(&config, "write_batch = 100\n").unwrap();
    let db = dir.path().join("tree");
    let mut child = deeptree()
        .args(["--db", db.to_str().unwrap(), "--config", config.to_str().unwrap()])
        .args(["fill", "--positions", "60000", "--batch", "200", "--seed", "77"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut committed = 0usize;
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        committed = line.strip_prefix("committed ").unwrap().parse().unwrap();
        if committed >= 3_000 {
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert!(!status.success(), "the writer was killed before finishing");
    assert!(committed >= 3_000);

    let store = Store::open(&db, &StoreOptions::default()).unwrap();
    let view = store.read().unwrap();
    for key in expected_keys(77, committed) {
        assert!(view.node(key).unwrap().is_some(), "committed position {key} lost");
    }
    drop(view);
    let positions = store.stats().unwrap().positions;
    assert!(positions >= committed as u64 && positions < 60_000, "{positions} positions after the kill");
    // `fill` is a bulk load: its values were owed when it was killed, and opening the store brought them up to date.
    assert_values_as_recomputed(&store);
}

/// Asserts that every stored idea value and cyclic flag equals a from-scratch recomputation over the stored graph.
fn assert_values_as_recomputed(store: &Store) {
    use deeptree::values::{
        graph::{Graph, MemGraph},
        idea::recompute_all,
    };
    let (graph, keys) = MemGraph::of_view(&store.read().unwrap()).unwrap();
    let mut scratch = graph.clone();
    recompute_all(&mut scratch, &keys);
    for key in &keys {
        let stored = graph.node(*key).unwrap();
        assert!(stored.idea.is_some(), "idea of {key} missing");
        assert_eq!(stored.idea, scratch.node(*key).unwrap().idea, "idea of {key}");
        assert_eq!(stored.cyclic, scratch.node(*key).unwrap().cyclic, "cyclic flag of {key}");
    }
}

#[test]
fn a_bulk_load_brings_every_value_up_to_date_in_one_pass_at_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    // Breadth first: parents are written before their children, so every value depends on records written later.
    let changes = generated_tree(5, 20_000);
    write_all(&store, changes, 1_000, None, |_| {}).unwrap();
    assert_eq!(store.stats().unwrap().positions, 20_000);
    assert_values_as_recomputed(&store);
    // The same load again changes nothing: a second bulk pass finds every value already right.
    let before: Vec<_> = store.read().unwrap().nodes().unwrap().map(Result::unwrap).collect();
    write_all(&store, generated_tree(5, 20_000), 1_000, None, |_| {}).unwrap();
    let after: Vec<_> = store.read().unwrap().nodes().unwrap().map(Result::unwrap).collect();
    assert!(before == after, "a repeated bulk load changed records");
}

/// The same changes with every edge's depth and score replaced.
fn reanalysed(changes: &[Change], depth: u8, shift: i32) -> Vec<Change> {
    changes
        .iter()
        .cloned()
        .map(|mut change| {
            if let Change::Merge { node, .. } = &mut change {
                for edge in &mut node.edges {
                    edge.depth = depth;
                    edge.score = Score::cp(shift + edge.score.as_cp().unwrap_or(0) % 50);
                }
            }
            change
        })
        .collect()
}

#[test]
fn a_bulk_load_over_stored_records_merges_into_them_and_settles_at_its_size_limit() {
    let dir = tempfile::tempdir().unwrap();
    // At most 100 x 20 = 2,000 records wait in memory: the load below is settled three times on its own.
    let options = StoreOptions { max_batch: 100, ..StoreOptions::default() };
    let store = Store::open(dir.path(), &options).unwrap();
    let tree = generated_tree(9, 6_000);
    let stored: Vec<Change> = tree.iter().step_by(2).cloned().collect();
    store.writer().submit(stored).wait().unwrap();
    // Every position again, its edges found shallower (depth 10) and scored otherwise: the stored depth-18 edges
    // must win where they exist, the new ones elsewhere.
    write_all(&store, reanalysed(&tree, 10, 7), 250, None, |_| {}).unwrap();
    let view = store.read().unwrap();
    for (i, change) in tree.iter().enumerate() {
        let key = change_key(change).unwrap();
        let node = view.node(key).unwrap().unwrap_or_else(|| panic!("position {i} missing"));
        let Change::Merge { node: original, .. } = change else { unreachable!() };
        assert_eq!(node.edges.len(), original.edges.len());
        let expected = if i % 2 == 0 { 18 } else { 10 };
        assert!(node.edges.iter().all(|e| e.depth == expected), "position {i}: {:?}", node.edges);
    }
    drop(view);
    assert_eq!(store.stats().unwrap().positions, 6_000);
    assert_values_as_recomputed(&store);
}

#[test]
fn a_write_with_values_now_commits_the_waiting_bulk_load_first() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    let tree = generated_tree(3, 3_000);
    let (bulk, now) = tree.split_at(2_000);
    let writer = store.writer();
    writer.submit_deferred(bulk.to_vec()).wait().unwrap();
    // Accepted, not yet committed: a reader does not see the bulk load.
    assert_eq!(store.stats().unwrap().positions, 0);
    writer.submit(now.to_vec()).wait().unwrap();
    // The write with values now found the bulk load's records committed before it, and carried its values over them.
    assert_eq!(store.stats().unwrap().positions, 3_000);
    assert_values_as_recomputed(&store);
    // Nothing waits any more: a settle commits nothing and succeeds.
    writer.settle().wait().unwrap();
    assert_eq!(store.stats().unwrap().positions, 3_000);
}

/// Every record of the store in `dir`, in key order.
fn records(dir: &Path) -> Vec<(PositionKey, Node)> {
    let store = Store::open_existing(dir, &StoreOptions::default()).unwrap();
    let view = store.read().unwrap();
    let mut all: Vec<_> = view.nodes().unwrap().map(Result::unwrap).collect();
    all.sort_by_key(|(key, _)| *key);
    all
}

#[test]
fn compact_rewrites_the_store_without_free_pages_and_refuses_while_it_is_open_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    // Many small transactions, each rewriting records, leave free pages behind.
    {
        let store = Store::open(&db, &StoreOptions::default()).unwrap();
        let changes = random_positions(7, 3000);
        for round in 0..4u8 {
            for chunk in changes.chunks(50) {
                let deeper = chunk
                    .iter()
                    .map(|change| match change.clone() {
                        Change::Merge { key, mut node, children } => {
                            for edge in &mut node.edges {
                                edge.depth = edge.depth.saturating_add(round);
                            }
                            Change::Merge { key, node, children }
                        }
                        other => other,
                    })
                    .collect();
                store.writer().submit(deeper).wait().unwrap();
            }
        }
    }
    let before = records(&db);
    let size = || std::fs::metadata(db.join("data.mdb")).unwrap().len();
    let size_before = size();

    // A GUI's session has the store open: compaction is refused and changes nothing.
    let mut session = deeptree().arg("--db").arg(&db).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut stdin = session.stdin.take().unwrap();
    let mut stdout = BufReader::new(session.stdout.take().unwrap());
    std::io::Write::write_all(&mut stdin, b"uci\nisready\n").unwrap();
    let mut line = String::new();
    while !line.starts_with("readyok") {
        line.clear();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "the session ended before readyok");
    }
    let refused = deeptree().arg("--db").arg(&db).arg("compact").output().unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("open in another process"));
    assert_eq!(size(), size_before);
    std::io::Write::write_all(&mut stdin, b"quit\n").unwrap();
    session.wait().unwrap();

    let done = deeptree().arg("--db").arg(&db).args(["compact", "--json"]).output().unwrap();
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let report: serde_json::Value = serde_json::from_slice(&done.stdout).unwrap();
    assert_eq!(report["bytes_before"].as_u64(), Some(size_before));
    assert_eq!(report["bytes_after"].as_u64(), Some(size()));
    assert!(size() * 2 < size_before, "{} bytes after, {size_before} before", size());
    assert_eq!(records(&db), before, "compaction changes no record");
    assert!(!db.join("data.mdb.compact").exists());
    // The compacted store is an ordinary store: it takes writes again.
    let store = Store::open(&db, &StoreOptions::default()).unwrap();
    let start = Chess::default();
    store.writer().submit(vec![Change::merge(&start, node_with_edge(&start, "e2e4", 5, 30)).unwrap()]).wait().unwrap();
    assert_eq!(store.stats().unwrap().positions, before.len() as u64 + 1);

    let missing = deeptree().arg("--db").arg(dir.path().join("nothing")).arg("compact").output().unwrap();
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no deeptree store"));
}

/// Asserts that every edge of the store has its parent link; returns how many edges there are.
fn assert_every_edge_is_linked(view: &deeptree::store::ReadView<'_>) -> usize {
    let mut links = 0;
    for item in view.nodes().unwrap() {
        let (key, node) = item.unwrap();
        let position = node.position.to_position().unwrap();
        for edge in &node.edges {
            let child = PositionKey::of(&deeptree::game::play_uci(&position, &edge.uci).unwrap());
            assert!(view.parents(child).unwrap().contains(&key), "link {key} -> {child} ({})", edge.uci);
            links += 1;
        }
    }
    links
}

/// A small store written by deeptree with schema 2 (a knight shuffle from 1. e4 e5, settled to software depth 1
/// with the fake engine; one LMDB entry per parent link), kept as a fixture: opening it migrates it to packed links.
#[test]
fn a_schema_2_store_is_migrated_to_packed_links_when_opened() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/schema2/data.mdb");
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(&fixture, dir.path().join("data.mdb")).unwrap();
    {
        let env = unsafe { EnvOpenOptions::new().map_size(1 << 30).max_dbs(4).open(dir.path()).unwrap() };
        let rtxn = env.read_txn().unwrap();
        let meta: heed::Database<Str, Bytes> = env.open_database(&rtxn, Some("meta")).unwrap().unwrap();
        assert_eq!(meta.get(&rtxn, "schema_version").unwrap(), Some(&2u32.to_be_bytes()[..]));
        drop(rtxn);
        env.prepare_for_closing().wait();
    }
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    let stats = store.stats().unwrap();
    assert_eq!((stats.positions, stats.edges), (34, 62), "the fixture's positions and links");
    let view = store.read().unwrap();
    assert_eq!(assert_every_edge_is_linked(&view), 62);
    drop(view);
    drop(store);
    // Migrated once: the store now says the current schema, and opens again as it is.
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    assert_eq!(store.stats().unwrap().edges, 62);
    let env_meta = {
        drop(store);
        let env = unsafe { EnvOpenOptions::new().map_size(1 << 30).max_dbs(4).open(dir.path()).unwrap() };
        let rtxn = env.read_txn().unwrap();
        let meta: heed::Database<Str, Bytes> = env.open_database(&rtxn, Some("meta")).unwrap().unwrap();
        meta.get(&rtxn, "schema_version").unwrap().map(<[u8]>::to_vec)
    };
    assert_eq!(env_meta, Some(SCHEMA_VERSION.to_be_bytes().to_vec()));
}

/// A small store written by deeptree with schema 3 (1. Nf3 Nf6 2. Ng1 Ng8 3. e4 e5, settled to software depth 1 with
/// the fake engine at engine depth 4, then compacted; one record of packed parents per child), kept as a fixture:
/// opening it moves its links into pages, and every link, value and record reads as before.
#[test]
fn a_schema_3_store_is_migrated_to_link_pages_when_opened() {
    use deeptree::values::{
        graph::{Graph, MemGraph},
        idea::recompute_all,
    };
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/schema3/data.mdb");
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(&fixture, dir.path().join("data.mdb")).unwrap();
    let schema = |dir: &Path| {
        let env = unsafe { EnvOpenOptions::new().map_size(1 << 30).max_dbs(6).open(dir).unwrap() };
        let rtxn = env.read_txn().unwrap();
        let meta: heed::Database<Str, Bytes> = env.open_database(&rtxn, Some("meta")).unwrap().unwrap();
        let version = meta.get(&rtxn, "schema_version").unwrap().map(<[u8]>::to_vec);
        let per_child: Option<heed::Database<Bytes, Bytes>> = env.open_database(&rtxn, Some("links")).unwrap();
        let per_child = per_child.map_or(0, |db| db.len(&rtxn).unwrap());
        drop(rtxn);
        env.prepare_for_closing().wait();
        (version, per_child)
    };
    let (version, per_child) = schema(dir.path());
    assert_eq!(version, Some(3u32.to_be_bytes().to_vec()));
    assert!(per_child > 20, "the fixture holds one record per child ({per_child})");

    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    let stats = store.stats().unwrap();
    assert_eq!((stats.positions, stats.edges), (35, 64), "the fixture's positions and links");
    let view = store.read().unwrap();
    assert_eq!(assert_every_edge_is_linked(&view), 64);
    // The values stored with the fixture are those a recomputation gives (positions of the line before the root
    // have no evaluation, and no idea value).
    let (graph, keys) = MemGraph::of_view(&view).unwrap();
    let mut scratch = graph.clone();
    recompute_all(&mut scratch, &keys);
    for key in &keys {
        let (stored, recomputed) = (graph.node(*key).unwrap(), scratch.node(*key).unwrap());
        assert_eq!((stored.idea, stored.cyclic), (recomputed.idea, recomputed.cyclic), "{key}");
    }
    assert!(keys.iter().filter(|k| graph.node(**k).unwrap().idea.is_some()).count() >= 30);
    drop(view);
    drop(store);
    assert_eq!(schema(dir.path()), (Some(SCHEMA_VERSION.to_be_bytes().to_vec()), 0), "migrated once");
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    assert_eq!(store.stats().unwrap().edges, 64);
}

/// A repair of a store larger than one of its transactions (100,000 nodes) copies every intact record, leaves the
/// damaged one out, and gives a store that checks clean with the same records.
#[test]
fn a_repair_copies_every_intact_record_of_a_large_store() {
    let dir = tempfile::tempdir().unwrap();
    let changes = generated_tree(11, 120_000);
    let keys: Vec<PositionKey> = changes.iter().filter_map(change_key).collect();
    {
        let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
        write_all(&store, changes, 10_000, None, |_| {}).unwrap();
    }
    let damaged = keys[keys.len() / 2];
    let mut value = peek(dir.path(), "nodes", &damaged.to_bytes()).unwrap();
    value[3] ^= 0x10;
    poke(dir.path(), "nodes", &damaged.to_bytes(), &value);
    let out = dir.path().join("repaired");
    let repair = Store::repair(dir.path(), &out).unwrap();
    assert_eq!(repair.nodes as usize, keys.len() - 1);
    assert_eq!(repair.left_out.len(), 1, "{:?}", repair.left_out);
    assert_eq!(repair.left_out[0].record, Record::Node(damaged));
    let before = Store::open_existing(dir.path(), &StoreOptions::default()).unwrap();
    let after = Store::open(&out, &StoreOptions::default()).unwrap();
    assert!(after.check().unwrap().is_clean());
    let (old, new) = (before.read().unwrap(), after.read().unwrap());
    for key in keys.iter().step_by(997).filter(|key| **key != damaged) {
        let (a, b) = (old.node(*key).unwrap().unwrap(), new.node(*key).unwrap().unwrap());
        assert_eq!((a.position, a.eval, a.edges), (b.position, b.eval, b.edges), "{key}");
    }
    assert!(new.node(damaged).unwrap().is_none());
}

/// A position evaluated at depth 8 by `engine` (cp 20, `nodes` searched), with the edge of its best move.
fn evaluated(pos: &Chess, best: &str, nodes: u64, engine: Option<u16>) -> Node {
    let mut node = Node::new(PackedPosition::of(pos));
    let best = best.parse().unwrap();
    node.eval = Some(deeptree::store::node::Eval {
        score: Score::cp(20),
        bound: Bound::Exact,
        depth: 8,
        best: Some(best),
        nodes,
        engine,
    });
    node.edges.push(Edge { engine, ..Edge::new(best, Score::cp(20), Bound::Exact, 8) });
    node
}

/// `deeptree stats --json` on the store in `dir`, which must succeed.
fn stats_json(dir: &Path) -> serde_json::Value {
    let out = deeptree().arg("--db").arg(dir).args(["stats", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `stats --json`'s engines: (name, evaluations) in list order.
fn stats_engines(dir: &Path) -> Vec<(String, u64)> {
    let stats = stats_json(dir);
    assert_eq!(stats["evaluations_without_engine"], 0, "{stats}");
    let engines = stats["engines"].as_array().unwrap();
    engines.iter().map(|e| (e["name"].as_str().unwrap().to_owned(), e["evaluations"].as_u64().unwrap())).collect()
}

#[test]
fn one_engine_listed_twice_by_an_older_build_is_merged_at_the_first_open_that_writes_alone() {
    // A store as builds before 52c2ad4 wrote it: one program listed by name and by path (two numbers, records under
    // both), another engine between them.
    let dir = tempfile::tempdir().unwrap();
    let sh = deeptree::engine::resolve_program("sh").display().to_string();
    let (by_name, by_path) = ("Shell 1.0 (sh -c x)".to_owned(), format!("Shell 1.0 ({sh} -c x)"));
    let other = "Toga II 3.0 (ssh box toga2)".to_owned();
    let start = Chess::default();
    let play = |pos: &Chess, uci: &str| deeptree::game::play_uci(pos, &uci.parse().unwrap()).unwrap();
    let (e4, d4) = (play(&start, "e2e4"), play(&start, "d2d4"));
    // Each position: its evaluation's engine and best move, then further moves searched and by which engine.
    type Written<'a> = (&'a Chess, u16, &'a str, &'a [(&'a str, u16)]);
    let written: [Written; 3] = [
        (&start, 0, "e2e4", &[("d2d4", 2), ("g1f3", 1)]),
        (&e4, 2, "c7c5", &[("e7e5", 0)]),
        (&d4, 1, "d7d5", &[("g8f6", 2)]),
    ];
    {
        let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
        let mut changes = Vec::new();
        for (pos, engine, best, more) in written {
            let mut node = evaluated(pos, best, 1000, Some(engine));
            for (uci, engine) in more {
                let edge = Edge::new(uci.parse().unwrap(), Score::cp(5), Bound::Exact, 8);
                node.edges.push(Edge { engine: Some(*engine), ..edge });
            }
            changes.push(Change::merge(pos, node).unwrap());
        }
        store.writer().submit(changes).wait().unwrap();
    }
    // The list as the older build wrote it: labels as given, unresolved.
    for (number, label) in [&by_name, &other, &by_path].into_iter().enumerate() {
        let name = format!("engines/{number}");
        poke(dir.path(), "meta", name.as_bytes(), &checksum::sealed(Table::Meta, name.as_bytes(), label.as_bytes()));
    }
    let before = stats_engines(dir.path());
    assert_eq!(before, vec![(by_name.clone(), 2), (other.clone(), 2), (by_path.clone(), 3)]);

    // Another process has the store open: the numbers stay (that process may hold them), nothing is merged.
    let lock = dir.path().join("deeptree.lock");
    let holder = std::fs::File::open(&lock).unwrap();
    holder.lock_shared().unwrap();
    // Only a label without a duplicate is made canonical in place (ssh resolved where it is installed).
    let other = deeptree::engine::canonical_label(&other);
    drop(Store::open(dir.path(), &StoreOptions::default()).unwrap());
    assert_eq!(stats_engines(dir.path()), vec![(by_name.clone(), 2), (other.clone(), 2), (by_path.clone(), 3)]);
    drop(holder);

    // Alone: one entry for the program, under the label written today; every count kept, the two summed.
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    assert_eq!(store.engines().unwrap(), vec![by_path.clone(), other.clone()]);
    let view = store.read().unwrap();
    let e4_node = view.node(PositionKey::of(&e4)).unwrap().unwrap();
    assert_eq!(e4_node.eval.unwrap().engine, Some(0), "records of number 2 now name number 0");
    let d4_node = view.node(PositionKey::of(&d4)).unwrap().unwrap();
    assert_eq!(d4_node.eval.as_ref().unwrap().engine, Some(1), "the other engine keeps its number");
    assert_eq!(d4_node.edge(&"g8f6".parse().unwrap()).unwrap().engine, Some(0));
    drop(view);
    // Today's label and the older one both find the entry; nothing is added.
    assert_eq!(store.engine_numbers(&[by_name.clone(), by_path.clone()]).unwrap(), vec![Some(0), Some(0)]);
    assert!(store.check().unwrap().is_clean());
    drop(store);
    assert_eq!(stats_engines(dir.path()), vec![(by_path, 5), (other, 2)]);
}

#[test]
fn stats_counts_the_nodes_the_position_evaluations_hold() {
    // Three positions evaluated by an engine, a checkmate valued without one (its nodes are not engine work), and a
    // position with a move searched but no evaluation of its own.
    let dir = tempfile::tempdir().unwrap();
    let start = Chess::default();
    let play = |pos: &Chess, uci: &str| deeptree::game::play_uci(pos, &uci.parse().unwrap()).unwrap();
    let (e4, d4, c4) = (play(&start, "e2e4"), play(&start, "d2d4"), play(&start, "c2c4"));
    let mate = position("rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3");
    {
        let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
        let mut changes = Vec::new();
        for (pos, best, nodes) in [(&start, "e2e4", 1_000), (&e4, "c7c5", 2_500), (&d4, "d7d5", 40_000)] {
            changes.push(Change::merge(pos, evaluated(pos, best, nodes, None)).unwrap());
        }
        changes.push(Change::merge(&mate, deeptree::store::answer::terminal_record(&mate, 8, 777)).unwrap());
        changes.push(Change::merge(&c4, node_with_edge(&c4, "e7e5", 10, 8)).unwrap());
        store.writer().submit(changes).wait().unwrap();
    }
    let stats = stats_json(dir.path());
    assert_eq!(stats["positions"], 5, "{stats}");
    assert_eq!(stats["engine_work"], serde_json::json!({"position_evaluations": 3, "nodes": 43_500}), "{stats}");
    let out = deeptree().arg("--db").arg(dir.path()).arg("stats").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("engine work 43500 nodes in the 3 position evaluations (14500 each;"), "{text}");
}

#[test]
fn the_engine_work_stats_counts_is_part_of_what_the_engines_searched_and_grows_with_the_tree() {
    // Real Stockfish: an analysis reports every node its searches took (`engine_nodes`), of which the position
    // evaluations it stored hold a part; a deeper run adds at most what it searched.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let work = |max_depth: &str| {
        let args = ["analyze", "--engine", "stockfish", "--engine-depth", "6", "--max-depth", max_depth, "--json"];
        let out = deeptree().arg("--db").arg(&db).args(args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let report: serde_json::Value =
            serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
        let stats = stats_json(&db);
        let nodes = stats["engine_work"]["nodes"].as_u64().unwrap();
        let positions_evaluated = stats["engine_work"]["position_evaluations"].as_u64().unwrap();
        assert!(positions_evaluated > 0 && Some(positions_evaluated) <= stats["positions"].as_u64(), "{stats}");
        (nodes, report["engine_nodes"].as_u64().unwrap())
    };
    let (first, searched) = work("1");
    assert!(first > 0 && first <= searched, "{first} stored of {searched} searched");
    let (second, searched) = work("2");
    assert!(second > first && second - first <= searched, "{first} then {second}, {searched} searched");
}

/// A write that comes after the store's writer has ended (the store closed under a straggler, or a write panicked)
/// fails as a store that takes no more writes: a caller stops, instead of trying each change again and spending
/// engine time on answers that cannot be stored.
#[test]
fn a_write_after_the_writer_ended_stops_writes() {
    let dir = tempfile::tempdir().unwrap();
    let store = deeptree::store::Store::open(dir.path(), &deeptree::store::StoreOptions::default()).unwrap();
    let writer = store.writer();
    drop(store);
    let refused = writer.submit(Vec::new()).wait();
    assert!(
        matches!(&refused, Err(e @ deeptree::store::StoreError::WriterStopped { .. }) if e.stops_writes()),
        "{refused:?}"
    );
}
