// End-to-end tests of the web console: a real `svs serve` (SVS_BIN) driven
// through real headless Chromium (/usr/bin/chromium) with playwright-core.
// The shared helpers are in lib.mjs.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  EMAIL, PASSWORD, HOST, startServer, apiClient, shots, newPage, signIn, resizeInUi, jobEnd,
  addUser, mediaOf, asAgent, fillSlice, volumeNeedingMovement, waitText,
} from "./lib.mjs";

const NO_IN_PLACE = "GetModificationPlan: Could not find an in-place modification plan";

test("sign in, policy, volume, in-place resize, pages, sign out", async () => {
  const server = await startServer([
    ["d1", "node-a", "zone-a", 100], ["d2", "node-b", "zone-b", 100], ["d3", "node-c", "zone-a", 60],
  ]);
  const page = await newPage();

  // /ui redirects to /ui/, which is served with its type and no-cache.
  const res = await page.goto(`${server.base}/ui`);
  assert.ok(page.url().endsWith("/ui/#/signin"), page.url());
  assert.match(res.headers()["content-type"], /^text\/html/);
  assert.equal(res.headers()["cache-control"], "no-cache");
  await shots(page, "01-signin");

  // A bad password shows the server's message.
  await page.fill("#email", EMAIL);
  await page.fill("#password", "wrong-password");
  await page.click("button[type=submit]");
  await page.waitForSelector(".error:not([hidden])");
  assert.match(await page.textContent(".error"), /Incorrect email or password/);
  await shots(page, "02-signin-error");

  await page.fill("#password", PASSWORD);
  await page.click("button[type=submit]");
  await page.waitForSelector("header#top:not([hidden])");
  assert.ok(await page.evaluate(() => sessionStorage.getItem("svs.session")), "tokens kept in sessionStorage");

  // Policies: create one with resiliency media 1 node 1.
  await page.click("nav a[data-page=policies]");
  await page.fill("#pol-name", "mirror");
  await page.selectOption("#pol-media", "1");
  await page.selectOption("#pol-node", "1");
  await page.click("#create-policy button[type=submit]");
  await page.waitForSelector('tr[data-policy="mirror"]');
  const cells = await page.$$eval('tr[data-policy="mirror"] td', (tds) => tds.map((t) => t.textContent));
  assert.deepEqual(cells.slice(0, 4), ["mirror", "1", "1", "0"]);
  // A duplicate is refused with the server's words.
  await page.fill("#pol-name", "mirror");
  await page.click("#create-policy button[type=submit]");
  await page.waitForSelector("#create-policy .error:not([hidden])");
  assert.ok((await page.textContent("#create-policy .error")).length > 0);
  await shots(page, "03-policies");

  // Volumes: create one.
  await page.click("nav a[data-page=volumes]");
  await page.waitForSelector('#vol-policy option[value="mirror"]', { state: "attached" });
  await page.fill("#vol-name", "db");
  await page.fill("#vol-size", "10");
  await page.selectOption("#vol-policy", "mirror");
  await page.click("#create-volume button[type=submit]");
  await page.waitForSelector('tr[data-volume="db"] .state-ready', { timeout: 20_000 });
  assert.match(await page.textContent('tr[data-volume="db"]'), /10 GiB/);

  // Resize: the range is shown and enforced before anything is sent.
  await page.click('tr[data-volume="db"] button.resize');
  await page.waitForSelector("#resize-dialog[open]");
  assert.match(await page.textContent("#resize-range"), /11 – 100 GiB/);
  await page.fill("#resize-size", "101");
  await page.click("#resize-submit");
  assert.match(await page.textContent("#resize-dialog .error"), /from 11 \(more than the current 10\) to 100 \(ten times the current size\)/);
  assert.equal(await page.isHidden("#resize-job"), true, "nothing was sent");
  await shots(page, "04-resize-dialog");
  await page.click("#resize-close");

  const { state } = await resizeInUi(page, "db", 12, false);
  assert.equal(state, "Done");
  await shots(page, "05-resize-done");
  await page.click("#resize-close");
  await page.waitForFunction(() => /12 GiB/.test(document.querySelector('tr[data-volume="db"]')?.textContent));
  await shots(page, "06-volumes");

  // Media: capacity grouped by zone and node.
  await page.click("nav a[data-page=media]");
  await page.waitForSelector('[data-medium="d1"]');
  const zones = await page.$$eval("section.zone h2", (hs) => hs.map((x) => x.textContent));
  assert.deepEqual(zones, ["Zone zone-a", "Zone zone-b"]);
  // Allocated (slices) beside written (what the sparse slices hold: nothing yet).
  assert.match(await page.textContent('[data-medium="d1"]'), /12\.0 GiB allocated to slices · (.* held by snapshots \(1 GiB of free space set aside for them\) · )?[\d.]+ (B|KiB|MiB) written · 88\.0 GiB free · 100\.0 GiB total/);
  await shots(page, "07-media");

  // Jobs: the create and resize jobs, filterable.
  await page.click("nav a[data-page=jobs]");
  await page.waitForSelector("tr[data-job]");
  assert.equal(await page.locator("tr[data-job]").count(), 2);
  await page.selectOption("#job-type", "volume_modify_extend");
  await page.waitForFunction(() => document.querySelectorAll("tr[data-job]").length === 1);
  assert.match(await page.textContent("tr[data-job]"), /Resize db 10 → 12 GiB.*Done/);
  await page.selectOption("#job-type", "");
  await page.selectOption("#job-count", "10");
  await page.waitForFunction(() => document.querySelectorAll("tr[data-job]").length === 2);
  await shots(page, "08-jobs");

  // Delete the volume (confirmed in the page's dialog).
  await page.click("nav a[data-page=volumes]");
  await page.click('tr[data-volume="db"] button.danger');
  await page.click("#confirm-ok");
  await page.waitForSelector('tr[data-volume="db"]', { state: "detached", timeout: 20_000 });

  // Sign out: the server is told, storage is cleared, the sign-in page is back.
  const signout = page.waitForRequest((r) => r.url().endsWith("/signout") && r.method() === "POST");
  await page.click("#signout");
  assert.ok(JSON.parse((await signout).postData()).AccessToken);
  await page.waitForSelector("#email");
  assert.equal(await page.evaluate(() => sessionStorage.getItem("svs.session")), null);
  assert.match(await page.textContent(".notice"), /signed out/);
  await page.context().close();
});

