// mptd's status page: every second /api/status (the table) and /api/history (the charts), asked
// for just after the daemon takes its next one-second sample. The charts are exposed as
// window.mptd.charts[peer].{throughput, rtt} (uPlot objects: data[0] the times, then a series
// per path) for tests; each path's table row carries data-path and data-state.
"use strict";
(function () {
  const token = new URLSearchParams(location.search).get("token");
  const headers = token ? { Authorization: "Bearer " + token } : {};
  const COLOURS = ["#2563eb", "#ea580c", "#059669", "#9333ea", "#dc2626", "#0891b2", "#ca8a04", "#4b5563"];
  const COLUMNS = ["Path", "State", "Transport", "Tier", "Round trip", "Loss", "Rate", "Now ↑", "Now ↓", "Sent", "Received", "Budget"];
  const HEIGHT = 320;
  const peers = {}; // name -> { card, head, body, charts, key, rows }
  window.mptd = { charts: {}, updated: 0 };

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function si(v, unit, digits) {
    if (v == null || !isFinite(v)) return "–";
    const steps = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
    for (const [f, p] of steps) if (Math.abs(v) >= f) return (v / f).toFixed(digits) + " " + p + unit;
    return v.toFixed(v >= 10 || v === 0 ? 0 : digits) + " " + unit;
  }
  const bits = (v) => si(v, "bit/s", 1);
  const bytes = (v) => si(v, "B", 1);
  const ms = (v) => (v == null ? "–" : v.toFixed(v < 10 ? 2 : 1) + " ms");

  function ago(msv) {
    const s = Math.round(msv / 1000);
    if (s < 120) return s + " s";
    if (s < 7200) return Math.round(s / 60) + " min";
    if (s < 172800) return Math.round(s / 3600) + " h";
    return Math.round(s / 86400) + " d";
  }

  function budget(b) {
    if (!b) return "–";
    const pct = b.limit ? Math.round((100 * b.used) / b.limit) : 0;
    let text = bytes(b.used) + " of " + bytes(b.limit) + " (" + pct + " %)";
    if (b.exhausted) text += ", used up: " + b.action;
    return text;
  }

  const clock = (v) => new Date(v * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });

  function chart(target, title, series, fmt) {
    const opts = {
      title: title,
      width: Math.max(300, target.clientWidth),
      height: HEIGHT,
      cursor: { drag: { x: false, y: false } },
      scales: { y: { range: (u, lo, hi) => [0, hi > 0 ? hi * 1.1 : 1] } },
      series: [{ label: "Time", value: (u, v) => (v == null ? "–" : clock(v)) }].concat(series),
      axes: [
        { stroke: "#475569", grid: { stroke: "#e2e8f0" }, space: 70, values: (u, vals) => vals.map(clock) },
        { stroke: "#475569", grid: { stroke: "#e2e8f0" }, size: 80, values: (u, vals) => vals.map(fmt) },
      ],
      legend: { live: true },
    };
    return new uPlot(opts, [[]].concat(series.map(() => [])), target);
  }

  function makePeer(p) {
    const card = el("section", "peer");
    card.dataset.peer = p.name;
    const head = el("div", "peer-head");
    head.append(el("h2", null, p.name), el("span", "badges"));
    const table = el("table", "paths");
    const tr = el("tr");
    for (const c of COLUMNS) tr.append(el("th", null, c));
    const thead = el("thead");
    thead.append(tr);
    table.append(thead);
    const body = el("tbody");
    table.append(body);
    const charts = el("div", "charts");
    const tput = el("div", "chart"), rtt = el("div", "chart");
    charts.append(tput, rtt);
    card.append(head, table, charts);
    document.getElementById("peers").append(card);
    const names = p.paths.map((x) => x.name);
    const tputSeries = [], rttSeries = [];
    names.forEach((n, i) => {
      const stroke = COLOURS[i % COLOURS.length];
      tputSeries.push({ label: n + " ↑", stroke: stroke, width: 2, value: (u, v) => bits(v) });
      tputSeries.push({ label: n + " ↓", stroke: stroke, width: 1.5, dash: [6, 4], value: (u, v) => bits(v) });
      rttSeries.push({ label: n, stroke: stroke, width: 2, value: (u, v) => ms(v) });
    });
    const c = {
      throughput: chart(tput, "Throughput (↑ sent, ↓ received)", tputSeries, (v) => si(v, "bit/s", 1).replace(".0 ", " ")),
      rtt: chart(rtt, "Round trip", rttSeries, (v) => v + " ms"),
    };
    window.mptd.charts[p.name] = c;
    return { card: card, head: head, body: body, charts: c, key: names.join("\n"), rows: {} };
  }

  function dropPeer(name) {
    const p = peers[name];
    p.charts.throughput.destroy();
    p.charts.rtt.destroy();
    p.card.remove();
    delete peers[name];
    delete window.mptd.charts[name];
  }

  function row(p, path) {
    let r = p.rows[path.name];
    if (!r) {
      r = el("tr");
      r.dataset.path = path.name;
      for (let i = 0; i < COLUMNS.length; i++) r.append(el("td"));
      p.body.append(r);
      p.rows[path.name] = r;
    }
    return r;
  }

  function renderPeer(p, view, hist) {
    const badges = p.head.querySelector(".badges");
    badges.replaceChildren();
    badges.append(el("span", view.keys_agreed ? "badge up" : "badge down", view.keys_agreed ? "session up" : "no session"));
    if (view.cipher) badges.append(el("span", "badge", view.cipher));
    if (view.role) badges.append(el("span", "badge", view.role));
    if (view.last_heard_ms != null) badges.append(el("span", "badge", "heard " + ago(view.last_heard_ms) + " ago"));
    const last = (arr) => (arr && arr.length ? arr[arr.length - 1] : null);
    for (const path of view.paths) {
      const h = hist && hist.paths.find((x) => x.name === path.name);
      const r = row(p, path);
      r.dataset.state = path.state;
      const state = el("span", "state " + path.state, path.state);
      if (path.down_reason) state.title = path.down_reason;
      const cells = [
        path.name, state, path.transport, String(path.tier) + (path.backup ? " (backup)" : ""),
        ms(path.rtt_ms), path.loss_pct.toFixed(2) + " %", bits(path.rate_bps),
        bits(h && last(h.tx_bps)), bits(h && last(h.rx_bps)), bytes(path.tx_bytes), bytes(path.rx_bytes),
        budget(path.budget),
      ];
      cells.forEach((v, i) => {
        const td = r.children[i];
        if (typeof v === "string") td.textContent = v;
        else td.replaceChildren(v);
      });
      r.children[1].title = path.down_reason || "";
    }
    if (!hist) return;
    const tput = [hist.t], rtt = [hist.t];
    for (const path of view.paths) {
      const h = hist.paths.find((x) => x.name === path.name);
      const none = hist.t.map(() => null);
      tput.push(h ? h.tx_bps : none, h ? h.rx_bps : none);
      rtt.push(h ? h.rtt_ms : none);
    }
    for (const [c, data] of [[p.charts.throughput, tput], [p.charts.rtt, rtt]]) {
      c.setData(data);
      // the legend shows the latest values unless the cursor is on the chart
      if (c.cursor.left == null || c.cursor.left < 0) c.setLegend({ idx: data[0].length - 1 });
    }
  }

  function render(st, hist) {
    document.getElementById("tunnel").textContent = st.tunnel;
    const up = st.peers.reduce((n, p) => n + p.paths.filter((x) => x.state === "up").length, 0);
    const all = st.peers.reduce((n, p) => n + p.paths.length, 0);
    document.getElementById("summary").textContent =
      st.peers.length + (st.peers.length === 1 ? " peer, " : " peers, ") + up + " of " + all + " paths up, running " + ago(st.uptime_ms);
    const seen = new Set();
    for (const view of st.peers) {
      seen.add(view.name);
      const key = view.paths.map((x) => x.name).join("\n");
      if (peers[view.name] && peers[view.name].key !== key) dropPeer(view.name);
      if (!peers[view.name]) peers[view.name] = makePeer(view);
      renderPeer(peers[view.name], view, hist.peers.find((h) => h.name === view.name));
    }
    for (const name of Object.keys(peers)) if (!seen.has(name)) dropPeer(name);
  }

  async function get(path) {
    const r = await fetch(path, { headers: headers, cache: "no-store" });
    if (!r.ok) throw new Error(path + ": " + r.status);
    return r.json();
  }

  function live(ok, text) {
    const l = document.getElementById("live");
    l.dataset.live = ok ? "yes" : "no";
    l.textContent = text;
  }

  async function tick() {
    let wait = 1000;
    try {
      const [st, hist] = await Promise.all([get("/api/status"), get("/api/history")]);
      render(st, hist);
      window.mptd.updated = Date.now();
      live(true, "live · " + new Date().toLocaleTimeString());
      // just after the daemon's next sample
      if (hist.age_ms != null) wait = Math.min(1000, Math.max(100, 1000 - hist.age_ms + 60));
    } catch (e) {
      console.error(e);
      live(false, "no answer from mptd: " + e.message);
    }
    setTimeout(tick, wait);
  }

  window.addEventListener("resize", () => {
    for (const p of Object.values(peers)) {
      for (const c of [p.charts.throughput, p.charts.rtt]) {
        c.setSize({ width: Math.max(300, c.root.parentNode.clientWidth), height: HEIGHT });
      }
    }
  });
  tick();
})();
