//! The HTTP/1.1 that `deeptree serve` speaks: one request per connection (every answer says `Connection: close`), a
//! request line and headers of at most [`MAX_HEAD`] bytes, a body only with `Content-Length` and of at most
//! [`MAX_BODY`] bytes. A body that is too large is refused from its declared length, before any of it is read; a
//! chunked body is refused too, and so is one given both lengths. The whole request is read within one deadline, and
//! the answer written within another ([`Timed`]). Nothing here knows the routes: [`read_request`] gives a [`Request`]
//! or the [`Response`] that refuses it.

use std::{
    io::{self, BufRead, BufReader, Read, Write},
    net::TcpStream,
    time::{Duration, Instant},
};

/// The most bytes a request's line and headers may take.
pub const MAX_HEAD: usize = 16 * 1024;
/// The most bytes a request's body may take.
pub const MAX_BODY: usize = 64 * 1024;

/// A request read in full.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The query string after `?`, still percent-encoded (empty when none).
    pub query: String,
    /// Header names in lower case, values trimmed.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// The first header named `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The value of query parameter `name`, percent-decoded (`+` is a space); an error naming it where it appears
    /// more than once or does not decode.
    pub fn param(&self, name: &str) -> Result<Option<String>, String> {
        query_param(&self.query, name)
    }

    /// An error naming the first query parameter not in `known`.
    pub fn only_params(&self, known: &[&str]) -> Result<(), String> {
        for pair in self.query.split('&').filter(|pair| !pair.is_empty()) {
            let name = pair.split_once('=').map_or(pair, |(n, _)| n);
            let name =
                percent_decode(name).ok_or_else(|| format!("bad percent-encoding in the query's name '{name}'"))?;
            if !known.contains(&name.as_str()) {
                return Err(if known.is_empty() {
                    format!("unknown parameter {}: this takes none", crate::game::quote(&name))
                } else {
                    format!("unknown parameter {}: this takes {}", crate::game::quote(&name), known.join(", "))
                });
            }
        }
        Ok(())
    }
}

/// An answer. Every answer closes its connection and carries the same safety headers; none has `Access-Control-*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

impl Response {
    pub fn new(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Response {
        Response { status, content_type, body: body.into() }
    }

    /// A plain-text answer (a refusal says why in one line).
    pub fn text(status: u16, message: impl Into<String>) -> Response {
        let mut body = message.into();
        body.push('\n');
        Response::new(status, "text/plain; charset=utf-8", body)
    }

    /// A JSON answer.
    pub fn json(value: &impl serde::Serialize) -> Response {
        match serde_json::to_vec(value) {
            Ok(body) => Response::new(200, "application/json", body),
            Err(e) => Response::text(500, format!("cannot write JSON: {e}")),
        }
    }

    /// A JSON error: `{"error": message}`.
    pub fn json_error(status: u16, message: impl Into<String>) -> Response {
        let body = serde_json::json!({ "error": message.into() }).to_string();
        Response::new(status, "application/json", body)
    }

    /// Writes the answer and its headers.
    pub fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        let head = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\n\
             X-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\nReferrer-Policy: no-referrer\r\n\
             Content-Security-Policy: default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; \
             connect-src 'self'; frame-ancestors 'none'\r\n\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len()
        );
        out.write_all(head.as_bytes())?;
        out.write_all(&self.body)?;
        out.flush()
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "",
    }
}

/// A stream read and written until a deadline: each read or write waits at most for the time left, so that a client
/// sending (or reading) a byte at a time holds a connection no longer than the deadline.
pub struct Timed<'s> {
    stream: &'s mut TcpStream,
    deadline: Instant,
}

impl<'s> Timed<'s> {
    /// `stream` until `time` from now.
    pub fn new(stream: &'s mut TcpStream, time: Duration) -> Timed<'s> {
        Timed { stream, deadline: Instant::now() + time }
    }

    /// The time left, or the error that says none is.
    fn left(&self) -> io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() { Err(io::ErrorKind::TimedOut.into()) } else { Ok(left) }
    }
}

impl Read for Timed<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.stream.set_read_timeout(Some(left))?;
        self.stream.read(buf)
    }
}

impl Write for Timed<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.stream.set_write_timeout(Some(left))?;
        self.stream.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

/// Reads one request from `stream` within `time`: its line, its headers and its body. A request that cannot be
/// served is answered by the [`Response`] returned as the error (400, 408 when it is not sent in time, 411, 413,
/// 431).
pub fn read_request(stream: &mut TcpStream, time: Duration) -> Result<Request, Response> {
    let mut timed = Timed::new(stream, time);
    let mut reader = BufReader::new(Read::by_ref(&mut timed).take(MAX_HEAD as u64));
    let mut head = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = reader.read_until(b'\n', &mut line).map_err(io_refusal)?;
        if read == 0 || !line.ends_with(b"\n") {
            return Err(if head.len() + line.len() >= MAX_HEAD - 1 {
                Response::text(431, "request line and headers too large")
            } else {
                Response::text(400, "request ended before its headers did")
            });
        }
        if line == b"\r\n" || line == b"\n" {
            break;
        }
        head.extend_from_slice(&line);
    }
    // What the buffer read past the headers is the start of the body.
    let buffered = reader.buffer().to_vec();
    drop(reader);
    let mut request = parse_head(&head)?;
    if request.header("content-length").is_some() && request.header("transfer-encoding").is_some() {
        // Two lengths to choose from (RFC 9112 6.3): refused rather than read either way.
        return Err(Response::text(400, "both Content-Length and Transfer-Encoding given"));
    }
    let length = match request.header("content-length") {
        None if request.header("transfer-encoding").is_some() => {
            return Err(Response::text(411, "a body needs a Content-Length (chunked bodies are not accepted)"));
        }
        None => 0,
        Some(text) => text.parse::<u64>().map_err(|_| Response::text(400, "Content-Length is not a number"))?,
    };
    if length > MAX_BODY as u64 {
        return Err(Response::text(413, format!("body of {length} bytes: at most {MAX_BODY} are accepted")));
    }
    let length = length as usize;
    let mut body = buffered;
    body.truncate(length);
    if body.len() < length {
        let start = body.len();
        body.resize(length, 0);
        timed.read_exact(&mut body[start..]).map_err(io_refusal)?;
    }
    request.body = body;
    Ok(request)
}