test("resize with data movement shows progress until Done", async () => {
  // Data in the copy on m2 (the one lacking room) so the move takes a few seconds.
  const { server, api } = await volumeNeedingMovement("8 MiB");

  const page = await newPage();
  await signIn(page, server.base);
  await page.waitForSelector('tr[data-volume="data"]');
  const { state, seen, statuses, previewText, planned } = await resizeInUi(page, "data", 18, true, { preview: true });
  assert.equal(state, "Done");
  // The preview named the move and its time before anything changed, and
  // the resize carried out that plan.
  assert.match(previewText, /With data movement: GetMovementModificationPlan: Found movement plan/);
  assert.match(previewText, /c1-k0: m2 \(n2\) → m3 \(n3\), 32\.0 MiB of data/);
  assert.match(previewText, /Data to copy: 32\.0 MiB, about 4 s at 8\.0 MiB\/s\./);
  assert.ok(planned && /^[0-9a-f]+$/.test(planned), `the resize was sent with the previewed plan: ${planned}`);
  const midway = seen.filter((p) => p > 0 && p < 100);
  assert.ok(midway.length > 0, `progress between 0 and 100 shown (seen: ${[...new Set(seen)]})`);
  // The moving slice with its bytes, rate and time left.
  const moving = /^Moving slice c1-k0 from m2 to m3 \(1 of 1\): [\d.]+ (B|KiB|MiB) of [\d.]+ (KiB|MiB|GiB), [\d.]+ (B|KiB|MiB)\/s, about \d+ (s|min \d+ s) left$/;
  assert.ok(statuses.some((s) => moving.test(s)), `the movement's status shown: ${JSON.stringify(statuses)}`);
  await shots(page, "09-movement-done");
  await page.click("#resize-close");
  await page.waitForFunction(() => /18 GiB/.test(document.querySelector('tr[data-volume="data"]')?.textContent));
  const job = (await api.call("GET", "/jobs?type=volume_modify_extend"))[0];
  assert.ok(job.details.some((d) => d.startsWith("GetMovementModificationPlan: Found movement plan")), JSON.stringify(job));
  await page.context().close();
});

test("Cancel on a running data movement: confirmed, the job ends Cancelled and the volume keeps its size", async () => {
  // 32 MiB to move at 2 MiB/s: each movement runs ~16 s, time enough to cancel it.
  const { server, api } = await volumeNeedingMovement("2 MiB");
  const before = await mediaOf(api, "data");
  const page = await newPage();
  const asked = [];
  page.on("dialog", (d) => asked.push(d.message()));
  await signIn(page, server.base);
  const moving = (sel) => page.waitForFunction(
    (s) => /^Moving slice c1-k0 from m2 to m3/.test(document.querySelector(s)?.textContent || ""), sel);
  const question = (id) => `Cancel job ${id} (volume_modify_extend on 'data')? ` +
    "The data movement stops and every slice goes back where it was; the volume keeps its size of 15 GiB.";
  const kept = async (id) => {
    const job = await api.call("GET", `/jobs/${id}`);
    assert.equal(job.state, "Error", JSON.stringify(job));
    assert.equal(job.status, "Cancelled");
    assert.equal(job.cancelrequested, true);
    assert.match(job.details.at(-1), /^Cancelled: volume 'data' stays at 15 GiB, every slice on its original medium/);
    assert.equal((await api.call("GET", "/volumes/data")).size, 15);
    assert.deepEqual(await mediaOf(api, "data"), before, "every slice back where it was");
    return job;
  };

  // The Jobs page: a resize started through the API offers Cancel while it moves data.
  const first = await api.call("PATCH", "/volumes/data", { size: 18, allowdatamovement: true });
  await page.click("nav a[data-page=jobs]");
  const row = `tr[data-job="${first.JobID}"]`;
  await moving(`${row} .job-status`);
  assert.equal(await page.textContent(`${row} button.cancel-job`), "Cancel");
  // Only that job: the volumes' creations and deletion ended.
  assert.equal(await page.locator("button.cancel-job").count(), 1);
  await shots(page, "27-jobs-cancel-offered");
  const sent = page.waitForRequest((r) => r.method() === "DELETE" && r.url().endsWith(`/jobs/${first.JobID}`));
  await page.click(`${row} button.cancel-job`);
  await sent;
  assert.equal(asked.at(-1), question(first.JobID));
  await waitText(page, "#job-notice", `Job ${first.JobID} is being cancelled: follow it with GET /jobs/${first.JobID}.`);
  await page.waitForSelector(`${row} .state-cancelled`, { timeout: 30_000 });
  // Cancelled, not failed: its own word, a grey bar, no Cancel any more.
  assert.equal(await page.textContent(`${row} td[data-label=State]`), "Cancelled");
  assert.equal(await page.getAttribute(`${row} .progress`, "class"), "progress cancelled");
  assert.match(await page.textContent(`${row} td[data-label=Details]`), /Cancelled: volume 'data' stays at 15 GiB/);
  assert.equal(await page.isHidden("#job-action-error"), true);
  await kept(first.JobID);
  await shots(page, "28-jobs-cancelled");

  // The volume's page lists it Cancelled; the resize dialog's job has Cancel too.
  await page.goto(`${server.base}/ui/#/volumes/data`);
  await page.waitForSelector(`#volume-jobs tr[data-job="${first.JobID}"] .state-cancelled`);
  assert.equal(await page.textContent("#volume-size"), "15 GiB");
  await page.click("#volume-actions button.resize");
  await page.waitForSelector("#resize-dialog[open]");
  await page.fill("#resize-size", "18");
  await page.check("#resize-move");
  await page.click("#resize-submit");
  await moving("#resize-job #job-status");
  await page.click("#resize-job #job-cancel");
  const second = (await api.call("GET", "/jobs?type=volume_modify_extend"))[0];
  assert.notEqual(second.id, Number(first.JobID));
  assert.equal(asked.at(-1), question(second.id));
  await waitText(page, "#job-cancel-notice", `Job ${second.id} is being cancelled: follow it with GET /jobs/${second.id}.`);
  await waitText(page, "#resize-job #job-state", "Cancelled");
  assert.equal(await page.isHidden("#resize-job #job-cancel"), true);
  assert.equal(await page.isHidden("#resize-job #job-error"), true, "a cancel is not a failure");
  assert.equal(await page.isHidden("#job-cancel-notice"), true, "the job has ended");
  assert.match(await page.textContent("#resize-job #job-detail"), /^Cancelled: volume 'data' stays at 15 GiB/);
  assert.equal(await page.$eval("#resize-job .fill", (f) => f.className), "fill cancelled");
  await kept(second.id);
  await shots(page, "29-resize-cancelled");
  await page.click("#resize-close");
  await page.waitForSelector(`#volume-jobs tr[data-job="${second.id}"] .state-cancelled`);
  assert.equal(await page.textContent("#volume-size"), "15 GiB");

  // A job that ends while its confirmation is open is left alone: no DELETE (which would
  // remove its record), the console says it ended. Cancel from the volume's status line.
  const third = await api.call("PATCH", "/volumes/data", { size: 18, allowdatamovement: true });
  await page.waitForSelector("#volume-cancel-job");
  await page.removeAllListeners("dialog");
  page.on("dialog", async (d) => {
    asked.push(d.message());
    await api.waitJob(third.JobID);
    await d.accept();
  });
  let deletes = 0;
  page.on("request", (r) => { if (r.method() === "DELETE") deletes += 1; });
  // The click returns once the confirmation is answered, when the job has ended.
  await page.click("#volume-cancel-job", { timeout: 60_000 });
  await waitText(page, "#volume-action-error .message",
    `Could not cancel job ${third.JobID}: it ended (Done) before the cancel was sent.`, 60_000);
  assert.equal(asked.at(-1), question(third.JobID));
  assert.equal(deletes, 0);
  assert.equal((await api.call("GET", `/jobs/${third.JobID}`)).state, "Done", "its record stays");
  await page.waitForFunction(() => document.querySelector("#volume-size")?.textContent === "18 GiB");
  assert.equal(await page.locator("#volume-cancel-job").count(), 0);
  await page.context().close();
});

