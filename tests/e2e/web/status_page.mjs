// Drives mptd's status page in Debian's headless chromium for tests/e2e/web.rs: reads one JSON
// command a line on stdin, answers each with one JSON line on stdout. Run inside the lab's
// namespace (the page is on its loopback), with PLAYWRIGHT_DIR the directory where npm
// installed playwright-core.
//
//   {"cmd":"open","url":U}                      load the page, wait for its first table
//   {"cmd":"rows"}                              each path row's data-path and data-state
//   {"cmd":"until_rate","peer":P,"above":X}     poll (every 20 ms) the sum of the last plotted
//   {"cmd":"until_rate","peer":P,"below":X}     point of the peer's "sent" series
//   {"cmd":"until_samples","peer":P,"more":K}   poll until the peer's charts have K more points
//   {"cmd":"until_state","path":N,"state":S}    poll until row N shows state S
//   {"cmd":"screenshot","file":F}               write a PNG of the page
//   {"cmd":"quit"}
//
// Each answer has ok, ms (time to the condition, or to the timeout: timeout_ms, default 10 s),
// and what was seen; errors the page logged are in every answer's "errors".
import { createRequire } from "node:module";
import readline from "node:readline";

const require = createRequire(process.env.PLAYWRIGHT_DIR + "/node_modules/");
const { chromium } = require("playwright-core");

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
const errors = [];
page.on("pageerror", (e) => errors.push("pageerror: " + e.message));
page.on("console", (m) => { if (m.type() === "error") errors.push("console: " + m.text()); });

const say = (o) => process.stdout.write(JSON.stringify({ ...o, errors }) + "\n");

// The sum of the last plotted point of `peer`'s "sent" series (labels ending in ↑), and its time.
function lastSent(peer) {
  return page.evaluate((peer) => {
    const c = window.mptd && window.mptd.charts[peer];
    if (!c) return null;
    const u = c.throughput, t = u.data[0];
    if (!t || t.length === 0) return null;
    const i = t.length - 1;
    let sum = 0;
    u.series.forEach((s, k) => { if (k > 0 && s.label.endsWith("↑")) sum += u.data[k][i] || 0; });
    return { t: t[i], bps: sum };
  }, peer);
}

async function poll(timeoutMs, probe) {
  const t0 = Date.now();
  let seen = null;
  for (;;) {
    const [ok, what] = await probe();
    seen = what;
    const ms = Date.now() - t0;
    if (ok) return { ok: true, ms, seen };
    if (ms > timeoutMs) return { ok: false, ms, seen };
    await new Promise((r) => setTimeout(r, 20));
  }
}

const rows = () => page.$$eval("tr[data-path]", (rs) => rs.map((r) => ({ path: r.dataset.path, state: r.dataset.state })));

for await (const line of readline.createInterface({ input: process.stdin })) {
  const c = JSON.parse(line);
  const timeout = c.timeout_ms || 10000;
  try {
    if (c.cmd === "open") {
      const t0 = Date.now();
      const r = await page.goto(c.url, { waitUntil: "load", timeout });
      await page.waitForSelector("tr[data-path][data-state]", { timeout });
      say({ ok: r.ok(), ms: Date.now() - t0, status: r.status(), rows: await rows() });
    } else if (c.cmd === "rows") {
      say({ ok: true, rows: await rows() });
    } else if (c.cmd === "until_rate") {
      say(await poll(timeout, async () => {
        const p = await lastSent(c.peer);
        const ok = p != null && (c.above != null ? p.bps >= c.above : p.bps < c.below);
        return [ok, p];
      }));
    } else if (c.cmd === "until_samples") {
      const points = () => page.evaluate((peer) => {
        const c = window.mptd && window.mptd.charts[peer];
        return c ? c.throughput.data[0].length : 0;
      }, c.peer);
      const from = await points();
      say(await poll(timeout, async () => {
        const n = await points();
        return [n >= from + c.more, n];
      }));
    } else if (c.cmd === "until_state") {
      say(await poll(timeout, async () => {
        const all = await rows();
        const r = all.find((x) => x.path === c.path);
        return [r != null && r.state === c.state, all];
      }));
    } else if (c.cmd === "screenshot") {
      await page.screenshot({ path: c.file });
      say({ ok: true, file: c.file });
    } else if (c.cmd === "quit") {
      say({ ok: true });
      break;
    } else {
      say({ ok: false, error: "unknown command " + c.cmd });
    }
  } catch (e) {
    say({ ok: false, error: String(e) });
  }
}
await browser.close();
