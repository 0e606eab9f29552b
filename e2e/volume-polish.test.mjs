// The volume list's columns (every zone of a mirrored volume, used bytes,
// health, snapshots) and sorting; the volume page's resize refusals and
// preview, Attach form without attached nodes, connect commands, in-page
// delete confirmation; one snapshot space on every page that shows it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import {
  startServer, apiClient, newPage, signIn, waitText, fillSlice, mediaOf, eventually, HOST, ARTIFACTS,
} from "./lib.mjs";

const HOSTS = `${HOST}\n[[nodes]]\nname = "host-2"\naddress = "127.0.0.2"\n`;
const WIDE = { width: 1400, height: 900 };
const SPACE_HINT =
  "Snapshot space: the bytes its saved chunks take on disk (data overwritten since it was taken, on every copy).";

// The console's byte formatter (ui/dom.js fmtBytes), for expected texts.
function fmtBytes(n) {
  let v = Number(n) || 0;
  if (v < 1024) return `${v} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let i = -1;
  do {
    v /= 1024;
    i++;
  } while (v >= 1024 && i < units.length - 1);
  return `${v.toFixed(1)} ${units[i]}`;
}

const shot = (page, name) => page.screenshot({ path: path.join(ARTIFACTS, `${name}-1400x900.png`), fullPage: true });
const listed = (page) => page.$$eval("tr[data-volume]", (rows) => rows.map((r) => r.dataset.volume));

function qemuIo(uri, ...commands) {
  const out = spawnSync("qemu-io", ["-f", "raw", ...commands.flatMap((c) => ["-c", c]), uri], { encoding: "utf8" });
  assert.equal(out.status, 0, `qemu-io ${commands}: ${out.stdout}${out.stderr}`);
  return out.stdout;
}

test("volume list: every zone of a mirrored volume, used bytes, health, snapshots; sortable columns", async () => {
  const server = await startServer([["m1", "n1", "zone-a", 60], ["m2", "n2", "zone-b", 60]]);
  const api = await apiClient(server.base);
  await api.policy("none", 0, 0, 0);
  await api.policy("mirror", 1, 1, 0);
  const big = await api.volume("big", 20, "mirror");
  await api.volume("small", 2, "none");
  const s = await api.call("POST", "/volumes/small/snapshots", { name: "s1", consistency: "crash" });
  assert.equal((await api.waitJob(s.JobID)).state, "Done");
  // 32 MiB of data in copy 0 of big (its only column).
  fillSlice(server, (await mediaOf(api, "big"))[0], big, 0, 0, 0x5a);
  const v = await api.call("GET", "/volumes/big");
  assert.deepEqual(v.zones, ["zone-a", "zone-b"]);
  assert.equal(v.writtenbytes, 32 * 1024 * 1024);
  const smallZone = (await api.call("GET", "/volumes/small")).zone;

  const page = await newPage();
  await page.setViewportSize(WIDE);
  await signIn(page, server.base);
  await page.waitForSelector('tr[data-volume="small"] .snapshot-count');
  const row = (name, label) => page.textContent(`tr[data-volume="${name}"] td[data-label="${label}"]`);
  assert.equal(await row("big", "Zones"), "zone-a, zone-b");
  assert.equal(await row("small", "Zones"), smallZone);
  await waitText(page, 'tr[data-volume="big"] td[data-label="Used"]', "32.0 MiB");
  assert.equal(await row("small", "Used"), "0 B");
  assert.equal(await row("big", "Health"), "Healthy");
  assert.equal(await row("big", "Snapshots"), "0");
  assert.equal(await row("small", "Snapshots"), "1");
  assert.match(await page.textContent("#volume-list-hint"), /^Used: the bytes of data written to the volume/);

  // The search finds a volume by the zone of any of its copies.
  await page.fill("#vol-search", smallZone === "zone-a" ? "zone-b" : "zone-a");
  await page.waitForFunction(() => document.querySelectorAll("tr[data-volume]").length === 1);
  assert.deepEqual(await listed(page), ["big"]);
  await page.fill("#vol-search", "");
  await page.waitForFunction(() => document.querySelectorAll("tr[data-volume]").length === 2);

  // By name (the API's order) until a header is clicked; Size sorts up, then down.
  assert.deepEqual(await listed(page), ["big", "small"]);
  await page.click('th button.sort[data-sort="Size"]');
  await page.waitForFunction(() => document.querySelector("tr[data-volume]")?.dataset.volume === "small");
  assert.deepEqual(await listed(page), ["small", "big"]);
  const sizeTh = page.locator("th", { has: page.locator('button[data-sort="Size"]') });
  assert.equal(await sizeTh.getAttribute("aria-sort"), "ascending");
  assert.equal(await sizeTh.textContent(), "Size ▲");
  const nameTh = page.locator("th", { has: page.locator('button[data-sort="Name"]') });
  assert.equal(await nameTh.getAttribute("aria-sort"), "none");
  await page.click('th button.sort[data-sort="Size"]');
  await page.waitForFunction(() => document.querySelector("tr[data-volume]")?.dataset.volume === "big");
  assert.deepEqual(await listed(page), ["big", "small"]);
  assert.equal(await sizeTh.getAttribute("aria-sort"), "descending");
  // Used and Snapshots sort by their numbers.
  await page.click('th button.sort[data-sort="Snapshots"]');
  await page.waitForFunction(() => document.querySelector("tr[data-volume]")?.dataset.volume === "big");
  await page.click('th button.sort[data-sort="Snapshots"]');
  await page.waitForFunction(() => document.querySelector("tr[data-volume]")?.dataset.volume === "small");
  // The order survives the live refreshes.
  await page.waitForTimeout(2500);
  assert.deepEqual(await listed(page), ["small", "big"]);
  await shot(page, "60-volume-list-columns");
  await page.context().close();
});

test("volume page: resize refusals and preview, attach form, connect commands, delete confirmation", async () => {
  const server = await startServer([["m1", "node-a", "zone-a", 100]], "0", HOSTS);
  const api = await apiClient(server.base);
  await api.policy("none", 0, 0, 0);
  await api.volume("v", 20, "none");
  const att = await api.call("POST", "/volumes/v/snapshots/top/attachments", { node: "host-1", readonly: false });
  assert.equal((await api.waitJob(att.JobID)).state, "Done");
  const s = await api.call("POST", "/volumes/v/snapshots", { name: "s1", consistency: "crash" });
  assert.equal((await api.waitJob(s.JobID)).state, "Done");
  const [attachment] = await api.call("GET", "/volumes/v/snapshots/top/attachments");
  const [, scheme, host, port, exportName] = /^(nbds?):\/\/([^:/]+):(\d+)\/(.+)$/.exec(attachment.uri);
  assert.equal(scheme, "nbd");

  const page = await newPage();
  await page.setViewportSize(WIDE);
  await page.context().grantPermissions(["clipboard-read", "clipboard-write"], { origin: server.base });
  await signIn(page, server.base);
  await page.goto(`${server.base}/ui/#/volumes/v`);
  await page.waitForSelector('#volume-attached tr[data-attachment="host-1"]');

  // Resize: a smaller and a too-large size say why; the preview says "In place" once.
  await page.click("#volume-actions button.resize");
  await page.waitForSelector("#resize-dialog[open]");
  const range = "enter a whole number of GiB from 21 (more than the current 20) to 200 (ten times the current size).";
  await page.fill("#resize-size", "10");
  await page.click("#resize-submit");
  assert.equal(await page.textContent("#resize-dialog .error"), `Volumes cannot shrink: ${range}`);
  await page.fill("#resize-size", "201");
  await page.click("#resize-submit");
  assert.equal(await page.textContent("#resize-dialog .error"), `A resize grows a volume to at most ten times its size: ${range}`);
  await page.fill("#resize-size", "30");
  await page.click("#resize-preview-button");
  await page.waitForSelector("#resize-preview:not([hidden])");
  assert.equal(await page.textContent("#resize-preview .preview-outcome"), "In place: every slice grows on its medium");
  await shot(page, "61-resize-preview");
  await page.click("#resize-close");
  await page.waitForSelector("#resize-dialog", { state: "detached" });

  // Attach: the node it is attached to is offered disabled, "(attached)"; another is chosen.
  await page.waitForSelector('#attach-node option[value="host-1"][disabled]', { state: "attached" });
  assert.equal(await page.textContent('#attach-node option[value="host-1"]'), "host-1 (127.0.0.1) (attached)");
  assert.equal(await page.inputValue("#attach-node"), "host-2");
  assert.equal(await page.isDisabled('#attach-node option[value="host-2"]'), false);

  // Connect commands of the real attachment, with Copy.
  const nbdClient = `nbd-client -N ${exportName} ${host} ${port} /dev/nbd0`;
  const qemuNbd = `qemu-nbd --connect=/dev/nbd0 ${attachment.uri}`;
  assert.equal(await page.textContent("#connect-host-1-nbd-client"), nbdClient);
  assert.equal(await page.textContent("#connect-host-1-qemu-nbd"), qemuNbd);
  assert.equal(await page.textContent('[data-connect="host-1"] h3'), "Connect from host-1");
  await page.click('[data-connect="host-1"] .command-line:has(#connect-host-1-qemu-nbd) button.copy');
  await waitText(page, '[data-connect="host-1"] .command-line:has(#connect-host-1-qemu-nbd) .copied', "Copied");
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), qemuNbd);
  // The URI in the command serves the volume.
  assert.match(qemuIo(qemuNbd.split(" ").at(-1), "read 0 4k"), /read 4096\/4096 bytes/);
  await shot(page, "62-volume-connect-commands");

  // Delete: an in-page dialog says it is attached and has a snapshot; Cancel sends nothing.
  let deletes = [];
  page.on("request", (r) => { if (r.method() === "DELETE") deletes.push(r.url()); });
  await page.click("#volume-actions button.delete");
  await page.waitForSelector("#confirm-dialog[open]");
  assert.equal(await page.textContent("#confirm-title"), "Delete v");
  assert.equal(await page.textContent("#confirm-attached"), "It is attached to host-1: it is detached first, their NBD connections are closed.");
  assert.equal(await page.textContent("#confirm-snapshots"), "It has 1 snapshot (s1): it is deleted with it.");
  assert.equal(await page.textContent("#confirm-ok"), "Delete with its attachments and snapshots");
  await shot(page, "63-volume-delete-confirmation");
  await page.click("#confirm-cancel");
  await page.waitForSelector("#confirm-dialog", { state: "detached" });
  await page.waitForTimeout(300);
  assert.deepEqual(deletes, []);
  // Confirmed: deleted with force, attachments and snapshots with it.
  await page.click("#volume-actions button.delete");
  await page.click("#confirm-ok");
  await page.waitForSelector("#volume-gone", { timeout: 30_000 });
  assert.deepEqual(deletes.map((u) => new URL(u).search), ["?force=true"]);
  await page.context().close();
});