test("Pause, Resume and Rate on a running data movement: paused, resumed, then Done quickly at 64 MiB/s", async () => {
  // 32 MiB to move at 1 MiB/s: ~32 s at the service's rate, well under a second at 64 MiB/s.
  const { server, api } = await volumeNeedingMovement("1 MiB");
  const page = await newPage();
  // Prompts of the Rate button: a malformed rate first, then 64 MiB.
  const asked = [];
  const answers = ["fast", "64 MiB/s"];
  page.removeAllListeners("dialog");
  page.on("dialog", async (d) => {
    asked.push({ type: d.type(), message: d.message(), value: d.defaultValue() });
    await (d.type() === "prompt" ? d.accept(answers.shift()) : d.accept());
  });
  const patches = [];
  page.on("request", (r) => {
    if (r.method() === "PATCH" && /\/jobs\/\d+$/.test(r.url())) patches.push(JSON.parse(r.postData()));
  });
  await signIn(page, server.base);
  const moving = (sel) => page.waitForFunction(
    (s) => /^Moving slice c1-k0 from m2 to m3/.test(document.querySelector(s)?.textContent || ""), sel);

  // The Jobs page: a data movement started through the API offers Pause and Rate beside Cancel.
  const r = await api.call("PATCH", "/volumes/data", { size: 18, allowdatamovement: true });
  const id = Number(r.JobID);
  await page.click("nav a[data-page=jobs]");
  const row = `tr[data-job="${id}"]`;
  await moving(`${row} .job-status`);
  assert.equal(await page.textContent(`${row} button.pause-job`), "Pause");
  assert.equal(await page.textContent(`${row} button.rate-job`), "Rate");
  assert.equal(await page.locator(`${row} button.resume-job`).count(), 0);
  assert.equal(await page.locator("button.pause-job").count(), 1, "only the running data movement");
  assert.equal(await page.locator(`${row} .job-rate`).count(), 0, "no rate of its own yet");

  // Pause: no question asked, the job stays Running in the API but paused, shown Paused in amber.
  await page.click(`${row} button.pause-job`);
  await waitText(page, "#job-notice",
    `Job ${id} paused: its copies stop at their last checkpoint (writes to the volume go on); Resume goes on from there.`);
  assert.deepEqual(patches.at(-1), { paused: true });
  assert.equal(asked.length, 0, "no confirmation for a pause");
  await page.waitForSelector(`${row} .state-paused`, { timeout: 30_000 });
  // The pause is recorded at once; the holder's copies take it at their next
  // step and then the status reads "Paused:" (the page shows what the API says).
  await page.waitForFunction((s) => /^Paused:/.test(document.querySelector(s)?.textContent || ""),
    `${row} .job-status`, { timeout: 30_000 });
  let job = await api.call("GET", `/jobs/${id}`);
  assert.equal(job.state, "Running", JSON.stringify(job));
  assert.equal(job.paused, true);
  assert.match(job.status, /^Paused:/);
  assert.equal(await page.textContent(`${row} .state-paused`), "Paused");
  assert.equal(await page.$eval(`${row} .state-paused`, (e) => getComputedStyle(e).color), "rgb(138, 75, 0)");
  assert.equal(await page.textContent(`${row} button.resume-job`), "Resume");
  assert.equal(await page.locator(`${row} button.pause-job`).count(), 0);
  assert.equal(await page.textContent(`${row} button.cancel-job`), "Cancel", "a paused job can still be cancelled");
  assert.equal(await page.isHidden("#job-action-error"), true);
  await shots(page, "37-jobs-paused");
  // Paused: the copy does not move on.
  const held = (await api.call("GET", `/jobs/${id}`)).progress;
  await page.waitForTimeout(1500);
  assert.equal((await api.call("GET", `/jobs/${id}`)).progress, held);

  // The volume's page: the paused job beside the status line and in its Jobs table; Resume there.
  await page.goto(`${server.base}/ui/#/volumes/data`);
  await page.waitForSelector("#volume-resume-job");
  await page.waitForSelector(`#volume-jobs ${row} .state-paused`);
  assert.equal(await page.locator("#volume-pause-job").count(), 0);
  await shots(page, "38-volume-paused");
  await page.click("#volume-resume-job");
  await waitText(page, "#volume-notice", `Job ${id} resumed: its copies go on from their last checkpoint.`);
  assert.deepEqual(patches.at(-1), { paused: false });
  job = await api.call("GET", `/jobs/${id}`);
  assert.equal(job.paused, false, JSON.stringify(job));
  await page.waitForSelector("#volume-pause-job");
  await moving(`#volume-jobs ${row} .job-status`);

  // Rate: a malformed rate is refused in the server's words, then 64 MiB/s is taken.
  await page.click("#volume-rate-job");
  await page.waitForFunction(() => /^Could not set the rate of job \d+: movementrate must be a rate like/
    .test(document.querySelector("#volume-action-error .message")?.textContent || ""));
  assert.deepEqual(patches.at(-1), { movementrate: "fast" });
  assert.equal(asked.at(-1).type, "prompt");
  assert.match(asked.at(-1).message, new RegExp(`^Copy rate of job ${id} \\(Resize data 15 → 18 GiB\\), per second: ` +
    "e\\.g\\. 64 MiB; 0 for unthrottled; empty for the service's movement rate\\. Now: the service's movement rate\\.$"));
  assert.equal(asked.at(-1).value, "", "no rate of its own yet");
  assert.equal((await api.call("GET", `/jobs/${id}`)).movementrate, null);
  await page.click("#volume-rate-job");
  const rateSet = Date.now();
  await waitText(page, "#volume-notice", `Job ${id} now copies at 64.0 MiB/s.`);
  assert.deepEqual(patches.at(-1), { movementrate: "64 MiB" }, "the trailing /s dropped");
  assert.equal(await page.isHidden("#volume-action-error"), true);
  // Done within seconds, where 1 MiB/s would still take tens of seconds.
  job = await api.waitJob(id);
  assert.equal(job.state, "Done", JSON.stringify(job));
  assert.ok(Date.now() - rateSet < 10_000, `Done ${Date.now() - rateSet} ms after the rate was set`);
  assert.equal(job.movementrate, 67108864);
  assert.equal(job.paused, false);
  await page.waitForSelector(`#volume-jobs ${row} .state-done`);
  assert.equal(await page.textContent(`#volume-jobs ${row} .job-rate`), "Rate: 64.0 MiB/s");
  assert.equal(await page.locator(`#volume-jobs ${row} .job-buttons`).count(), 0, "no buttons once it ended");
  await page.waitForFunction(() => document.querySelector("#volume-size")?.textContent === "18 GiB");
  await page.locator("#volume-jobs").scrollIntoViewIfNeeded();
  await shots(page, "39-volume-job-rate");
  assert.deepEqual(await mediaOf(api, "data"), ["m1", "m3"]);
  await page.context().close();
});

