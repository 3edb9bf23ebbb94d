//! `deeptree serve`: the stored tree live in a browser, served from the store while other processes grow it.
//!
//! A small synchronous HTTP/1.1 server ([`http`]) on a loopback address. Each connection is read on a thread of its
//! own, up to [`MAX_CONNECTIONS`] at once; one more is answered 503 at once. A connection has [`READ_TIMEOUT`] to send
//! its whole request (line, headers and body: a deadline on the request, not on each byte), then it is answered 408 and
//! closed, so a client that connects and sends nothing, or a byte a second, holds one thread for 5 s and takes nothing
//! from the others; an answer must be read within [`WRITE_TIMEOUT`] as well. Of the requests read, [`ANSWERING`] are
//! answered at once (each holds one read transaction of the store while it builds its answer); the others wait their
//! turn. Every request is checked by [`guard`] (its Host; for a request that changes the store, its Origin and the
//! per-run token), then routed: the page and its assets (from memory), the JSON API (`/api/position`, `/api/live`) and
//! steering (`/api/mark`, `/api/task`, whose bodies [`steer`] checks field by field). A background thread samples the
//! store ([`live`]).

pub mod guard;
pub mod http;
pub mod live;
pub mod steer;

use std::{
    io::Read,
    net::{Shutdown, TcpListener, TcpStream},
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use parking_lot::Mutex;
use serde_json::{Value, json};
use shakmaty::{Chess, Color, Position, uci::UciMove};

use crate::{
    game::Line,
    notation::canonical,
    search::{show, tree},
    store::{Store, StoreError, key::PositionKey},
};

use guard::{Guard, TOKEN_HEADER};
use http::{Request, Response};

/// Connections served at once, each on a thread of its own; one more is answered 503. Well above what idle browser
/// tabs (six connections per host each) and a few hundred idle or trickling sockets hold.
pub const MAX_CONNECTIONS: usize = 512;
/// Requests answered at once (the others read wait their turn): each holds a read transaction of the store, and the
/// store has 254 reader slots for every process that shares it.
pub const ANSWERING: usize = 4;
/// How long a client may take to send its whole request, from the connection on.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client may take to read its whole answer.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a connection is drained after its answer (what the client still sends is dropped).
const DRAIN_TIME: Duration = Duration::from_millis(500);
/// The longest main line shown.
const MAIN_LINE_PLIES: usize = 40;
/// The most running searches `/api/live` lists.
const SEARCHES_SHOWN: usize = 40;

/// The page and its assets, served from memory.
const ASSETS: &[(&str, &str, &[u8])] = &[
    ("/", "text/html; charset=utf-8", include_bytes!("assets/index.html")),
    ("/app.js", "text/javascript; charset=utf-8", include_bytes!("assets/app.js")),
    ("/app.css", "text/css; charset=utf-8", include_bytes!("assets/app.css")),
    ("/chessground.js", "text/javascript; charset=utf-8", include_bytes!("assets/chessground.js")),
    ("/chessground.css", "text/css; charset=utf-8", include_bytes!("assets/chessground.css")),
];

/// What the routes share.
pub struct Server {
    store: Arc<Store>,
    guard: Guard,
    /// The root the page opens at (`--fen`, `--moves`).
    root: Line,
    ring: Arc<Mutex<live::Ring>>,
    started: Instant,
    /// The turns to answer a request, [`ANSWERING`] of them.
    turns: Turns,
}

/// One of the open connections [`Server::run`] counts: the count goes down when this is dropped.
struct Held(Arc<AtomicUsize>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A counted set of turns: [`Turns::take`] waits until one is free, and the [`Turn`] gives it back when dropped.
struct Turns {
    free: crossbeam_channel::Receiver<()>,
    back: crossbeam_channel::Sender<()>,
}

/// A turn taken from [`Turns`].
struct Turn<'t>(&'t crossbeam_channel::Sender<()>);

impl Turns {
    fn new(count: usize) -> Turns {
        let (back, free) = crossbeam_channel::bounded(count);
        for _ in 0..count {
            let _ = back.send(());
        }
        Turns { free, back }
    }

    fn take(&self) -> Turn<'_> {
        // Both ends live as long as `self`, so the wait ends with a turn.
        let _ = self.free.recv();
        Turn(&self.back)
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

impl Server {
    /// A server of `store` at `root`, guarded by `guard`; [`Server::run`] starts it.
    pub fn new(store: Store, guard: Guard, root: Line) -> Server {
        Server {
            store: Arc::new(store),
            guard,
            root,
            ring: Arc::new(Mutex::new(live::Ring::new())),
            started: Instant::now(),
            turns: Turns::new(ANSWERING),
        }
    }

    /// Answers connections on `listener` until the process ends: the sampler, then the accepting loop on this
    /// thread, each connection on a thread of its own up to [`MAX_CONNECTIONS`].
    pub fn run(self, listener: TcpListener) -> std::io::Result<()> {
        live::spawn_sampler(self.store.clone(), self.root.clone(), self.ring.clone(), self.started);
        let server = Arc::new(self);
        let open = Arc::new(AtomicUsize::new(0));
        for stream in listener.incoming() {
            let stream = match stream {
                Ok(stream) => stream,
                Err(e) => {
                    // Out of file descriptors, most likely: wait for some to close.
                    log::warn!("serve: cannot accept a connection: {e}");
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            if open.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
                open.fetch_sub(1, Ordering::AcqRel);
                refuse_busy(stream);
                continue;
            }
            let held = Held(open.clone());
            let server = server.clone();
            // The thread owns the count it took: `held` gives it back however the thread ends. A thread that cannot
            // start drops the connection (closed unanswered) and its count with it.
            if let Err(e) = std::thread::Builder::new().name("serve-connection".into()).spawn(move || {
                let _held = held;
                server.answer(stream);
            }) {
                log::warn!("serve: cannot start a thread for a connection: {e}");
            }
        }
        Ok(())
    }

    /// Reads one request from `stream` within [`READ_TIMEOUT`], answers it when its turn comes and closes the
    /// connection.
    fn answer(&self, mut stream: TcpStream) {
        let response = match http::read_request(&mut stream, READ_TIMEOUT) {
            Ok(request) => {
                let turn = self.turns.take();
                // A panic costs one answer (500), never the server.
                let routed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.route(&request)));
                drop(turn);
                let response = routed.unwrap_or_else(|_| Response::text(500, "internal error: see the log"));
                log::info!("serve: {} {} -> {}", request.method, request.path, response.status);
                response
            }
            Err(refusal) => refusal,
        };
        finish(stream, &response);
    }

    /// The answer to `request`.
    pub fn route(&self, request: &Request) -> Response {
        let host = request.header("host");
        if !self.guard.host_allowed(host) {
            return Response::text(
                403,
                format!(
                    "refused: Host {} is not this server's (only 127.0.0.1:{port}, localhost:{port} or [::1]:{port})",
                    host.map_or("(none)".to_owned(), |h| format!("'{h}'")),
                    port = self.guard.port
                ),
            );
        }
        match request.method.as_str() {
            "GET" => self.get(request),
            "POST" => {
                let host = host.unwrap_or_default();
                if !self.guard.origin_allowed(request.header("origin"), host, request.header("sec-fetch-site")) {
                    return Response::text(403, "refused: a request that changes the store must come from this page");
                }
                if !self.guard.token_ok(request.header(TOKEN_HEADER)) {
                    return Response::text(
                        403,
                        "refused: missing or wrong X-Deeptree-Token (the token is in the URL serve printed at start)",
                    );
                }
                self.post(request)
            }
            _ => Response::text(405, format!("method {} is not served", request.method)),
        }
    }

    fn get(&self, request: &Request) -> Response {
        if let Some((_, kind, body)) = ASSETS.iter().find(|(path, _, _)| *path == request.path) {
            return Response::new(200, kind, *body);
        }
        // The API's parameters are checked as its bodies are: one it does not read is refused, never ignored. The
        // page itself takes any query (its URL carries the token).
        let known: &[&str] = if request.path == "/api/position" { &["fen", "moves"] } else { &[] };
        if matches!(request.path.as_str(), "/api/position" | "/api/live")
            && let Err(message) = request.only_params(known)
        {
            return Response::json_error(400, message);
        }
        match request.path.as_str() {
            "/api/position" => {
                let (fen, moves) = match (request.param("fen"), request.param("moves")) {
                    (Ok(fen), Ok(moves)) => (fen, moves),
                    (Err(message), _) | (_, Err(message)) => return Response::json_error(400, message),
                };
                let line = match self.line(fen, moves) {
                    Ok(line) => line,
                    Err(message) => return Response::json_error(400, message),
                };
                answer_json(self.position(&line))
            }
            "/api/live" => answer_json(self.live()),
            "/api/mark" | "/api/task" => Response::text(405, "use POST"),
            _ => Response::text(404, format!("nothing at {}", request.path)),
        }
    }

    fn post(&self, request: &Request) -> Response {
        if !matches!(request.path.as_str(), "/api/mark" | "/api/task") {
            return if request.path.starts_with("/api/") || ASSETS.iter().any(|(p, _, _)| *p == request.path) {
                Response::text(405, format!("{} takes no POST", request.path))
            } else {
                Response::text(404, format!("nothing at {}", request.path))
            };
        }
        let result = if request.path == "/api/mark" {
            let mark = match steer::MarkRequest::parse(&request.body) {
                Ok(mark) => mark,
                Err(message) => return Response::json_error(400, message),
            };
            let line = match self.line(mark.at.fen, mark.at.moves) {
                Ok(line) => line,
                Err(message) => return Response::json_error(400, message),
            };
            let uci = match legal_move(line.root(), &mark.uci) {
                Ok(uci) => uci,
                Err(message) => return Response::json_error(400, message),
            };
            steer::mark(&self.store, &line, uci, mark.kind, mark.undo)
        } else {
            let task = match steer::TaskRequest::parse(&request.body) {
                Ok(task) => task,
                Err(message) => return Response::json_error(400, message),
            };
            let line = match self.line(task.at.fen.clone(), task.at.moves.clone()) {
                Ok(line) => line,
                Err(message) => return Response::json_error(400, message),
            };
            steer::task(&self.store, &line, &task)
        };
        match result {
            Ok(value) => Response::json(&value),
            Err((status, message)) => Response::json_error(status, message),
        }
    }

    /// The line of a request: `fen` (default: the served root's start) and `moves` from it (default: the served
    /// root's moves, when no `fen` is given either).
    fn line(&self, fen: Option<String>, moves: Option<String>) -> Result<Line, String> {
        if fen.is_none() && moves.is_none() {
            return Ok(self.root.clone());
        }
        let start = match fen.as_deref().map(str::trim).filter(|f| !f.is_empty()) {
            Some(fen) => fen.to_owned(),
            None => start_fen(&self.root),
        };
        Line::parse_in(Some(&start), moves.as_deref().unwrap_or(""), self.root.chess960)
            .map_err(|e| format!("unknown position: {e}"))
    }

    /// `/api/position`: the position at the end of `line` as the tree knows it.
    fn position(&self, line: &Line) -> Result<Value, StoreError> {
        let root = line.root();
        let history = line.history_keys();
        let key = PositionKey::of(root);
        let view = self.store.read()?;
        let shown = show::tree(&view, root, &history, 1)?;
        let seen = tree::view(&view, root, &history)?;
        let node = view.node(key)?;
        drop(view);
        let marks: Vec<Value> =
            shown.marks.iter().map(|mark| serde_json::to_value(mark).unwrap_or(Value::Null)).collect();
        let mut moves = Vec::new();
        for m in &shown.moves {
            let mut value = serde_json::to_value(m).unwrap_or(Value::Null);
            value.as_object_mut().map(|o| o.remove("child"));
            let own: Vec<&Value> =
                marks.iter().filter(|mark| mark.get("move").and_then(Value::as_str) == Some(m.uci.as_str())).collect();
            value["marks"] = json!(own);
            moves.push(value);
        }
        let main_line = seen
            .as_ref()
            .and_then(|s| s.candidates.first())
            .filter(|c| c.alpha.is_valued())
            .map(|c| sans(root, c.pv.iter().take(MAIN_LINE_PLIES)))
            .unwrap_or_default();
        let legal: Vec<Value> = root
            .legal_moves()
            .iter()
            .map(|m| {
                let uci = canonical(*m);
                json!({"uci": uci.to_string(), "san": show::san_of(root, &uci)})
            })
            .collect();
        let line_moves = sans(&line.start, line.moves.iter());
        Ok(json!({
            "start_fen": start_fen(line),
            "line": line_moves,
            "fen": shown.fen,
            "key": shown.key,
            "turn": if root.turn() == Color::White { "white" } else { "black" },
            "ply": line.moves.len(),
            "fullmove": root.fullmoves().get(),
            "score": seen.as_ref().and_then(|s| s.candidates.first()).map(|c| c.alpha).filter(|s| s.is_valued()),
            "settled_depth": shown.settled_depth,
            "engine_depth": node.as_ref().and_then(|n| n.eval.as_ref()).map(|e| e.depth),
            "main_line": main_line,
            "moves": moves,
            "unsearched": shown.unsearched,
            "rest": shown.rest,
            "screen": shown.screen,
            "legal": legal,
            "marks": marks,
            "outcome": match root.outcome() { shakmaty::Outcome::Known(o) => Some(o.to_string()), shakmaty::Outcome::Unknown => None },
            "check": root.is_check(),
        }))
    }

    /// `/api/live`: what the store holds and grows by, what is searched now, and the samples since serve started.
    fn live(&self) -> Result<Value, StoreError> {
        let stats = self.store.stats()?;
        let claims = self.store.claims_summary()?;
        let running = self.store.running_searches()?;
        let searching = {
            let view = self.store.read()?;
            let mut shown = Vec::new();
            for search in running.iter().take(SEARCHES_SHOWN) {
                shown.push(describe_search(&view, &search.search, search.pid)?);
            }
            shown
        };
        let uptime = self.started.elapsed().as_secs_f64();
        let (samples, rate) = {
            let ring = self.ring.lock();
            (ring.samples(), ring.rate(uptime, stats.positions))
        };
        Ok(json!({
            "uptime": uptime,
            "positions": stats.positions,
            "edges": stats.edges,
            "bytes": stats.bytes,
            "rate": rate,
            "claims": claims,
            "running": running.len(),
            "searching": searching,
            "root": {"fen": start_fen(&self.root), "moves": self.root.moves.iter().map(ToString::to_string).collect::<Vec<_>>()},
            "samples": samples,
        }))
    }
}

/// The start position of `line` as FEN.
fn start_fen(line: &Line) -> String {
    shakmaty::fen::Fen::from_position(&line.start, shakmaty::EnPassantMode::Legal).to_string()
}

/// `moves` played from `pos`, each as `{uci, san}`, up to the first that is not legal.
fn sans<'m>(pos: &Chess, moves: impl Iterator<Item = &'m UciMove>) -> Vec<Value> {
    let mut pos = pos.clone();
    let mut out = Vec::new();
    for uci in moves {
        let Ok(m) = uci.to_move(&pos) else { break };
        out.push(json!({"uci": uci.to_string(), "san": show::san_of(&pos, uci)}));
        pos.play_unchecked(m);
    }
    out
}

