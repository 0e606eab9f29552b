// End-to-end tests of issue 49's console items: the Nodes table fits a
// 1280-px window (the rest on the node's page), the Overview page's
// numbers, the chart scales, and one style for links, breadcrumbs, plurals,
// sizes and the Jobs list (total, Done badge, duration, user).
import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import {
  ARTIFACTS, HOST, startServer, apiClient, newPage, signIn, waitText, volumeNeedingMovement,
} from "./lib.mjs";

const ACCENT = "rgb(31, 111, 235)"; // --accent

/** A screenshot at 1400×900 and 1280×800 (the sizes). */
async function wideShots(page, name) {
  for (const [w, hgt] of [[1400, 900], [1280, 800]]) {
    await page.setViewportSize({ width: w, height: hgt });
    await page.waitForTimeout(100);
    await page.screenshot({ path: path.join(ARTIFACTS, `${name}-${w}x${hgt}.png`), fullPage: true });
  }
}

/** Whether the element's content is wider than its box (it would scroll). */
async function overflow(page, selector) {
  return page.$eval(selector, (el) => ({ scroll: el.scrollWidth, client: el.clientWidth }));
}

test("nodes: the table fits at 1280 and 1400 px; credentials, slice address and who manages a node are on its page", async () => {
  const server = await startServer([["d1", "node-a", "zone-a", 100], ["d2", "node-b", "zone-b", 50]], "0", HOST);
  const api = await apiClient(server.base);
  // Long names, addresses and zones, as a real site has.
  await api.call("POST", "/nodes", { name: "hypervisor-rack-12-slot-04", address: "192.168.100.204", zone: "datacenter-east-row-3" });
  await api.call("POST", "/nodes", { name: "hypervisor-rack-12-slot-05", address: "192.168.100.205", zone: "datacenter-east-row-3" });
  await api.call("POST", "/nodes/hypervisor-rack-12-slot-05/credentials", {});

  const page = await newPage();
  await signIn(page, server.base);
  await page.click("nav a[data-page=nodes]");
  await page.waitForSelector('tr[data-node="hypervisor-rack-12-slot-04"]');
  assert.deepEqual(await page.$$eval("#main thead th", (ths) => ths.map((t) => t.textContent)),
    ["Name", "Role", "State", "Zone", "Address", "Media", "Copies", "Volumes", "Capacity", "Last seen"]);
  for (const [width, height] of [[1280, 800], [1400, 900]]) {
    await page.setViewportSize({ width, height });
    await page.waitForTimeout(100);
    const { scroll, client } = await overflow(page, "#main .table-wrap");
    assert.ok(scroll <= client, `at ${width} px the nodes table is ${scroll} px wide in a ${client} px box`);
  }
  const cells = await page.$$eval('tr[data-node="hypervisor-rack-12-slot-04"] td', (tds) => tds.map((t) => t.textContent));
  assert.deepEqual(cells, ["hypervisor-rack-12-slot-04", "host", "Online", "datacenter-east-row-3", "192.168.100.204",
    "0", "0", "0", "—", "no agent"]);
  assert.equal(await page.textContent('tr[data-node="hypervisor-rack-12-slot-05"] .last-seen'), "never");
  assert.equal(await page.locator("#main tbody button").count(), 0, "the actions are on the node's page");
  await wideShots(page, "polish-01-nodes");

  // A node of the configuration file: its facts; removed there, not here.
  await page.click('tr[data-node="host-1"] a.node-link');
  await page.waitForSelector("#node-managed-by");
  assert.equal(await page.textContent("nav.breadcrumb"), "Nodes›host-1");
  assert.equal(await page.textContent("#main h1"), "Node host-1");
  assert.equal(await page.textContent("#node-managed-by"), "configuration file");
  assert.equal(await page.textContent("#node-credential-state"), "none");
  assert.equal(await page.textContent("#node-agent-seen"), "never");
  assert.equal(await page.textContent("#node-actions button.issue"), "Issue agent credential");
  assert.equal(await page.locator("#node-actions button.remove").count(), 0);

  // One added through the API, with a credential: Revoke and Remove here.
  await page.goto(`${server.base}/ui/#/nodes/hypervisor-rack-12-slot-05`);
  await waitText(page, "#node-managed-by", "API");
  assert.equal(await page.textContent("#node-credential-state"), "yes (agent)");
  assert.equal(await page.textContent("#node-actions button.revoke"), "Revoke credential");
  await wideShots(page, "polish-02-node-page");
  await page.click("#node-actions button.remove");
  await waitText(page, "#node-notice", "Node hypervisor-rack-12-slot-05 removed.");
  assert.ok(page.url().endsWith("#/nodes"), page.url());
  await page.waitForSelector('tr[data-node="hypervisor-rack-12-slot-05"]', { state: "detached" });
  await page.context().close();
});