test("one snapshot's space is the same text on the volume, Snapshots, node and media pages", async () => {
  const server = await startServer([["m1", "node-a", "zone-a", 100]], "0", HOST);
  const api = await apiClient(server.base);
  await api.policy("none", 0, 0, 0);
  await api.volume("v", 20, "none");
  const att = await api.call("POST", "/volumes/v/snapshots/top/attachments", { node: "host-1", readonly: false });
  assert.equal((await api.waitJob(att.JobID)).state, "Done");
  const [{ uri }] = await api.call("GET", "/volumes/v/snapshots/top/attachments");
  qemuIo(uri, "write -P 0x5a 0 2M");
  const s = await api.call("POST", "/volumes/v/snapshots", { name: "s1", consistency: "crash" });
  assert.equal((await api.waitJob(s.JobID)).state, "Done");
  // Overwritten after the snapshot: its old 2 MiB are saved into the snapshot.
  qemuIo(uri, "write -P 0x6b 0 2M");
  let used = 0;
  await eventually(30_000, async () => {
    used = (await api.call("GET", "/volumes/v/snapshots/s1")).used;
    return used >= 2 * 1024 * 1024;
  }, () => `used ${used}`);
  const medium = await api.call("GET", "/media/m1");
  assert.equal(medium.snapshotbytes, used, "the medium holds exactly the snapshot's bytes");
  assert.equal(medium.allocatedsize, 20);
  assert.equal(medium.snapshotsize, 1);
  const node = await api.call("GET", "/nodes/node-a");
  assert.equal(node.snapshotbytes, used);
  const size = fmtBytes(used);

  const page = await newPage();
  await page.setViewportSize(WIDE);
  await signIn(page, server.base);
  // The volume's page and its Snapshots page: the same figure, the same explanation.
  await page.goto(`${server.base}/ui/#/volumes/v`);
  await waitText(page, '#volume-snapshots tr[data-snapshot="s1"] td[data-label="Space"]', size);
  assert.equal(await page.textContent("#volume-snapshots .snapshot-space-hint"), SPACE_HINT);
  await shot(page, "64-snapshot-space-volume-page");
  await page.goto(`${server.base}/ui/#/snapshots/v`);
  await waitText(page, 'tr[data-snapshot="s1"] td[data-label="Space"]', size);
  assert.equal(await page.textContent(".snapshot-space-hint"), SPACE_HINT);
  await shot(page, "65-snapshot-space-snapshots-page");
  // The node and the medium: what their snapshots hold, in the same text, apart from the slices.
  const held = `${size} held by snapshots (1 GiB of free space set aside for them)`;
  await page.goto(`${server.base}/ui/#/nodes/node-a`);
  await page.waitForSelector("#node-capacity .capacity-text");
  assert.equal(await page.textContent("#node-capacity .capacity-text"),
    `20 GiB allocated to slices · 0 GiB booked · ${held} · 79 GiB free of 100 GiB`);
  await shot(page, "66-snapshot-space-node-page");
  await page.goto(`${server.base}/ui/#/media`);
  await page.waitForSelector('[data-medium="m1"] .usage');
  const usage = await page.textContent('[data-medium="m1"] .usage');
  assert.ok(usage.startsWith(`20.0 GiB allocated to slices · ${held} · `), usage);
  await shot(page, "67-snapshot-space-media-page");
  await page.context().close();
});