/// The move `text` names, in its stored form, if it is a UCI move legal in `pos`.
fn legal_move(pos: &Chess, text: &str) -> Result<UciMove, String> {
    let uci: UciMove =
        text.parse().map_err(|_| format!("malformed move {}: not a UCI move", crate::game::quote(text)))?;
    let m = uci.to_move(pos).map_err(|_| format!("move {} is not legal in this position", crate::game::quote(text)))?;
    Ok(canonical(m))
}

/// A running search as `/api/live` lists it: its position (FEN where the store has the position or a parent of it
/// with the move to it), the engine depth, the moves it is restricted to, and the process that runs it.
fn describe_search(view: &crate::store::ReadView<'_>, search: &[u8], pid: u32) -> Result<Value, StoreError> {
    let Some(key) = search.get(..PositionKey::SIZE).and_then(PositionKey::from_slice) else {
        return Ok(json!({"pid": pid}));
    };
    let depth = search.get(PositionKey::SIZE).copied();
    let rest = search.get(PositionKey::SIZE + 1..).unwrap_or_default();
    let restricted = rest.iter().position(|&b| b == b'S').map_or(rest.len(), |i| i) / 2;
    let mut fen = view.node(key)?.map(|n| n.position.fen());
    let mut after = None;
    if fen.is_none() {
        'parents: for parent in view.parents(key)? {
            let Some(node) = view.node(parent)? else { continue };
            let Some(pos) = node.position.to_position() else { continue };
            for edge in &node.edges {
                if let Some(child) = crate::game::play_uci(&pos, &edge.uci)
                    && PositionKey::of(&child) == key
                {
                    fen = Some(shakmaty::fen::Fen::from_position(&child, shakmaty::EnPassantMode::Legal).to_string());
                    after = Some(json!({"fen": node.position.fen(), "san": show::san_of(&pos, &edge.uci)}));
                    break 'parents;
                }
            }
        }
    }
    Ok(json!({"key": key.to_string(), "fen": fen, "after": after, "depth": depth, "moves": restricted, "pid": pid}))
}

