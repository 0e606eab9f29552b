// End-to-end test of the console's metrics: a volume's I/O charts, fed by a
// real NBD client (qemu-io) writing through an attachment, moving live on
// the volume's page; and the capacity bars of the Media and Nodes pages,
// split as the API says. Driven under the console's own
// Content-Security-Policy (no bypass): the charts are SVG drawn from the
// scripts, with no inline style.
import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import {
  ARTIFACTS, HOST, startServer, apiClient, newPage, signIn, shots, eventually, startNbdWriter,
} from "./lib.mjs";

/** An attribute of the first element matching `selector`, or null. */
async function attr(page, selector, name) {
  return page.locator(selector).first().getAttribute(name, { timeout: 1000 }).catch(() => null);
}

async function text(page, selector) {
  return ((await page.locator(selector).first().textContent({ timeout: 1000 }).catch(() => "")) || "").trim();
}

/** The capacity bar's parts (GiB, from its data attributes) and how wide
 * each is drawn against the whole bar. */
async function barOf(page, selector) {
  return page.$eval(selector, (bar) => {
    const gib = {};
    for (const [k, v] of Object.entries(bar.dataset)) if (k !== "testid") gib[k] = Number(v);
    const whole = bar.getBoundingClientRect().width;
    const drawn = [...bar.querySelectorAll(".part")].map((p) => [p.dataset.part, p.getBoundingClientRect().width / whole]);
    return { gib, drawn, titles: [...bar.querySelectorAll(".part")].map((p) => p.title) };
  });
}

/** Checks one capacity bar against what the API says of the medium or node `x`. */
function checkBar(bar, x, what) {
  const { size, ...parts } = bar.gib;
  assert.equal(size, x.size, `${what}: size`);
  assert.equal(parts.allocated, x.allocatedsize, `${what}: allocated`);
  assert.equal(parts.booked, x.bookedsize, `${what}: booked`);
  assert.equal(parts.snapshot, x.snapshotsize, `${what}: snapshot`);
  assert.equal(parts.free, x.freesize, `${what}: free`);
  const sum = Object.values(parts).reduce((a, b) => a + b, 0);
  assert.equal(sum, x.size, `${what}: the parts ${JSON.stringify(parts)} add up to the size`);
  // Drawn in proportion: each part's share of the bar is its share of the size.
  for (const [part, share] of bar.drawn) {
    assert.ok(Math.abs(share - parts[part] / x.size) < 0.02, `${what}: ${part} drawn at ${share} of the bar, ${parts[part]} of ${x.size} GiB`);
  }
  const drawnTotal = bar.drawn.reduce((a, [, share]) => a + share, 0);
  assert.ok(Math.abs(drawnTotal - 1) < 0.02, `${what}: the parts fill the bar (${drawnTotal})`);
  assert.ok(bar.titles.every((t) => /^[A-Z][a-z ]+: \d+ GiB \(\d+%\)$/.test(t)), `${what}: titles ${bar.titles}`);
}