test("a refused in-place resize shows the seed's error", async () => {
  const server = await startServer([["a1", "node-a", "zone-a", 10], ["b1", "node-b", "zone-b", 12]]);
  const api = await apiClient(server.base);
  await api.policy("none", 0, 0, 0);
  await api.volume("spread", 16, "none");

  const page = await newPage();
  await signIn(page, server.base);
  await page.waitForSelector('tr[data-volume="spread"]');
  const { state } = await resizeInUi(page, "spread", 22, false);
  assert.equal(state, "Error");
  await page.waitForSelector("#job-error:not([hidden])");
  assert.match(await page.textContent("#job-error"), new RegExp(NO_IN_PLACE));
  await shots(page, "10-resize-error");
  await page.click("#resize-close");
  assert.match(await page.textContent('tr[data-volume="spread"]'), /16 GiB/);
  await page.context().close();
});

test("the IdToken is refreshed before it expires", async () => {
  const server = await startServer([["a1", "node-a", "zone-a", 10]], "0", 'token_lifetime = "3s"\n');
  const page = await newPage();
  await signIn(page, server.base);
  const first = await page.evaluate(() => JSON.parse(sessionStorage.getItem("svs.session")).idToken);
  const refreshed = page.waitForRequest((r) => r.url().endsWith("/refresh") && r.method() === "POST", { timeout: 10_000 });
  await refreshed;
  await page.waitForFunction((t) => JSON.parse(sessionStorage.getItem("svs.session")).idToken !== t, first);
  await page.waitForTimeout(1500); // the first token has expired by now
  await page.click("nav a[data-page=media]");
  await page.waitForSelector('[data-medium="a1"]');
  assert.equal(await page.isVisible(".error"), false);
  await page.context().close();
});

test("refreshes rotate the RefreshToken, and concurrent ones share one request", async () => {
  const server = await startServer([["a1", "node-a", "zone-a", 10]]);
  const page = await newPage();
  await signIn(page, server.base);
  const before = await page.evaluate(() => JSON.parse(sessionStorage.getItem("svs.session")).refreshToken);
  let posts = 0;
  page.on("request", (r) => { if (r.url().endsWith("/refresh") && r.method() === "POST") posts += 1; });
  // Three callers at once: one request (two would present the same token and
  // the server would end the session as a stolen token's reuse).
  await page.evaluate(async () => {
    const api = await import("/ui/api.js");
    await Promise.all([api.refresh(), api.refresh(), api.refresh()]);
  });
  assert.equal(posts, 1);
  const after = await page.evaluate(() => JSON.parse(sessionStorage.getItem("svs.session")).refreshToken);
  assert.notEqual(after, before, "the rotated RefreshToken is stored");
  await page.evaluate(async () => (await import("/ui/api.js")).refresh());
  assert.equal(posts, 2);
  await page.click("nav a[data-page=media]");
  await page.waitForSelector('[data-medium="a1"]');
  assert.equal(await page.isVisible(".error"), false);
  await page.context().close();
});

