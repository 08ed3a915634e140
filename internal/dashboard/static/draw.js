// relay's pictures: the pipeline the API declared, drawn live from
// /dashboard/pipeline (boxes with their depth, arrows with the messages a
// second of the last seconds), and a copy's attempts on a time axis. Plain
// SVG built with DOM calls: no inline script or style, nothing from
// outside the page. Each picture has a table beside it with the same
// numbers, for the keyboard and screen readers.
"use strict";

(() => {
  const SVG = "http://www.w3.org/2000/svg";
  const PIPELINE_REFRESH_MS = 2000;
  const TOKEN_KEY = "relay.token";

  const $ = (id) => document.getElementById(id);

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }

  function fmtRate(r) {
    if (!r) return "";
    return (r >= 10 ? Math.round(r) : r.toFixed(1)) + "/s";
  }

  function fmtDur(ms) {
    ms = Math.max(0, Math.round(ms));
    if (ms < 1000) return ms + "ms";
    const s = ms / 1000;
    if (s < 10) return s.toFixed(1).replace(/\.0$/, "") + "s";
    if (s < 60) return Math.round(s) + "s";
    const m = Math.floor(s / 60);
    const rs = Math.round(s - m * 60);
    if (m < 60) return rs ? m + "m" + rs + "s" : m + "m";
    const h = Math.floor(m / 60);
    return h + "h" + (m - h * 60 ? (m - h * 60) + "m" : "");
  }

  // ---- the pipeline ------------------------------------------------------

  // The grid the boxes sit on, in SVG units.
  const BOX_W = 168;
  const BOX_H = 54;
  const GAP_X = 88;
  const GAP_Y = 26;
  const PAD = 16;

  function boxAt(n) {
    return { x: PAD + n.col * (BOX_W + GAP_X), y: PAD + 30 + n.row * (BOX_H + GAP_Y), w: BOX_W, h: BOX_H };
  }

  // arrowPath draws an arrow between two boxes: forward from the right
  // side of one to the left side of the other; back by one column, from
  // the left side to the right side; further back, along a lane below
  // every box and into the left side of its end; to itself, a loop over
  // the box.
  function arrowPath(e, a, b, bottom, lane) {
    if (e.from === e.to) {
      const x = a.x + a.w - 28;
      return { d: `M ${x} ${a.y} C ${x - 10} ${a.y - 30}, ${x + 40} ${a.y - 30}, ${a.x + a.w} ${a.y + 10}`, lx: x + 14, ly: a.y - 20 };
    }
    if (!e.back) {
      const x1 = a.x + a.w, y1 = a.y + a.h / 2, x2 = b.x, y2 = b.y + b.h / 2;
      const dx = Math.max(30, (x2 - x1) / 2);
      return { d: `M ${x1} ${y1} C ${x1 + dx} ${y1}, ${x2 - dx} ${y2}, ${x2} ${y2}`, lx: (x1 + x2) / 2, ly: (y1 + y2) / 2 - 5 };
    }
    if (a.x - b.x === BOX_W + GAP_X) {
      const x1 = a.x, y1 = a.y + a.h / 2 + 8, x2 = b.x + b.w, y2 = b.y + b.h / 2 + 8;
      const dx = GAP_X / 2;
      return { d: `M ${x1} ${y1} C ${x1 - dx} ${y1}, ${x2 + dx} ${y2}, ${x2} ${y2}`, lx: (x1 + x2) / 2, ly: (y1 + y2) / 2 - 5 };
    }
    const x1 = a.x + a.w / 2, y1 = a.y + a.h, yl = bottom + 14 + lane * 9;
    const xl = b.x - 12 - lane * 6, y2 = b.y + b.h / 2 + 10;
    return { d: `M ${x1} ${y1} L ${x1} ${yl} L ${xl} ${yl} L ${xl} ${y2} L ${b.x} ${y2}`, lx: (x1 + xl) / 2, ly: yl - 3 };
  }

  function depthText(n) {
    const parts = [];
    if (n.depth !== null && n.depth !== undefined) parts.push(n.depth + " ready");
    if (n.waiting) parts.push(n.waiting + " waiting");
    return parts.join(" · ");
  }

  // drawPipeline draws picture p into the svg element target.
  function drawPipeline(target, p) {
    const boxes = new Map(p.nodes.map((n) => [n.id, boxAt(n)]));
    let bottom = 0, right = 0;
    for (const b of boxes.values()) {
      bottom = Math.max(bottom, b.y + b.h);
      right = Math.max(right, b.x + b.w);
    }
    const lanes = p.edges.filter((e) => e.back && e.from !== e.to).length;
    const width = right + PAD;
    const height = bottom + 30 + lanes * 9;
    target.setAttribute("viewBox", `0 0 ${width} ${height}`);
    target.setAttribute("width", String(width));
    target.setAttribute("height", String(height));
    const defs = svg("defs");
    for (const kind of ["idle", "busy"]) {
      const m = svg("marker", { id: "arrow-" + kind, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 9, markerHeight: 9, markerUnits: "userSpaceOnUse", orient: "auto-start-reverse" });
      m.append(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow-head " + kind }));
      defs.append(m);
    }
    const edges = svg("g", { class: "edges" });
    const labels = svg("g", { class: "edge-labels" });
    let lane = 0;
    for (const e of p.edges) {
      const a = boxes.get(e.from), b = boxes.get(e.to);
      if (!a || !b) continue;
      const far = e.back && e.from !== e.to && a.x - b.x !== BOX_W + GAP_X;
      const path = arrowPath(e, a, b, bottom, far ? lane++ : 0);
      const busy = e.rate > 0;
      const g = svg("g", { class: "edge " + e.kind + (busy ? " busy" : ""), "data-edge": e.id });
      g.append(svg("title", null, e.from + " → " + e.to + (e.label ? " (" + e.label + ")" : "") + ": " + (fmtRate(e.rate) || "idle")));
      g.append(svg("path", { d: path.d, "marker-end": "url(#arrow-" + (busy ? "busy" : "idle") + ")" }));
      edges.append(g);
      if (busy) labels.append(svg("text", { x: path.lx, y: path.ly, class: "rate", "data-rate": e.id, "text-anchor": "middle" }, fmtRate(e.rate)));
    }
    const nodes = svg("g", { class: "nodes" });
    for (const n of p.nodes) {
      const b = boxes.get(n.id);
      const busy = (n.depth || 0) > 0 || n.waiting > 0;
      const g = svg("g", { class: "node " + n.kind + (busy ? " busy" : ""), "data-node": n.id });
      g.append(svg("title", null, n.label + (n.detail ? " (" + n.detail + ")" : "") + (depthText(n) ? ": " + depthText(n) : "")));
      const rx = n.kind === "exchange" ? 3 : n.kind === "sink" ? 27 : 9;
      g.append(svg("rect", { x: b.x, y: b.y, width: b.w, height: b.h, rx }));
      g.append(svg("text", { x: b.x + 10, y: b.y + 17, class: "label" }, n.label));
      g.append(svg("text", { x: b.x + 10, y: b.y + 31, class: "detail" }, clip(n.detail || n.kind, 28)));
      g.append(svg("text", { x: b.x + 10, y: b.y + 46, class: "depth", "data-depth": n.id }, depthText(n)));
      // The copies waiting, one dot each up to a dozen.
      for (let i = 0; i < Math.min(n.waiting || 0, 12); i++) {
        g.append(svg("circle", { cx: b.x + b.w - 10 - (i % 6) * 9, cy: b.y + 12 + Math.floor(i / 6) * 9, r: 3.2, class: "waiting-dot" }));
      }
      nodes.append(g);
    }
    const caption = svg("text", { x: PAD, y: PAD + 2, class: "caption" },
      p.backend + " backend, " + p.handoff + " hand-off · rates over the last " + p.window_seconds + "s");
    target.replaceChildren(defs, caption, edges, nodes, labels);
  }

  function clip(s, n) {
    return s.length > n ? s.slice(0, n - 1) + "…" : s;
  }

  // drawPipelineTable lists what the picture shows.
  function drawPipelineTable(boxesBody, arrowsBody, p) {
    const names = new Map(p.nodes.map((n) => [n.id, n.label]));
    boxesBody.replaceChildren(...p.nodes.map((n) => {
      const tr = el("tr");
      tr.dataset.node = n.id;
      const queues = n.kind === "wait" && n.queues.length > 1 ? n.queues.length + " queues" : "";
      tr.append(el("th", null, n.label), el("td", null, n.kind), el("td", null, [n.detail, queues].filter(Boolean).join(" · ")),
        el("td", "num", n.depth === null || n.depth === undefined ? "—" : String(n.depth)), el("td", "num", String(n.waiting || 0)));
      return tr;
    }));
    arrowsBody.replaceChildren(...p.edges.map((e) => {
      const tr = el("tr");
      tr.dataset.edge = e.id;
      tr.append(el("td", null, names.get(e.from) || e.from), el("td", null, names.get(e.to) || e.to),
        el("td", null, e.kind + (e.label ? ": " + e.label : "")), el("td", "num", e.rate ? e.rate.toFixed(1) : "0"));
      return tr;
    }));
  }

  let pipelineTimer = 0;

  function token() {
    return sessionStorage.getItem(TOKEN_KEY) || "";
  }

  // refreshPipeline reads the picture every few seconds while the page's
  // data is on show and the tab visible; the page's own script handles
  // the log-in.
  async function refreshPipeline() {
    clearTimeout(pipelineTimer);
    const app = $("app");
    if (!app || app.hidden || document.hidden) {
      pipelineTimer = setTimeout(refreshPipeline, PIPELINE_REFRESH_MS);
      return;
    }
    const status = $("pipeline-status");
    try {
      const h = {};
      if (token()) h.Authorization = "Bearer " + token();
      const res = await fetch("/dashboard/pipeline", { cache: "no-store", headers: h });
      if (!res.ok) throw new Error(res.status === 503 ? "no pipeline to draw" : res.status + " " + res.statusText);
      const p = await res.json();
      drawPipeline($("pipeline-svg"), p);
      drawPipelineTable($("pipeline-boxes"), $("pipeline-arrows"), p);
      status.textContent = p.depths_error ? p.depths_error : "";
      status.hidden = !p.depths_error;
      $("pipeline").dataset.state = "drawn";
    } catch (err) {
      status.textContent = "The pipeline could not be drawn: " + (err && err.message ? err.message : err);
      status.hidden = false;
    }
    pipelineTimer = setTimeout(refreshPipeline, PIPELINE_REFRESH_MS);
  }

  function initPipeline() {
    if (!$("pipeline")) return;
    const toggle = $("pipeline-table-toggle");
    toggle.addEventListener("click", () => {
      const open = toggle.getAttribute("aria-expanded") !== "true";
      toggle.setAttribute("aria-expanded", String(open));
      $("pipeline-tables").hidden = !open;
      toggle.textContent = open ? "Hide the table" : "Show as a table";
    });
    document.addEventListener("visibilitychange", () => {
      if (!document.hidden) refreshPipeline();
    });
    refreshPipeline();
  }

  // ---- attempts on a time axis -------------------------------------------

  // The marks of one copy: each attempt that ended (failed, delivered,
  // parked, a replay), the scheduled wait after a failure as a bar, and
  // the next attempt due for a copy still retrying.
  function marksOf(c) {
    const marks = [];
    const waits = [];
    for (const a of c.attempts || []) {
      const at = Date.parse(a.at);
      if (Number.isNaN(at)) continue;
      // A failure whose wait is a deferral (a rate limit, a Retry-After)
      // spent no retry: it is drawn, and named, apart.
      const deferred = a.outcome === "failed" && !!a.deferred;
      marks.push({ at, outcome: deferred ? "deferred" : a.outcome, n: a.n, round: a.round, reason: a.reason || "" });
      if (a.outcome === "failed" && a.delay_ms != null) waits.push({ from: at, ms: a.delay_ms, n: a.n, deferred });
    }
    let due = null;
    if (c.status === "retrying" && c.next_attempt_at) {
      const t = Date.parse(c.next_attempt_at);
      if (!Number.isNaN(t)) due = t;
    }
    return { marks, waits, due };
  }

  // spanOf is the time the copies' attempts take: from the first to the
  // last, the end of the last scheduled wait, or now for a copy still
  // retrying.
  function spanOf(copies) {
    const now = Date.now();
    let t0 = Infinity, t1 = -Infinity;
    for (const c of copies) {
      const { marks, waits, due } = marksOf(c);
      for (const m of marks) {
        t0 = Math.min(t0, m.at);
        t1 = Math.max(t1, m.at);
      }
      for (const w of waits) t1 = Math.max(t1, w.from + w.ms);
      if (due !== null) {
        t0 = Math.min(t0, due);
        t1 = Math.max(t1, due, now);
      }
    }
    if (!Number.isFinite(t0)) return { t0: now, t1: now + 1000 };
    return { t0, t1: Math.max(t1, t0 + 1000) };
  }

  // axis draws a copy's attempts on a time axis into a new svg element:
  // wide (the detail) or compact (a row of the list); opts.range, when
  // given, is the axis's {t0, t1}, shared by the copies drawn together.
  function axis(c, opts) {
    const compact = !!(opts && opts.compact);
    const width = compact ? 160 : 560;
    const height = compact ? 18 : 58;
    const left = compact ? 4 : 12, right = compact ? 8 : 70;
    const y = compact ? 9 : 26;
    const { marks, waits, due } = marksOf(c);
    const root = svg("svg", { class: "axis" + (compact ? " compact" : ""), viewBox: `0 0 ${width} ${height}`, width, height, role: "img" });
    if (marks.length === 0 && due === null) {
      root.setAttribute("aria-label", "no attempt yet");
      return root;
    }
    const now = Date.now();
    let { t0, t1 } = (opts && opts.range) || spanOf([c]);
    if (!(t1 > t0)) t1 = t0 + 1000;
    const span = t1 - t0;
    const x = (t) => left + ((t - t0) / span) * (width - left - right);
    root.append(svg("line", { x1: left, x2: width - right, y1: y, y2: y, class: "axis-line" }));
    const label = [];
    for (const w of waits) {
      const bar = svg("rect", { x: x(w.from), y: y - (compact ? 3 : 5), width: Math.max(1, x(w.from + w.ms) - x(w.from)), height: compact ? 6 : 10,
        class: "wait-bar", "data-wait-ms": w.ms });
      if (w.deferred) bar.classList.add("deferred");
      bar.append(svg("title", null, "waited " + fmtDur(w.ms) + " after attempt " + w.n + (w.deferred ? " (deferred: no retry spent)" : "")));
      root.append(bar);
      if (!compact) root.append(svg("text", { x: (x(w.from) + x(w.from + w.ms)) / 2, y: y - 9, class: "wait-label", "text-anchor": "middle" }, fmtDur(w.ms)));
    }
    for (const m of marks) {
      const cx = x(m.at);
      const r = compact ? 3.5 : 6;
      let mark;
      if (m.outcome === "parked") mark = svg("rect", { x: cx - r, y: y - r, width: 2 * r, height: 2 * r });
      else if (m.outcome === "failed") mark = svg("path", { d: `M ${cx - r} ${y - r} L ${cx + r} ${y + r} M ${cx + r} ${y - r} L ${cx - r} ${y + r}` });
      else if (m.outcome === "deferred") mark = svg("path", { d: `M ${cx - r} ${y} L ${cx + r} ${y} M ${cx} ${y - r} L ${cx} ${y + r}` });
      else mark = svg("circle", { cx, cy: y, r });
      mark.setAttribute("class", "mark " + m.outcome);
      mark.setAttribute("data-outcome", m.outcome);
      // A cancellation sends nothing: it stands before the attempt it stopped.
      const what = (m.n === 0 ? "replayed" : m.outcome === "cancelled" ? "cancelled before attempt " + m.n : "attempt " + m.n + " " + m.outcome) +
        (m.n !== 0 && m.reason ? " (" + m.reason + ")" : "");
      mark.append(svg("title", null, what + " at +" + fmtDur(m.at - t0)));
      root.append(mark);
      if (m.outcome !== "failed" && m.outcome !== "deferred") label.push(what);
    }
    if (due !== null) {
      const cx = x(due);
      const mark = svg("path", { d: `M ${cx} ${y - 8} L ${cx + 6} ${y} L ${cx} ${y + 8} L ${cx - 6} ${y} z`, class: "mark due", "data-outcome": "due" });
      mark.append(svg("title", null, "next attempt due at +" + fmtDur(due - t0)));
      root.append(mark);
      if (!compact) root.append(svg("text", { x: cx + 9, y: y + 4, class: "due-label" }, due > now ? "due in " + fmtDur(due - now) : "due"));
    }
    if (!compact) {
      root.append(svg("text", { x: left, y: height - 4, class: "tick" }, "0"));
      root.append(svg("text", { x: width - right, y: height - 4, class: "tick", "text-anchor": "end" }, "+" + fmtDur(span)));
    }
    const fails = marks.filter((m) => m.outcome === "failed").length;
    root.setAttribute("aria-label", (opts && opts.name ? opts.name + ": " : "") + fails + " failed attempt" + (fails === 1 ? "" : "s") +
      (waits.length ? ", waits " + waits.map((w) => fmtDur(w.ms)).join(", ") : "") +
      (label.length ? ", " + label.join(", ") : "") + (due !== null ? ", next attempt due" : ""));
    return root;
  }

  // ---- the list: a compact axis per copy ---------------------------------

  let rowsTimer = 0;

  // rowsChanged redraws the axes of the list's rows once a burst of
  // changes is over.
  function rowsChanged() {
    clearTimeout(rowsTimer);
    rowsTimer = setTimeout(loadTimelines, 400);
  }

  // loadTimelines asks the API for the page of the list shown again, with
  // each copy's attempts (times and outcomes, no error text), and draws
  // them on the rows it still shows.
  async function loadTimelines() {
    const list = document.getElementById("rows");
    const rows = [...list.querySelectorAll("tr[data-id]")];
    if (rows.length === 0 || list.dataset.query === undefined) return;
    const h = {};
    if (token()) h.Authorization = "Bearer " + token();
    const all = {};
    try {
      const res = await fetch("/v1/notifications?" + list.dataset.query + "&attempts=true", { cache: "no-store", headers: h });
      if (!res.ok) return;
      for (const n of (await res.json()).notifications || []) all[n.id] = n.copies;
    } catch {
      return; // the list's own requests say what is wrong
    }
    // One scale for the whole page: a 30s wait is six times as long as
    // a 5s one, whichever rows they are on.
    let longest = 1000;
    for (const copies of Object.values(all)) {
      const r = spanOf(copies);
      longest = Math.max(longest, r.t1 - r.t0);
    }
    for (const tr of rows) {
      const copies = all[tr.dataset.id];
      if (!copies || !tr.isConnected) continue;
      let cell = tr.querySelector("td.timelines");
      if (!cell) {
        cell = el("td", "timelines");
        tr.append(cell);
      }
      const start = spanOf(copies).t0;
      const range = { t0: start, t1: start + longest };
      cell.replaceChildren(...copies.map((c) => {
        const name = c.channel + (c.recipient ? " " + c.recipient : "");
        const a = axis(c, { compact: true, name, range });
        a.dataset.channel = c.channel;
        return a;
      }));
    }
  }

  window.relayDraw = { axis, spanOf, rowsChanged, drawPipeline, drawPipelineTable };

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", initPipeline);
  else initPipeline();
})();
