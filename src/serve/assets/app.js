// deeptree serve: the page. It only shows what the server says (legal moves, SAN, scores); it knows no chess rules.
'use strict';
(function () {
  const token = new URLSearchParams(location.search).get('token') || '';
  const $ = (id) => document.getElementById(id);
  const state = { startFen: null, rootMoves: [], moves: [], pos: null, seq: 0, board: null };

  // --- talking to the server ---------------------------------------------------------------------------------------
  function positionUrl(moves) {
    const q = new URLSearchParams({ fen: state.startFen, moves: moves.join(' ') });
    return '/api/position?' + q.toString();
  }
  async function getJson(url) {
    const r = await fetch(url, { cache: 'no-store' });
    const body = await r.json().catch(() => ({ error: r.statusText }));
    if (!r.ok) throw new Error(body.error || r.statusText);
    return body;
  }
  async function post(path, body) {
    const r = await fetch(path, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Deeptree-Token': token },
      body: JSON.stringify(body),
    });
    const text = await r.text();
    let parsed = null;
    try { parsed = JSON.parse(text); } catch (e) { parsed = { error: text.trim() }; }
    if (!r.ok) throw new Error(parsed.error || r.statusText);
    return parsed;
  }

  // --- formatting --------------------------------------------------------------------------------------------------
  function fmtScore(s) {
    if (s === null || s === undefined) return '?';
    if ('mate' in s) return '#' + s.mate;
    const v = s.cp / 100;
    return (v > 0 ? '+' : v < 0 ? '−' : '') + Math.abs(v).toFixed(2);
  }
  function scorePawns(s) {
    if (!s) return null;
    if ('mate' in s) return s.mate > 0 ? 5 : -5;
    return Math.max(-5, Math.min(5, s.cp / 100));
  }
  function moveLabel(ply, san, startFullmove, startBlack) {
    const abs = ply + (startBlack ? 1 : 0);
    const num = startFullmove + Math.floor(abs / 2);
    return abs % 2 === 0 ? num + '. ' : (ply === 0 ? num + '… ' : '');
  }
  function plural(n, one, many) {
    return n + ' ' + (n === 1 ? one : many);
  }
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v; else if (k.startsWith('on')) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }
  function say(id, text, kind) {
    const m = $(id);
    m.textContent = text;
    m.className = 'message' + (kind ? ' ' + kind : '');
  }

  // --- the position ------------------------------------------------------------------------------------------------
  async function load(moves) {
    const seq = ++state.seq;
    const pos = await getJson(positionUrl(moves));
    if (seq !== state.seq) return; // a later walk answered first
    state.moves = moves;
    state.pos = pos;
    render(pos);
  }
  function walk(uci) {
    load(state.moves.concat([uci])).catch((e) => say('message', e.message, 'error'));
  }
  function goTo(n) {
    load(state.moves.slice(0, n)).catch((e) => say('message', e.message, 'error'));
  }

  function dests(pos) {
    const map = new Map();
    for (const m of pos.legal) {
      const from = m.uci.slice(0, 2), to = m.uci.slice(2, 4);
      if (!map.has(from)) map.set(from, []);
      if (!map.get(from).includes(to)) map.get(from).push(to);
    }
    return map;
  }
  function renderBoard(pos) {
    const last = state.moves.length ? state.moves[state.moves.length - 1] : null;
    const config = {
      fen: pos.fen.split(' ')[0],
      turnColor: pos.turn,
      check: pos.check ? pos.turn : false,
      lastMove: last ? [last.slice(0, 2), last.slice(2, 4)] : undefined,
      movable: { free: false, color: pos.turn, dests: dests(pos), showDests: true },
      draggable: { enabled: true },
    };
    if (!state.board) {
      config.coordinates = true;
      config.movable.events = {
        after: (orig, dest) => {
          const found = state.pos.legal.filter((m) => m.uci.slice(0, 4) === orig + dest);
          const pick = found.find((m) => m.uci.length === 4 || m.uci.endsWith('q')) || found[0];
          if (pick) walk(pick.uci);
        },
      };
      state.board = Chessground($('board'), config);
    } else {
      state.board.set(config);
    }
    $('board').dataset.fen = pos.fen;
  }

  function renderLine(pos) {
    const bc = $('breadcrumb');
    bc.replaceChildren();
    const startFull = parseInt(pos.start_fen.split(' ')[5] || '1', 10);
    const startBlack = pos.start_fen.split(' ')[1] === 'b';
    bc.append(el('a', { class: 'root', onclick: () => goTo(0), title: pos.start_fen }, 'start'));
    pos.line.forEach((m, i) => {
      const label = moveLabel(i, m.san, startFull, startBlack);
      if (label) bc.append(el('span', { class: 'num' }, label));
      bc.append(el('a', { onclick: () => goTo(i + 1), 'data-uci': m.uci }, m.san));
    });
    $('back').disabled = pos.line.length === 0;
    $('to-start').disabled = pos.line.length === state.rootMoves.length &&
      pos.line.every((m, i) => m.uci === state.rootMoves[i]);
    $('fen').textContent = pos.fen;
  }

  function markButtons(m, own) {
    const td = el('td', { class: 'actions' });
    for (const kind of ['exclude', 'include']) {
      const has = own.some((k) => k.kind === kind);
      const b = el('button', {
        class: 'mark-' + kind, 'data-uci': m.uci,
        title: (has ? 'lift the ' : '') + kind + (has ? '' : ' this move') + ' (a mark in the store)',
        onclick: (ev) => { ev.stopPropagation(); mark(m, kind, has); },
      }, has ? 'lift' : kind);
      td.append(b);
    }
    return td;
  }
  function render(pos) {
    renderBoard(pos);
    renderLine(pos);
    $('turn').textContent = (pos.turn === 'white' ? 'White' : 'Black') + ' to move · scores for the side to move';
    $('score').textContent = pos.outcome ? 'game over: ' + pos.outcome : fmtScore(pos.score);
    const depth = pos.settled_depth;
    $('depth').textContent = depth === null || depth === undefined ?
      (pos.moves.length ? 'none of its own (analysed as part of a line above)' : 'none yet') :
      depth + (pos.engine_depth ? '  (combined depth ' + (depth + pos.engine_depth) + ' with engine depth ' + pos.engine_depth + ')' : '');
    const ml = $('main-line');
    ml.replaceChildren();
    if (!pos.main_line.length) ml.textContent = '–';
    const plyBase = pos.ply;
    const startBlack = pos.turn === 'black';
    pos.main_line.forEach((m, i) => {
      const label = moveLabel(i, m.san, pos.fullmove, startBlack);
      if (label) ml.append(el('span', { class: 'num' }, label));
      ml.append(el('a', { onclick: () => load(state.moves.concat(pos.main_line.slice(0, i + 1).map((x) => x.uci))) }, m.san), ' ');
    });
    if (pos.main_line.length) ml.append(el('span', { class: 'num' }, '(' + pos.main_line.length + ' plies)'));
    void plyBase;
    const body = $('moves').querySelector('tbody');
    body.replaceChildren();
    const marksOf = (uci) => (pos.marks || []).filter((k) => (k.move || k.uci) === uci);
    const row = (m, best) => {
      const own = marksOf(m.uci);
      const excluded = own.some((k) => k.kind === 'exclude');
      const badges = el('td', {});
      for (const k of own) {
        const when = k.time ? new Date(k.time).toLocaleString() : '';
        badges.append(el('span', { class: 'badge ' + k.kind, title: [k.source, k.user, when].filter(Boolean).join(' · ') }, k.kind + 'd'), ' ');
      }
      if (m.imported) badges.append(el('span', { class: 'badge imported', title: 'a move of a game or of the root\'s line' }, 'line'));
      return el('tr', { class: (best && !excluded ? 'best ' : '') + (excluded ? 'excluded' : ''), 'data-uci': m.uci, onclick: () => walk(m.uci) },
        el('td', { class: 'san' }, m.san),
        el('td', {}, excluded ? '' : fmtScore(m.alpha)),
        el('td', {}, excluded ? '' : fmtScore(m.idea)),
        el('td', {}, m.depth === null || m.depth === undefined || excluded ? '' : String(m.depth)),
        el('td', {}, excluded ? '' : (m.bound || '')),
        badges,
        markButtons(m, own));
    };
    pos.moves.forEach((m, i) => body.append(row(m, i === 0)));
    // Excluded moves are no moves of the tree: the server lists them among the marks only.
    const listed = new Set(pos.moves.map((m) => m.uci));
    for (const k of pos.marks || []) {
      const uci = k.move || k.uci;
      if (listed.has(uci)) continue;
      listed.add(uci);
      const legal = pos.legal.find((m) => m.uci === uci);
      body.append(row({ uci, san: k.san || (legal && legal.san) || uci }, false));
    }
    const shownUci = listed;
    const others = pos.legal.filter((m) => !shownUci.has(m.uci));
    const un = $('unsearched');
    un.replaceChildren();
    if (others.length) {
      let text = others.length + ' moves unsearched';
      if (pos.rest) text += ', at most ' + fmtScore(pos.rest.score) + ' at depth ' + pos.rest.depth;
      if (pos.screen) text += '; screened at depth ' + pos.screen.depth + ': ' + fmtScore(pos.screen.score);
      un.append(text + ': ');
      for (const m of others) un.append(el('a', { onclick: () => walk(m.uci), 'data-uci': m.uci }, m.san), ' ');
    } else if (!pos.moves.length) {
      un.textContent = pos.outcome ? 'no legal moves' : 'nothing stored here yet';
    }
  }

  async function mark(m, kind, undo) {
    say('message', (undo ? 'lifting ' : 'marking ') + m.san + '…');
    try {
      await post('/api/mark', { fen: state.startFen, moves: state.moves.join(' '), move: m.uci, kind, undo });
      say('message', (undo ? 'lifted the ' + kind + ' mark on ' : kind + 'd ') + m.san, 'ok');
      await load(state.moves);
    } catch (e) {
      say('message', 'cannot ' + kind + ' ' + m.san + ': ' + e.message, 'error');
    }
  }

  // --- live --------------------------------------------------------------------------------------------------------
  function drawPlot(samples) {
    const c = $('plot');
    const ratio = window.devicePixelRatio || 1;
    const w = c.clientWidth, h = c.clientHeight;
    if (c.width !== w * ratio) { c.width = w * ratio; c.height = h * ratio; }
    const g = c.getContext('2d');
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, w, h);
    const left = 34, right = 26, top = 8, bottom = 20;
    const pw = w - left - right, ph = h - top - bottom;
    const tMax = Math.max(10, samples.length ? samples[samples.length - 1].t : 0);
    const scores = samples.map((s) => scorePawns(s.score)).filter((v) => v !== null);
    let lo = Math.min(-0.5, ...scores), hi = Math.max(0.5, ...scores);
    const pad = (hi - lo) * 0.1; lo -= pad; hi += pad;
    const depths = samples.map((s) => s.settled_depth || 0);
    const dMax = Math.max(2, ...depths) + 1;
    const x = (t) => left + (t / tMax) * pw;
    const y = (v) => top + (1 - (v - lo) / (hi - lo)) * ph;
    const yd = (d) => top + (1 - d / dMax) * ph;
    g.font = '11px system-ui, sans-serif';
    g.strokeStyle = '#e6e3dc'; g.fillStyle = '#888'; g.lineWidth = 1;
    for (let i = 0; i <= 4; i++) {
      const v = lo + (hi - lo) * i / 4, yy = y(v);
      g.beginPath(); g.moveTo(left, yy); g.lineTo(left + pw, yy); g.stroke();
      g.textAlign = 'right'; g.fillText(v.toFixed(2), left - 4, yy + 4);
    }
    g.textAlign = 'left';
    for (let d = 0; d <= dMax; d += Math.max(1, Math.ceil(dMax / 5))) g.fillText(String(d), left + pw + 5, yd(d) + 4);
    g.textAlign = 'center';
    for (let i = 0; i <= 4; i++) { const t = tMax * i / 4; g.fillText(Math.round(t) + 's', x(t), h - 5); }
    if (lo < 0 && hi > 0) { g.strokeStyle = '#c9c6bd'; g.beginPath(); g.moveTo(left, y(0)); g.lineTo(left + pw, y(0)); g.stroke(); }
    g.strokeStyle = '#e08a00'; g.lineWidth = 2; g.beginPath();
    samples.forEach((s, i) => {
      const d = s.settled_depth || 0;
      if (i === 0) g.moveTo(x(s.t), yd(d)); else { g.lineTo(x(s.t), yd(samples[i - 1].settled_depth || 0)); g.lineTo(x(s.t), yd(d)); }
    });
    if (samples.length === 1) g.lineTo(x(samples[0].t) + 2, yd(samples[0].settled_depth || 0));
    g.stroke();
    g.strokeStyle = '#2f6db5'; g.fillStyle = '#2f6db5'; g.lineWidth = 2; g.beginPath();
    let started = false;
    for (const s of samples) {
      const v = scorePawns(s.score);
      if (v === null) { started = false; continue; }
      if (!started) { g.moveTo(x(s.t), y(v)); started = true; } else g.lineTo(x(s.t), y(v));
    }
    g.stroke();
    const last = samples[samples.length - 1];
    if (last && scorePawns(last.score) !== null) { g.beginPath(); g.arc(x(last.t), y(scorePawns(last.score)), 3, 0, 7); g.fill(); }
  }
  function renderLive(live) {
    $('live-positions').textContent = live.positions.toLocaleString('en');
    $('live-rate').textContent = live.rate.toFixed(1);
    $('live-running').textContent = String(live.running);
    $('live-running-label').textContent = live.running === 1 ? 'search running' : 'searches running';
    $('live-state').textContent = 'live · up ' + Math.round(live.uptime) + ' s';
    $('live-state').className = 'state';
    document.body.dataset.positions = String(live.positions);
    const claims = live.claims;
    $('claims').textContent = !claims ? 'No process has claimed a search on this store yet.' :
      plural(claims.running, 'search', 'searches') + ' running' +
      (claims.processes.length ? ' in ' + (claims.processes.length > 1 ? 'processes ' : 'process ') + claims.processes.join(', ') : '') +
      '; ' + plural(claims.answers, 'answer', 'answers') + ' kept for other processes. ' +
      live.edges.toLocaleString('en') + ' edges.';
    const ul = $('searching');
    ul.replaceChildren();
    for (const s of live.searching) {
      const what = s.after ? 'after ' + s.after.san : (s.fen ? 'position' : 'a position not stored yet');
      ul.append(el('li', {},
        el('b', {}, what), ' · depth ' + s.depth + (s.moves ? ' · ' + s.moves + ' moves' : ' · all moves') + ' · pid ' + s.pid,
        el('div', { class: 'fen-small' }, s.fen || s.key)));
    }
    const last = live.samples[live.samples.length - 1];
    $('plot-note').textContent = 'The root since serve started' +
      (last && last.score ? ': ' + fmtScore(last.score) + ', settled depth ' + (last.settled_depth ?? 'none') : '') + '.';
    drawPlot(live.samples);
  }
  async function pollLive() {
    try {
      renderLive(await getJson('/api/live'));
    } catch (e) {
      $('live-state').textContent = 'disconnected';
      $('live-state').className = 'state down';
    }
  }
  async function refreshPosition() {
    if (!state.pos) return;
    const seq = state.seq;
    try {
      const pos = await getJson(positionUrl(state.moves));
      if (seq === state.seq && pos.fen === state.pos.fen) { state.pos = pos; render(pos); }
    } catch (e) { /* the next poll tries again */ }
  }

  // --- start -------------------------------------------------------------------------------------------------------
  $('back').addEventListener('click', () => goTo(Math.max(0, state.moves.length - 1)));
  $('to-start').addEventListener('click', () => load(state.rootMoves.slice()));
  $('add-task').addEventListener('click', async () => {
    say('task-message', 'adding…');
    try {
      const r = await post('/api/task', {
        fen: state.startFen, moves: state.moves.join(' '),
        budget_seconds: Number($('task-budget').value), priority: Number($('task-priority').value),
      });
      say('task-message', 'task ' + r.task.id + ' added: ' + r.task.label + ', ' + r.task.budget_seconds + ' s, priority ' +
        r.task.priority, 'ok');
    } catch (e) {
      say('task-message', 'cannot add a task: ' + e.message, 'error');
    }
  });
  getJson('/api/position').then((pos) => {
    state.startFen = pos.start_fen;
    state.rootMoves = pos.line.map((m) => m.uci);
    state.moves = state.rootMoves.slice();
    state.pos = pos;
    render(pos);
  }).catch((e) => say('message', 'cannot load the tree: ' + e.message, 'error'));
  pollLive();
  setInterval(pollLive, 1000);
  setInterval(refreshPosition, 2000);
  window.deeptree = state;
})();
