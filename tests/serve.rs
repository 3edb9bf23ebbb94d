//! `deeptree serve` as a client meets it: the built binary on a free port (`--port 0`) over a store grown by the real
//! Stockfish, spoken to in raw HTTP/1.1 over TCP. The page and its API, and every refusal of the safety rules, each
//! with the store left as it was.

mod common;

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::OnceLock,
    time::Duration,
};

fn deeptree() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_deeptree"));
    command.env_remove("DEEPTREE_DB").env_remove("DEEPTREE_CONFIG");
    command
}

/// A store grown once for all the tests here (engine depth 6, software depth 1), copied for each test.
fn grown_store() -> &'static Path {
    static STORE: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, db) = STORE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("tree");
        let out = deeptree()
            .arg("--db")
            .arg(&db)
            .args(["analyze", "--engine-depth", "6", "--max-depth", "1", "--engine"])
            .arg(common::stockfish())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        (dir, db)
    });
    db
}

/// A copy of the grown store in a directory of its own.
fn store_copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    std::fs::create_dir(&db).unwrap();
    std::fs::copy(grown_store().join("data.mdb"), db.join("data.mdb")).unwrap();
    (dir, db)
}

/// A running `deeptree serve`, stopped when dropped.
struct Served {
    child: Child,
    port: u16,
    token: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(db: &Path, args: &[&str]) -> Served {
    let mut child = deeptree()
        .arg("--db")
        .arg(db)
        .args(["serve", "--port", "0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    // http://127.0.0.1:PORT/?token=HEX
    let url = line.trim();
    let rest = url.strip_prefix("http://127.0.0.1:").unwrap_or_else(|| panic!("serve printed {url:?}"));
    let (port, token) = rest.split_once("/?token=").unwrap();
    assert_eq!(token.len(), 32, "{url}");
    Served { child, port: port.parse().unwrap(), token: token.to_owned() }
}

/// An answer: status, headers (lower-case names) and body.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// Sends `raw` (a whole request) to `port` and reads the answer to its end.
fn send(port: u16, raw: &[u8]) -> Answer {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    stream.write_all(raw).unwrap();
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).unwrap();
    parse(&bytes)
}

fn parse(bytes: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(bytes);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no answer: {text:?}"));
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers = lines
        .map(|l| l.split_once(':').unwrap())
        .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_owned()))
        .collect::<Vec<_>>();
    for (name, _) in &headers {
        assert!(!name.starts_with("access-control-"), "a CORS header: {head}");
    }
    Answer { status, headers, body: body.to_owned() }
}

