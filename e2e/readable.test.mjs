// End-to-end tests of issue 27's console changes: jobs named by what they do,
// a resize's target size, the volume list's zone, attachments and search, a
// list live behind the resize dialog that resets after Done, no bar on a
// settled volume, a failed job's red bar, media's written bytes, the
// policy form's copies and the slice vocabulary. Helpers in lib.mjs.
import { test } from "node:test";
import assert from "node:assert/strict";
import { HOST, startServer, apiClient, shots, newPage, signIn, jobEnd, fillSlice, volumeNeedingMovement } from "./lib.mjs";

const RED = "rgb(198, 40, 40)"; // --danger
const RED_TRACK = "rgb(245, 194, 192)"; // a failed bar's track

/** Texts of the visible volume rows' names. */
async function listed(page) {
  return page.$$eval("tr[data-volume]", (trs) => trs.map((t) => t.dataset.volume));
}

test("volume list: zone, attachments, search, no bar when settled; live behind the resize dialog, which resets after Done", async () => {
  const server = await startServer([["m1", "n1", "z1", 20], ["m2", "n2", "z2", 16], ["m3", "n3", "z3", 30]], "4 MiB", HOST);
  const api = await apiClient(server.base);
  await api.policy("none", 0, 0, 0);
  await api.policy("mirror", 1, 1, 0);
  await api.volume("filler", 20, "none"); // takes m3
  const id = await api.volume("data", 15, "mirror"); // m1 + m2
  const del = await api.call("DELETE", "/volumes/filler");
  await api.waitJob(del.JobID);
  await api.volume("web", 2, "none"); // m3: the most free
  const att = await api.call("POST", "/volumes/web/snapshots/top/attachments", { node: "host-1", readonly: true });
  assert.equal((await api.waitJob(att.JobID)).state, "Done");
  fillSlice(server, "m2", id, 1, 0, 0xab); // the copy that must move holds 32 MiB
  const zonesOf = async (v) => (await api.call("GET", `/volumes/${v}`)).zones.join(", ");

  const page = await newPage();
  await signIn(page, server.base);
  await page.waitForSelector('tr[data-volume="web"] .state-ready');
  // Zone and attachment of each volume; a settled volume has no progress bar.
  const row = (v, label) => page.textContent(`tr[data-volume="${v}"] td[data-label="${label}"]`);
  // Every zone a volume's copies are in: the mirrored one's two.
  assert.equal(await row("web", "Zones"), await zonesOf("web"));
  assert.equal(await row("data", "Zones"), "z1, z2");
  assert.equal(await row("web", "Attached"), "host-1 read-only");
  assert.equal(await row("data", "Attached"), "—");
  assert.equal(await row("data", "State"), "Ready");
  assert.equal(await page.locator("tr[data-volume] .progress").count(), 0, "no 100 % bar on Ready volumes");

  // The search box narrows the list by name, node, zone, policy.
  await page.fill("#vol-search", "host-1");
  await page.waitForFunction(() => document.querySelectorAll("tr[data-volume]").length === 1);
  assert.deepEqual(await listed(page), ["web"]);
  await page.fill("#vol-search", "mirror");
  await page.waitForFunction(() => document.querySelector("tr[data-volume]")?.dataset.volume === "data");
  assert.deepEqual(await listed(page), ["data"]);
  await shots(page, "40-volumes-search");
  await page.fill("#vol-search", "nothing-like-it");
  await page.waitForSelector("td.empty");
  assert.equal(await page.textContent("td.empty"), 'No volume matches "nothing-like-it".');
  await page.fill("#vol-search", "");
  await page.waitForFunction(() => document.querySelectorAll("tr[data-volume]").length === 2);

  // Resize with data movement from the dialog: the list behind it keeps
  // refreshing (state, target size, progress bar) while it is open.
  await page.click('tr[data-volume="data"] button.resize');
  await page.waitForSelector("#resize-dialog[open]");
  await page.fill("#resize-size", "18");
  await page.check("#resize-move");
  await page.click("#resize-submit");
  await page.waitForFunction(() => document.querySelector("#resize-job #job-what")?.textContent === "Resize data 15 → 18 GiB");
  assert.equal(await page.getAttribute("#resize-job #job-what", "title"), "volume_modify_extend");
  await page.waitForSelector('tr[data-volume="data"] .state-resizing', { state: "attached" });
  await page.waitForFunction(() => document.querySelector('tr[data-volume="data"] td[data-label="Size"]')?.textContent === "15 → 18 GiB");
  assert.equal(await page.locator('tr[data-volume="data"] .progress').count(), 1, "a busy volume has its bar");
  assert.equal(await page.isVisible("#resize-dialog"), true, "the dialog is still open");
  await shots(page, "41-resize-live-behind-dialog");

  // Done: the dialog is ready for the next resize, the list shows the new size.
  assert.equal(await jobEnd(page), "Done");
  await page.waitForSelector("#resize-done:not([hidden])");
  assert.match(await page.textContent("#resize-done"), /^Resized data to 18 GiB \(job \d+ Done\)\.$/);
  assert.equal(await page.isHidden("#resize-job"), true, "the finished job's panel is gone");
  assert.equal(await page.isChecked("#resize-move"), false);
  assert.equal(await page.inputValue("#resize-size"), "19");
  assert.equal(await page.textContent("#resize-current"), "Current size: 18 GiB.");
  await page.waitForFunction(() => document.querySelector('tr[data-volume="data"] td[data-label="Size"]')?.textContent === "18 GiB");
  await page.waitForFunction(() => document.querySelector('tr[data-volume="data"] td[data-label="State"]')?.textContent === "Ready");
  assert.equal(await page.locator('tr[data-volume="data"] .progress').count(), 0, "no bar once settled");
  await shots(page, "42-resize-dialog-reset");
  await page.click("#resize-close");
  await page.context().close();
});