test("the console is served with a Content-Security-Policy that forbids framing", async () => {
  const server = await startServer([["a1", "node-a", "zone-a", 10]]);
  const page = await newPage({ bypassCSP: false });
  const violations = [];
  page.on("console", (m) => { if (/Content Security Policy/i.test(m.text())) violations.push(m.text()); });
  const response = await page.goto(`${server.base}/ui/`);
  const headers = response.headers();
  assert.match(headers["content-security-policy"], /default-src 'self'/);
  assert.match(headers["content-security-policy"], /frame-ancestors 'none'/);
  assert.equal(headers["x-frame-options"], "DENY");
  assert.equal(headers["x-content-type-options"], "nosniff");
  // The browser enforces it: an injected inline script does not run ...
  const inline = await page.evaluate(() => new Promise((resolve) => {
    window.injected = "blocked";
    document.addEventListener("securitypolicyviolation", () => resolve(window.injected), { once: true });
    const script = document.createElement("script");
    script.textContent = "window.injected = 'ran'";
    document.body.appendChild(script);
    setTimeout(() => resolve(window.injected), 2000);
  }));
  assert.equal(inline, "blocked");
  violations.length = 0;
  // ... and the console works under it: sign in, open a page, no violation.
  await signIn(page, server.base);
  await page.click("nav a[data-page=media]");
  await page.waitForSelector('[data-medium="a1"]');
  assert.deepEqual(violations, []);
  await page.context().close();
});

const ROLLBACK_REFUSED = "volume 'v' is attached read-write to node(s) host-1; detach it or make the attachment read-only before a rollback";

test("snapshots: take, roll back after detaching, attach read-only, clone, delete", async () => {
  const server = await startServer([["d1", "node-a", "zone-a", 40], ["d2", "node-b", "zone-b", 40]], "0", HOST);
  const api = await apiClient(server.base);
  await api.policy("mirror", 1, 1, 0);
  await api.volume("v", 1, "mirror"); // a clone copies every byte: small
  const attached = await api.call("POST", "/volumes/v/snapshots/top/attachments", { node: "host-1" });
  assert.equal((await api.waitJob(attached.JobID)).state, "Done");

  const page = await newPage();
  const asked = [];
  page.on("dialog", (d) => asked.push(d.message()));
  await signIn(page, server.base);
  await page.click('tr[data-volume="v"] a.snapshots');
  await page.waitForSelector("#take-snapshot");
  assert.ok(page.url().endsWith("#/snapshots/v"), page.url());

  // Take one: listed with its time, size, used bytes and state.
  await page.fill("#snap-name", "s1");
  await page.selectOption("#snap-consistency", "application");
  await page.click("#take-snapshot button[type=submit]");
  assert.equal(await jobEnd(page), "Done");
  await page.waitForSelector('tr[data-snapshot="s1"] .state-ready');
  const cells = await page.$$eval('tr[data-snapshot="s1"] td', (tds) => tds.map((t) => t.textContent));
  assert.equal(cells[0], "s1");
  assert.equal(cells[2], "1 GiB");
  assert.match(cells[3], /^\d+(\.\d)? (B|KiB|MiB)$/);
  assert.equal(cells[5], "—", "not attached");
  const s1 = await api.call("GET", "/volumes/v/snapshots/s1");
  assert.equal(s1.consistency, "application");
  await shots(page, "11-snapshots");

  // Roll back while attached read-write: the server's 409 stays through the reload.
  const reloaded = page.waitForResponse((r) => r.url().endsWith("/volumes/v/attachments"));
  await page.click('tr[data-snapshot="s1"] button.rollback');
  await page.waitForSelector("#snapshot-action-error:not([hidden])");
  await reloaded;
  await page.waitForTimeout(300);
  assert.equal(await page.textContent("#snapshot-action-error .message"), `Could not roll back to "s1": ${ROLLBACK_REFUSED}`);
  await shots(page, "12-rollback-refused");

  // Detach from the message, then the rollback runs.
  await page.click('#snapshot-action-error button.detach[data-node="host-1"]');
  assert.equal(await jobEnd(page), "Done");
  await page.click('tr[data-snapshot="s1"] button.rollback');
  await page.waitForFunction(() => /rollback/.test(document.querySelector("#snapshot-notice")?.textContent || ""));
  assert.equal(await jobEnd(page), "Done");
  assert.equal(await page.textContent("#job-detail"), "Volume 'v' rolled back to snapshot 's1'");
  assert.equal(await page.isHidden("#snapshot-action-error"), true);
  const rollback = (await api.call("GET", "/jobs?type=snapshot_rollback"))[0];
  assert.equal(rollback.state, "Done");
  await shots(page, "13-rolled-back");

  // Attach read-only to a node: the URI is shown.
  await page.click('tr[data-snapshot="s1"] button.attach');
  await page.waitForSelector('#attach-node option[value="host-1"]', { state: "attached" });
  await page.selectOption("#attach-node", "host-1");
  await page.click("#attach-dialog-submit");
  await page.waitForSelector('tr[data-snapshot="s1"] .attachment[data-node="host-1"] .state-attached', { timeout: 20_000 });
  const uri = await page.textContent('tr[data-snapshot="s1"] .attachment[data-node="host-1"] .uri');
  assert.match(uri, /^nbd:\/\/127\.0\.0\.1:\d+\/\S+$/);
  await page.waitForFunction((u) => (document.querySelector("#snapshot-notice")?.textContent || "").endsWith(u), uri);
  const a = await api.call("GET", "/volumes/v/snapshots/s1/attachments/host-1");
  assert.equal(a.uri, uri);
  assert.equal(a.readonly, true);
  await shots(page, "14-snapshot-attached");

  // Clone: the size may not be below the snapshot's.
  await page.click('tr[data-snapshot="s1"] button.clone');
  await page.waitForSelector("#clone-dialog[open]");
  assert.equal(await page.inputValue("#clone-size"), "1");
  await page.fill("#clone-name", "v-clone");
  await page.fill("#clone-size", "0");
  await page.click("#clone-dialog-submit");
  assert.match(await page.textContent("#clone-dialog .error"), /at least 1\./);
  await page.fill("#clone-size", "2");
  await page.selectOption("#clone-policy", "mirror");
  await shots(page, "15-clone-dialog");
  await page.click("#clone-dialog-submit");
  await page.waitForFunction(() => /is a clone of v@s1/.test(document.querySelector("#snapshot-notice")?.textContent || ""), null, { timeout: 60_000 });
  const clone = await api.call("GET", "/volumes/v-clone");
  assert.equal(clone.size, 2);
  assert.equal(clone.contentvolume, "v");
  assert.equal(clone.contentsnapshot, "s1");

  // Delete the attached snapshot: the confirmation says so, force is used.
  asked.length = 0;
  await page.click('tr[data-snapshot="s1"] button.danger');
  assert.equal(await jobEnd(page), "Done");
  await page.waitForSelector('tr[data-snapshot="s1"]', { state: "detached" });
  assert.match(asked[0], /attached to host-1\. Delete it together with its attachments\?/);
  assert.deepEqual(await api.call("GET", "/volumes/v/snapshots"), []);
  await shots(page, "16-snapshot-deleted");

  // The volume list names the clone's source.
  await page.click("nav a[data-page=volumes]");
  await page.waitForSelector('tr[data-volume="v-clone"] .clone-of');
  assert.equal(await page.textContent('tr[data-volume="v-clone"] .clone-of'), "clone of v@s1");
  await shots(page, "17-volumes-clone");
  await page.context().close();
});