test("overview: the first page after sign-in counts capacity, volumes by health, nodes and running jobs", async () => {
  // m1 20 GiB (n1), m2 16 GiB (n2), m3 30 GiB (n3); "data" 15 GiB mirrored on m1 + m2.
  const { server, api } = await volumeNeedingMovement("1 MiB");
  await api.volume("web", 2, "none"); // m3
  const page = await newPage();
  await signIn(page, server.base, undefined, undefined, { overview: true });
  assert.ok(page.url().endsWith("#/overview"), page.url());
  await page.waitForSelector("#overview-capacity");
  // 66 GiB in all; 15 + 15 + 2 allocated.
  assert.equal(await page.textContent("#overview-used"), "32.0 GiB used");
  assert.equal(await page.textContent("#overview-free"), "34.0 GiB free of 66.0 GiB (48% used) · 3 media");
  assert.equal(await page.textContent("#overview-volumes .figure"), "2 volumes");
  assert.equal(await page.textContent("#overview-volume-health"), "2 healthy · 0 degraded · 0 failed");
  assert.equal(await page.textContent("#overview-nodes .figure"), "3 nodes");
  assert.equal(await page.textContent("#overview-node-states"), "3 online · 0 offline");
  assert.equal(await page.textContent("#overview-jobs p"), "No job is running.");

  // A resize copying at 1 MiB/s runs a while: listed, linked to its volume.
  const started = await api.call("PATCH", "/volumes/data", { size: 18, allowdatamovement: true });
  await page.reload();
  const item = `#overview-jobs li[data-job="${started.JobID}"]`;
  await page.waitForSelector(item);
  assert.equal(await page.textContent(`${item} a`), "Resize data 15 → 18 GiB");
  assert.equal(await page.getAttribute(`${item} a`, "href"), "#/volumes/data");
  assert.equal(await page.textContent("#overview-jobs-count"), "(1)");
  await wideShots(page, "polish-03-overview-job");
  await api.call("DELETE", `/jobs/${started.JobID}`);
  assert.equal((await api.waitJob(started.JobID)).status, "Cancelled");

  // A medium fails: the mirrored volume is degraded, the capacity shrinks.
  await api.call("PATCH", "/media/m2", { state: "Failed" });
  await page.reload();
  await waitText(page, "#overview-volume-health", "1 healthy · 1 degraded · 0 failed");
  assert.equal(await page.textContent("#overview-volumes .attention"), "Lost copies: data (recover them on the Volumes page)");
  assert.equal(await page.textContent("#overview-jobs p"), "No job is running.");
  const media = await api.call("GET", "/media");
  const free = media.reduce((sum, m) => sum + m.freesize, 0);
  assert.equal(await page.getAttribute("#overview-free", "data-gib"), String(free));
  await wideShots(page, "polish-04-overview-degraded");

  // The volume list is one click away.
  await page.click("nav a[data-page=volumes]");
  await page.waitForSelector('tr[data-volume="web"]');
  await page.context().close();
});

test("charts: IOPS ticks are whole numbers, one time axis style, read drawn over write", async () => {
  const server = await startServer([["d1", "node-a", "zone-a", 10]]);
  const page = await newPage();
  await signIn(page, server.base);
  const scale = (max, bytes) => page.evaluate(async ([m, b]) => (await import("/ui/text.js")).ioScale(m, b), [max, bytes]);
  const ticks = async (max) => (await scale(max, false)).ticks.map((t) => t.label);
  assert.deepEqual(await ticks(0), ["0", "1"]);
  assert.deepEqual(await ticks(0.3), ["0", "1"], "no 0 / 0.3 / 0.5");
  assert.deepEqual(await ticks(1.6), ["0", "1", "2"]);
  assert.deepEqual(await ticks(3.2), ["0", "1", "2", "3", "4", "5"]);
  assert.deepEqual(await ticks(812), ["0", "500", "1000"]);
  const latency = (us) => page.evaluate(async (v) => {
    const t = await import("/ui/text.js");
    const s = t.latencyScale(v);
    return [s.title, s.ticks.map((x) => x.label), t.latencyText(v)];
  }, us);
  assert.deepEqual(await latency(85), ["µs", ["0", "50", "100"], "85 µs"]);
  assert.deepEqual(await latency(1234), ["ms", ["0", "1", "2"], "1.2 ms"]);
  assert.equal(await page.evaluate(async () => (await import("/ui/text.js")).latencyText(null)), "—");
  await page.context().close();
});