test("a resize started elsewhere: its target size on the volume page, jobs in words, slices named as statuses name them", async () => {
  const { server, api } = await volumeNeedingMovement("4 MiB");
  const page = await newPage();
  await signIn(page, server.base);
  await page.goto(`${server.base}/ui/#/volumes/data`);
  await page.waitForSelector("#volume-summary dl");
  assert.equal(await page.textContent("#volume-size"), "15 GiB");

  // The slices: the API's names, which the moving job's status uses.
  const slices = await api.call("GET", "/volumes/data/slices");
  assert.deepEqual(slices.map((s) => s.name).sort(), slices.map((s) => `c${s.copy}-k${s.column}`).sort());
  assert.equal(await page.textContent("#volume-copies h2"), "Slices");
  const names = await page.$$eval("#volume-copies td[data-label=Slice]", (tds) => tds.map((t) => t.textContent));
  assert.deepEqual(names, ["c0-k0", "c1-k0"]);

  const started = await api.call("PATCH", "/volumes/data", { size: 18, allowdatamovement: true });
  await page.waitForFunction(() => document.querySelector("#volume-size")?.textContent === "15 → 18 GiB");
  await page.waitForFunction(() => /^Moving slice c1-k0 from m2 to m3/.test(document.querySelector("#volume-status")?.textContent || ""));
  const running = `#volume-jobs tr[data-job="${started.JobID}"]`;
  await page.waitForSelector(running);
  assert.equal(await page.textContent(`${running} .job-title`), "Resize data 15 → 18 GiB");
  await shots(page, "43-volume-target-size");

  // The Jobs page: every job in words, the filter by kind in words too.
  await page.click("nav a[data-page=jobs]");
  await page.waitForSelector(`tr[data-job="${started.JobID}"] td[data-label=Volume]`);
  const titles = await page.$$eval("tr[data-job] td[data-label=Job]", (tds) => tds.map((t) => t.textContent));
  assert.deepEqual(titles, ["Resize data 15 → 18 GiB", "Delete filler", "Create data (15 GiB, policy mirror)",
    "Create filler (20 GiB, policy none)"]);
  assert.equal(await page.textContent('#job-type option[value="volume_modify_extend"]'), "Resize volume");
  await page.selectOption("#job-type", "volume_create");
  await page.waitForFunction(() => document.querySelectorAll("tr[data-job]").length === 2);
  await page.selectOption("#job-type", "");

  assert.equal((await api.waitJob(started.JobID)).state, "Done");
  await page.click("nav a[data-page=volumes]");
  await page.click('tr[data-volume="data"] a.vol-link');
  await page.waitForFunction(() => document.querySelector("#volume-size")?.textContent === "18 GiB");
  await page.context().close();
});