test("a volume's I/O charts move while qemu-io writes; media and nodes show their capacity split", async () => {
  const server = await startServer([["d1", "node-a", "zone-a", 20], ["d2", "node-b", "zone-b", 30]], "0", HOST);
  const api = await apiClient(server.base);
  await api.policy("none", 0, 0, 0);
  await api.volume("io", 2, "none");
  // Attached read-write to host-1 (127.0.0.1): NBD connections from here are its.
  const attach = await api.call("POST", "/volumes/io/snapshots/top/attachments", { node: "host-1" });
  assert.equal((await api.waitJob(attach.JobID)).state, "Done");
  const { uri } = await api.call("GET", "/volumes/io/snapshots/top/attachments/host-1");
  assert.match(uri, /^nbd:\/\/127\.0\.0\.1:\d+\/\S+$/);

  const page = await newPage({ bypassCSP: false });
  const violations = [];
  page.on("console", (m) => { if (/Content Security Policy/i.test(m.text())) violations.push(m.text()); });
  let writer = null;
  try {
    await signIn(page, server.base);
    await page.goto(`${server.base}/ui/#/volumes/io`);
    await page.waitForSelector("#volume-summary dl");
    // Not served over NBD yet: no samples, no chart.
    await eventually(10_000, async () => (await text(page, "#io-latest")) === "No I/O served yet.",
      () => `#io-latest: ${page.url()}`);
    assert.equal(await page.locator('[data-testid="iops-chart"]').count(), 0);
    assert.deepEqual(await api.call("GET", "/volumes/io/iostats"), []);

    // A real NBD client writes 4 MiB (and reads 1 MiB back) again and again.
    writer = startNbdWriter(uri, ["write -P 0x5a 0 4M", "read -P 0x5a 0 1M"], 100);
    const iops = '[data-testid="iops-chart"]';
    let latest = 0;
    await eventually(30_000, async () => {
      latest = Number(await attr(page, iops, "data-latest-write-iops"));
      return latest > 0;
    }, () => `latest write IOPS ${latest}; qemu-io ran ${writer.runs} times (${writer.failures} failed): ${writer.lastOutput}`);
    assert.ok(writer.runs > 0 && writer.failures === 0, `qemu-io: ${writer.failures} of ${writer.runs} runs failed: ${writer.lastOutput}`);

    // The chart moves: more samples at least 6 s later, without a reload.
    const before = { points: Number(await attr(page, iops, "data-points")), at: Date.now() };
    assert.ok(before.points >= 1, `points ${before.points}`);
    let after = before.points;
    await eventually(20_000, async () => {
      after = Number(await attr(page, iops, "data-points"));
      return Date.now() - before.at >= 6_000 && after > before.points;
    }, () => `points ${before.points} → ${after}`);
    const samples = await api.call("GET", "/volumes/io/iostats");
    assert.ok(samples.length >= after, `the API has ${samples.length} samples, the chart ${after}`);

    // The numbers in words, the lines drawn point by point, the throughput in binary units.
    // The headline says what it shows: the last sample, and the window's peak beside it.
    const latestText = await text(page, "#io-latest");
    assert.match(latestText, /^Last 5 s: read [\d.]+k? IOPS, [\d.]+ (B|KiB|MiB|GiB)\/s · write [\d.]+k? IOPS, [\d.]+ (KiB|MiB|GiB)\/s$/);
    assert.match(await text(page, "#io-peak"),
      /^Peak of the last 10 min \(highest 5-s sample\): read [\d.]+k? IOPS, [\d.]+ (B|KiB|MiB|GiB)\/s · write [1-9][\d.]*k? IOPS, [\d.]+ (KiB|MiB|GiB)\/s$/);
    const writeIops = Number(await attr(page, iops, "data-latest-write-iops"));
    assert.ok(writeIops > 0, `latest write IOPS ${writeIops}`);
    const throughput = '[data-testid="throughput-chart"]';
    assert.ok(Number(await attr(page, throughput, "data-latest-write-bps")) > 0);
    // Each chart read at once (it is redrawn every 5 s): its axis says its
    // unit, its ticks are plain numbers of it, each line has a vertex per sample.
    const chartOf = (sel) => page.$eval(sel, (c) => ({
      points: Number(c.dataset.points),
      unit: c.dataset.unit,
      axis: c.querySelector(".axis-title").textContent,
      ticks: [...c.querySelectorAll("text.tick")].map((t) => t.textContent),
      vertices: Object.fromEntries([...c.querySelectorAll("[data-series]")].map((g) =>
        [g.dataset.series, (g.querySelector("polyline").getAttribute("points").trim().match(/\S+/g) || []).length])),
      // Drawing order (the last is on top) and each line's dashes.
      order: [...c.querySelectorAll("[data-series]")].map((g) => g.dataset.series),
      dashes: Object.fromEntries([...c.querySelectorAll("[data-series]")].map((g) =>
        [g.dataset.series, getComputedStyle(g.querySelector("polyline")).strokeDasharray])),
    }));
    const XTICKS = ["10 min ago", "5 min ago", "now"];
    const iopsChart = await chartOf(iops);
    assert.equal(iopsChart.axis, "IOPS");
    assert.deepEqual(iopsChart.vertices, { read: iopsChart.points, write: iopsChart.points });
    // Whole-number IOPS ticks, then the one time axis style of every chart.
    const yTicks = iopsChart.ticks.slice(0, -3);
    assert.ok(yTicks.length >= 2 && yTicks.every((t) => /^\d+$/.test(t)), `IOPS ticks ${iopsChart.ticks}`);
    assert.deepEqual(iopsChart.ticks.slice(-3), XTICKS);
    // Read is drawn over write, dashed, so that equal lines both show.
    assert.deepEqual(iopsChart.order, ["write", "read"]);
    assert.equal(iopsChart.dashes.write, "none");
    assert.notEqual(iopsChart.dashes.read, "none");
    assert.deepEqual(await page.$$eval("#volume-io .io-legend .legend-item", (items) => items.map((i) => i.textContent)),
      ["write", "read (dashed)"]);
    const rateChart = await chartOf(throughput);
    assert.match(rateChart.unit, /^(B|KiB|MiB|GiB)\/s$/);
    assert.equal(rateChart.axis, rateChart.unit);
    assert.equal(rateChart.ticks[0], "0");
    assert.ok(rateChart.ticks.slice(0, 3).every((t) => /^\d+(\.\d)?$/.test(t)) && Number(rateChart.ticks[2]) > 0, `ticks ${rateChart.ticks}`);
    assert.deepEqual(rateChart.vertices, { read: rateChart.points, write: rateChart.points });
    assert.deepEqual(rateChart.ticks.slice(-3), XTICKS);
    // Latency: the mean per request, in a unit of time, a point per period that had such requests.
    const latency = await chartOf('[data-testid="latency-chart"]');
    assert.match(latency.unit, /^(µs|ms|s)$/);
    assert.equal(latency.axis, latency.unit);
    assert.deepEqual(latency.ticks.slice(-3), XTICKS);
    const withWrites = (await api.call("GET", "/volumes/io/iostats")).filter((x) => x.writelatencyus != null);
    assert.ok(withWrites.length > 0 && withWrites.every((x) => x.writelatencyus > 0), JSON.stringify(withWrites.slice(-2)));
    assert.ok(latency.vertices.write >= 1 && latency.vertices.write <= latency.points, JSON.stringify(latency));
    assert.equal(await text(page, "#io-latency figcaption"), "Latency (mean per request)");
    await page.screenshot({ path: path.join(ARTIFACTS, "volume-io-chart.png"), fullPage: true });
    await shots(page, "metrics-01-volume-io");
  } finally {
    await writer?.stop();
  }
  assert.equal(writer.failures, 0, `qemu-io: ${writer.lastOutput}`);

  // A snapshot holds what was written: its part shows on the medium.
  const snap = await api.call("POST", "/volumes/io/snapshots", { name: "s1", consistency: "crash" });
  assert.equal((await api.waitJob(snap.JobID)).state, "Done");
  const detach = await api.call("DELETE", "/volumes/io/snapshots/top/attachments/host-1");
  assert.equal((await api.waitJob(detach.JobID)).state, "Done");

  // Media: one bar per medium, its parts as the API says, adding up to the size.
  await page.click("nav a[data-page=media]");
  await page.waitForSelector('[data-medium] [data-testid="capacity-bar"]');
  const media = await api.call("GET", "/media");
  assert.equal(media.length, 2);
  assert.equal(await page.locator('[data-medium] [data-testid="capacity-bar"]').count(), media.length);
  for (const m of media) {
    checkBar(await barOf(page, `[data-medium="${m.mediaid}"] [data-testid="capacity-bar"]`), m, `medium ${m.mediaid}`);
  }
  const holder = media.find((m) => m.allocatedsize > 0);
  assert.ok(holder, JSON.stringify(media));
  assert.equal(holder.allocatedsize, 2, JSON.stringify(holder));
  assert.deepEqual(await page.$$eval(".capacity-legend .legend-item", (items) => items.map((i) => i.textContent)),
    ["Allocated to slices", "Booked by running jobs", "Set aside for snapshots", "Free", "Written to disk"]);
  await shots(page, "metrics-02-media-capacity");

  // Nodes: a bar for each node with media, the same way; none for a host without.
  await page.click("nav a[data-page=nodes]");
  await page.waitForSelector('tr[data-node="node-a"] [data-testid="capacity-bar"]');
  for (const n of await api.call("GET", "/nodes")) {
    const row = `tr[data-node="${n.name}"]`;
    if (!n.size) {
      assert.equal(await page.locator(`${row} [data-testid="capacity-bar"]`).count(), 0, n.name);
      assert.equal(await text(page, `${row} td[data-label="Capacity"]`), "—");
      continue;
    }
    checkBar(await barOf(page, `${row} [data-testid="capacity-bar"]`), n, `node ${n.name}`);
    assert.equal(await text(page, `${row} .capacity-free`), `${n.freesize} GiB free of ${n.size} GiB`);
  }
  await shots(page, "metrics-03-nodes-capacity");

  // Away from the volume's page its I/O is no longer asked for.
  const asked = [];
  page.on("request", (r) => { if (r.url().includes("/iostats")) asked.push(r.url()); });
  await page.waitForTimeout(6_000);
  assert.deepEqual(asked, [], "no I/O polling once the page is left");
  assert.deepEqual(violations, [], "no Content-Security-Policy violation");
  await page.context().close();
});