test("a refused delete keeps its message, with force offered", async () => {
  const server = await startServer([["d1", "node-a", "zone-a", 40]], "0", HOST);
  const api = await apiClient(server.base);
  await api.policy("none", 0, 0, 0);
  await api.volume("v", 2, "none");
  const r = await api.call("POST", "/volumes/v/snapshots", { name: "s1", consistency: "crash" });
  assert.equal((await api.waitJob(r.JobID)).state, "Done");

  const page = await newPage();
  // The list has not seen the snapshot (held stale, as when it was taken meanwhile): a plain
  // delete is sent, which the server refuses.
  await page.route("**/snapshots", (route) => route.fulfill({ json: [] }));
  await signIn(page, server.base);
  await page.waitForSelector('tr[data-volume="v"]');
  await page.click('tr[data-volume="v"] button.danger');
  const reloaded = page.waitForResponse((res) => res.url().endsWith("/volumes") && res.request().method() === "GET");
  await page.click("#confirm-ok");
  await reloaded;
  await page.waitForSelector("#volume-action-error:not([hidden])");
  const refused = await page.textContent("#volume-action-error .message");
  assert.match(refused, /^Could not delete "v": .*snapshot/);
  await page.waitForTimeout(300);
  assert.equal(await page.isVisible("#volume-action-error"), true, "the list reload kept it");
  await shots(page, "18-delete-refused");

  // A policy in use: refused, and the message outlives the list reload.
  await page.click("nav a[data-page=policies]");
  await page.waitForSelector('tr[data-policy="none"]');
  const policies = page.waitForResponse((res) => res.url().endsWith("/policies") && res.request().method() === "GET");
  await page.click('tr[data-policy="none"] button.danger');
  await policies;
  await page.waitForSelector("#policy-action-error:not([hidden])");
  assert.match(await page.textContent("#policy-action-error"), /^Could not delete "none": ./);
  await page.waitForTimeout(300);
  assert.equal(await page.isVisible("#policy-action-error"), true);

  // Delete anyway (force): the confirmation now says the snapshot goes with it.
  await page.click("nav a[data-page=volumes]");
  await page.click('tr[data-volume="v"] button.danger');
  await page.click("#confirm-ok");
  await page.waitForSelector("#volume-action-error button.force");
  await page.click("#volume-action-error button.force");
  await page.waitForSelector("#confirm-dialog[open]");
  assert.equal(await page.textContent("#confirm-ok"), "Delete with its attachments and snapshots");
  await page.click("#confirm-ok");
  await page.waitForSelector('tr[data-volume="v"]', { state: "detached", timeout: 20_000 });
  await page.context().close();
});

