// relay's dashboard: the notification history a page at a time, searched
// and filtered; a notification's copies with every attempt and its full
// error text; replay of a parked copy; the dead letters a filter selects,
// counted, listed, and replayed or purged as a job; live updates from the
// event stream; queue depths; the circuit of each webhook endpoint, and of each mail
// server and SMS gateway with its limit. Every request carries the API token the visitor logged in
// with (kept in this tab's sessionStorage) as a bearer token. Plain
// JavaScript, no dependencies, no inline script or style (the page's
// Content-Security-Policy allows neither).
"use strict";

(() => {
  const TOKEN_KEY = "relay.token";
  // JOB_KEY holds the address of the dead-letter job the panel follows,
  // so that a reload follows it still.
  const JOB_KEY = "relay.deadJob";
  const PAGE_SIZE = 25;
  const QUEUE_REFRESH_MS = 2000;
  const ENDPOINT_REFRESH_MS = 5000;
  const ENDPOINT_PAGE_SIZE = 500; // the API's largest page
  const ENDPOINT_MAX_PAGES = 4;
  const DETAIL_REFRESH_MS = 1500;
  const LIST_RELOAD_DEBOUNCE_MS = 800;
  // A list that could not be loaded is asked for again after a pause that
  // doubles from the first to the last, and stays there.
  const LIST_RETRY_FIRST_MS = 1000;
  const LIST_RETRY_LAST_MS = 15000;
  const STREAM_RETRY_MIN_MS = 1000;
  const STREAM_RETRY_MAX_MS = 15000;
  // PAYLOAD_INDENT_DEPTH is how deep the payload is indented; below it,
  // each value is written on one line.
  const PAYLOAD_INDENT_DEPTH = 32;

  const $ = (id) => document.getElementById(id);

  // ---- requests ----------------------------------------------------------

  let token = sessionStorage.getItem(TOKEN_KEY) || "";
  let session = { public: false, authenticated: false };

  // Unauthorized is a 401: the token is missing, wrong or no longer valid.
  class Unauthorized extends Error {}

  function headers(extra) {
    const h = Object.assign({}, extra);
    if (token) h.Authorization = "Bearer " + token;
    return h;
  }

  // problemText says what an error answer says: a problem's detail, the
  // queue route's error, or the status; then each invalid field a 422
  // names, with what the API says of it.
  async function problemText(res) {
    try {
      const b = await res.json();
      let text = b.detail || b.title || res.status + " " + res.statusText;
      if (Array.isArray(b.errors) && b.errors.length > 0) {
        text += ": " + b.errors.map((e) => (e.field ? e.field + ": " : "") + e.message).join("; ");
      }
      return text;
    } catch {
      return res.status + " " + res.statusText;
    }
  }

  // call fetches path with the token and throws Unauthorized on a 401 and
  // an Error with the answer's words (and its status) on any other
  // failure; it returns the decoded body, and puts the answer's Location
  // in meta when given one.
  async function call(path, opts = {}, meta) {
    const res = await fetch(path, Object.assign({ cache: "no-store" }, opts, { headers: headers(opts.headers) }));
    if (res.status === 401) throw new Unauthorized(await problemText(res));
    if (!res.ok) {
      const err = new Error(await problemText(res));
      err.status = res.status;
      throw err;
    }
    if (meta) meta.location = res.headers.get("Location") || "";
    return res.json();
  }

  function message(err) {
    return String(err && err.message ? err.message : err);
  }

  // ---- session: log-in, public mode, log-out -----------------------------

  let running = false;

  async function begin() {
    let s;
    try {
      const res = await fetch("/dashboard/session", { cache: "no-store", headers: headers() });
      if (res.status === 401) {
        forget();
        showLogin("The API does not accept the saved token any more: log in again.");
        return;
      }
      if (!res.ok) throw new Error(await problemText(res));
      s = await res.json();
    } catch (err) {
      showLogin("The dashboard cannot be reached: " + message(err));
      return;
    }
    session = s;
    if (session.authenticated || session.public) showApp();
    else showLogin("");
  }

  // forget drops the token, and the rows it was shown: the next token,
  // perhaps another tenant's, sees only what its own list answers.
  function forget() {
    token = "";
    sessionStorage.removeItem(TOKEN_KEY);
    sessionStorage.removeItem(JOB_KEY);
    $("rows").replaceChildren();
    rowsById.clear();
    copiesById.clear();
    statusById.clear();
  }

  function showLogin(why, canGoBack) {
    stop();
    $("app").hidden = true;
    $("detail").hidden = true;
    $("login").hidden = false;
    $("login-cancel").hidden = !canGoBack;
    $("logout").hidden = true;
    $("login-open").hidden = true;
    $("mode").hidden = true;
    loginError(why);
    $("token").focus();
  }

  function loginError(text) {
    $("login-error").textContent = text || "";
    $("login-error").hidden = !text;
  }

  $("login-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const candidate = $("token").value.trim();
    if (!candidate) return;
    $("login-submit").disabled = true;
    try {
      const res = await fetch("/dashboard/session", { cache: "no-store", headers: { Authorization: "Bearer " + candidate } });
      if (res.status === 401) {
        loginError("That token is not one the API accepts.");
        return;
      }
      if (!res.ok) throw new Error(await problemText(res));
      const s = await res.json();
      if (!s.authenticated) {
        loginError("That token is not one the API accepts.");
        return;
      }
      token = candidate;
      sessionStorage.setItem(TOKEN_KEY, token);
      session = s;
      $("token").value = "";
      showApp();
    } catch (err) {
      loginError("Log-in failed: " + message(err));
    } finally {
      $("login-submit").disabled = false;
    }
  });

  $("login-cancel").addEventListener("click", () => begin());
  $("login-open").addEventListener("click", () => showLogin("", true));
  $("public-login").addEventListener("click", () => showLogin("", true));
  $("endpoints-login").addEventListener("click", () => showLogin("", true));
  $("providers-login").addEventListener("click", () => showLogin("", true));
  $("logout").addEventListener("click", () => {
    forget();
    closeDetail();
    begin();
  });

  // expired sends the visitor back to the log-in form after a 401.
  function expired(why) {
    forget();
    showLogin("The API refused the token (" + why + "): log in again.");
  }

  function showApp() {
    stop();
    $("login").hidden = true;
    $("app").hidden = false;
    const publicView = session.public && !session.authenticated;
    $("public-note").hidden = !publicView;
    $("mode").hidden = !session.public;
    $("mode").textContent = publicView ? "public dashboard" : "public dashboard · logged in";
    $("login-open").hidden = !publicView;
    $("logout").hidden = !token;
    running = true;
    loadList();
    refreshQueues();
    refreshEndpoints();
    refreshProviders();
    showDead();
    connectStream();
    if (detail.id) openDetail(detail.id);
  }

  // stop ends every loop: the stream, the queue refresh, the detail's
  // refresh.
  function stop() {
    running = false;
    stopStream();
    clearTimeout(queueTimer);
    stopEndpoints();
    stopProviders();
    stopDead();
    clearTimeout(detail.timer);
    clearTimeout(listTimer);
    clearTimeout(listRetry);
  }

  // failed handles an error of a background request: back to the log-in
  // form on a 401, else a notice.
  function failed(what, err) {
    if (err instanceof Unauthorized) {
      expired(err.message);
      return;
    }
    appError(what + ": " + message(err));
  }

  function appError(text) {
    $("app-error").textContent = text || "";
    $("app-error").hidden = !text;
  }

  // ---- the list ----------------------------------------------------------

  const filters = { q: "", status: "", channel: "" };
  let pages = [""]; // the cursor of every page up to the current one
  let nextCursor = "";
  let listSeq = 0;
  let listTimer = 0;
  let listRetry = 0; // the timer of the next try after a failed load
  let listRetryMs = 0; // its pause; 0 after a load that worked
  const rowsById = new Map();

  async function loadList() {
    const params = new URLSearchParams();
    if (filters.q) params.set("q", filters.q);
    if (filters.status) params.set("status", filters.status);
    if (filters.channel) params.set("channel", filters.channel);
    params.set("limit", String(PAGE_SIZE));
    const cursor = pages[pages.length - 1];
    if (cursor) params.set("cursor", cursor);
    const seq = ++listSeq;
    clearTimeout(listRetry);
    listRetry = 0;
    try {
      const body = await call("/v1/notifications?" + params.toString());
      if (seq !== listSeq || !running) return;
      listRetryMs = 0;
      // The query of the page shown, which draw.js asks again with the
      // copies' attempts for the rows' time axes.
      $("rows").dataset.query = params.toString();
      drawList(body.notifications || []);
      nextCursor = body.next_cursor || "";
      drawPager();
      appError("");
    } catch (err) {
      if (seq !== listSeq || !running) return;
      failed("The list could not be loaded", err);
      if (err instanceof Unauthorized) return;
      // A busy or restarting API: ask again, however quiet the pipeline
      // is, rather than wait for an event to bring a reload.
      listRetryMs = Math.min(listRetryMs ? 2 * listRetryMs : LIST_RETRY_FIRST_MS, LIST_RETRY_LAST_MS);
      listRetry = setTimeout(() => {
        listRetry = 0;
        if (running) loadList();
      }, listRetryMs);
    }
  }

  // reloadSoon reloads the list once the events of a burst are in.
  function reloadSoon() {
    if (listTimer) return;
    listTimer = setTimeout(() => {
      listTimer = 0;
      if (running) loadList();
    }, LIST_RELOAD_DEBOUNCE_MS);
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }

  // copyKey names one copy of a notification: its channel and recipient
  // ("" for a copy of a whole channel).
  function copyKey(channel, recipient) {
    return channel + "\u0000" + (recipient || "");
  }

  // chip shows a channel's status, as the history derives it (the most
  // pressing of its copies'); with a copy per recipient, how many of them
  // are in it, and each recipient's in its title.
  function chip(channel, status, copies) {
    let text = channel + " · " + status;
    if (copies.length > 1) {
      const n = copies.filter((c) => c.status === status).length;
      text = channel + " · " + (n === copies.length ? n + " " + status : n + " of " + copies.length + " " + status);
    }
    const c = el("span", "chip " + status, text);
    c.dataset.channel = channel;
    c.dataset.status = status;
    c.title = copies.filter((x) => x.recipient).map((x) => x.recipient + ": " + x.status).join("\n");
    return c;
  }

  // drawList shows a page of the list. A row already on the page is
  // updated in place, so a reload that changes nothing changes no element
  // (and a click on a row is never lost to a redraw).
  function drawList(items) {
    const sameOrder = items.length === rowsById.size && items.every((n, i) => $("rows").children[i] === rowsById.get(n.id));
    const rows = items.map((n) => {
      const old = rowsById.get(n.id);
      if (old) {
        updateRow(old, n);
        return old;
      }
      return makeRow(n);
    });
    if (!sameOrder) {
      rowsById.clear();
      for (const tr of rows) rowsById.set(tr.dataset.id, tr);
      $("rows").replaceChildren(...rows);
      for (const id of copiesById.keys()) if (!rowsById.has(id)) copiesById.delete(id);
      for (const id of statusById.keys()) if (!rowsById.has(id)) statusById.delete(id);
    }
    $("empty").hidden = rows.length > 0;
    markSelected();
    if (window.relayDraw) window.relayDraw.rowsChanged();
  }

  function makeRow(n) {
    const tr = el("tr", "row");
    tr.dataset.id = n.id;
    const idCell = el("td", "id");
    const open = el("button", "open", n.id);
    open.type = "button";
    open.title = "Show " + n.id;
    idCell.append(open);
    // A named tenant's notification says whose it is: an operator's list
    // holds every tenant's (the default tenant's carry none).
    if (n.tenant) {
      const tenant = el("span", "tenant", n.tenant);
      tenant.title = "Tenant " + n.tenant;
      idCell.append(" ", tenant);
    }
    const created = el("td", "when", fmtTime(n.created_at));
    created.title = n.created_at;
    const recipients = el("td", "recipients", (n.recipients || []).join(", "));
    recipients.title = recipients.textContent;
    tr.append(idCell, created, el("td", "copies"), recipients);
    tr.addEventListener("click", () => openDetail(n.id));
    updateRow(tr, n);
    return tr;
  }

  // The copies of each row's notification, by copyKey, and the status of
  // each of its channels, as the list answers them: what its chips show,
  // kept up to date by the live events.
  const copiesById = new Map();
  const statusById = new Map();

  // updateRow sets the status chip of each channel, touching only those
  // that changed.
  function updateRow(tr, n) {
    const copies = new Map();
    for (const c of n.copies || []) copies.set(copyKey(c.channel, c.recipient), Object.assign({}, c));
    for (const [ch, st] of Object.entries(n.status || {})) {
      if (![...copies.values()].some((c) => c.channel === ch)) copies.set(copyKey(ch, ""), { channel: ch, status: st });
    }
    copiesById.set(n.id, copies);
    statusById.set(n.id, Object.assign({}, n.status));
    tr.dataset.channels = JSON.stringify(n.channels || []);
    drawChips(tr);
  }

  // drawChips draws a row's chips from its channels' statuses and its
  // copies: one per channel, in the order of the notification's channels,
  // then of the copies. A channel nothing is known of yet is queued.
  function drawChips(tr) {
    const copies = [...(copiesById.get(tr.dataset.id) || new Map()).values()];
    const status = statusById.get(tr.dataset.id) || {};
    const order = JSON.parse(tr.dataset.channels || "[]");
    for (const c of copies) if (!order.includes(c.channel)) order.push(c.channel);
    const cell = tr.querySelector(".copies");
    const chips = [...cell.children];
    const fresh = order.map((ch) => {
      const mine = copies.filter((c) => c.channel === ch);
      const st = status[ch] || "queued";
      return chip(ch, st, mine.length ? mine : [{ channel: ch, status: st }]);
    });
    const same = chips.length === fresh.length && fresh.every((c, i) =>
      chips[i].dataset.channel === c.dataset.channel && chips[i].dataset.status === c.dataset.status &&
      chips[i].textContent === c.textContent && chips[i].title === c.title);
    if (!same) cell.replaceChildren(...fresh);
  }

  function drawPager() {
    $("newest").disabled = pages.length <= 1;
    $("older").disabled = !nextCursor;
    $("page-info").textContent = "page " + pages.length;
  }

  $("older").addEventListener("click", () => {
    if (!nextCursor) return;
    pages.push(nextCursor);
    loadList();
  });
  $("newest").addEventListener("click", () => {
    pages = [""];
    loadList();
  });

  function applyFilters() {
    filters.q = $("search").value.trim();
    filters.status = $("status").value;
    filters.channel = $("channel").value;
    pages = [""];
    loadList();
  }

  $("filters").addEventListener("submit", (e) => {
    e.preventDefault();
    applyFilters();
  });
  $("status").addEventListener("change", applyFilters);
  $("channel").addEventListener("change", applyFilters);
  $("clear").addEventListener("click", () => {
    $("search").value = "";
    $("status").value = "";
    $("channel").value = "";
    applyFilters();
  });

  // ---- live updates ------------------------------------------------------

  // Each event carries what the history derives from it: the status it
  // leads its copy to (ev.status) and its rank within its attempt
  // (ev.rank). The greatest (round, attempt, rank) shown per copy: events
  // arrive from several processes, so a replay's own event can come after
  // the delivery it led to. An older event never overwrites a newer
  // status.
  const shown = new Map();

  function newest(ev) {
    const key = ev.id + "\u0000" + copyKey(ev.channel, ev.recipient);
    const at = [ev.round || 0, ev.attempt || 0, ev.rank ?? -1];
    const had = shown.get(key);
    if (had && (had[0] - at[0] || had[1] - at[1] || had[2] - at[2]) > 0) return false;
    shown.set(key, at);
    if (shown.size > 5000) shown.delete(shown.keys().next().value);
    return true;
  }

  function onEvent(ev) {
    if (!ev || !ev.id) return;
    const tr = rowsById.get(ev.id);
    const status = ev.status;
    if (tr && status && ev.channel && newest(ev)) {
      let copies = copiesById.get(ev.id);
      if (!copies) copiesById.set(ev.id, (copies = new Map()));
      const key = copyKey(ev.channel, ev.recipient);
      const c = copies.get(key) || { channel: ev.channel, recipient: ev.recipient || "" };
      c.status = status;
      copies.set(key, c);
      if ([...copies.values()].filter((x) => x.channel === ev.channel).length === 1) {
        // The channel's one copy: its status is the channel's.
        let st = statusById.get(ev.id);
        if (!st) statusById.set(ev.id, (st = {}));
        st[ev.channel] = status;
      } else {
        // A channel of several copies shows the most pressing of theirs:
        // the list answers it.
        reloadSoon();
      }
      drawChips(tr);
      if (window.relayDraw) window.relayDraw.rowsChanged();
      tr.classList.remove("flash");
      void tr.offsetWidth; // restart the animation
      tr.classList.add("flash");
    } else if (!tr && pages.length === 1) {
      // A notification not on the newest page may belong there now.
      reloadSoon();
    }
    if (ev.id === detail.id) detailSoon();
  }

  let streamCtl = null;
  let streamTimer = 0;
  let streamGen = 0;
  let streamRetry = STREAM_RETRY_MIN_MS;
  let streamedBefore = false;

  function setConn(state, text) {
    $("conn").dataset.state = state;
    $("conn-text").textContent = text;
  }

  function stopStream() {
    streamGen++;
    clearTimeout(streamTimer);
    if (streamCtl) streamCtl.abort();
    streamCtl = null;
    streamedBefore = false;
    setConn("idle", "not connected");
  }

  // connectStream reads /dashboard/events with fetch (EventSource cannot
  // send a token) and reconnects with a growing pause when it ends.
  async function connectStream() {
    const gen = ++streamGen;
    const ctl = new AbortController();
    streamCtl = ctl;
    setConn("connecting", "connecting…");
    try {
      const res = await fetch("/dashboard/events", {
        cache: "no-store",
        headers: headers({ Accept: "text/event-stream" }),
        signal: ctl.signal,
      });
      if (res.status === 401) {
        expired(await problemText(res));
        return;
      }
      if (!res.ok || !res.body) throw new Error(await problemText(res));
      streamRetry = STREAM_RETRY_MIN_MS;
      setConn("live", session.authenticated ? "live" : "live, redacted");
      if (streamedBefore) {
        // What happened while the stream was down is in the history.
        loadList();
        if (detail.id) loadDetail();
      }
      streamedBefore = true;
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          onFrame(buf.slice(0, i));
          buf = buf.slice(i + 2);
        }
      }
    } catch (err) {
      if (ctl.signal.aborted || gen !== streamGen) return;
      setConn("down", "stream failed: " + message(err));
    }
    if (ctl.signal.aborted || gen !== streamGen || !running) return;
    const wait = streamRetry;
    streamRetry = Math.min(streamRetry * 2, STREAM_RETRY_MAX_MS);
    setConn("down", "disconnected, retrying in " + fmtDur(wait));
    streamTimer = setTimeout(connectStream, wait);
  }

  // onFrame handles one Server-Sent Event: comments and retry hints are
  // skipped, "attempt" events applied.
  function onFrame(text) {
    let event = "message";
    const data = [];
    for (const line of text.split("\n")) {
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") event = value;
      else if (field === "data") data.push(value);
    }
    if (event !== "attempt" || data.length === 0) return;
    try {
      onEvent(JSON.parse(data.join("\n")));
    } catch {
      // not an event: skip it
    }
  }

  // ---- the detail --------------------------------------------------------

  const detail = { id: "", timer: 0, seq: 0, replayedAt: 0, notes: new Map(), deadLetters: null, soon: 0 };

  function openDetail(id) {
    if (detail.id !== id) {
      detail.notes = new Map();
      detail.deadLetters = null;
      detail.replayedAt = 0;
    }
    detail.id = id;
    $("detail-title").textContent = id;
    $("detail").hidden = false;
    // The address bar names the open detail: a link to paste.
    showRoute(id);
    markSelected();
    loadDetail();
  }

  function closeDetail() {
    detail.id = "";
    clearTimeout(detail.timer);
    $("detail").hidden = true;
    showRoute("");
    markSelected();
  }

  // ---- the address: #/n/<id> opens a detail, ?code= logs in once ---------

  // route reads the fragment: "#/n/ntf_…" names a notification to open,
  // "?code=…" after it (or alone) a one-time link's code (relay
  // dashboard).
  function route() {
    const frag = location.hash.replace(/^#/, "");
    const q = frag.indexOf("?");
    const path = q < 0 ? frag : frag.slice(0, q);
    const params = new URLSearchParams(q < 0 ? "" : frag.slice(q + 1));
    const m = path.match(/^\/n\/(.+)$/);
    let id = "";
    if (m) {
      try {
        id = decodeURIComponent(m[1]);
      } catch {
        id = "";
      }
    }
    return { id, code: params.get("code") || "" };
  }

  // showRoute puts the detail id (or none) in the address bar, without a
  // new history entry and without any code.
  function showRoute(id) {
    const want = id ? "#/n/" + encodeURIComponent(id) : "";
    if (location.hash !== want) history.replaceState(null, "", location.pathname + location.search + want);
  }

  // redeem exchanges a one-time link's code for the token it stands for,
  // once; it says why when it cannot.
  async function redeem(code) {
    try {
      const res = await fetch("/dashboard/link", {
        method: "POST",
        cache: "no-store",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ code }),
      });
      if (!res.ok) return "This link's code was used already, has expired (it works once, for two minutes) or is not one this API issued: run relay dashboard again, or log in with the token.";
      const body = await res.json();
      if (!body.token) return "The link could not be used: the API answered no token.";
      token = body.token;
      sessionStorage.setItem(TOKEN_KEY, token);
      return "";
    } catch (err) {
      return "The link could not be used: " + message(err);
    }
  }

  // start reads the address the page was loaded at: a code logs in (and
  // leaves the address), a notification's detail opens once the page
  // shows the history.
  async function start() {
    const r = route();
    showRoute(r.id); // the code never stays in the address bar or the history
    if (r.id) detail.id = r.id;
    let why = "";
    if (r.code) why = await redeem(r.code);
    await begin();
    if (why && !$("login").hidden) loginError(why);
    else if (why) appError(why);
  }

  window.addEventListener("hashchange", () => {
    const r = route();
    if (r.code) {
      start();
      return;
    }
    if (r.id && r.id !== detail.id && !$("app").hidden) openDetail(r.id);
    else if (!r.id && detail.id) closeDetail();
  });

  $("detail-close").addEventListener("click", closeDetail);
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && !$("detail").hidden) closeDetail();
  });

  function markSelected() {
    for (const [id, tr] of rowsById) tr.classList.toggle("selected", id === detail.id);
  }

  function detailSoon() {
    if (detail.soon) return;
    detail.soon = setTimeout(() => {
      detail.soon = 0;
      if (detail.id && running) loadDetail();
    }, 300);
  }

  async function loadDetail() {
    const id = detail.id;
    if (!id) return;
    const seq = ++detail.seq;
    clearTimeout(detail.timer);
    let n;
    try {
      n = await call("/v1/notifications/" + encodeURIComponent(id));
    } catch (err) {
      if (seq !== detail.seq || !running) return;
      if (err instanceof Unauthorized) {
        expired(err.message);
        return;
      }
      $("copies").replaceChildren(el("p", "error", "The notification could not be loaded: " + message(err)));
      detail.timer = setTimeout(loadDetail, DETAIL_REFRESH_MS * 2);
      return;
    }
    if (seq !== detail.seq || id !== detail.id || !running) return;
    const parked = n.copies.some((c) => c.status === "parked");
    if (parked && session.authenticated && detail.deadLetters === null) loadDeadLetters(id);
    try {
      drawDetail(n);
    } catch (err) {
      // Whatever failed to draw, the detail goes on following the copies.
      appError("The notification could not be drawn: " + message(err));
    }
    // Follow a copy that is not done yet, and one just replayed, whose
    // replay the history may not have recorded yet.
    const moving = n.copies.some((c) => c.status === "queued" || c.status === "retrying" || c.status === "scheduled") ||
      Date.now() - detail.replayedAt < 15000;
    if (moving) detail.timer = setTimeout(loadDetail, DETAIL_REFRESH_MS);
  }

  // loadDeadLetters reads the parked messages of the notification, whose
  // headers the detail shows.
  async function loadDeadLetters(id) {
    detail.deadLetters = [];
    try {
      const body = await call("/v1/dead-letters?id=" + encodeURIComponent(id));
      if (id !== detail.id) return;
      detail.deadLetters = body.dead_letters || [];
      if (lastDetail && lastDetail.id === id) drawDetail(lastDetail);
    } catch (err) {
      if (err instanceof Unauthorized) expired(err.message);
    }
  }

  let lastDetail = null;

  function drawDetail(n) {
    lastDetail = n;
    const meta = $("detail-meta");
    meta.replaceChildren();
    const item = (k, v) => meta.append(el("dt", null, k), el("dd", null, v));
    item("Created", fmtTime(n.created_at, true));
    if (n.due_at) {
      const left = Date.parse(n.due_at) - Date.now();
      item("Due", fmtTime(n.due_at, true) + (left > 0 ? " (in " + fmtDur(left) + ")" : ""));
    }
    item("Channels", (n.channels || []).join(", ") || "—");
    item("Recipients", (n.recipients || []).join(", ") || "—");
    if (!n.accepted) item("Note", "known from its events only: the API's record of it has not arrived");
    $("detail-redacted").hidden = !n.redacted;
    $("copies").replaceChildren(...n.copies.map((c) => drawCopy(n, c)));
    $("payload-box").hidden = !n.payload;
    $("payload").textContent = n.payload ? payloadText(n.payload) : "";
  }

  // payloadText writes a payload as JSON.stringify(value, null, 2) does,
  // indented down to PAYLOAD_INDENT_DEPTH and on one line below, with a
  // stack of its own. A payload may nest thousands of levels deep (the
  // API once took 10,000): JSON.stringify recurses and throws a RangeError
  // long before that, and an indent per level would make lines of
  // thousands of spaces.
  function payloadText(value) {
    const out = [];
    // What is left to write, last first: a value with its depth, or text.
    const todo = [{ value, depth: 0 }];
    while (todo.length > 0) {
      const next = todo.pop();
      if (typeof next === "string") {
        out.push(next);
        continue;
      }
      const { value: v, depth } = next;
      if (v === null || typeof v !== "object") {
        out.push(JSON.stringify(v) ?? "null");
        continue;
      }
      const array = Array.isArray(v);
      const keys = array ? null : Object.keys(v);
      const n = array ? v.length : keys.length;
      const [open, close] = array ? ["[", "]"] : ["{", "}"];
      if (n === 0) {
        out.push(open + close);
        continue;
      }
      const indent = depth < PAYLOAD_INDENT_DEPTH;
      const inner = indent ? "\n" + "  ".repeat(depth + 1) : "";
      todo.push((indent ? "\n" + "  ".repeat(depth) : "") + close);
      for (let i = n - 1; i >= 0; i--) {
        todo.push({ value: array ? v[i] : v[keys[i]], depth: depth + 1 });
        todo.push((i > 0 ? "," : "") + inner + (array ? "" : JSON.stringify(keys[i]) + (indent ? ": " : ":")));
      }
      todo.push(open);
    }
    return out.join("");
  }

  function drawCopy(n, c) {
    const box = el("section", "copy " + c.status);
    box.dataset.channel = c.channel;
    box.dataset.recipient = c.recipient || "";
    box.dataset.status = c.status;
    const head = el("div", "copy-head");
    const title = el("h3", null, c.channel);
    if (c.recipient) title.append(" ", el("span", "recipient", c.recipient));
    head.append(title, el("span", "badge " + c.status, c.status));
    const facts = [];
    if (c.reason) facts.push(c.reason);
    facts.push(c.attempt_count + (c.attempt_count === 1 ? " attempt" : " attempts"));
    if (c.round > 0) facts.push("round " + c.round);
    if (c.status === "scheduled" && c.next_attempt_at) {
      // A countdown, redrawn with every refresh of the detail.
      const left = Date.parse(c.next_attempt_at) - Date.now();
      facts.push("due " + fmtTime(c.next_attempt_at, true) + (left > 0 ? " (in " + fmtDur(left) + ")" : " (on its way)"));
    } else if (c.next_attempt_at) facts.push("next attempt " + fmtTime(c.next_attempt_at));
    head.append(el("span", "facts", facts.join(" · ")));
    box.append(head);
    // The attempts on a time axis: failures, the scheduled waits, the end.
    // One axis for every copy of the notification.
    if (window.relayDraw) {
      box.append(window.relayDraw.axis(c, { name: c.channel + (c.recipient ? " " + c.recipient : ""), range: window.relayDraw.spanOf(n.copies) }));
    }

    if (c.status === "parked") {
      const bar = el("div", "replay-bar");
      // A recipient's copy (email) is replayed alone; a channel's copy
      // without one, with whatever else of the channel is parked for the
      // notification.
      const button = el("button", "replay", c.recipient ? "Replay this copy" : "Replay");
      button.type = "button";
      if (c.recipient) button.title = "Replay the copy for " + c.recipient + " only";
      if (!session.authenticated) {
        button.disabled = true;
        button.title = "Replay needs the API token: log in";
      }
      button.addEventListener("click", () => replay(n, c, button));
      let what;
      if (c.recipient) {
        const others = n.copies.some((x) => x.channel === c.channel && x.recipient && x.recipient !== c.recipient);
        what = "the parked copy for " + c.recipient + " back to " + c.channel + "-queue for a new round of attempts" +
          (others ? "; the other recipients' copies stay as they are" : "");
      } else {
        const parked = n.copies.filter((x) => x.channel === c.channel && x.status === "parked").length;
        what = (parked > 1 ? "the " + parked + " parked " + c.channel + " copies" : "the parked copy") +
          " back to " + c.channel + "-queue for a new round of attempts";
      }
      bar.append(button, el("span", "muted", "sends " + what));
      box.append(bar);
    }
    const note = detail.notes.get(copyKey(c.channel, c.recipient));
    if (note) {
      const p = el("p", "replay-note " + note.kind, note.text);
      p.setAttribute("role", "status");
      box.append(p);
    }

    const table = el("table", "attempts");
    const head2 = el("tr");
    // "Via" only for a channel with several providers (SMTP_PROVIDERS).
    const via = c.attempts.some((a) => a.provider);
    const heads = ["Round", "Attempt", "At", "Outcome", "Waited", "Took", "Next in", "Error"];
    if (via) heads.splice(4, 0, "Via");
    for (const h of heads) head2.append(el("th", null, h));
    const thead = el("thead");
    thead.append(head2);
    const tbody = el("tbody");
    for (const a of c.attempts) {
      // A failure whose wait is a deferral (a rate limit's slot, a
      // downstream's Retry-After) spent no retry: it reads "deferred".
      const shown = a.outcome === "failed" && a.deferred ? "deferred" : a.outcome;
      const tr = el("tr", "attempt " + shown);
      tr.dataset.outcome = a.outcome;
      if (a.deferred) tr.dataset.deferred = "true";
      tr.dataset.round = String(a.round);
      tr.dataset.n = String(a.n);
      const outcome = a.reason ? shown + " (" + a.reason + ")" : shown;
      tr.append(
        el("td", "num", String(a.round)),
        // A cancellation sent nothing: it stands before the attempt it
        // stopped, as relay status says it.
        el("td", "num", a.n === 0 ? "replay" : a.outcome === "cancelled" ? "before " + a.n : String(a.n)),
        el("td", "when", fmtTime(a.at, true)),
        el("td", "outcome", outcome),
      );
      if (via) tr.append(el("td", "provider", a.provider || ""));
      tr.append(
        el("td", "num", a.waited_ms != null ? fmtDur(a.waited_ms) : ""),
        el("td", "num", a.duration_ms != null ? fmtDur(a.duration_ms) : ""),
        el("td", "num", a.delay_ms != null && a.outcome === "failed" ? fmtDur(a.delay_ms) : ""),
      );
      const err = el("td", "error");
      if (a.error) err.append(el("pre", "error-text", a.error));
      else if (n.redacted && (a.outcome === "failed" || a.outcome === "parked")) err.append(el("span", "muted", "hidden"));
      tr.append(err);
      tbody.append(tr);
    }
    table.append(thead, tbody);
    box.append(table);

    const dead = (detail.deadLetters || []).find((d) =>
      d.source && d.source.endsWith(c.channel + "-queue") && (d.recipient || "") === (c.recipient || ""));
    if (c.status === "parked" && dead) {
      const h = el("div", "headers");
      h.append(el("h4", null, "Headers of the parked message"));
      const dl = el("dl");
      const row = (k, v) => {
        if (v === undefined || v === null || v === "") return;
        dl.append(el("dt", null, k), el("dd", null, String(v)));
      };
      row("x-dead-source", dead.source);
      row("x-dead-reason", dead.reason);
      row("x-retry-count", dead.retries);
      row("x-first-failed-at", dead.first_failed_at);
      row("x-parked-at", dead.parked_at);
      row("x-last-error", dead.last_error);
      h.append(dl);
      box.append(h);
    }
    return box;
  }

  // replay sends parked copy c of n back to its queue: a recipient's copy
  // alone, or, for a copy without a recipient, every parked copy of its
  // channel. The note goes under each copy it replays.
  async function replay(n, c, button) {
    const id = n.id;
    const channel = c.channel;
    const keys = c.recipient ? [copyKey(channel, c.recipient)]
      : n.copies.filter((x) => x.channel === channel && x.status === "parked").map((x) => copyKey(x.channel, x.recipient));
    const note = (kind, text) => {
      for (const k of keys) detail.notes.set(k, { kind, text });
    };
    const selection = { id, source: channel + "-queue" };
    if (c.recipient) selection.recipient = c.recipient;
    button.disabled = true;
    note("pending", "replaying…");
    if (lastDetail) drawDetail(lastDetail);
    try {
      const body = await call("/v1/dead-letters/replay", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(selection),
      });
      if (body.replayed > 0) {
        note("ok", "replayed: the copy" + (c.recipient ? " for " + c.recipient : "") + " is back in " + channel + "-queue");
        detail.replayedAt = Date.now();
        detail.deadLetters = null;
      } else {
        note("error", "nothing replayed: the copy is no longer parked");
      }
    } catch (err) {
      if (err instanceof Unauthorized) {
        expired(err.message);
        return;
      }
      // 404: nothing with this id is parked any more (replayed from
      // elsewhere, or purged).
      const text = err.status === 404 ? "nothing replayed: the copy is no longer parked" : "replay failed: " + message(err);
      note("error", text);
    }
    if (id === detail.id) loadDetail();
  }

  // ---- dead letters ------------------------------------------------------

  // The dead-letters panel works the API's /v1/dead-letters routes with
  // the token: a filter, sent as typed (the API checks it and names what
  // is wrong); how many parked copies it selects (a dry run) and the
  // first of them; a replay or a purge of them all as a job, followed
  // until it ends. Counts and states are the API's, shown as answered. A
  // visitor without the token (a public dashboard) gets no panel.
  const DEAD_LIST_LIMIT = 10;
  const DEAD_JOB_REFRESH_MS = 1000;
  const DEAD_FIELDS = ["channel", "reason", "source", "endpoint", "since", "until", "error", "recipient", "id"];
  const JSON_HEADERS = { "Content-Type": "application/json" };

  // counted is the filter last counted and what the API counted: the
  // actions act on it, not on inputs changed since. confirming is the
  // purge waiting for its confirmation; job the address of the job
  // followed; readFailed says the problem shown is its read's. seq and
  // jobSeq drop the answers of a count and of a job's read that come too
  // late.
  const dead = { seq: 0, jobSeq: 0, counted: null, confirming: null, job: "", readFailed: false, timer: 0, hints: false };

  function showDead() {
    const allowed = session.authenticated;
    $("dead").hidden = !allowed;
    if (!allowed) {
      dead.counted = null;
      dead.confirming = null;
      dead.job = "";
      $("dead-rows").replaceChildren();
      $("dead-job").hidden = true;
      delete $("dead-job").dataset.state;
      return;
    }
    loadDeadHints();
    drawDeadActions();
    const saved = sessionStorage.getItem(JOB_KEY);
    if (saved) {
      dead.job = saved;
      pollJob();
    }
  }

  function stopDead() {
    dead.seq++; // an answer in flight is dropped when it comes
    dead.jobSeq++;
    clearTimeout(dead.timer);
    dead.timer = 0;
  }

  // loadDeadHints offers the channels and park reasons the API's own
  // document lists as suggestions. They are only suggestions: without
  // them any text can still be sent, and the API names a wrong one.
  async function loadDeadHints() {
    if (dead.hints) return;
    dead.hints = true;
    let doc;
    try {
      doc = await call("/openapi.json");
    } catch {
      dead.hints = false; // tried again at the next log-in
      return;
    }
    const values = (path, name) => {
      const op = ((doc.paths || {})[path] || {}).get || {};
      const p = (op.parameters || []).find((x) => x.name === name);
      return (p && p.schema && Array.isArray(p.schema.enum)) ? p.schema.enum : [];
    };
    const fill = (id, list) => $(id).replaceChildren(...list.map((v) => {
      const o = el("option");
      o.value = v;
      return o;
    }));
    fill("dead-reasons", values("/v1/dead-letters", "reason"));
    fill("dead-channels", values("/v1/notifications", "channel"));
  }

  // deadFilter is the filter the inputs hold, by the API's names; the
  // times, picked in the visitor's time zone, as RFC 3339.
  function deadFilter() {
    const f = {};
    for (const name of DEAD_FIELDS) {
      let v = $("dead-" + name).value.trim();
      if (!v) continue;
      if (name === "since" || name === "until") {
        const t = new Date(v);
        if (!Number.isNaN(t.getTime())) v = t.toISOString();
      }
      f[name] = v;
    }
    return f;
  }

  // chosen is the body of a replay, purge or job for filter f: an empty
  // filter is every parked copy, which the API asks to be said (all).
  function chosen(f) {
    return Object.keys(f).length === 0 ? { all: true } : Object.assign({}, f);
  }

  function deadProblem(text) {
    dead.readFailed = false;
    $("dead-problem").textContent = text || "";
    $("dead-problem").hidden = !text;
  }

  function deadFailed(what, err) {
    if (err instanceof Unauthorized) {
      expired(err.message);
      return;
    }
    deadProblem(what + ": " + message(err));
  }

  function jobRunning() {
    return $("dead-job").dataset.state === "running";
  }

  function drawDeadActions() {
    const c = dead.counted;
    $("dead-actions").hidden = !c || c.matched === 0;
    $("dead-replay").disabled = jobRunning();
    $("dead-purge").disabled = jobRunning();
    // A count while the job walks the queue would miss what the job
    // holds: the filter is counted again when the job ends.
    $("dead-count").disabled = jobRunning();
    $("dead-count").title = jobRunning() ? "counted again when the job ends" : "";
    if (!c || jobRunning()) {
      dead.confirming = null;
      $("dead-confirm").hidden = true;
    }
  }

  // countDead asks the API how many parked copies the filter selects (a
  // dry run of the replay, which touches nothing), then for the first of
  // them. One after the other: each walks the dead-letter queue holding
  // what it read until it is done, so a walk beside it finds those
  // missing.
  async function countDead() {
    const f = deadFilter();
    const seq = ++dead.seq;
    dead.counted = null;
    drawDeadActions();
    deadProblem("");
    $("dead-count").disabled = true;
    $("dead-result").textContent = "counting…";
    delete $("dead-result").dataset.matched;
    const params = new URLSearchParams(f);
    params.set("limit", String(DEAD_LIST_LIMIT));
    try {
      const count = await call("/v1/dead-letters/replay", { method: "POST", headers: JSON_HEADERS, body: JSON.stringify(Object.assign(chosen(f), { dry_run: true })) });
      if (seq !== dead.seq || !running) return;
      const list = await call("/v1/dead-letters?" + params.toString());
      if (seq !== dead.seq || !running) return;
      dead.counted = { filter: f, matched: count.matched };
      drawDeadList(count.matched, list.dead_letters || [], Object.keys(f).length === 0);
    } catch (err) {
      if (seq !== dead.seq || !running) return;
      $("dead-result").textContent = "Not counted.";
      deadFailed("The dead letters could not be counted", err);
    } finally {
      if (seq === dead.seq) $("dead-count").disabled = jobRunning();
    }
    drawDeadActions();
  }

  function copiesText(n) {
    return fmtInt(n) + (n === 1 ? " parked copy" : " parked copies");
  }

  function drawDeadList(matched, list, all) {
    const result = $("dead-result");
    result.dataset.matched = String(matched);
    let text = (all ? "The dead-letter queue holds " : "The filter selects ") + copiesText(matched);
    if (list.length > 0 && list.length < matched) text += "; the first " + fmtInt(list.length) + " below";
    result.textContent = text + ".";
    $("dead-rows").replaceChildren(...list.map((d) => {
      const tr = el("tr", "dead-letter");
      tr.dataset.id = d.id;
      tr.dataset.reason = d.reason || "";
      tr.dataset.source = d.source || "";
      const open = el("button", "link", d.id);
      open.type = "button";
      open.title = "Show " + d.id;
      open.addEventListener("click", () => openDetail(d.id));
      const id = el("td", "id");
      id.append(open);
      const parked = el("td", "when", d.parked_at ? fmtTime(d.parked_at) : "");
      parked.title = d.parked_at || "";
      const error = el("td", "error", d.last_error || "");
      error.title = d.last_error || "";
      tr.append(id, el("td", "source", d.source || ""), el("td", "recipient", d.recipient || ""), el("td", "reason", d.reason || ""),
        el("td", "num", String(d.retries ?? "")), parked, error);
      return tr;
    }));
    $("dead-table").hidden = list.length === 0;
  }

  // A filter changed after its count is not the one counted: the actions
  // wait for a new count.
  $("dead-filters").addEventListener("input", () => {
    if (!dead.counted) return;
    dead.seq++;
    dead.counted = null;
    delete $("dead-result").dataset.matched;
    $("dead-result").textContent = "The filter changed: count again.";
    $("dead-count").disabled = jobRunning();
    drawDeadActions();
  });
  $("dead-filters").addEventListener("submit", (e) => {
    e.preventDefault();
    countDead();
  });
  $("dead-clear").addEventListener("click", () => {
    for (const name of DEAD_FIELDS) $("dead-" + name).value = "";
    dead.seq++;
    dead.counted = null;
    $("dead-count").disabled = jobRunning();
    $("dead-rows").replaceChildren();
    $("dead-table").hidden = true;
    delete $("dead-result").dataset.matched;
    $("dead-result").textContent = "No filter: Count counts every parked copy.";
    deadProblem("");
    drawDeadActions();
  });

  $("dead-replay").addEventListener("click", () => {
    if (dead.counted) startJob("replay", dead.counted.filter);
  });

  // A purge is confirmed in the page, naming how many copies the API
  // counts for it now (the purge's own dry run).
  $("dead-purge").addEventListener("click", async () => {
    const c = dead.counted;
    if (!c) return;
    deadProblem("");
    $("dead-purge").disabled = true;
    try {
      const count = await call("/v1/dead-letters/purge", { method: "POST", headers: JSON_HEADERS, body: JSON.stringify(Object.assign(chosen(c.filter), { dry_run: true })) });
      if (c !== dead.counted || !running) return;
      if (count.matched === 0) {
        deadProblem("Nothing to purge: the filter selects no parked copy now.");
        return;
      }
      dead.confirming = { filter: c.filter, matched: count.matched };
      const box = $("dead-confirm");
      box.dataset.matched = String(count.matched);
      const what = Object.keys(c.filter).length === 0 ? "every parked copy, " + fmtInt(count.matched) + " now" : "the " + copiesText(count.matched) + " the filter selects";
      $("dead-confirm-text").textContent = "Purge " + what + "? They are deleted for good: a purge cannot be undone.";
      $("dead-confirm-yes").textContent = "Purge " + fmtInt(count.matched);
      box.hidden = false;
      $("dead-confirm-no").focus();
    } catch (err) {
      deadFailed("The purge could not be counted", err);
    } finally {
      $("dead-purge").disabled = jobRunning();
    }
  });
  $("dead-confirm-no").addEventListener("click", () => {
    dead.confirming = null;
    $("dead-confirm").hidden = true;
  });
  $("dead-confirm-yes").addEventListener("click", () => {
    const c = dead.confirming;
    dead.confirming = null;
    $("dead-confirm").hidden = true;
    if (c) startJob("purge", c.filter);
  });

  // startJob asks the API for a job that replays or purges what filter f
  // selects, and follows it at the address the API answers.
  async function startJob(action, f) {
    deadProblem("");
    $("dead-replay").disabled = true;
    $("dead-purge").disabled = true;
    const body = Object.assign({ action }, chosen(f));
    if (action === "purge") body.confirm = true;
    const meta = {};
    try {
      const job = await call("/v1/dead-letters/jobs", { method: "POST", headers: JSON_HEADERS, body: JSON.stringify(body) }, meta);
      if (!running) return;
      dead.job = meta.location;
      dead.jobSeq++;
      sessionStorage.setItem(JOB_KEY, dead.job);
      // The count before the job is history now.
      delete $("dead-result").dataset.matched;
      $("dead-result").textContent = "The job is under way: the filter is counted again when it ends.";
      drawJob(job);
      clearTimeout(dead.timer);
      dead.timer = setTimeout(pollJob, DEAD_JOB_REFRESH_MS);
    } catch (err) {
      deadFailed("The " + action + " could not start", err);
    }
    drawDeadActions();
  }

  // pollJob reads the job followed, and again every second while it runs;
  // once it ends, the filter is counted again, to show what is left.
  async function pollJob() {
    clearTimeout(dead.timer);
    const where = dead.job;
    if (!where || !running) return;
    const seq = ++dead.jobSeq;
    let job;
    try {
      job = await call(where);
    } catch (err) {
      if (where !== dead.job || seq !== dead.jobSeq || !running) return;
      if (err.status === 404) {
        dead.job = "";
        sessionStorage.removeItem(JOB_KEY);
        $("dead-job").hidden = true;
        delete $("dead-job").dataset.state;
        drawDeadActions();
      } else {
        dead.timer = setTimeout(pollJob, DEAD_JOB_REFRESH_MS * 3);
      }
      deadFailed("The job could not be read", err);
      dead.readFailed = !(err instanceof Unauthorized);
      return;
    }
    if (where !== dead.job || seq !== dead.jobSeq || !running) return;
    // A read that failed before is answered now: its problem is over.
    if (dead.readFailed) deadProblem("");
    dead.readFailed = false;
    drawJob(job);
    if (job.state === "running") {
      dead.timer = setTimeout(pollJob, DEAD_JOB_REFRESH_MS);
      return;
    }
    sessionStorage.removeItem(JOB_KEY);
    if (dead.counted) countDead();
  }

  // drawJob shows a job as the API answers it: its state and counts.
  function drawJob(job) {
    const box = $("dead-job");
    box.hidden = false;
    box.dataset.id = job.id;
    box.dataset.state = job.state;
    box.dataset.matched = String(job.matched);
    box.dataset.done = String(job.done);
    box.dataset.failed = String(job.failed);
    const verb = job.action === "purge" ? "purged" : "replayed";
    const parts = [fmtInt(job.matched) + " matched", fmtInt(job.done) + " " + verb, fmtInt(job.failed) + " failed (left parked)"];
    let text = (job.action === "purge" ? "Purge" : "Replay") + " job " + job.id + ": " + job.state + " · " + parts.join(" · ");
    text += " · started " + fmtTime(job.started_at);
    if (job.finished_at) text += ", ended " + fmtTime(job.finished_at);
    if (job.takeovers > 0) text += " · taken over " + job.takeovers + (job.takeovers === 1 ? " time" : " times");
    // A cancelled job's counts are those it last stored: it may have done
    // more before it noticed.
    if (job.state === "cancelled") text += " · counts as the job last stored them: a new count says what is still parked";
    $("dead-job-text").textContent = text;
    $("dead-job-error").textContent = job.last_error ? "Last error: " + job.last_error : "";
    $("dead-job-error").hidden = !job.last_error;
    $("dead-cancel").hidden = job.state !== "running";
    $("dead-cancel").disabled = false;
    drawDeadActions();
  }

  // Cancelling stops the job at its next lease renewal: the API answers
  // the job as it stands, and the page goes on reading it until it ends.
  $("dead-cancel").addEventListener("click", async () => {
    const where = dead.job;
    if (!where) return;
    $("dead-cancel").disabled = true;
    try {
      const job = await call(where, { method: "DELETE" });
      if (where !== dead.job || !running) return;
      drawJob(job);
    } catch (err) {
      deadFailed("The job could not be cancelled", err);
      $("dead-cancel").disabled = false;
    }
    if (where === dead.job) pollJob();
  });

  // ---- queue depths ------------------------------------------------------

  let queueTimer = 0;

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

  // The backlog of each work queue and endpoint, in seconds, as the
  // workers last found it (the API's figures, see docs/template.md):
  // shown beside the depths and in the endpoints' rows.
  let queueBacklog = {};
  let endpointBacklog = {};

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
      const behind = queueBacklog[name];
      if (behind !== undefined) {
        const b = el("span", "q-backlog", fmtDur(behind * 1000) + " behind");
        b.title = "how long the message a worker took last had waited, ready, in this queue";
        q.dataset.backlog = String(behind);
        q.append(b);
      }
      return q;
    }));
  }

  async function refreshQueues() {
    if (!running) return;
    try {
      const body = await call("/dashboard/queues");
      queueBacklog = body.backlog_seconds || {};
      endpointBacklog = body.endpoint_backlog_seconds || {};
      drawQueues(body.queues || {});
      for (const [id, tr] of endpointRows) updateBacklog(tr, id);
      $("queues").classList.remove("stale");
      $("queues").title = "";
    } catch (err) {
      if (err instanceof Unauthorized) {
        expired(err.message);
        return;
      }
      const strip = $("queues");
      strip.classList.add("stale");
      if (!strip.querySelector(".queue")) strip.replaceChildren(el("span", "muted", "queue depths unavailable"));
      strip.title = message(err);
    }
    if (running) queueTimer = setTimeout(refreshQueues, QUEUE_REFRESH_MS);
  }

  // ---- endpoints ---------------------------------------------------------

  // The endpoints come from the API's GET /v1/endpoints, which needs the
  // token even on a public dashboard. They are read every few seconds
  // while the page is visible, and not at all while it is hidden.
  let endpointTimer = 0;
  let endpointSeq = 0;
  const endpointRows = new Map();

  function stopEndpoints() {
    clearTimeout(endpointTimer);
    endpointTimer = 0;
    endpointSeq++; // a request in flight is dropped when it ends
  }

  // hostOf is the host (and port) of an endpoint's URL: never its path or
  // query, which may hold a receiver's own secret.
  function hostOf(raw) {
    try {
      return new URL(raw).host;
    } catch {
      return "";
    }
  }

  // hostsOnly cuts the path and query off every URL in an error text: the
  // sender's errors name the URL it posted to, path and all.
  function hostsOnly(text) {
    return String(text || "").replace(/\b(https?:\/\/[^\s/?#"'<>]+)[/?#][^\s"'<>]*?([:;,.)]?)(?=[\s"'<>]|$)/gi, "$1$2");
  }

  // readEndpoints reads every page of the endpoints, up to a bound.
  async function readEndpoints() {
    const all = [];
    let cursor = "";
    for (let i = 0; i < ENDPOINT_MAX_PAGES; i++) {
      const params = new URLSearchParams({ limit: String(ENDPOINT_PAGE_SIZE) });
      if (cursor) params.set("cursor", cursor);
      const body = await call("/v1/endpoints?" + params.toString());
      all.push(...(body.endpoints || []));
      cursor = body.next_cursor || "";
      if (!cursor) break;
    }
    return { endpoints: all, more: cursor !== "" };
  }

  async function refreshEndpoints() {
    stopEndpoints();
    if (!running) return;
    const locked = !session.authenticated;
    $("endpoints-locked").hidden = !locked;
    if (locked) {
      endpointRows.clear();
      $("endpoints").replaceChildren();
      $("endpoints-table").hidden = true;
      endpointStatus("");
      return;
    }
    if (document.hidden) return; // visibilitychange starts it again
    const seq = endpointSeq;
    try {
      const got = await readEndpoints();
      if (seq !== endpointSeq || !running) return;
      drawEndpoints(got.endpoints, got.more);
      $("endpoints-table").classList.remove("stale");
    } catch (err) {
      if (seq !== endpointSeq || !running) return;
      if (err instanceof Unauthorized) {
        expired(err.message);
        return;
      }
      // Keep the last rows, marked stale, and say why.
      $("endpoints-table").classList.add("stale");
      endpointStatus("Endpoints unavailable: " + message(err));
    }
    if (running && !document.hidden) endpointTimer = setTimeout(refreshEndpoints, ENDPOINT_REFRESH_MS);
  }

  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      stopEndpoints();
      stopProviders();
    } else if (running) {
      refreshEndpoints();
      refreshProviders();
    }
  });

  function endpointStatus(text) {
    $("endpoints-status").textContent = text;
    $("endpoints-status").hidden = !text;
  }

  // drawEndpoints shows the endpoints, a row each, updating the rows
  // already shown in place: a refresh that changes nothing changes no
  // element, so a selection in a row survives it.
  function drawEndpoints(list, more) {
    const rows = list.map((ep) => {
      let tr = endpointRows.get(ep.id);
      if (!tr) {
        tr = el("tr", "endpoint");
        tr.dataset.endpoint = ep.id;
        tr.append(el("td", "id"), el("td", "host"), el("td", "description"), el("td", "enabled"),
          el("td", "circuit"), el("td", "error"), el("td", "when"), el("td", "backlog"));
      }
      updateEndpoint(tr, ep);
      return tr;
    });
    const same = rows.length === $("endpoints").children.length && rows.every((tr, i) => $("endpoints").children[i] === tr);
    if (!same) $("endpoints").replaceChildren(...rows);
    endpointRows.clear();
    for (const tr of rows) endpointRows.set(tr.dataset.endpoint, tr);
    $("endpoints-table").hidden = rows.length === 0;
    if (rows.length === 0) endpointStatus("No endpoint yet: POST /v1/endpoints registers one.");
    else if (more) endpointStatus("Showing the first " + fmtInt(rows.length) + " endpoints.");
    else endpointStatus("");
  }

  // setText sets an element's text and title only when they change.
  function setText(e, text, title) {
    if (e.textContent !== text) e.textContent = text;
    if ((title || "") !== e.title) e.title = title || "";
  }

  function updateEndpoint(tr, ep) {
    const c = ep.circuit || {};
    const state = c.state || "closed";
    tr.dataset.circuit = state;
    tr.dataset.enabled = String(!!ep.enabled);
    tr.classList.toggle("disabled", !ep.enabled);
    const cells = tr.children;
    setText(cells[0], ep.id);
    setText(cells[1], hostOf(ep.url));
    setText(cells[2], ep.description || "", ep.description || "");
    setText(cells[3], ep.enabled ? "yes" : "no", ep.enabled ? "" : hostsOnly(ep.disabled_reason));

    // The circuit: a badge with the state, then since when.
    let badge = cells[4].querySelector(".badge");
    let since = cells[4].querySelector(".since");
    if (!badge) {
      badge = el("span", "badge");
      since = el("span", "since muted");
      cells[4].replaceChildren(badge, since);
    }
    const cls = "badge circuit-" + state;
    if (badge.className !== cls) badge.className = cls;
    setText(badge, state);
    setText(since, c.since ? "since " + fmtTime(c.since) : "", c.since || "");

    const lastError = hostsOnly(c.last_error);
    setText(cells[5], lastError, lastError);
    setText(cells[6], c.failing_since ? fmtTime(c.failing_since) : "—", c.failing_since || "");
    updateBacklog(tr, ep.id);
  }

  // updateBacklog shows how far behind an endpoint's copies are: "—" for
  // one no worker delivered to lately.
  function updateBacklog(tr, id) {
    const behind = endpointBacklog[id];
    if (behind === undefined) delete tr.dataset.backlog;
    else tr.dataset.backlog = String(behind);
    setText(tr.children[7], behind === undefined ? "—" : fmtDur(behind * 1000),
      behind === undefined ? "no copy for it taken in the last 30 s" : "");
  }

  // ---- providers ---------------------------------------------------------

  // The mail servers and SMS gateways come from the API's GET
  // /v1/providers, which needs the token even on a public dashboard: a
  // provider's errors may name its address. Read as the endpoints are.
  let providerTimer = 0;
  let providerSeq = 0;
  const providerRows = new Map();

  function stopProviders() {
    clearTimeout(providerTimer);
    providerTimer = 0;
    providerSeq++;
  }

  async function refreshProviders() {
    stopProviders();
    if (!running) return;
    const locked = !session.authenticated;
    $("providers-locked").hidden = !locked;
    if (locked) {
      providerRows.clear();
      $("providers").replaceChildren();
      $("providers-table").hidden = true;
      providerStatus("");
      return;
    }
    if (document.hidden) return; // visibilitychange starts it again
    const seq = providerSeq;
    try {
      const body = await call("/v1/providers");
      if (seq !== providerSeq || !running) return;
      drawProviders(body.providers || []);
      $("providers-table").classList.remove("stale");
    } catch (err) {
      if (seq !== providerSeq || !running) return;
      if (err instanceof Unauthorized) {
        expired(err.message);
        return;
      }
      $("providers-table").classList.add("stale");
      providerStatus("Providers unavailable: " + message(err));
    }
    if (running && !document.hidden) providerTimer = setTimeout(refreshProviders, ENDPOINT_REFRESH_MS);
  }

  function providerStatus(text) {
    $("providers-status").textContent = text;
    $("providers-status").hidden = !text;
  }

  // drawProviders shows the providers, a row each, updating the rows
  // already shown in place, as drawEndpoints does.
  function drawProviders(list) {
    const rows = list.map((p) => {
      const key = p.channel + "/" + p.name;
      let tr = providerRows.get(key);
      if (!tr) {
        tr = el("tr", "provider");
        tr.dataset.provider = key;
        tr.append(el("td", "id"), el("td", "id"), el("td", "circuit"), el("td", "error"),
          el("td", "when"), el("td", "when"), el("td", "when"));
      }
      updateProvider(tr, p);
      return tr;
    });
    const same = rows.length === $("providers").children.length && rows.every((tr, i) => $("providers").children[i] === tr);
    if (!same) $("providers").replaceChildren(...rows);
    providerRows.clear();
    for (const tr of rows) providerRows.set(tr.dataset.provider, tr);
    $("providers-table").hidden = rows.length === 0;
    if (rows.length === 0) providerStatus("No provider yet: an email or sms worker declares its mail servers or gateways when it starts, with a limit or with HISTORY_DSN or DATA_DIR set.");
    else providerStatus("");
  }

  function updateProvider(tr, p) {
    const c = p.circuit || {};
    const state = c.state || "closed";
    tr.dataset.circuit = state;
    const cells = tr.children;
    setText(cells[0], p.channel);
    setText(cells[1], String(p.position + 1) + ". " + p.name);

    let badge = cells[2].querySelector(".badge");
    let since = cells[2].querySelector(".since");
    if (!badge) {
      badge = el("span", "badge");
      since = el("span", "since muted");
      cells[2].replaceChildren(badge, since);
    }
    const cls = "badge circuit-" + state;
    if (badge.className !== cls) badge.className = cls;
    setText(badge, state);
    setText(since, state !== "closed" && c.since ? "since " + fmtTime(c.since) : "", c.since || "");

    // A closed circuit's last error is history: shown only while it is
    // open or probing.
    const lastError = state === "closed" ? "" : hostsOnly(c.last_error);
    setText(cells[3], lastError, lastError);

    const r = p.rate;
    setText(cells[4], r ? r.per_second + "/s, burst " + r.burst : "no limit");
    setText(cells[5], r && r.next_slot_ms > 0 ? "in " + r.next_slot_ms + " ms" : r ? "free" : "—");
    setText(cells[6], r ? fmtInt(r.waiting) : "—");
  }

  // ---- formatting --------------------------------------------------------

  function fmtInt(n) {
    return Number(n).toLocaleString("en-US");
  }

  function fmtTime(s, withMillis) {
    const t = new Date(String(s).replace(/(\.\d{3})\d+/, "$1"));
    if (Number.isNaN(t.getTime())) return String(s || "");
    const opts = { hour12: false, hour: "2-digit", minute: "2-digit", second: "2-digit" };
    if (withMillis) opts.fractionalSecondDigits = 3;
    const time = t.toLocaleTimeString([], opts);
    const today = new Date().toDateString() === t.toDateString();
    return today ? time : t.toLocaleDateString([], { month: "short", day: "numeric" }) + " " + time;
  }

  function fmtDur(ms) {
    ms = Math.max(0, Math.round(ms));
    if (ms < 1000) return ms + "ms";
    const s = ms / 1000;
    if (s < 10) return s.toFixed(1).replace(/\.0$/, "") + "s";
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

  start();
})();
