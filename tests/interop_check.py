#!/usr/bin/env python3
"""Reads deeptree's exports with independent tools, for the interop tests. Prints one JSON value.

    interop_check.py pgn FILE          the game as python-chess reads it: tags and the move tree with comments
    interop_check.py book FILE         FENs (a JSON list) on stdin: python-chess's Polyglot entries for each
    interop_check.py epd FILE          every line as python-chess parses it
    interop_check.py png FILE          size and colours of a PNG (decoded with the standard library)
    interop_check.py browse FILE       loads a page in headless Chromium over the DevTools pipe, clicks
                                       the first move and a breadcrumb, and reports what the page showed

Only the standard library and python-chess; Chromium is /usr/bin/chromium unless $CHROMIUM says otherwise.
"""

import base64
import json
import os
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

import chess
import chess.pgn
import chess.polyglot


def pgn(path):
    with open(path, encoding="utf-8") as f:
        game = chess.pgn.read_game(f)
        rest = chess.pgn.read_game(f)

    def node(n):
        return {
            "uci": n.move.uci(),
            "san": n.san(),
            "comment": n.comment,
            "children": [node(c) for c in n.variations],
        }

    return {
        "headers": dict(game.headers),
        "fen": game.board().fen(),
        "comment": game.comment,
        "errors": [str(e) for e in game.errors],
        "more_games": rest is not None,
        "moves": [node(c) for c in game.variations],
    }


def book(path):
    fens = json.load(sys.stdin)
    out = []
    with chess.polyglot.open_reader(path) as reader:
        total = len(reader)
        for fen in fens:
            board = chess.Board(fen)
            entries = [[e.move.uci(), e.weight] for e in reader.find_all(board, minimum_weight=0)]
            try:
                best = reader.find(board).move.uci()
            except IndexError:
                best = None
            out.append({"fen": fen, "key": chess.polyglot.zobrist_hash(board), "entries": entries, "best": best})
    return {"entries": total, "positions": out}


def epd(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            board, ops = chess.Board.from_epd(line)
            parsed = {}
            for key, value in ops.items():
                if isinstance(value, list):
                    if key == "pv":
                        b = board.copy()
                        ucis = []
                        for m in value:
                            ucis.append(m.uci())
                            b.push(m)
                        parsed[key] = ucis
                    else:
                        parsed[key] = [m.uci() for m in value]
                elif isinstance(value, chess.Move):
                    parsed[key] = [value.uci()]
                else:
                    parsed[key] = value
            out.append({"fen": board.fen(), "ops": parsed})
    return out


def png_pixels(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos = 8
    idat = b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows = []
    prev = bytearray(stride)
    i = 0
    for _ in range(height):
        kind = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if kind == 1:
                line[x] = (line[x] + a) & 255
            elif kind == 2:
                line[x] = (line[x] + b) & 255
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[x] = (line[x] + pred) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def png(path):
    with open(path, "rb") as f:
        width, height, bpp, rows = png_pixels(f.read())
    counts = {}
    for row in rows:
        for x in range(0, len(row), bpp):
            key = row[x:x + 3].hex()
            counts[key] = counts.get(key, 0) + 1
    top = sorted(counts.items(), key=lambda kv: -kv[1])[:12]
    return {"width": width, "height": height, "colours": len(counts), "top": dict(top), "counts": counts}


class DevTools:
    """A minimal Chrome DevTools Protocol client over --remote-debugging-pipe (fd 3 in, fd 4 out)."""

    def __init__(self, chromium, profile):
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()
        high_r = os.dup(to_chrome_r)
        high_w = os.dup(from_chrome_w)

        def wire():
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--user-data-dir=" + profile, "--remote-debugging-pipe", "--window-size=1100,800", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=wire, close_fds=False)
        for fd in (to_chrome_r, from_chrome_w, high_r, high_w):
            os.close(fd)
        self.buffer = b""
        self.next_id = 0
        self.events = []

    def close(self):
        try:
            self.send("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.to_chrome)
        os.close(self.from_chrome)

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError("no answer from Chromium")
            ready, _, _ = select.select([self.from_chrome], [], [], left)
            if ready:
                chunk = os.read(self.from_chrome, 1 << 16)
                if not chunk:
                    raise EOFError("Chromium closed the pipe")
                self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method, params=None, session=None, timeout=30):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            answer = self._read_message(deadline)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self.events.append(answer)

    def wait_event(self, method, timeout=30):
        deadline = time.time() + timeout
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._read_message(deadline))


def browse(path):
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    profile = tempfile.mkdtemp(prefix="deeptree-chromium-")
    tools = DevTools(chromium, profile)
    out = {}
    try:
        target = tools.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = tools.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        tools.send("Page.enable", session=session)
        tools.send("Emulation.setDeviceMetricsOverride",
                   {"width": 1100, "height": 800, "deviceScaleFactor": 1, "mobile": False}, session=session)
        tools.send("Page.navigate", {"url": "file://" + os.path.abspath(path)}, session=session)
        tools.wait_event("Page.loadEventFired")

        def js(expression):
            result = tools.send("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                                session=session)
            if "exceptionDetails" in result:
                raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
            return result["result"].get("value")

        def state():
            return js("""({
                fen: document.getElementById('fen').textContent,
                path: document.body.dataset.path,
                hash: location.hash,
                crumbs: [...document.querySelectorAll('#crumbs a')].map(a => a.textContent),
                moves: [...document.querySelectorAll('#moves tbody tr')].map(tr => ({
                    uci: tr.dataset.uci,
                    cells: [...tr.querySelectorAll('td')].map(td => td.textContent)})),
                squares: document.querySelectorAll('#board rect').length,
                pieces: [...document.querySelectorAll('#board text.piece')].map(t => t.dataset.piece).join(''),
            })""")

        def click(selector):
            box = js(f"""(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();
                        return [r.left + r.width / 2, r.top + r.height / 2]; }})()""")
            for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
                tools.send("Input.dispatchMouseEvent",
                           {"type": kind, "x": box[0], "y": box[1], "button": "left", "clickCount": 1},
                           session=session)

        out["loaded"] = state()
        click("#moves tbody tr:first-child td.san a")
        out["after_click"] = state()
        click("#moves tbody tr:first-child td.san a")
        out["after_second_click"] = state()
        click("#crumbs a[data-depth='1']")
        out["after_crumb"] = state()
        shot = tools.send("Page.captureScreenshot", {"format": "png"}, session=session)
        out["screenshot_bytes"] = len(base64.b64decode(shot["data"]))
    finally:
        tools.close()
        shutil.rmtree(profile, ignore_errors=True)
    return out


def main():
    mode, path = sys.argv[1], sys.argv[2]
    result = {"pgn": pgn, "book": book, "epd": epd, "png": png, "browse": browse}[mode](path)
    json.dump(result, sys.stdout)
    print()


if __name__ == "__main__":
    main()