test("a medium marked failed in the console: Degraded and Failed volumes, Recover followed to Ready", async () => {
  // d1 has the most room: the single-copy volume w and one copy of the mirror v go there;
  // the third medium takes v's lost copy back.
  const server = await startServer([["d1", "node-a", "zone-a", 60], ["d2", "node-b", "zone-b", 40], ["d3", "node-c", "zone-a", 40]], "8 MiB");
  const api = await apiClient(server.base);
  await api.policy("mirror", 1, 1, 0);
  await api.policy("none", 0, 0, 0);
  await api.volume("w", 1, "none");
  const vid = await api.volume("v", 2, "mirror");
  const [lost] = await mediaOf(api, "w");
  const before = await mediaOf(api, "v");
  assert.equal(lost, "d1");
  assert.ok(before.includes(lost), `v has a copy on ${lost}: ${before}`);
  // Data in v's other copy, so that its rebuild (paced at 8 MiB/s) takes a few seconds.
  const healthy = (await api.call("GET", "/volumes/v/slices")).find((s) => s.media !== lost);
  fillSlice(server, healthy.media, vid, healthy.copy, healthy.column, 0x5a);

  // A user who is not an administrator is not offered the action.
  addUser(server, "user@example.com", "user-password-123");
  const userPage = await newPage();
  await signIn(userPage, server.base, "user@example.com", "user-password-123");
  await userPage.click("nav a[data-page=media]");
  await userPage.waitForSelector('[data-medium="d1"]');
  assert.equal(await userPage.locator("button.fail").count(), 0);
  await userPage.context().close();

  const page = await newPage();
  const asked = [];
  page.on("dialog", (d) => asked.push(d.message()));
  await signIn(page, server.base);
  await page.waitForSelector('tr[data-volume="v"] .state-ready');
  assert.equal(await page.locator("button.recover").count(), 0, "nothing to recover yet");

  // Media: the administrator marks d1 failed, after a confirmation saying what is lost.
  await page.click("nav a[data-page=media]");
  await page.waitForSelector('[data-medium="d1"] button.fail');
  assert.equal(await page.locator("button.fail").count(), 3);
  await page.click('[data-medium="d1"] button.fail');
  await page.waitForSelector('[data-medium="d1"].failed .state-failed');
  assert.match(asked[0], /^Mark medium "d1" failed\? Its slices are lost at once/);
  assert.equal(await page.textContent("#main .notice"), "Medium d1 is Failed. Recover the volumes that lost a copy on the Volumes page.");
  assert.equal(await page.locator('[data-medium="d1"] button.fail').count(), 0, "a failed medium does not come back");
  assert.equal(await page.textContent('[data-medium="d2"] .state'), "Online");
  const d1 = await api.call("GET", "/media/d1");
  assert.equal(d1.state, "Failed");
  assert.equal(d1.freesize, 0);
  await shots(page, "19-media-failed");

  // Volumes: v lost a copy (Degraded), w its only one (Failed); both offer Recover.
  await page.click("nav a[data-page=volumes]");
  await page.waitForSelector('tr[data-volume="v"] .state-degraded');
  await page.waitForSelector('tr[data-volume="w"] .state-failed');
  assert.equal(await page.locator("button.recover").count(), 2);
  await shots(page, "20-volumes-degraded");

  // Recover v: the job is followed to Done, and v is Ready on healthy media.
  await page.click('tr[data-volume="v"] button.recover');
  await page.waitForFunction(() => /^Volume recovery started \(job \d+\)\.$/.test(document.querySelector("#main .notice")?.textContent || ""));
  // Followed: progress between 0 and 100 on the way, and no second Recover offered meanwhile.
  const seen = [];
  let offeredWhileRunning = false;
  let ended = "";
  for (let i = 0; i < 600 && !ended; i++) {
    const state = (await page.textContent("#job-state").catch(() => "")) || "";
    const progress = Number(await page.textContent("#job-progress").catch(() => "0"));
    if (state === "Done" || state === "Error") ended = state;
    else {
      seen.push(progress);
      if (progress > 0 && await page.locator('tr[data-volume="v"] button.recover').count()) offeredWhileRunning = true;
      await page.waitForTimeout(100);
    }
  }
  assert.equal(ended, "Done");
  assert.ok(seen.some((p) => p > 0 && p < 100), `progress between 0 and 100 shown (seen: ${[...new Set(seen)]})`);
  assert.equal(offeredWhileRunning, false);
  await page.waitForSelector('tr[data-volume="v"] .state-ready');
  assert.equal(await page.locator('tr[data-volume="v"] button.recover').count(), 0);
  const job = (await api.call("GET", "/jobs?type=volume_recovery"))[0];
  assert.equal(job.state, "Done");
  assert.equal(await page.textContent("#volume-job h3"), `Job ${job.id}`);
  const after = await mediaOf(api, "v");
  assert.ok(!after.includes("d1"), `v left d1: ${after}`);
  assert.deepEqual(after.filter((m) => before.includes(m)), before.filter((m) => m !== "d1"), "the healthy copy stayed");
  assert.equal((await api.call("GET", "/volumes/v")).state, "Ready");
  await shots(page, "21-volume-recovered");

  // w lost every copy of its data: its recovery ends in Error with the server's reason.
  await page.click('tr[data-volume="w"] button.recover');
  await page.waitForFunction((h) => document.querySelector("#volume-job h3")?.textContent !== h, `Job ${job.id}`);
  assert.equal(await jobEnd(page), "Error");
  assert.equal(await page.textContent("#job-error"),
    "The job failed: Could not recover volume 'w': column 0 has no healthy copy left: its data is lost and cannot be rebuilt");
  assert.equal(await page.textContent('tr[data-volume="w"] .state'), "Failed");
  await shots(page, "22-recovery-error");
  await page.context().close();
});

test("nodes: add a node, issue its agent credential once, see the agent, revoke it", async () => {
  const server = await startServer([["d1", "node-a", "zone-a", 10]]);

  // A user who is not an administrator sees the nodes, not the actions.
  addUser(server, "user@example.com", "user-password-123");
  const userPage = await newPage();
  await signIn(userPage, server.base, "user@example.com", "user-password-123");
  await userPage.click("nav a[data-page=nodes]");
  await userPage.waitForSelector('tr[data-node="node-a"]');
  assert.equal(await userPage.locator("#add-node").count(), 0);
  assert.equal(await userPage.locator("button.issue").count(), 0);
  await userPage.click('tr[data-node="node-a"] a.node-link');
  await userPage.waitForSelector("#node-managed-by");
  assert.equal(await userPage.locator("#node-actions").count(), 0, "no credential or removal for users");
  await userPage.context().close();

  const page = await newPage();
  await page.context().grantPermissions(["clipboard-read", "clipboard-write"], { origin: server.base });
  const asked = [];
  page.on("dialog", (d) => asked.push(d.message()));
  await signIn(page, server.base);
  await page.click("nav a[data-page=nodes]");
  await page.waitForSelector('tr[data-node="node-a"]');

  // Add a node: listed with its zone and address, no agent yet.
  await page.fill("#node-name", "host-7");
  await page.fill("#node-address", "10.0.0.7");
  await page.fill("#node-zone", "zone-b");
  await page.click("#add-node button[type=submit]");
  await page.waitForSelector('tr[data-node="host-7"]');
  assert.equal(await page.textContent("#node-notice"),
    "Node host-7 added (address 10.0.0.7). Issue its agent credential on its page to run the agent on it.");
  const cells = await page.$$eval('tr[data-node="host-7"] td', (tds) => tds.map((t) => t.textContent));
  assert.deepEqual(cells, ["host-7", "host", "Online", "zone-b", "10.0.0.7", "0", "0", "0", "—", "no agent"]);
  // The same name again: the server's words.
  await page.fill("#node-name", "host-7");
  await page.fill("#node-address", "10.0.0.8");
  await page.click("#add-node button[type=submit]");
  await page.waitForSelector("#add-node .error:not([hidden])");
  assert.equal(await page.textContent("#add-node .error"), "node 'host-7' already exists");

  // Its page: no credential yet, nothing to revoke.
  await page.click('tr[data-node="host-7"] a.node-link');
  await waitText(page, "#node-credential-state", "none");
  assert.equal(await page.textContent("#node-agent-seen"), "never");
  assert.equal(await page.locator("#node-actions button.revoke").count(), 0, "nothing to revoke");

  // Issue: the credential and the agent's command line, each with Copy.
  await page.click("#node-actions button.issue");
  await page.waitForSelector("#node-credential:not([hidden])");
  const credential = await page.inputValue("#credential-value");
  assert.match(credential, /^svsnode\.[0-9a-f]{16}\.\S+$/);
  assert.equal(await page.inputValue("#agent-command"),
    `svs agent --url ${server.base} --node host-7 --credential-file /etc/svs/agent.credential`);
  await page.click("#node-credential .copy-field:first-of-type button.copy");
  await page.waitForFunction(() => document.querySelector("#node-credential .copied")?.textContent === "Copied");
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), credential);
  await shots(page, "23-node-credential");

  // The agent uses it; the list shows the agent and when it was last seen.
  const desired = await asAgent(server.base, credential, "GET", "/nodes/host-7/agent/attachments");
  assert.equal(desired.status, 200, JSON.stringify(desired.body));
  assert.equal(desired.body.node, "host-7");
  assert.deepEqual(desired.body.attachments, []);
  await page.reload();
  await page.waitForSelector("#node-credential-state .agent.yes");
  assert.notEqual(await page.textContent("#node-agent-seen"), "never");
  assert.equal(await page.isHidden("#node-credential"), true, "shown only once");
  await shots(page, "24-nodes");
  await page.click('nav.breadcrumb a[href="#/nodes"]');
  await page.waitForSelector('tr[data-node="host-7"]');
  assert.notEqual(await page.textContent('tr[data-node="host-7"] .last-seen'), "never");
  await page.click('tr[data-node="host-7"] a.node-link');
  await page.waitForSelector("#node-actions button.revoke");

  // Issuing again, confirmed, revokes the first credential.
  asked.length = 0;
  await page.click("#node-actions button.issue");
  await page.waitForSelector("#node-credential:not([hidden])");
  assert.match(asked[0], /^Issue a new agent credential for node host-7\? The one it has stops working at once\./);
  const second = await page.inputValue("#credential-value");
  assert.notEqual(second, credential);
  const old = await asAgent(server.base, credential, "GET", "/nodes/host-7/agent/attachments");
  assert.equal(old.status, 401);
  assert.equal(old.body.message, "invalid or revoked node credential");
  assert.equal((await asAgent(server.base, second, "GET", "/nodes/host-7/agent/attachments")).status, 200);

  // Revoke: the agent is refused, the node has no agent any more.
  await page.click("#credential-done");
  await page.click("#node-actions button.revoke");
  await page.waitForFunction(() => document.querySelector("#node-notice")?.textContent === "The agent credential of node host-7 is revoked.");
  await page.waitForSelector("#node-credential-state .agent.no");
  assert.equal(await page.locator("#node-actions button.revoke").count(), 0);
  assert.equal((await asAgent(server.base, second, "GET", "/nodes/host-7/agent/attachments")).status, 401);
  const node = await (await apiClient(server.base)).call("GET", "/nodes/host-7");
  assert.equal(node.agentcredential, false);
  await page.context().close();
});

