// End-to-end tests of a volume's page and of the console's live lists: a real
// `svs serve` driven through real headless Chromium (helpers in lib.mjs).
import { test } from "node:test";
import assert from "node:assert/strict";
import { HOST, startServer, apiClient, shots, newPage, signIn, jobEnd, volumeNeedingMovement } from "./lib.mjs";

const ATTACHED_REFUSAL = "volume 'v' is attached to node(s) host-1; detach it first or delete with force=true";
// A copy's status while it runs: what moves, then bytes, rate and time left.
const MOVING = /^Moving slice c1-k0 from m2 to m3 \(1 of 1\): [\d.]+ (B|KiB|MiB) of [\d.]+ (KiB|MiB|GiB), [\d.]+ (B|KiB|MiB)\/s, about \d+ (s|min \d+ s) left$/;

/** Whether the page scrolls sideways (its content is wider than the window). */
async function pageOverflows(page) {
  return page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
}

test("GET / leads to the console, which has a favicon", async () => {
  const server = await startServer([["d1", "node-a", "zone-a", 10]]);
  const page = await newPage();
  await page.goto(`${server.base}/`);
  assert.ok(page.url().endsWith("/ui/#/signin"), page.url());
  const icon = await page.getAttribute('link[rel="icon"]', "href");
  assert.equal(icon, "favicon.svg");
  for (const p of ["/ui/favicon.svg", "/favicon.ico"]) {
    const r = await page.request.get(`${server.base}${p}`);
    assert.equal(r.status(), 200, p);
    assert.equal(r.headers()["content-type"], "image/svg+xml", p);
    assert.match(await r.text(), /^<svg /, p);
  }
  await page.context().close();
});

test("a volume's page: summary, copies, attach and detach, snapshots, jobs, a refused delete", async () => {
  const server = await startServer([["d1", "node-a", "zone-a", 40], ["d2", "node-b", "zone-b", 40]], "0", HOST);
  const api = await apiClient(server.base);
  await api.policy("mirror", 1, 1, 0);
  const id = await api.volume("v", 2, "mirror");
  const page = await newPage();
  const asked = [];
  page.on("dialog", (d) => asked.push(d.message()));
  await signIn(page, server.base);

  // From the list, the name leads to the page.
  await page.click('tr[data-volume="v"] a.vol-link');
  await page.waitForSelector("#volume-summary dl");
  assert.ok(page.url().endsWith("#/volumes/v"), page.url());
  assert.equal(await page.textContent("#volume-size"), "2 GiB");
  assert.equal(await page.textContent("#volume-state"), "Ready");
  assert.equal(await page.textContent("#volume-health"), "Healthy: 2 copies of 1 column");
  assert.equal(await page.textContent("#volume-status"), "Online");

  // Each copy with its medium, node, zone and health, as the API says.
  const slices = await api.call("GET", "/volumes/v/slices");
  assert.equal(slices.length, 2);
  for (const s of slices) {
    const cells = await page.$$eval(`#volume-copies tr[data-slice="c${s.copy}-k${s.column}"] td`, (tds) => tds.map((t) => t.textContent));
    assert.deepEqual(cells, [`c${s.copy}-k${s.column}`, String(s.copy), String(s.column), s.media, s.node, s.zone, "2 GiB", "Healthy"]);
  }
  assert.equal(await page.textContent("#volume-attached td.empty"), "Not attached.");
  assert.equal(await page.locator("#volume-snapshots table").count(), 0, "no snapshots, no table");

  // Attach to host-1 from the page: its NBD URI and host state are shown.
  await page.waitForSelector('#attach-node option[value="host-1"]', { state: "attached" });
  await page.selectOption("#attach-node", "host-1");
  await page.click("#attach-volume button[type=submit]");
  assert.equal(await jobEnd(page), "Done");
  assert.equal(await page.textContent("#volume-job #job-what"), "Attach v to host-1");
  const row = '#volume-attached tr[data-attachment="host-1"]';
  await page.waitForSelector(`${row} .state-attached`);
  const uri = await page.textContent(`${row} .uri`);
  assert.equal(uri, (await api.call("GET", "/volumes/v/snapshots/top/attachments/host-1")).uri);
  assert.match(uri, /^nbd:\/\/127\.0\.0\.1:\d+\/\S+$/);
  assert.equal(await page.textContent(`${row} td[data-label="Access"]`), "read-write");
  assert.equal(await page.textContent(`${row} td[data-label="Host"]`), "host —");

  // A snapshot taken elsewhere shows up without a reload.
  const snap = await api.call("POST", "/volumes/v/snapshots", { name: "s1", consistency: "crash" });
  assert.equal((await api.waitJob(snap.JobID)).state, "Done");
  await page.waitForSelector('#volume-snapshots tr[data-snapshot="s1"] .state-ready');

  // The volume's jobs, newest first.
  await page.waitForFunction(() => document.querySelectorAll("#volume-jobs tr[data-job]").length === 3);
  // Each job in words, its kind on hover.
  const titles = await page.$$eval("#volume-jobs tr[data-job] td[data-label=Job] .job-title", (ts) => ts.map((t) => [t.textContent, t.title]));
  assert.deepEqual(titles, [["Snapshot v as s1", "snapshot_create"], ["Attach v to host-1", "attachment_create"],
    ["Create v (2 GiB, policy mirror)", "volume_create"]]);
  await shots(page, "30-volume-page");

  // Delete while attached and with a snapshot: the in-page confirmation says what goes with it;
  // cancelled, nothing is sent.
  let deletes = 0;
  page.on("request", (r) => { if (r.method() === "DELETE") deletes += 1; });
  await page.click("#volume-actions button.delete");
  await page.waitForSelector("#confirm-dialog[open]");
  assert.equal(await page.textContent("#confirm-attached"), "It is attached to host-1: it is detached first, their NBD connections are closed.");
  assert.equal(await page.textContent("#confirm-snapshots"), "It has 1 snapshot (s1): it is deleted with it.");
  await shots(page, "31-volume-delete-confirmation");
  await page.click("#confirm-cancel");
  await page.waitForSelector("#confirm-dialog", { state: "detached" });
  await page.waitForTimeout(300);
  assert.equal(deletes, 0);

  // Detach from the page.
  asked.length = 0;
  await page.click(`${row} button.detach`);
  assert.match(asked[0], /^Detach volume "v" from node host-1\?/);
  assert.equal(await jobEnd(page), "Done");
  await page.waitForSelector(row, { state: "detached" });
  assert.equal(await page.isHidden("#volume-action-error"), true, "a new action starts clean");

  // Deleted: the page says so and still lists the volume's jobs by name.
  const del = await api.call("DELETE", "/volumes/v?force=true");
  await api.waitJob(del.JobID);
  await page.waitForSelector("#volume-gone");
  await page.waitForSelector("#volume-jobs tr[data-job] td[data-label=Job] .job-title:text-is('Delete v with its attachments and snapshots')");
  const jobs = await api.call("GET", "/jobs?object=v");
  assert.deepEqual(jobs.map((j) => j.type),
    ["volume_delete", "attachment_delete", "snapshot_create", "attachment_create", "volume_create"]);
  assert.ok(jobs.every((j) => j.objectname === "v" && j.object === id), JSON.stringify(jobs));
  await page.context().close();
});