fn io_refusal(e: io::Error) -> Response {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Response::text(408, "request not sent in time"),
        _ => Response::text(400, format!("cannot read the request: {e}")),
    }
}

/// Parses a request line and headers (without the blank line that ends them).
pub fn parse_head(head: &[u8]) -> Result<Request, Response> {
    let text = std::str::from_utf8(head).map_err(|_| Response::text(400, "request head is not UTF-8"))?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).filter(|l| !l.is_empty());
    let request_line = lines.next().ok_or_else(|| Response::text(400, "empty request"))?;
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Response::text(400, "malformed request line"));
    };
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(Response::text(400, format!("unsupported protocol {version}")));
    }
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(Response::text(400, "malformed method"));
    }
    if !target.starts_with('/') {
        return Err(Response::text(400, "the request target must be a path"));
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line.split_once(':').ok_or_else(|| Response::text(400, "malformed header line"))?;
        if name.is_empty() || name.bytes().any(|b| b.is_ascii_whitespace()) {
            return Err(Response::text(400, "malformed header name"));
        }
        let name = name.to_ascii_lowercase();
        // The headers the safety rules read: one of each, never two to choose from (RFC 9112: a request with more
        // than one Host is refused).
        if ONE_ONLY.contains(&name.as_str()) && headers.iter().any(|(n, _)| *n == name) {
            return Err(Response::text(400, format!("header {name} given twice")));
        }
        headers.push((name, value.trim().to_owned()));
    }
    Ok(Request { method: method.to_owned(), path: path.to_owned(), query: query.to_owned(), headers, body: Vec::new() })
}

/// Headers a request may carry once at most.
const ONE_ONLY: [&str; 6] =
    ["host", "origin", "x-deeptree-token", "content-length", "sec-fetch-site", "transfer-encoding"];

/// The value of `name` in a `a=1&b=2` query, percent-decoded; an error where it is there twice or a value named so
/// (or any name) does not decode: a bad request, never a parameter taken as absent.
pub fn query_param(query: &str, name: &str) -> Result<Option<String>, String> {
    let mut found = None;
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (n, v) = pair.split_once('=').unwrap_or((pair, ""));
        let n = percent_decode(n).ok_or_else(|| format!("bad percent-encoding in the query's name '{n}'"))?;
        if n != name {
            continue;
        }
        let v = percent_decode(v).ok_or_else(|| format!("bad percent-encoding in {name}"))?;
        if found.replace(v).is_some() {
            return Err(format!("{name} is given twice"));
        }
    }
    Ok(found)
}

/// Decodes `%XX` escapes and `+` (a space); `None` for a bad escape or bytes that are not UTF-8.
pub fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_head_is_parsed() {
        let r =
            parse_head(b"GET /api/position?fen=a+b&moves=e2e4%20e7e5 HTTP/1.1\r\nHost: 127.0.0.1:80\r\nX-A:  v \r\n")
                .unwrap();
        assert_eq!((r.method.as_str(), r.path.as_str()), ("GET", "/api/position"));
        assert_eq!(r.param("fen"), Ok(Some("a b".to_owned())));
        assert_eq!(r.param("moves"), Ok(Some("e2e4 e7e5".to_owned())));
        assert_eq!(r.param("none"), Ok(None));
        assert!(query_param("fen=%ff%&moves=%zz", "fen").unwrap_err().contains("percent-encoding"));
        assert!(query_param("fen=a&fen=b", "fen").unwrap_err().contains("twice"));
        assert_eq!(r.header("host"), Some("127.0.0.1:80"));
        assert_eq!(r.header("x-a"), Some("v"));
    }

    #[test]
    fn malformed_heads_are_refused_with_400() {
        for head in [
            &b"GET /\r\n"[..],
            b"GET / HTTP/2.0\r\n",
            b"get / HTTP/1.1\r\n",
            b"GET http://x/ HTTP/1.1\r\n",
            b"GET / HTTP/1.1\r\nNoColon\r\n",
            b"GET / HTTP/1.1\r\nBad Name: x\r\n",
            b"\xff / HTTP/1.1\r\n",
        ] {
            assert_eq!(parse_head(head).unwrap_err().status, 400, "{}", String::from_utf8_lossy(head));
        }
    }

    #[test]
    fn bad_escapes_decode_to_nothing() {
        assert_eq!(percent_decode("a%2"), None);
        assert_eq!(percent_decode("%zz"), None);
        assert_eq!(percent_decode("%ff"), None);
        assert_eq!(percent_decode("r%2Fq").as_deref(), Some("r/q"));
    }

    #[test]
    fn every_answer_closes_and_has_no_cors_header() {
        let mut out = Vec::new();
        Response::text(403, "no").write_to(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 403 Forbidden\r\n"));
        assert!(text.contains("Connection: close\r\n"));
        assert!(!text.to_ascii_lowercase().contains("access-control"));
        assert!(text.ends_with("\r\n\r\nno\n"));
    }
}
