// End-to-end tests of media and nodes managed from the console: add a
// medium, resize it, remove it and its node, with the server's refusals
// shown and kept.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { startServer, apiClient, shots, newPage, signIn, waitText } from "./lib.mjs";

async function openMedia(page) {
  await page.click("nav a[data-page=media]");
  await page.waitForSelector("[data-medium]");
}

test("media: add, resize within what is in use, remove once empty; nodes: remove", async () => {
  const server = await startServer([["d1", "node-a", "zone-a", 4]], "0",
    '\n[[nodes]]\nname = "host-1"\naddress = "127.0.0.1"\n');
  const api = await apiClient(server.base);
  const page = await newPage();
  await signIn(page, server.base);
  await openMedia(page);

  // The configured medium says so, and offers no edit or removal.
  const d1 = '[data-medium="d1"]';
  assert.equal((await page.textContent(`${d1} .managed-by`)).trim(), "configuration file");
  assert.equal(await page.$(`${d1} button.remove`), null);

  // Add d2 through the form.
  const dir = path.join(server.dir, "api-media", "d2");
  await page.fill("#medium-id", "d2");
  await page.fill("#medium-node", "node-b");
  await page.fill("#medium-zone", "zone-b");
  await page.fill("#medium-directory", dir);
  await page.fill("#medium-size", "20");
  await page.click("#add-medium button[type=submit]");
  await waitText(page, "#media-notice",
    "Medium d2 added: 20 GiB on node node-b in zone zone-b. New volumes may be placed on it now.");
  const d2 = '[data-medium="d2"]';
  await page.waitForSelector(d2);
  assert.equal((await page.textContent(`${d2} .managed-by`)).trim(), "added through the API");
  assert.ok(fs.statSync(dir).isDirectory(), "the directory was made");
  await shots(page, "infra-01-medium-added");

  // A duplicate is refused with the server's words, in the form.
  await page.fill("#medium-id", "d2");
  await page.fill("#medium-node", "node-b");
  await page.fill("#medium-zone", "zone-b");
  await page.fill("#medium-directory", path.join(server.dir, "api-media", "other"));
  await page.fill("#medium-size", "5");
  await page.click("#add-medium button[type=submit]");
  await waitText(page, "#add-medium-error", "medium 'd2' already exists");

  // A 10 GiB volume fits only on d2.
  await api.policy("none", 0, 0, 0);
  await api.volume("v", 10, "none");
  const slices = await api.call("GET", "/volumes/v/slices");
  assert.deepEqual([...new Set(slices.map((s) => s.media))], ["d2"]);

  // Shrinking below what is in use is refused; the message stays after the reload.
  await page.click("nav a[data-page=volumes]");
  await openMedia(page);
  await page.fill(`${d2} .size-input`, "5");
  await page.click(`${d2} button.set-size`);
  const refused = "Could not resize \"d2\": medium 'd2' cannot shrink to 5 GiB: 10 GiB of it is in use " +
    "(slices, snapshots and running jobs' bookings)";
  await waitText(page, "#media-action-error", refused);
  await page.waitForTimeout(500);
  assert.equal((await page.textContent("#media-action-error")).trim(), refused);
  assert.equal(await page.isVisible("#media-action-error"), true);
  await shots(page, "infra-02-shrink-refused");

  // Growing works; the refusal goes with the next action.
  await page.fill(`${d2} .size-input`, "30");
  await page.click(`${d2} button.set-size`);
  await waitText(page, "#media-notice", "Medium d2 is now 30 GiB (20 GiB free).");
  assert.equal(await page.isVisible("#media-action-error"), false);
  await page.waitForFunction(() => document.querySelector('[data-medium="d2"] .muted')?.textContent.includes("30.0 GiB total"));

  // Removal is refused while the volume is on it, naming it.
  await page.click(`${d2} button.remove`);
  await waitText(page, "#media-action-error",
    "Could not remove \"d2\": medium 'd2' holds slices of volume(s) 'v'; delete those volumes first");
  await shots(page, "infra-03-remove-refused");

  // Once the volume is gone it goes; its directory stays.
  const del = await api.call("DELETE", "/volumes/v");
  assert.equal((await api.waitJob(del.JobID)).state, "Done");
  await page.click(`${d2} button.remove`);
  await waitText(page, "#media-notice", "Medium d2 removed.");
  await page.waitForSelector(d2, { state: "detached" });
  assert.ok(fs.statSync(dir).isDirectory(), "the directory stays");

  // Nodes: who manages each; a node with media is refused, an empty one removed.
  await api.call("POST", "/media", { mediaid: "d3", node: "node-c", zone: "zone-c", media: path.join(server.dir, "api-media", "d3"), size: 5 });
  await page.click("nav a[data-page=nodes]");
  await page.waitForSelector('tr[data-node="node-b"]');
  // Each node's page says who manages it; only the API's nodes are removed here.
  const managed = [];
  for (const name of await page.$$eval("tr[data-node]", (rows) => rows.map((r) => r.dataset.node))) {
    await page.goto(`${server.base}/ui/#/nodes/${name}`);
    await page.waitForSelector("#node-managed-by");
    managed.push([name, await page.textContent("#node-managed-by"), await page.locator("#node-actions button.remove").count() === 1]);
  }
  assert.deepEqual(managed, [
    ["host-1", "configuration file", false],
    ["node-a", "configuration file", false],
    ["node-b", "API", true],
    ["node-c", "API", true],
  ]);
  await page.goto(`${server.base}/ui/#/nodes/node-c`);
  await page.click("#node-actions button.remove");
  await waitText(page, "#node-action-error",
    "Could not remove node node-c: node 'node-c' has media 'd3'; remove them first");
  await shots(page, "infra-04-node-remove-refused");
  await page.goto(`${server.base}/ui/#/nodes/node-b`);
  await page.click("#node-actions button.remove");
  await waitText(page, "#node-notice", "Node node-b removed.");
  await page.waitForSelector('tr[data-node="node-b"]', { state: "detached" });
  assert.equal(await page.isVisible("#node-action-error"), false);
  await shots(page, "infra-05-node-removed");
});