test("a refused delete of an attached volume keeps its message on the live list", async () => {
  const server = await startServer([["d1", "node-a", "zone-a", 40]], "0", HOST);
  const api = await apiClient(server.base);
  await api.policy("none", 0, 0, 0);
  await api.volume("v", 2, "none");
  const attached = await api.call("POST", "/volumes/v/snapshots/top/attachments", { node: "host-1" });
  assert.equal((await api.waitJob(attached.JobID)).state, "Done");

  const page = await newPage();
  // The list has not seen the attachment (its attachments held stale, as when it was made
  // meanwhile): the confirmation asks for a plain delete, which the server refuses.
  await page.route("**/attachments", (route) => route.fulfill({ json: [] }));
  await signIn(page, server.base);
  await page.waitForSelector('tr[data-volume="v"]');
  await page.click('tr[data-volume="v"] button.danger');
  assert.equal(await page.textContent("#confirm-ok"), "Delete");
  await page.click("#confirm-ok");
  await page.waitForSelector("#volume-action-error:not([hidden])");
  assert.equal(await page.textContent("#volume-action-error .message"), `Could not delete "v": ${ATTACHED_REFUSAL}`);
  // Two list loads later (the one after the refusal and a live one) it is still there.
  for (let i = 0; i < 2; i++) {
    await page.waitForResponse((r) => r.url().endsWith("/volumes") && r.request().method() === "GET");
  }
  await page.waitForTimeout(200);
  assert.equal(await page.isVisible("#volume-action-error"), true);
  assert.equal(await page.textContent("#volume-action-error .message"), `Could not delete "v": ${ATTACHED_REFUSAL}`);
  await shots(page, "32-list-delete-refused");
  await page.context().close();
});