test("a failed job's bar is red, in the dialog, on the volume page and on the Jobs page", async () => {
  const server = await startServer([["a1", "node-a", "zone-a", 10], ["b1", "node-b", "zone-b", 12]]);
  const api = await apiClient(server.base);
  await api.policy("none", 0, 0, 0);
  await api.volume("spread", 16, "none");
  const page = await newPage();
  await signIn(page, server.base);
  await page.click('tr[data-volume="spread"] button.resize');
  await page.waitForSelector("#resize-dialog[open]");
  await page.fill("#resize-size", "22");
  await page.click("#resize-submit");
  assert.equal(await jobEnd(page), "Error");
  // The failed job stays in the dialog, its bar red.
  assert.equal(await page.isVisible("#resize-job"), true);
  assert.equal(await page.isHidden("#resize-done"), true);
  await page.waitForFunction(() => document.querySelector("#resize-job .fill")?.classList.contains("failed"));
  assert.equal(await page.$eval("#resize-job .fill", (f) => getComputedStyle(f).backgroundColor), RED);
  assert.equal(await page.$eval("#resize-job .bar", (b) => getComputedStyle(b).backgroundColor), RED_TRACK, "a bar at 0 % shows it too");
  await shots(page, "44-resize-error-red");
  await page.click("#resize-close");

  const job = (await api.call("GET", "/jobs?type=volume_modify_extend"))[0];
  assert.equal(job.state, "Error");
  for (const [where, go] of [["#volume-jobs", "#/volumes/spread"], ["#main", "#/jobs"]]) {
    await page.goto(`${server.base}/ui/${go}`);
    const sel = `${where} tr[data-job="${job.id}"]`;
    await page.waitForSelector(`${sel} .state-error`);
    assert.equal(await page.textContent(`${sel} .job-title`), "Resize spread 16 → 22 GiB");
    assert.equal(await page.$eval(`${sel} .progress .fill`, (f) => getComputedStyle(f).backgroundColor), RED, where);
    assert.equal(await page.$eval(`${sel} .progress .bar`, (b) => getComputedStyle(b).backgroundColor), RED_TRACK, where);
    // A finished job has a Done badge, not a full bar.
    const created = `${where} tr[data-job]:not([data-job="${job.id}"])`;
    assert.equal(await page.textContent(`${created} td[data-label=Progress]`), "✓ Done");
    assert.equal(await page.locator(`${created} .progress`).count(), 0, where);
  }
  await shots(page, "45-jobs-error-red");
  await page.context().close();
});

test("media show written bytes beside allocated; the policy form says how many copies a policy makes", async () => {
  const server = await startServer([["d1", "node-a", "zone-a", 100], ["d2", "node-b", "zone-b", 100]]);
  const api = await apiClient(server.base);
  await api.policy("none", 0, 0, 0);
  const id = await api.volume("v", 2, "none");
  const medium = (await api.call("GET", `/volumes/v/slices`))[0].media;
  const other = medium === "d1" ? "d2" : "d1";
  fillSlice(server, medium, id, 0, 0, 0x5a); // 32 MiB written
  const written = (await api.call("GET", `/media/${medium}`)).writtenbytes;
  assert.ok(written >= 32 * 1024 * 1024 && written < 33 * 1024 * 1024, `writtenbytes ${written}`);
  assert.equal((await api.call("GET", `/media/${other}`)).writtenbytes, 0);

  const page = await newPage();
  await signIn(page, server.base);
  await page.click("nav a[data-page=media]");
  await page.waitForSelector(`[data-medium="${medium}"] .usage`);
  assert.equal(await page.textContent(`[data-medium="${medium}"] .usage`),
    "2.0 GiB allocated to slices · 32.0 MiB written · 98.0 GiB free · 100.0 GiB total · 1 volume");
  assert.equal(await page.textContent(`[data-medium="${other}"] .usage`),
    "0 B allocated to slices · 0 B written · 100.0 GiB free · 100.0 GiB total · 0 volumes");
  // The written part fills the allocated one: 32 MiB of 2 GiB.
  const share = await page.$eval(`[data-medium="${medium}"] .written`, (w) => w.getBoundingClientRect().width / w.parentElement.getBoundingClientRect().width);
  assert.ok(share > 0.01 && share < 0.03, `written share of the allocated bar: ${share}`);
  await shots(page, "46-media-written");

  // Policies: the hint counts copies (1 + the largest resiliency), the list too.
  await page.click("nav a[data-page=policies]");
  await page.waitForSelector("#pol-copies");
  assert.equal(await page.textContent("#pol-copies"),
    "1 copy of every slice (1 + the largest resiliency of media 0, node 0, zone 0): losing its medium loses data.");
  await page.selectOption("#pol-media", "1");
  await page.selectOption("#pol-node", "1");
  assert.equal(await page.textContent("#pol-copies"),
    "2 copies of every slice (1 + the largest resiliency of media 1, node 1, zone 0), each copy of a column on a different medium and node.");
  await page.selectOption("#pol-zone", "2");
  assert.match(await page.textContent("#pol-copies"), /^3 copies of every slice .* on a different medium, node and zone\.$/);
  await page.selectOption("#pol-zone", "0");
  await page.fill("#pol-name", "mirror");
  await page.click("#create-policy button[type=submit]");
  await page.waitForSelector('tr[data-policy="mirror"]');
  assert.equal(await page.textContent('tr[data-policy="mirror"] td[data-label=Copies]'), "2");
  assert.equal(await page.textContent('tr[data-policy="none"] td[data-label=Copies]'), "1");
  await shots(page, "47-policy-copies");
  await page.context().close();
});
