// relay's live dashboard: reads pipeline events from /dashboard/events
// (Server-Sent Events) and queue depths from /dashboard/queues, and draws
// one row per notification copy (id + channel) with its attempts on a
// shared time axis. Plain JavaScript, no dependencies.
"use strict";

(() => {
  const MAX_ROWS = 200; // rows on the page
  const MAX_COPIES = 5000; // copies remembered, rows or not
  const QUEUE_REFRESH_MS = 2000;

  const $ = (id) => document.getElementById(id);

  // ---- state ---------------------------------------------------------

  // copies: key "id\u0000channel" -> copy. Insertion order is first seen.
  let copies = new Map();
  let accepted = new Set();
  let totals = { copies: 0, delivered: 0, parked: 0, attempts: 0 };
  let shown = []; // keys of the rows on the page, newest first
  let axisMax = 0; // ms
  let drawnWidth = 0; // px of the lanes when last drawn
  const dirty = new Set();
  let frame = 0;

  function reset() {
    copies = new Map();
    accepted = new Set();
    totals = { copies: 0, delivered: 0, parked: 0, attempts: 0 };
    shown = [];
    axisMax = 0;
    dirty.clear();
    $("rows").replaceChildren();
    schedule();
  }

  function parseTime(s) {
    // Go writes nanoseconds; Date wants at most milliseconds.
    return Date.parse(String(s).replace(/(\.\d{3})\d+/, "$1"));
  }

  function isAttempt(ev) {
    // The outcomes that end a delivery attempt; "parked" only when the
    // worker itself parked (a permanent failure), not the error stage.
    return ev.outcome === "delivered" || ev.outcome === "failed" ||
      (ev.outcome === "parked" && ev.reason === "permanent");
  }

  function add(ev) {
    if (!ev || !ev.id) return;
    const channel = ev.channel || "";
    const key = ev.id + "\u0000" + channel;
    ev.t = parseTime(ev.at);
    if (Number.isNaN(ev.t)) return;
    let c = copies.get(key);
    if (!c) {
      c = { key, id: ev.id, channel, events: [], done: null, attempts: new Set(), row: null };
      copies.set(key, c);
      totals.copies++;
      accepted.add(ev.id);
      forgetOldCopies();
    }
    c.events.push(ev);
    if (isAttempt(ev) && !c.attempts.has(ev.attempt)) {
      c.attempts.add(ev.attempt);
      totals.attempts++;
    }
    if ((ev.outcome === "delivered" || ev.outcome === "parked") && c.done !== "delivered") {
      if (c.done === "parked") totals.parked--;
      if (c.done !== ev.outcome) totals[ev.outcome]++;
      c.done = ev.outcome;
    }
    if (!c.row) show(c);
    dirty.add(c);
    schedule();
  }

  function forgetOldCopies() {
    if (copies.size <= MAX_COPIES) return;
    for (const [key, c] of copies) {
      if (copies.size <= MAX_COPIES) break;
      if (c.row) continue;
      copies.delete(key);
    }
  }

  // show gives a copy a row at the top, dropping the oldest beyond MAX_ROWS.
  function show(c) {
    c.row = makeRow(c);
    $("rows").prepend(c.row.tr);
    shown.unshift(c.key);
    while (shown.length > MAX_ROWS) {
      const old = copies.get(shown.pop());
      if (old && old.row) {
        old.row.tr.remove();
        old.row = null;
        dirty.delete(old);
      }
    }
  }

  // ---- the model of one row --------------------------------------------

  // marks turns a copy's events, in time order, into what its row draws:
  // points (failed, delivered, parked) and waits (from a failure to the
  // next attempt). A wait still under way is drawn to its scheduled end.
  function model(c) {
    const evs = c.events.slice().sort((a, b) => a.t - b.t);
    const t0 = evs[0].t;
    const points = [];
    const waits = [];
    let open = null;
    const last = evs[evs.length - 1];
    const close = (t) => {
      if (open) {
        waits.push({ from: open.from, to: Math.max(t, open.from), delay: open.delay, attempt: open.attempt, pending: false });
        open = null;
      }
    };
    for (const ev of evs) {
      const t = ev.t - t0;
      switch (ev.outcome) {
        case "failed":
          close(t);
          points.push({ outcome: "failed", t, ev });
          open = { from: t, delay: ev.delay_ms || 0, attempt: ev.attempt };
          break;
        case "retrying":
          if (open && open.attempt === ev.attempt) open.delay = ev.delay_ms || open.delay;
          else { close(t); open = { from: t, delay: ev.delay_ms || 0, attempt: ev.attempt }; }
          break;
        case "requeued":
          close(t);
          break;
        case "delivered":
          close(t);
          points.push({ outcome: "delivered", t, ev });
          break;
        case "parked":
          // A failure that was parked at once never waited.
          if (open && open.attempt === ev.attempt) open = null;
          close(t);
          points.push({ outcome: "parked", t, ev });
          break;
        default: // "waiting": the wait goes on
          break;
      }
    }
    if (open && c.done === null) {
      waits.push({ from: open.from, to: open.from + open.delay, delay: open.delay, attempt: open.attempt, pending: true });
    }
    let span = last.t - t0;
    for (const w of waits) span = Math.max(span, w.to);
    const status = c.done || last.outcome;
    const terminal = c.done ? evs.filter((e) => e.outcome === c.done).pop() : null;
    return { t0, points, waits, span, status, last, terminal, pendingWait: waits.find((w) => w.pending) };
  }

  // ---- drawing ---------------------------------------------------------

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function makeRow(c) {
    const tr = el("tr");
    tr.dataset.id = c.id;
    tr.dataset.channel = c.channel;
    const status = el("td", "status");
    const badge = el("span", "badge");
    const detail = el("span", "detail");
    status.append(badge, detail);
    const idCell = el("td", "id");
    const idText = el("span", "id-text", c.id);
    idText.title = c.id;
    const when = el("span", "when");
    idCell.append(idText, when);
    const channel = el("td", "channel");
    channel.append(el("span", "chip", c.channel || "—"));
    const attempts = el("td", "num attempts");
    const timeline = el("td", "timeline");
    const lane = el("div", "lane");
    timeline.append(lane);
    const age = el("td", "num age");
    tr.append(status, idCell, channel, attempts, timeline, age);
    return { tr, badge, detail, when, attempts, lane, age, model: null };
  }

  const STATUS = {
    delivered: "delivered",
    parked: "parked",
    failed: "retrying",
    retrying: "retrying",
    waiting: "retrying",
    requeued: "retrying",
  };

  function updateRow(c) {
    const r = c.row;
    const m = model(c);
    r.model = m;
    r.tr.dataset.outcome = m.status;
    const kind = STATUS[m.status] || "retrying";
    r.tr.className = "row " + kind;
    r.badge.className = "badge " + kind;
    r.badge.textContent = kind === "retrying" ? (m.last.outcome === "requeued" ? "requeued" : "waiting") : kind;
    let detail = "";
    if (m.status === "parked") {
      detail = (m.terminal && m.terminal.reason) || "";
      r.detail.title = parkedTitle(m.terminal);
    } else if (m.status === "delivered") {
      detail = m.terminal && m.terminal.attempt > 1 ? "on attempt " + m.terminal.attempt : "first try";
      r.detail.title = "";
    } else if (m.pendingWait) {
      detail = "next try after " + fmtDur(m.pendingWait.delay);
      r.detail.title = m.last.error || "";
    } else {
      detail = "";
      r.detail.title = "";
    }
    r.detail.textContent = detail;
    r.when.textContent = new Date(m.t0).toLocaleTimeString([], { hour12: false });
    r.attempts.textContent = String(c.attempts.size || "—");
    const ageMs = m.terminal && m.terminal.age_ms ? m.terminal.age_ms : null;
    r.age.textContent = ageMs !== null ? fmtDur(ageMs) : (c.done ? fmtDur(m.span) : "");
    r.age.title = ageMs !== null ? "from publish to " + m.status : "";
  }

  function parkedTitle(ev) {
    if (!ev) return "parked";
    let s = "parked after attempt " + ev.attempt;
    if (ev.reason) s += ": " + ev.reason;
    if (ev.error) s += " (" + ev.error + ")";
    return s;
  }

  // laneWidth is the drawable width of every lane, in pixels.
  function laneWidth() {
    return $("axis").clientWidth || 600;
  }

  const POINT_GAP = 10; // px between the centres of neighbouring points

  function drawLane(c, width) {
    const r = c.row;
    const m = r.model;
    const frac = (t) => (axisMax > 0 ? Math.min(1, t / axisMax) : 0);
    const pos = (t, px) => "calc(" + frac(t) * 100 + "% + " + (px || 0) + "px)";
    const marks = [];
    for (const w of m.waits) {
      const bar = el("span", "mark wait" + (w.pending ? " pending" : ""));
      bar.dataset.outcome = "retrying";
      bar.dataset.attempt = w.attempt;
      bar.style.left = pos(w.from);
      const barPx = (frac(w.to) - frac(w.from)) * width;
      bar.style.width = Math.max(barPx, 2) + "px";
      const label = w.delay > 0 ? fmtDur(w.delay) : "";
      // A label only where it fits; the title always has it.
      if (label && barPx >= label.length * 6.5 + 10) bar.append(el("span", "wait-label", label));
      bar.title = (w.pending ? "waiting, next attempt after " : "waited before attempt " + (w.attempt + 1) + ", scheduled ") + fmtDur(w.delay);
      marks.push(bar);
    }
    // Points closer than POINT_GAP (a failure parked at once, say) are
    // nudged right, like beads on a string, so none hides another.
    let lastPx = -Infinity;
    for (const p of m.points) {
      const px = frac(p.t) * width;
      const shift = Math.max(0, lastPx + POINT_GAP - px);
      lastPx = px + shift;
      const dot = el("span", "mark point " + p.outcome);
      dot.dataset.outcome = p.outcome;
      dot.dataset.attempt = p.ev.attempt;
      dot.style.left = pos(p.t, shift);
      if (p.outcome === "failed") {
        dot.title = "attempt " + p.ev.attempt + " failed" + (p.ev.error ? ": " + p.ev.error : "") + " · +" + fmtDur(p.t);
      } else if (p.outcome === "delivered") {
        dot.title = "delivered on attempt " + p.ev.attempt + " · +" + fmtDur(p.t);
      } else {
        dot.title = parkedTitle(p.ev) + " · +" + fmtDur(p.t);
      }
      marks.push(dot);
    }
    r.lane.replaceChildren(...marks);
  }

  // niceStep picks a tick step (1, 2 or 5 × 10^k ms) giving at most 6 ticks.
  function niceStep(span) {
    const raw = Math.max(span, 1) / 6;
    const pow = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const f of [1, 2, 5, 10]) if (f * pow >= raw) return f * pow;
    return 10 * pow;
  }

  function axisFor(span) {
    const s = Math.max(span, 1000);
    const step = niceStep(s);
    return { max: Math.ceil(s / step) * step, step };
  }

  function drawAxis(ax) {
    const axis = $("axis");
    const ticks = [];
    const n = Math.round(ax.max / ax.step);
    for (let i = 0; i <= n; i++) {
      const t = el("span", "tick" + (i === 0 ? " first" : i === n ? " last" : ""), i === 0 ? "0" : "+" + fmtDur(i * ax.step));
      t.style.left = (i / n) * 100 + "%";
      ticks.push(t);
    }
    axis.replaceChildren(...ticks);
    document.documentElement.style.setProperty("--ticks", String(n));
  }

  function schedule() {
    if (!frame) frame = requestAnimationFrame(render);
  }

  function render() {
    frame = 0;
    for (const c of dirty) if (c.row) updateRow(c);
    let span = 0;
    for (const key of shown) {
      const c = copies.get(key);
      if (c && c.row && c.row.model) span = Math.max(span, c.row.model.span);
    }
    const ax = axisFor(span);
    const width = laneWidth();
    if (ax.max !== axisMax || width !== drawnWidth) {
      axisMax = ax.max;
      drawnWidth = width;
      drawAxis(ax);
      for (const key of shown) {
        const c = copies.get(key);
        if (c && c.row && c.row.model) drawLane(c, width);
      }
    } else {
      for (const c of dirty) if (c.row) drawLane(c, width);
    }
    dirty.clear();
    drawTotals();
    $("empty").hidden = shown.length > 0;
  }

  // Totals count every copy seen since the stream began, including copies
  // whose rows were dropped or which were forgotten to bound memory.
  function drawTotals() {
    const inFlight = totals.copies - totals.delivered - totals.parked;
    $("total-accepted").textContent = fmtInt(accepted.size);
    $("total-delivered").textContent = fmtInt(totals.delivered);
    $("total-parked").textContent = fmtInt(totals.parked);
    $("total-inflight").textContent = fmtInt(Math.max(inFlight, 0));
    $("total-attempts").textContent = fmtInt(totals.attempts);
  }

  function fmtInt(n) {
    return n.toLocaleString("en-US");
  }

  function fmtDur(ms) {
    ms = Math.max(0, Math.round(ms));
    if (ms < 1000) return ms + "ms";
    const s = ms / 1000;
    if (s < 10) return trim(s.toFixed(1)) + "s";
    if (s < 60) return Math.round(s) + "s";
    const m = Math.floor(s / 60);
    if (m < 60) {
      const rs = Math.round(s - m * 60);
      return rs ? m + "m" + rs + "s" : m + "m";
    }
    const h = Math.floor(m / 60);
    const rm = m - h * 60;
    return rm ? h + "h" + rm + "m" : h + "h";
  }

  function trim(s) {
    return s.replace(/\.0$/, "");
  }

  // ---- the event stream ------------------------------------------------

  let source = null;
  let retryMs = 1000;
  let resetOnNext = false;

  function setConn(state, text) {
    $("conn").dataset.state = state;
    $("conn-text").textContent = text;
  }

  function connect() {
    source = new EventSource("/dashboard/events");
    source.addEventListener("open", () => {
      retryMs = 1000;
      // The server starts every stream with its recent events: start over
      // from them rather than count them twice.
      resetOnNext = true;
      setConn("live", "live");
    });
    source.addEventListener("attempt", (msg) => {
      let ev;
      try {
        ev = JSON.parse(msg.data);
      } catch {
        return;
      }
      if (resetOnNext) {
        resetOnNext = false;
        reset();
      }
      add(ev);
    });
    source.addEventListener("error", () => {
      if (source.readyState === EventSource.CLOSED) {
        // The browser gave up (the server answered with an error): try
        // again ourselves, backing off.
        source.close();
        setConn("down", "disconnected, retrying in " + fmtDur(retryMs));
        setTimeout(connect, retryMs);
        retryMs = Math.min(retryMs * 2, 15000);
      } else {
        setConn("reconnecting", "reconnecting…");
      }
    });
  }

  // ---- queue depths ----------------------------------------------------

  function queueRank(name) {
    if (name === "error-queue") return [1, 0];
    if (name.startsWith("wait.")) return [2, waitMs(name.slice(5))];
    if (name === "requeue-queue") return [3, 0];
    if (name === "dead-letter-queue") return [4, 0];
    return [0, 0];
  }

  function waitMs(step) {
    const m = /^(\d+)(ms|s|m|h)$/.exec(step);
    if (!m) return 0;
    return Number(m[1]) * { ms: 1, s: 1000, m: 60000, h: 3600000 }[m[2]];
  }

  function drawQueues(queues) {
    const names = Object.keys(queues).sort((a, b) => {
      const ra = queueRank(a), rb = queueRank(b);
      return ra[0] - rb[0] || ra[1] - rb[1] || a.localeCompare(b);
    });
    const strip = $("queues");
    if (names.length === 0) {
      strip.replaceChildren(el("span", "muted", "no queues to show"));
      return;
    }
    strip.replaceChildren(...names.map((name) => {
      const n = queues[name];
      const q = el("div", "queue");
      q.dataset.queue = name;
      if (n > 0) q.classList.add("busy");
      if (name === "dead-letter-queue") q.classList.add("dead");
      if (name.startsWith("wait.")) q.classList.add("waiting");
      q.append(el("span", "q-name", name), el("span", "q-depth", fmtInt(n)));
      return q;
    }));
  }

  async function refreshQueues() {
    try {
      const res = await fetch("/dashboard/queues", { cache: "no-store" });
      const body = await res.json();
      if (!res.ok) throw new Error(body.error || res.statusText);
      drawQueues(body.queues || {});
      $("queues").classList.remove("stale");
    } catch (err) {
      const strip = $("queues");
      strip.classList.add("stale");
      if (!strip.querySelector(".queue")) {
        strip.replaceChildren(el("span", "muted", "queue depths unavailable"));
      }
      strip.title = String(err && err.message ? err.message : err);
    } finally {
      setTimeout(refreshQueues, QUEUE_REFRESH_MS);
    }
  }

  window.addEventListener("resize", schedule);

  connect();
  refreshQueues();
  schedule();
})();