fn get(served: &Served, path: &str) -> Answer {
    send(served.port, format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n", served.port).as_bytes())
}

/// A POST of `body` with `headers` (each `Name: value`), and the Host of the server.
fn post(served: &Served, path: &str, headers: &[String], body: &str) -> Answer {
    let mut raw =
        format!("POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n", served.port);
    for header in headers {
        raw.push_str(header);
        raw.push_str("\r\n");
    }
    raw.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    send(served.port, raw.as_bytes())
}

/// The headers of a request from the page itself.
fn from_page(served: &Served) -> Vec<String> {
    vec![format!("Origin: http://127.0.0.1:{}", served.port), format!("X-Deeptree-Token: {}", served.token)]
}

const EXCLUDE_E4: &str = r#"{"fen": "", "moves": "", "move": "e2e4", "kind": "exclude", "undo": false}"#;

/// What `show --json` prints of the store: the state every refusal must leave as it was.
fn shown(db: &Path) -> String {
    let out = deeptree().arg("--db").arg(db).args(["show", "--json", "--depth", "2"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_page_its_assets_and_the_json_api_are_served() {
    let (_dir, db) = store_copy();
    let served = serve(&db, &[]);
    let page = get(&served, "/");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("<script src=\"/chessground.js\">"), "{}", page.body);
    assert!(!page.body.contains("https://"), "the page loads nothing from the network");
    for (path, kind) in [
        ("/chessground.js", "text/javascript"),
        ("/chessground.css", "text/css"),
        ("/app.js", "text/javascript"),
        ("/app.css", "text/css"),
    ] {
        let asset = get(&served, path);
        assert_eq!(asset.status, 200, "{path}");
        assert!(asset.headers.iter().any(|(n, v)| n == "content-type" && v.starts_with(kind)), "{path}");
        assert!(asset.body.len() > 1000, "{path}");
    }
    assert!(get(&served, "/chessground.js").body.contains("Chessground"));

    let root = get(&served, "/api/position").json();
    assert_eq!(root["fen"], "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1");
    assert_eq!(root["turn"], "white");
    assert_eq!(root["settled_depth"], 1);
    assert_eq!(root["engine_depth"], 6);
    assert_eq!(root["legal"].as_array().unwrap().len(), 20);
    let moves = root["moves"].as_array().unwrap();
    assert!(!moves.is_empty());
    for field in ["uci", "san", "idea", "alpha", "depth", "engine", "bound", "imported", "marks"] {
        assert!(moves[0].get(field).is_some(), "{field} in {}", moves[0]);
    }
    assert_eq!(moves[0]["depth"], 6);
    assert!(moves[0]["alpha"]["cp"].is_i64());
    assert_eq!(root["main_line"][0]["uci"], moves[0]["uci"], "the main line starts with the best move");
    assert_eq!(root["score"], moves[0]["alpha"]);

    // A move walked: the position after it, its line from the start.
    let best = moves[0]["uci"].as_str().unwrap();
    let after = get(&served, &format!("/api/position?moves={best}")).json();
    assert_eq!(after["turn"], "black");
    assert_eq!(after["line"][0]["uci"], best);
    assert_ne!(after["fen"], root["fen"]);
    let fen = "8/8/8/8/8/4k3/8/4K2R w K - 0 1";
    let other =
        get(&served, &format!("/api/position?fen={}&moves=e1g1", fen.replace(' ', "+").replace('/', "%2F"))).json();
    assert_eq!(other["fen"], "8/8/8/8/8/4k3/8/5RK1 b - - 1 1");
    assert_eq!(other["moves"].as_array().unwrap().len(), 0, "not in the store");

    let live = get(&served, "/api/live").json();
    assert_eq!(
        live["positions"].as_u64(),
        serde_json::from_str::<serde_json::Value>(&shown_stats(&db)).unwrap()["positions"].as_u64()
    );
    assert!(live["edges"].as_u64().unwrap() > 0);
    assert!(live["rate"].is_number());
    assert!(live["searching"].as_array().unwrap().is_empty());
    let samples = live["samples"].as_array().unwrap();
    assert!(!samples.is_empty());
    assert_eq!(samples[0]["settled_depth"], 1);
    assert_eq!(samples[0]["score"], root["score"]);
}

fn shown_stats(db: &Path) -> String {
    let out = deeptree().arg("--db").arg(db).args(["stats", "--json"]).output().unwrap();
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_foreign_host_is_refused() {
    let (_dir, db) = store_copy();
    let served = serve(&db, &[]);
    let port = served.port;
    for host in [
        format!("Host: evil.example:{port}\r\n"),
        format!("Host: localhost.evil.example:{port}\r\n"),
        format!("Host: 127.0.0.1:{}\r\n", port.wrapping_add(1)),
        "Host: 127.0.0.1\r\n".to_owned(),
        String::new(),
    ] {
        let answer = send(port, format!("GET /api/position HTTP/1.1\r\n{host}\r\n").as_bytes());
        assert_eq!(answer.status, 403, "{host:?}");
        assert!(answer.body.contains("Host"), "{}", answer.body);
    }
    for host in [format!("localhost:{port}"), format!("[::1]:{port}")] {
        let answer = send(port, format!("GET /api/live HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes());
        assert_eq!(answer.status, 200, "{host}");
    }
    // A POST with the token is refused too, and changes nothing.
    let before = shown(&db);
    let raw = format!(
        "POST /api/mark HTTP/1.1\r\nHost: evil.example:{port}\r\nOrigin: http://evil.example:{port}\r\nX-Deeptree-Token: \
         {}\r\nContent-Length: {}\r\n\r\n{EXCLUDE_E4}",
        served.token,
        EXCLUDE_E4.len()
    );
    assert_eq!(send(port, raw.as_bytes()).status, 403);
    assert_eq!(shown(&db), before);
}

#[test]
fn a_post_from_a_foreign_origin_is_refused() {
    let (_dir, db) = store_copy();
    let served = serve(&db, &[]);
    let before = shown(&db);
    let token = format!("X-Deeptree-Token: {}", served.token);
    for origin in ["http://evil.example", "null", &format!("https://127.0.0.1:{}", served.port)] {
        let answer = post(&served, "/api/mark", &[format!("Origin: {origin}"), token.clone()], EXCLUDE_E4);
        assert_eq!(answer.status, 403, "{origin}");
        assert!(answer.body.contains("must come from this page"), "{}", answer.body);
    }
    let cross_site = post(&served, "/api/mark", &["Sec-Fetch-Site: cross-site".to_owned(), token], EXCLUDE_E4);
    assert_eq!(cross_site.status, 403);
    assert_eq!(shown(&db), before);
}

#[test]
fn a_post_without_the_token_is_refused() {
    let (_dir, db) = store_copy();
    let served = serve(&db, &[]);
    let before = shown(&db);
    let answer = post(&served, "/api/mark", &[format!("Origin: http://127.0.0.1:{}", served.port)], EXCLUDE_E4);
    assert_eq!(answer.status, 403);
    assert!(answer.body.contains("X-Deeptree-Token"), "{}", answer.body);
    assert_eq!(post(&served, "/api/task", &[], "{}").status, 403);
    assert_eq!(shown(&db), before);
}

#[test]
fn a_post_with_a_wrong_token_is_refused() {
    let (_dir, db) = store_copy();
    let served = serve(&db, &[]);
    let before = shown(&db);
    let mut wrong = served.token.clone();
    wrong.replace_range(0..1, if wrong.starts_with('0') { "1" } else { "0" });
    for token in [wrong, served.token[..31].to_owned(), format!("{}0", served.token), String::new()] {
        let headers = [format!("Origin: http://127.0.0.1:{}", served.port), format!("X-Deeptree-Token: {token}")];
        assert_eq!(post(&served, "/api/mark", &headers, EXCLUDE_E4).status, 403, "{token}");
    }
    // A token in the query is not a token.
    let path = format!("/api/mark?token={}", served.token);
    assert_eq!(post(&served, &path, &[format!("Origin: http://127.0.0.1:{}", served.port)], EXCLUDE_E4).status, 403);
    assert_eq!(shown(&db), before);
}

#[test]
fn a_body_too_large_is_refused_before_it_is_read() {
    let (_dir, db) = store_copy();
    let served = serve(&db, &[]);
    let before = shown(&db);
    let head = |length: u64| {
        format!(
            "POST /api/mark HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nOrigin: http://127.0.0.1:{}\r\nX-Deeptree-Token: {}\r\n\
             Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n",
            served.port, served.port, served.token
        )
    };
    // A declared length of 100 GB and no body: answered at once, nothing read or allocated.
    let answer = send(served.port, head(100_000_000_000).as_bytes());
    assert_eq!(answer.status, 413);
    assert!(answer.body.contains("at most 65536"), "{}", answer.body);
    // One byte over, sent in full.
    let mut raw = head(64 * 1024 + 1).into_bytes();
    raw.extend(std::iter::repeat_n(b' ', 64 * 1024 + 1));
    assert_eq!(send(served.port, &raw).status, 413);
    // A chunked body is refused too.
    let chunked = format!(
        "POST /api/mark HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nX-Deeptree-Token: {}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        served.port, served.token
    );
    assert_eq!(send(served.port, chunked.as_bytes()).status, 411);
    assert_eq!(shown(&db), before);
    // The server still answers.
    assert_eq!(get(&served, "/api/live").status, 200);
}

#[test]
fn a_traversal_a_second_request_on_one_connection_and_two_lengths_are_refused() {
    let (_dir, db) = store_copy();
    let served = serve(&db, &[]);
    let before = shown(&db);
    let port = served.port;
    // Paths outside the page's own: nothing but the assets in memory is served.
    for path in
        ["/../../../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/..%2fCargo.toml", "//etc/passwd", "/app.js/.."]
    {
        let answer = get(&served, path);
        assert_eq!(answer.status, 404, "{path}: {}", answer.body);
        assert!(!answer.body.contains("root:"), "{path}");
    }
    // A second request sent on the same connection behind the first: the first is answered, the connection closed,
    // and the second (a mark with the token) never read.
    let mark = format!(
        "POST /api/mark HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Deeptree-Token: {}\r\nContent-Length: {}\r\n\r\n{EXCLUDE_E4}",
        served.token,
        EXCLUDE_E4.len()
    );
    let pipelined = format!("GET /api/live HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n{mark}");
    let answer = send(port, pipelined.as_bytes());
    assert_eq!(answer.status, 200);
    assert!(!answer.body.contains("HTTP/1.1"), "one answer only: {}", answer.body);
    // A body whose length is given twice over: refused, whichever way it was meant.
    let smuggled = format!(
        "POST /api/mark HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Deeptree-Token: {}\r\nContent-Length: {}\r\n\
         Transfer-Encoding: chunked\r\n\r\n{EXCLUDE_E4}",
        served.token,
        EXCLUDE_E4.len()
    );
    assert_eq!(send(port, smuggled.as_bytes()).status, 400);
    assert_eq!(shown(&db), before, "nothing marked");
    // The mark itself, sent alone, is taken: the requests above were refused for what they were.
    assert_eq!(send(port, mark.as_bytes()).status, 200);
    assert_ne!(shown(&db), before);
}

#[test]
fn an_unknown_position_or_a_bad_move_is_refused_with_400() {
    let (_dir, db) = store_copy();
    let served = serve(&db, &[]);
    let before = shown(&db);
    for query in
        ["fen=not+a+fen", "moves=e2e5", "moves=e2e4+e2e4", "moves=zz", "fen=8%2F8%2F8%2F8%2F8%2F8%2F8%2F8+w+-+-+0+1"]
    {
        let answer = get(&served, &format!("/api/position?{query}"));
        assert_eq!(answer.status, 400, "{query}: {}", answer.body);
        assert!(answer.json()["error"].as_str().unwrap().starts_with("unknown position"), "{}", answer.body);
    }
    let page = from_page(&served);
    for (body, says) in [
        (r#"{"moves": "", "move": "e2e5", "kind": "exclude"}"#, "not legal"),
        (r#"{"moves": "", "move": "zz", "kind": "exclude"}"#, "malformed move"),
        (r#"{"moves": "", "kind": "exclude"}"#, "no move"),
        (r#"{"moves": "e2e4 e2e4", "move": "e7e5", "kind": "exclude"}"#, "unknown position"),
        (r#"{"moves": "", "move": "e2e4", "kind": "ban"}"#, "kind must be"),
        (r#"{"moves": "", "move": "e2e4", "kind": "exclude", "undo": "yes"}"#, "undo must be"),
        ("[1, 2]", "JSON object"),
        ("{\"moves\": ", "not JSON"),
    ] {
        let answer = post(&served, "/api/mark", &page, body);
        assert_eq!(answer.status, 400, "{body}: {}", answer.body);
        assert!(answer.json()["error"].as_str().unwrap().contains(says), "{body}: {}", answer.body);
    }
    assert_eq!(get(&served, "/nothing-here").status, 404);
    assert_eq!(post(&served, "/nothing-here", &page, "{}").status, 404);
    assert_eq!(
        send(served.port, format!("DELETE / HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n", served.port).as_bytes()).status,
        405
    );
    assert_eq!(send(served.port, b"NONSENSE\r\n\r\n").status, 400);
    // A parameter that does not decode, or comes twice, is refused, never taken as absent.
    for query in ["fen=%ff%&moves=%zz", "moves=%zz", "moves=e2e4&moves=d2d4"] {
        let answer = get(&served, &format!("/api/position?{query}"));
        assert_eq!(answer.status, 400, "{query}: {}", answer.body);
    }
    // A header the safety rules read, given twice: refused whichever comes first.
    let twice = format!("GET /api/live HTTP/1.1\r\nHost: 127.0.0.1:{0}\r\nHost: evil.example:{0}\r\n\r\n", served.port);
    assert_eq!(send(served.port, twice.as_bytes()).status, 400);
    assert_eq!(shown(&db), before);
}

/// The most connections serve holds at once (`deeptree::serve::MAX_CONNECTIONS`).
const MAX_CONNECTIONS: usize = 512;

#[test]
fn connections_beyond_the_bound_are_answered_busy() {
    let (_dir, db) = store_copy();
    let served = serve(&db, &[]);
    // Idle connections each hold a thread until their request's time runs out (5 s): of 520 opened at once, the 8
    // beyond the bound are answered 503 at once and the others nothing yet.
    let idle: Vec<TcpStream> =
        (0..MAX_CONNECTIONS + 8).map(|_| TcpStream::connect(("127.0.0.1", served.port)).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(1000));
    let mut busy = 0;
    for mut stream in &idle {
        stream.set_nonblocking(true).unwrap();
        let mut bytes = Vec::new();
        let _ = stream.read_to_end(&mut bytes);
        if !bytes.is_empty() {
            let answer = parse(&bytes);
            assert_eq!(answer.status, 503, "{}", answer.body);
            assert!(answer.body.contains("busy"), "{}", answer.body);
            busy += 1;
        }
    }
    assert_eq!(busy, 8, "connections answered busy");
    drop(idle);
    // Once they are gone the server answers again.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while get(&served, "/api/live").status != 200 {
        assert!(std::time::Instant::now() < deadline, "the server stays busy");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sockets that hold connections to `port` without finishing a request, each reconnecting as soon as the server
/// answers or closes it, until `stop`: `idle` that send nothing, `slow` that send a request head a byte a second.
/// Says on `open` once every socket is connected. Answers the statuses the server sent them, and how many connections
/// ended without an answer.
fn hold_connections(
    port: u16,
    idle: usize,
    slow: usize,
    open: std::sync::mpsc::Sender<()>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<(Vec<u16>, usize)> {
    std::thread::spawn(move || {
        let head = format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ").into_bytes();
        let connect = || {
            let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
            stream.set_nonblocking(true).unwrap();
            stream
        };
        // Each socket, whether it trickles, and the bytes it sent.
        let mut sockets: Vec<(TcpStream, bool, usize)> = (0..idle + slow).map(|i| (connect(), i >= idle, 0)).collect();
        let _ = open.send(());
        let (mut statuses, mut unanswered) = (Vec::new(), 0);
        let mut last_byte = std::time::Instant::now();
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let trickle = last_byte.elapsed() >= Duration::from_secs(1);
            if trickle {
                last_byte = std::time::Instant::now();
            }
            for (stream, slow, sent) in &mut sockets {
                if *slow && trickle {
                    let byte = head.get(*sent).copied().unwrap_or(b'a');
                    if stream.write_all(&[byte]).is_ok() {
                        *sent += 1;
                    }
                }
                let mut buf = [0u8; 4096];
                let ended = match stream.read(&mut buf) {
                    Ok(0) => {
                        unanswered += 1;
                        true
                    }
                    Ok(n) => {
                        statuses.push(parse_status(&buf[..n]));
                        true
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
                    Err(_) => {
                        unanswered += 1;
                        true
                    }
                };
                if ended {
                    *stream = connect();
                    *sent = 0;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        (statuses, unanswered)
    })
}

/// The status of an answer's first bytes.
fn parse_status(bytes: &[u8]) -> u16 {
    let text = String::from_utf8_lossy(bytes);
    text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no status in {text:?}"))
}

#[test]
fn idle_and_slow_clients_leave_a_normal_client_its_page_within_a_second() {
    let (_dir, db) = store_copy();
    let served = serve(&db, &[]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // 200 sockets that send nothing and 50 that send a byte a second, reconnecting whenever the server lets go.
    let (open, opened) = std::sync::mpsc::channel();
    let holders = hold_connections(served.port, 200, 50, open, stop.clone());
    opened.recv_timeout(Duration::from_secs(10)).expect("the 250 sockets connect");
    // Time for the server to take them all in: its first answer below is to a client behind 250 held connections.
    std::thread::sleep(Duration::from_millis(300));
    // The first request comes now, and every request after it within a second: over 12 s the held sockets time out
    // (at 5 s) and reconnect twice, and the page and the API answer throughout.
    let mut slowest = Duration::ZERO;
    for i in 0..24 {
        let path = if i % 2 == 0 { "/" } else { "/api/position" };
        let started = std::time::Instant::now();
        let answer = get(&served, path);
        let took = started.elapsed();
        assert_eq!(answer.status, 200, "{path} at request {i}: {}", answer.body);
        assert!(took < Duration::from_secs(1), "{path} at request {i} took {took:?}");
        slowest = slowest.max(took);
        std::thread::sleep(Duration::from_millis(500));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (statuses, unanswered) = holders.join().unwrap();
    // The held sockets were held: each was answered 408 when its request's time ran out, none was refused as busy.
    assert!(statuses.iter().all(|&s| s == 408), "{statuses:?}");
    assert!(statuses.len() >= 250, "{} held sockets timed out, {unanswered} closed unanswered", statuses.len());
    println!("slowest answer {slowest:?}; {} held connections timed out", statuses.len());
}

#[test]
fn a_bind_beyond_loopback_needs_allow_remote_and_warns() {
    let (_dir, db) = store_copy();
    let refused = deeptree().arg("--db").arg(&db).args(["serve", "--port", "0", "--bind", "0.0.0.0"]).output().unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("not a loopback address") && stderr.contains("--allow-remote"), "{stderr}");
    assert!(refused.stdout.is_empty(), "no URL printed");

    let mut child = deeptree()
        .arg("--db")
        .arg(&db)
        .args(["serve", "--port", "0", "--bind", "0.0.0.0", "--allow-remote"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert!(line.starts_with("http://127.0.0.1:") && line.contains("/?token="), "{line}");
    let mut warning = String::new();
    BufReader::new(child.stderr.take().unwrap()).read_line(&mut warning).unwrap();
    assert!(warning.contains("in clear"), "{warning}");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn compact_is_refused_while_serve_runs() {
    let (_dir, db) = store_copy();
    let served = serve(&db, &[]);
    let size = || std::fs::metadata(db.join("data.mdb")).unwrap().len();
    let before = size();
    let refused = deeptree().arg("--db").arg(&db).arg("compact").output().unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("open in another process"));
    assert_eq!(size(), before);
    assert_eq!(get(&served, "/api/live").status, 200);
    drop(served);
    let done = deeptree().arg("--db").arg(&db).arg("compact").output().unwrap();
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
}

#[test]
fn serve_needs_an_existing_store() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none");
    let out = deeptree().arg("--db").arg(&missing).args(["serve", "--port", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no deeptree store"));
    assert!(!missing.exists());
}

#[test]
fn a_request_trickled_a_byte_at_a_time_is_cut_off_in_time() {
    let (_dir, db) = store_copy();
    let served = serve(&db, &[]);
    let mut stream = TcpStream::connect(("127.0.0.1", served.port)).unwrap();
    let started = std::time::Instant::now();
    stream.write_all(format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nX-Slow: ", served.port).as_bytes()).unwrap();
    let mut writer = stream.try_clone().unwrap();
    std::thread::spawn(move || {
        while writer.write_all(b"a").is_ok() && started.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut bytes = Vec::new();
    let _ = stream.read_to_end(&mut bytes);
    assert_eq!(parse(&bytes).status, 408);
    assert!(started.elapsed() < Duration::from_secs(8), "{:?}", started.elapsed());
}

#[test]
fn a_mark_made_from_the_page_holds_in_show_and_is_lifted_again() {
    let (_dir, db) = store_copy();
    let served = serve(&db, &[]);
    let page = from_page(&served);
    let best = get(&served, "/api/position").json()["moves"][0]["uci"].as_str().unwrap().to_owned();
    let body = |kind: &str, undo: bool| {
        serde_json::json!({"fen": "", "moves": "", "move": best, "kind": kind, "undo": undo}).to_string()
    };
    let made = post(&served, "/api/mark", &page, &body("exclude", false));
    assert_eq!(made.status, 200, "{}", made.body);
    let made = made.json();
    assert_eq!((made["mark"]["move"].as_str(), made["mark"]["kind"].as_str()), (Some(best.as_str()), Some("exclude")));
    assert_eq!(made["mark"]["source"], "serve");

    // `show` leaves the move out of the tree's moves and lists it among the marks.
    let tree: serde_json::Value = serde_json::from_str(&shown(&db)).unwrap();
    assert!(tree["moves"].as_array().unwrap().iter().all(|m| m["uci"] != best.as_str()), "{tree}");
    assert!(tree["marks"].as_array().unwrap().iter().any(|m| m["move"] == best.as_str() && m["kind"] == "exclude"));
    let position = get(&served, "/api/position").json();
    assert!(position["moves"].as_array().unwrap().iter().all(|m| m["uci"] != best.as_str()));
    assert_eq!(position["marks"][0]["move"], best.as_str());

    // Lifting a mark of another kind is refused and changes nothing; lifting this one restores the move.
    let before = shown(&db);
    let wrong = post(&served, "/api/mark", &page, &body("include", true));
    assert_eq!(wrong.status, 409, "{}", wrong.body);
    assert_eq!(shown(&db), before);
    assert_eq!(post(&served, "/api/mark", &page, &body("exclude", true)).status, 200);
    let tree: serde_json::Value = serde_json::from_str(&shown(&db)).unwrap();
    assert_eq!(tree["moves"][0]["uci"], best.as_str());
    assert!(tree.get("marks").is_none_or(|m| m.as_array().unwrap().is_empty()), "{tree}");
    assert_eq!(post(&served, "/api/mark", &page, &body("exclude", true)).status, 409, "nothing left to lift");
}

#[test]
fn a_task_added_from_the_page_is_in_the_task_list() {
    let (_dir, db) = store_copy();
    let served = serve(&db, &[]);
    let page = from_page(&served);
    for (body, says) in [
        (r#"{"moves": "e2e4"}"#, "budget_seconds"),
        (r#"{"moves": "e2e4", "budget_seconds": 0}"#, "budget"),
        (r#"{"moves": "e2e4", "budget_seconds": 60, "priority": 99}"#, "priority"),
        (r#"{"moves": "e2e4", "budget_seconds": 60, "priority": -1}"#, "priority"),
        (r#"{"moves": "e2e5", "budget_seconds": 60}"#, "unknown position"),
    ] {
        let answer = post(&served, "/api/task", &page, body);
        assert_eq!(answer.status, 400, "{body}: {}", answer.body);
        assert!(answer.json()["error"].as_str().unwrap().contains(says), "{body}: {}", answer.body);
    }
    let list = || {
        let out = deeptree().arg("--db").arg(&db).args(["task", "list", "--json"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    assert_eq!(list().as_array().map(Vec::len), Some(0), "refused requests add nothing");
    let added = post(&served, "/api/task", &page, r#"{"moves": "e2e4 e7e5", "budget_seconds": 90, "priority": 2}"#);
    assert_eq!(added.status, 200, "{}", added.body);
    assert_eq!(added.json()["task"]["label"], "e2e4 e7e5");
    let tasks = list();
    assert_eq!(tasks.as_array().unwrap().len(), 1, "{tasks}");
    assert_eq!(tasks[0]["moves"], serde_json::json!(["e2e4", "e7e5"]));
    assert_eq!((tasks[0]["budget_seconds"].as_f64(), tasks[0]["priority"].as_u64()), (Some(90.0), Some(2)));
}

/// The tasks in the store, as `task list --json` prints them.
fn task_list(db: &Path) -> serde_json::Value {
    let out = deeptree().arg("--db").arg(db).args(["task", "list", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every mark and every task in the store, as `mark list --json` and `task list --json` print them: what a steering
/// request writes, wherever its position is.
fn steering(db: &Path) -> (String, String) {
    let list = |what: &str| {
        let out = deeptree().arg("--db").arg(db).args([what, "list", "--json"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    (list("mark"), list("task"))
}

/// Posts each body to `path` of the server of `db` from the page and checks it is refused with 400 and a reason that
/// says `says`, and that after each one the store holds the marks and tasks it held before the first.
fn refused_with_400(served: &Served, db: &Path, path: &str, cases: &[(&str, &str)]) {
    let page = from_page(served);
    let before = steering(db);
    for (body, says) in cases {
        let answer = post(served, path, &page, body);
        assert_eq!(answer.status, 400, "{path} {body}: {}", answer.body);
        let error = answer.json()["error"].as_str().unwrap().to_owned();
        assert!(error.contains(says), "{path} {body}: {error:?} does not say {says:?}");
        assert_eq!(steering(db), before, "{path} {body}: refused, yet a mark or a task changed");
    }
}

#[test]
fn every_field_of_a_mark_is_checked_and_a_refusal_writes_nothing() {
    let (_dir, db) = store_copy();
    let served = serve(&db, &[]);
    let before = shown(&db);
    let after_e4_e5 = || {
        let out = deeptree().arg("--db").arg(&db).args(["show", "--json", "--moves", "e2e4 e7e5"]).output().unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let before_e4_e5 = after_e4_e5();
    refused_with_400(
        &served,
        &db,
        "/api/mark",
        &[
            // A list where text is read: refused, never read as no moves (it excluded g1f3 at the start).
            (r#"{"moves": ["e2e4", "e7e5"], "move": "g1f3", "kind": "exclude"}"#, "moves must be text"),
            (
                r#"{"moves": 5, "move": "g1f3", "kind": "exclude"}"#,
                "moves must be text (UCI moves separated by spaces), not a number",
            ),
            (r#"{"moves": {"e2e4": 1}, "move": "g1f3", "kind": "exclude"}"#, "moves must be text"),
            (r#"{"moves": "e2e4 zz", "move": "g1f3", "kind": "exclude"}"#, "unknown position"),
            (r#"{"moves": "e2e4 e2e4", "move": "g1f3", "kind": "exclude"}"#, "unknown position"),
            (
                r#"{"fen": 5, "moves": "e2e4 e7e5", "move": "g1f3", "kind": "exclude"}"#,
                "fen must be text (a FEN), not a number",
            ),
            (r#"{"fen": ["x"], "moves": "e2e4 e7e5", "move": "g1f3", "kind": "exclude"}"#, "fen must be text"),
            (r#"{"fen": "not a fen", "moves": "e2e4 e7e5", "move": "g1f3", "kind": "exclude"}"#, "unknown position"),
            (r#"{"fen": "8/8/8/8/8/8/8/8 w - - 0 1", "move": "g1f3", "kind": "exclude"}"#, "unknown position"),
            (
                r#"{"moves": "e2e4 e7e5", "move": ["g1f3"], "kind": "exclude"}"#,
                "move must be text (a UCI move), not a list",
            ),
            (r#"{"moves": "e2e4 e7e5", "move": 7, "kind": "exclude"}"#, "move must be text"),
            (r#"{"moves": "e2e4 e7e5", "move": "g1", "kind": "exclude"}"#, "malformed move"),
            (r#"{"moves": "e2e4 e7e5", "move": "g1g3", "kind": "exclude"}"#, "not legal"),
            (r#"{"moves": "e2e4 e7e5", "move": null, "kind": "exclude"}"#, "no move"),
            (
                r#"{"moves": "e2e4 e7e5", "move": "g1f3", "kind": 1}"#,
                "kind must be \"exclude\" or \"include\", not a number",
            ),
            (r#"{"moves": "e2e4 e7e5", "move": "g1f3", "kind": ["exclude"]}"#, "kind must be"),
            (r#"{"moves": "e2e4 e7e5", "move": "g1f3", "kind": "ban"}"#, "kind must be"),
            (r#"{"moves": "e2e4 e7e5", "move": "g1f3"}"#, "kind must be"),
            (
                r#"{"moves": "e2e4 e7e5", "move": "g1f3", "kind": "exclude", "undo": "no"}"#,
                "undo must be true or false, not text",
            ),
            (r#"{"moves": "e2e4 e7e5", "move": "g1f3", "kind": "exclude", "undo": 0}"#, "undo must be true or false"),
            (r#"{"moves": "e2e4 e7e5", "move": "g1f3", "kind": "exclude", "Move": "b1c3"}"#, "unknown field 'Move'"),
            (r#"{"moves": "e2e4 e7e5", "move": "g1f3", "kind": "exclude", "token": "x"}"#, "unknown field"),
            // A key given twice: serde_json alone would keep the last.
            (r#"{"moves": "e2e4 e7e5", "move": "g1f3", "move": "b1c3", "kind": "exclude"}"#, "'move' is given twice"),
            (
                r#"{"moves": "e2e4 e7e5", "move": "g1f3", "kind": "exclude", "kind": "exclude"}"#,
                "'kind' is given twice",
            ),
            (r#"{"moves": "", "moves": "e2e4 e7e5", "move": "g1f3", "kind": "exclude"}"#, "'moves' is given twice"),
            (r#"{"fen": "", "fen": "", "move": "e2e4", "kind": "exclude"}"#, "'fen' is given twice"),
            (
                r#"{"moves": "e2e4 e7e5", "move": "g1f3", "kind": "exclude", "undo": false, "undo": true}"#,
                "'undo' is given twice",
            ),
        ],
    );
    assert_eq!(shown(&db), before, "a refused mark writes nothing at the start");
    assert_eq!(after_e4_e5(), before_e4_e5, "nor where it was aimed");

    // The same body with every field right marks the move where the moves lead, and only there.
    let made = post(
        &served,
        "/api/mark",
        &from_page(&served),
        r#"{"fen": "", "moves": "e2e4 e7e5", "move": "g1f3", "kind": "exclude", "undo": null}"#,
    );
    assert_eq!(made.status, 200, "{}", made.body);
    assert_eq!(made.json()["mark"]["fen"], "rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 2");
    assert_eq!(shown(&db), before, "nothing marked at the start");
    assert_ne!(after_e4_e5(), before_e4_e5);
    // The list the refusals were checked against shows the one mark made.
    let marks: serde_json::Value = serde_json::from_str(&steering(&db).0).unwrap();
    assert_eq!(marks.as_array().map(Vec::len), Some(1), "{marks}");
}

#[test]
fn every_field_of_a_task_is_checked_and_a_refusal_writes_nothing() {
    let (_dir, db) = store_copy();
    let served = serve(&db, &[]);
    let before = shown(&db);
    refused_with_400(
        &served,
        &db,
        "/api/task",
        &[
            // A number where a FEN is read: refused, never read as the root.
            (r#"{"fen": 5, "moves": "e2e4", "budget_seconds": 60}"#, "fen must be text (a FEN), not a number"),
            (r#"{"fen": true, "budget_seconds": 60}"#, "fen must be text"),
            (r#"{"fen": "rnbqkbnr/pppppppp/8 w", "budget_seconds": 60}"#, "unknown position"),
            (
                r#"{"moves": ["e2e4"], "budget_seconds": 60}"#,
                "moves must be text (UCI moves separated by spaces), not a list",
            ),
            (r#"{"moves": "e2e4 e7e6 e7e5", "budget_seconds": 60}"#, "unknown position"),
            (
                r#"{"moves": "e2e4", "budget_seconds": "60"}"#,
                "budget_seconds must be a number of seconds above 0, not text",
            ),
            (r#"{"moves": "e2e4", "budget_seconds": [60]}"#, "budget_seconds must be"),
            (
                r#"{"moves": "e2e4", "budget_seconds": null}"#,
                "budget_seconds (a number of seconds above 0) is required",
            ),
            (r#"{"moves": "e2e4", "budget_seconds": -5}"#, "budget"),
            (r#"{"moves": "e2e4", "budget_seconds": 1e999}"#, "not JSON"),
            (
                r#"{"moves": "e2e4", "budget_seconds": 60, "priority": "2"}"#,
                "priority must be a small whole number (0 to 255), not text",
            ),
            (
                r#"{"moves": "e2e4", "budget_seconds": 60, "priority": 2.5}"#,
                "priority must be a small whole number (0 to 255), not 2.5",
            ),
            (r#"{"moves": "e2e4", "budget_seconds": 60, "priority": 17}"#, "priority"),
            (r#"{"moves": "e2e4", "budget_seconds": 60, "max_depth": "8"}"#, "max_depth must be a small whole number"),
            (r#"{"moves": "e2e4", "budget_seconds": 60, "max_depth": -1}"#, "max_depth must be a small whole number"),
            (r#"{"moves": "e2e4", "budget_seconds": 60, "max_depth": 300}"#, "max_depth must be a small whole number"),
            (r#"{"moves": "e2e4", "budget_seconds": 60, "label": 5}"#, "label must be text, not a number"),
            (r#"{"moves": "e2e4", "budget_seconds": 60, "label": ["a"]}"#, "label must be text, not a list"),
            (r#"{"moves": "e2e4", "budget_seconds": 60, "budget": 60}"#, "unknown field 'budget'"),
            (r#"{"moves": "e2e4", "budget_seconds": 60, "move": "e7e5"}"#, "unknown field 'move'"),
            (r#"{"moves": "e2e4", "budget_seconds": 60, "budget_seconds": 6000}"#, "'budget_seconds' is given twice"),
            (r#"{"moves": "e2e4", "moves": "d2d4", "budget_seconds": 60}"#, "'moves' is given twice"),
            (r#"{"fen": "", "fen": "", "budget_seconds": 60}"#, "'fen' is given twice"),
            (r#"{"moves": "e2e4", "budget_seconds": 60, "priority": 1, "priority": 2}"#, "'priority' is given twice"),
            (
                r#"{"moves": "e2e4", "budget_seconds": 60, "max_depth": 1, "max_depth": 1}"#,
                "'max_depth' is given twice",
            ),
            (r#"{"moves": "e2e4", "budget_seconds": 60, "label": "a", "label": "b"}"#, "'label' is given twice"),
        ],
    );
    assert_eq!(task_list(&db).as_array().map(Vec::len), Some(0), "refused requests add no task");
    assert_eq!(shown(&db), before);

    // Every field right: the task is where the moves lead, with what was sent.
    let added = post(
        &served,
        "/api/task",
        &from_page(&served),
        r#"{"fen": "", "moves": "e2e4", "budget_seconds": 60, "priority": 3, "max_depth": 8, "label": " open "}"#,
    );
    assert_eq!(added.status, 200, "{}", added.body);
    let tasks = task_list(&db);
    assert_eq!(tasks.as_array().unwrap().len(), 1, "{tasks}");
    assert_eq!(tasks[0]["moves"], serde_json::json!(["e2e4"]));
    assert_eq!(tasks[0]["label"], "open");
    assert_eq!((tasks[0]["priority"].as_u64(), tasks[0]["max_depth"].as_u64()), (Some(3), Some(8)));
}

#[test]
fn an_api_parameter_it_does_not_read_is_refused() {
    let (_dir, db) = store_copy();
    let served = serve(&db, &[]);
    for path in ["/api/position?move=e2e4", "/api/position?moves=e2e4&fen=&depth=2", "/api/live?since=3"] {
        let answer = get(&served, path);
        assert_eq!(answer.status, 400, "{path}: {}", answer.body);
        assert!(answer.json()["error"].as_str().unwrap().contains("unknown parameter"), "{path}: {}", answer.body);
    }
    // The page's own URL carries the token in its query.
    assert_eq!(get(&served, &format!("/?token={}", served.token)).status, 200);
    assert_eq!(get(&served, "/api/position?fen=&moves=e2e4").status, 200);
}