/// A JSON answer, or 500 with the store's error; a damaged store stops the server with its line (exit status 3).
fn answer_json(result: Result<Value, StoreError>) -> Response {
    match result {
        Ok(value) => Response::json(&value),
        Err(e) => {
            crate::store::fault::stop_if_damaged(&e);
            Response::json_error(500, format!("cannot read the store: {e}"))
        }
    }
}

/// Writes `response`, then closes the connection without resetting it: what the client still sends (a body refused
/// before it was read) is read and dropped, for at most [`DRAIN_TIME`] and up to a bound, so that the client reads
/// the answer instead of a reset connection.
fn finish(mut stream: TcpStream, response: &Response) {
    // The whole answer within its own deadline: a client that reads it a byte at a time is cut off then.
    if response.write_to(&mut http::Timed::new(&mut stream, WRITE_TIMEOUT)).is_err() {
        return;
    }
    let _ = stream.shutdown(Shutdown::Write);
    let deadline = Instant::now() + DRAIN_TIME;
    let mut sink = [0u8; 8192];
    let mut drained = 0;
    while drained < 2 * http::MAX_BODY {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            break;
        }
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
}

/// Answers 503 to a connection beyond [`MAX_CONNECTIONS`], on the accepting thread: a small answer into an empty send
/// buffer, then what the client already sent is dropped (so that it reads the answer, not a reset) without waiting.
fn refuse_busy(mut stream: TcpStream) {
    let _ = stream.set_write_timeout(Some(Duration::from_millis(200)));
    if Response::text(503, "busy: too many connections, try again").write_to(&mut stream).is_err() {
        return;
    }
    let _ = stream.shutdown(Shutdown::Write);
    if stream.set_nonblocking(true).is_ok() {
        let mut sink = [0u8; 4096];
        let mut drained = 0;
        while drained < http::MAX_HEAD {
            match stream.read(&mut sink) {
                Ok(n) if n > 0 => drained += n,
                _ => break,
            }
        }
    }
}