test("media: a drain from the console empties the medium; set ready takes slices again", async () => {
  const server = await startServer([["d1", "node-a", "zone-a", 20], ["d2", "node-b", "zone-b", 20]], "0", "");
  const api = await apiClient(server.base);
  await api.policy("none", 0, 0, 0);
  await api.volume("v", 4, "none");
  assert.deepEqual([...new Set((await api.call("GET", "/volumes/v/slices")).map((s) => s.media))], ["d1"]);
  const page = await newPage();
  const asked = [];
  page.on("dialog", (d) => asked.push(d.message())); // newPage accepts it
  await signIn(page, server.base);
  await openMedia(page);

  const d1 = '[data-medium="d1"]';
  // Drain is a small outline button, not the page's main action.
  const look = await page.$eval(`${d1} button.drain`, (b) => [b.textContent, getComputedStyle(b).backgroundColor]);
  assert.deepEqual(look, ["Drain…", "rgb(255, 255, 255)"]);
  // Its confirmation says what the dry run would move; Cancel leaves the medium as it is.
  await page.click(`${d1} button.drain`);
  await page.waitForSelector("#confirm-dialog[open]");
  assert.equal(await page.textContent("#confirm-title"), 'Drain medium "d1"?');
  assert.equal(await page.textContent("#drain-plan"), "It moves 1 slice of 1 volume (v), 4.0 GiB of data at most, to d2; unthrottled.");
  await shots(page, "infra-05b-drain-confirmation");
  await page.click("#confirm-cancel");
  await page.waitForSelector("#confirm-dialog", { state: "detached" });
  assert.equal((await api.call("GET", "/jobs?type=media_drain")).length, 0, "nothing drains after Cancel");
  await page.click(`${d1} button.drain`);
  await page.click("#confirm-ok");
  await page.waitForFunction(() => document.querySelector("#media-notice")?.textContent.startsWith("Medium 'd1' is draining: follow job "));
  assert.deepEqual(asked, [], "no browser confirm()");
  const job = (await api.call("GET", "/jobs?type=media_drain"))[0];
  assert.equal((await api.waitJob(String(job.id))).state, "Done");
  assert.deepEqual([...new Set((await api.call("GET", "/volumes/v/slices")).map((s) => s.media))], ["d2"]);
  await page.click("nav a[data-page=volumes]");
  await openMedia(page);
  await page.waitForFunction(() => document.querySelector('[data-medium="d1"] .usage')?.textContent
    === "Draining: it takes no new slices · 0 B allocated · 0 volumes still on it · 20.0 GiB total");
  await page.waitForSelector(`${d1} button.ready`);
  assert.equal((await page.textContent(`${d1} .state`)).trim(), "Draining");
  await shots(page, "infra-06-medium-drained");

  await page.click(`${d1} button.ready`);
  await waitText(page, "#media-notice", "Medium d1 takes new slices again (20 GiB free).");
  await page.waitForSelector(`${d1} button.drain`);
  assert.equal((await page.textContent(`${d1} .state`)).trim(), "Online");
});