test("one style: links, breadcrumbs, plurals, sizes; the Jobs list has a total, a Done badge, duration and user", async () => {
  const server = await startServer([["d1", "node-a", "zone-a", 100], ["d2", "node-b", "zone-b", 100]]);
  const api = await apiClient(server.base);
  await api.policy("none", 0, 0, 0);
  for (let i = 1; i <= 11; i++) await api.volume(`v${i}`, 1, "none");
  const page = await newPage();
  await signIn(page, server.base);

  // Media: one volume or several, every size through one formatter.
  await page.click("nav a[data-page=media]");
  await page.waitForSelector('[data-medium="d1"] .usage');
  const usage = await page.$$eval("[data-medium] .usage", (els) => els.map((e) => e.textContent));
  assert.ok(usage.every((u) => !/\(s\)/.test(u)), usage.join("\n"));
  const counts = (await api.call("GET", "/media")).map((m) => m.volumescount);
  assert.deepEqual(counts.sort(), [5, 6]);
  assert.ok(usage.some((u) => u.endsWith(" · 5 volumes")) && usage.some((u) => u.endsWith(" · 6 volumes")), usage.join("\n"));
  assert.match(usage[0], /^\d+\.0 GiB allocated to slices · 0 B written · \d+\.0 GiB free · 100\.0 GiB total · \d volumes$/);

  // Jobs: a total, "Done" badges rather than full bars, duration and user.
  await page.click("nav a[data-page=jobs]");
  await page.selectOption("#job-count", "10");
  await waitText(page, "#job-page", "Page 1 of 2 · jobs 1–10 of 11");
  assert.deepEqual(await page.$$eval("#main thead th", (ths) => ths.map((t) => t.textContent)),
    ["ID", "Job", "Volume", "User", "State", "Progress", "Details", "Started", "Duration"]);
  const job = (await api.call("GET", "/jobs?count=1"))[0];
  const row = `tr[data-job="${job.id}"]`;
  assert.equal(await page.textContent(`${row} td[data-label=Progress]`), "✓ Done");
  assert.equal(await page.locator("tr[data-job] .progress").count(), 0, "no finished job has a bar");
  assert.equal(await page.textContent(`${row} td[data-label=User]`), job.username);
  assert.ok(job.username.length > 0);
  assert.match(await page.textContent(`${row} td[data-label=Duration]`), /^\d+ s$/);
  await page.click("text=Next ›");
  await waitText(page, "#job-page", "Page 2 of 2 · job 11 of 11");
  assert.equal(await page.isDisabled("text=Next ›"), true);
  await wideShots(page, "polish-05-jobs");
  const { scroll, client } = await overflow(page, "#main .table-wrap");
  assert.ok(scroll <= client, `the jobs table is ${scroll} px wide in a ${client} px box`);

  // Breadcrumbs on every detail page; links look the same everywhere.
  const linkStyle = (sel) => page.$eval(sel, (a) => {
    const s = getComputedStyle(a);
    return [s.color, s.textDecorationLine, s.fontWeight];
  });
  const jobLink = await linkStyle("a.job-object");
  await page.goto(`${server.base}/ui/#/volumes/v1`);
  await page.waitForSelector("#volume-summary dl");
  assert.equal(await page.textContent("nav.breadcrumb"), "Volumes›v1");
  assert.equal(await page.getAttribute("nav.breadcrumb a", "href"), "#/volumes");
  const crumbLink = await linkStyle("nav.breadcrumb a");
  await page.goto(`${server.base}/ui/#/snapshots/v1`);
  await page.waitForSelector("#take-snapshot");
  assert.equal(await page.textContent("nav.breadcrumb"), "Volumes›v1›Snapshots");
  await page.goto(`${server.base}/ui/#/volumes`);
  await page.waitForSelector("a.vol-link");
  const volumeLink = await linkStyle("a.vol-link");
  await page.goto(`${server.base}/ui/#/nodes`);
  await page.waitForSelector("a.node-link");
  const nodeLink = await linkStyle("a.node-link");
  for (const style of [jobLink, crumbLink, volumeLink, nodeLink]) assert.deepEqual(style, [ACCENT, "none", "400"]);
  await page.context().close();
});