test("a file volume's filesystem, and an attachment's host state as its node's agent reports it", async () => {
  const server = await startServer([["d1", "node-a", "zone-a", 40]], "0", HOST);
  const api = await apiClient(server.base);
  await api.policy("none", 0, 0, 0);
  const page = await newPage();
  await signIn(page, server.base);

  // The filesystem is asked for only for a file volume.
  await page.waitForSelector('#vol-policy option[value="none"]', { state: "attached" });
  assert.equal(await page.isHidden("#vol-fs-field"), true);
  await page.fill("#vol-name", "files");
  await page.fill("#vol-size", "1");
  await page.selectOption("#vol-type", "file");
  assert.equal(await page.isVisible("#vol-fs-field"), true);
  await page.selectOption("#vol-fs", "xfs");
  await page.click("#create-volume button[type=submit]");
  await page.waitForSelector('tr[data-volume="files"] .state-ready', { timeout: 30_000 });
  assert.equal(await page.textContent('tr[data-volume="files"] td[data-label="Type"]'), "file · xfs");
  const created = await api.call("GET", "/volumes/files");
  assert.equal(created.filesystem, "xfs");

  // Attached to host-1, whose agent reports on it.
  const attach = await api.call("POST", "/volumes/files/snapshots/top/attachments", { node: "host-1" });
  assert.equal((await api.waitJob(attach.JobID)).state, "Done");
  const { credential } = await api.call("POST", "/nodes/host-1/credentials", {});
  const report = async (body) => {
    const r = await asAgent(server.base, credential, "PUT", `/nodes/host-1/agent/attachments/${created.volumeid}/top`, body);
    assert.equal(r.status, 204, JSON.stringify(r.body));
  };

  await page.click('tr[data-volume="files"] a.snapshots');
  await page.waitForSelector('#volume-attachments tr[data-attachment="host-1"]');
  assert.match(await page.textContent("#snapshot-volume"), /^file · xfs · 1 GiB/);
  const row = '#volume-attachments tr[data-attachment="host-1"]';
  assert.equal(await page.textContent(`${row} td[data-label="Host"]`), "host —", "no report yet");

  await report({ hoststate: "Mounted", device: "/dev/loop3", mountpath: "/var/lib/svs/mounts/files", filesystembytes: 1020 * 1024 * 1024, filesystemsize: 1 });
  await page.reload();
  await page.waitForSelector(`${row} .host-state.state-mounted`);
  const detail = "/dev/loop3 · on /var/lib/svs/mounts/files · 1020.0 MiB filesystem";
  assert.equal(await page.textContent(`${row} .host-detail`), detail);
  assert.match(await page.getAttribute(`${row} .host-state`, "title"), new RegExp(`^${detail} \\(reported `));
  assert.equal(await page.textContent(`${row} td[data-label="Access"]`), "read-write");
  await shots(page, "25-attachment-host-state");

  // A failure shows without reloading (the page looks again while attached).
  await report({ hoststate: "Error", hostdetail: "mount: /var/lib/svs/mounts/files: wrong fs type" });
  await page.waitForSelector(`${row} .host-state.state-error`, { timeout: 15_000 });
  assert.match(await page.textContent(`${row} .host-detail`), /mount: \/var\/lib\/svs\/mounts\/files: wrong fs type$/);
  const a = await api.call("GET", "/volumes/files/snapshots/top/attachments/host-1");
  assert.equal(a.hoststate, "Error");
  await shots(page, "26-attachment-host-error");
  await page.context().close();
});