test("the resize dialog drops a corrected error and shows the new size after Done", async () => {
  const server = await startServer([["d1", "node-a", "zone-a", 100]]);
  const api = await apiClient(server.base);
  await api.policy("none", 0, 0, 0);
  await api.volume("db", 10, "none");
  const page = await newPage();
  await signIn(page, server.base);
  await page.click('tr[data-volume="db"] button.resize');
  await page.waitForSelector("#resize-dialog[open]");
  assert.equal(await page.textContent("#resize-current"), "Current size: 10 GiB.");
  await page.fill("#resize-size", "101");
  await page.click("#resize-submit");
  assert.equal(await page.textContent("#resize-dialog .error"),
    "A resize grows a volume to at most ten times its size: enter a whole number of GiB from 11 (more than the current 10) to 100 (ten times the current size).");
  // Corrected: the complaint goes at once, before anything is sent.
  await page.fill("#resize-size", "12");
  assert.equal(await page.isHidden("#resize-dialog .error"), true);
  // Still wrong stays: an invalid value keeps it.
  await page.fill("#resize-size", "5");
  await page.click("#resize-submit");
  assert.equal(await page.isVisible("#resize-dialog .error"), true);
  await page.fill("#resize-size", "12");
  assert.equal(await page.isHidden("#resize-dialog .error"), true);
  await page.click("#resize-submit");
  assert.equal(await jobEnd(page), "Done");
  await page.waitForFunction(() => document.querySelector("#resize-current")?.textContent === "Current size: 12 GiB.");
  assert.equal(await page.textContent("#resize-range"), "Allowed: 13 – 120 GiB");
  assert.equal(await page.inputValue("#resize-size"), "13");
  await shots(page, "33-resize-done-new-size");
  await page.click("#resize-close");
  await page.waitForFunction(() => /12 GiB/.test(document.querySelector('tr[data-volume="db"]')?.textContent));
  await page.context().close();
});

test("a movement started elsewhere shows live: busy buttons, human status, job names, a Jobs table that fits", async () => {
  // Data in the copy on m2 (the one lacking room): at 4 MiB/s the move takes about 8 s.
  const { server, api, id } = await volumeNeedingMovement("4 MiB");

  const page = await newPage();
  await signIn(page, server.base);
  const rowOf = 'tr[data-volume="data"]';
  await page.waitForSelector(`${rowOf} .state-ready`);
  assert.equal(await page.isEnabled(`${rowOf} button.resize`), true);
  assert.equal(await page.isEnabled(`${rowOf} button.danger`), true);

  // Started through the API: the list follows without a reload.
  const started = await api.call("PATCH", "/volumes/data", { size: 18, allowdatamovement: true });
  await page.waitForSelector(`${rowOf} .state-resizing`);
  assert.equal(await page.isDisabled(`${rowOf} button.resize`), true, "no resize while busy");
  assert.equal(await page.isDisabled(`${rowOf} button.danger`), true, "no delete while busy");
  assert.match(await page.getAttribute(`${rowOf} button.resize`, "title"), /^A job is working on "data"/);
  await shots(page, "34-volumes-busy");

  // The volume's page: the movement's human status, and its buttons disabled too.
  await page.click(`${rowOf} a.vol-link`);
  await page.waitForFunction((re) => new RegExp(re).test(document.querySelector("#volume-status")?.textContent || ""), MOVING.source);
  assert.equal(await page.isDisabled("#volume-actions button.resize"), true);
  assert.equal(await page.isDisabled("#volume-actions button.delete"), true);
  await shots(page, "35-volume-moving");

  // Jobs: the running job's status and every job's volume name; the table fits 1280 px.
  await page.click("nav a[data-page=jobs]");
  const jobRow = `tr[data-job="${started.JobID}"]`;
  // The Jobs page's row (it has a Volume column; the volume page just left has a row for the
  // same job without one, until the Jobs page replaces it).
  await page.waitForFunction(
    ([sel, re]) => document.querySelector(`${sel} td[data-label=Volume]`) &&
      new RegExp(re).test(document.querySelector(`${sel} .job-status`)?.textContent || ""),
    [jobRow, MOVING.source]);
  const names = await page.$$eval("tr[data-job] td[data-label=Volume]", (tds) => tds.map((t) => t.textContent));
  assert.deepEqual(names, ["data", "filler", "data", "filler"]);
  assert.equal(await page.getAttribute(`${jobRow} a.job-object`, "href"), "#/volumes/data");
  assert.equal(await pageOverflows(page), false, "the page does not scroll sideways at 1280 px");
  const wrap = await page.$eval(".table-wrap", (w) => [w.scrollWidth, w.clientWidth]);
  assert.ok(wrap[0] <= wrap[1], `the jobs table fits its box: ${wrap}`);
  await shots(page, "36-jobs-moving");

  // Filtered by name: the volume's jobs only.
  await page.fill("#job-object", "filler");
  await page.press("#job-object", "Enter");
  await page.waitForFunction(() => document.querySelectorAll("tr[data-job]").length === 2);
  await page.fill("#job-object", "");
  await page.press("#job-object", "Enter");

  // Done: the list shows the new size and the buttons come back, all without a reload.
  assert.equal((await api.waitJob(started.JobID)).state, "Done");
  await page.click("nav a[data-page=volumes]");
  await page.waitForFunction(() => /18 GiB/.test(document.querySelector('tr[data-volume="data"]')?.textContent));
  await page.waitForSelector(`${rowOf} button.resize:not([disabled])`);
  // A long finished job still fits (its details wrap).
  await page.click("nav a[data-page=jobs]");
  await page.waitForSelector(`${jobRow} .state-done`);
  assert.equal(await pageOverflows(page), false);
  await page.context().close();
});
