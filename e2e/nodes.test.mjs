// End-to-end test of the Nodes page with a real storage node: a real
// `svs storage-node` process on 127.0.0.2 holds a volume's copy; the page
// and the node's own page show it Online with the copy, then, once the
// process is killed, Offline with the copy Lost, without a reload.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  startServer, startStorageNode, apiClient, shots, newPage, signIn, addUser, eventually, waitText,
} from "./lib.mjs";

test("nodes: a storage node Online with the copies it holds, then Offline once killed", async () => {
  // The local medium is too small for the volume: its copy goes to the node.
  const server = await startServer([["m1", "host-0", "z0", 1]], "0", 'storage_node_timeout = "5s"\n', { log: "info" });
  const api = await apiClient(server.base);
  await api.call("POST", "/nodes", { name: "sn-1", address: "127.0.0.2", zone: "z1" });
  const { credential } = await api.call("POST", "/nodes/sn-1/credentials", { role: "storage" });
  const sn1 = await startStorageNode(server, "sn-1", "127.0.0.2", [["a1", 4]], credential);
  // The service serves the node's medium once its slice server answers.
  await eventually(30_000, () => /serving a storage node's medium.*a1/.test(server.log()),
    () => `${server.log()}\n${sn1.log()}`);
  await api.policy("single", 0, 0, 0);
  await api.volume("data", 2, "single");
  assert.deepEqual((await api.call("GET", "/volumes/data/slices")).map((s) => s.media), ["a1"]);

  const page = await newPage();
  await signIn(page, server.base);
  await page.click("nav a[data-page=nodes]");
  const row = 'tr[data-node="sn-1"]';
  await page.waitForSelector(row);
  const cells = await page.$$eval(`${row} td`, (tds) => tds.map((t) => t.textContent));
  assert.deepEqual(cells.slice(0, 8), ["sn-1", "storage", "Online", "z1", "127.0.0.2", "1", "1", "1"]);
  assert.equal(await page.$eval(`${row} td[data-label="Capacity"] .capacity-free`, (e) => e.textContent), "2 GiB free of 4 GiB");
  // Last seen: its last heartbeat, today's as a time of day.
  assert.match(cells[9], /^\d{1,2}:\d{2}:\d{2}/);
  assert.equal(await page.textContent('tr[data-node="host-0"] td[data-label="Role"]'), "host");
  // The table fits; the slice address, credential and who manages it are on the node's page.
  const wrap = await page.$eval("#main .table-wrap", (el) => [el.scrollWidth, el.clientWidth]);
  assert.ok(wrap[0] <= wrap[1], `the table is ${wrap[0]} px wide in ${wrap[1]} px`);
  await shots(page, "nodes-01-storage-node-online");

  // Its page: the facts and the copy it holds.
  await page.click(`${row} a.node-link`);
  await page.waitForSelector('tr[data-copy="data/c0-k0"]');
  assert.equal(await page.textContent("#node-role"), "storage");
  assert.equal(await page.textContent("#node-state"), "Online");
  assert.equal(await page.textContent("#node-slice-address"), sn1.sliceAddress);
  assert.notEqual(await page.textContent("#node-heartbeat"), "never");
  assert.equal(await page.textContent("#node-copies-count"), "1");
  assert.equal(await page.textContent("#node-managed-by"), "API");
  assert.equal(await page.textContent("#node-credential-state"), "yes (storage)");
  // A storage node is offered its own kind of credential, never the agent's.
  assert.equal(await page.textContent("#node-actions button.issue"), "Issue storage credential");
  assert.deepEqual(await page.$$eval('tr[data-copy="data/c0-k0"] td', (tds) => tds.map((t) => t.textContent)),
    ["data", "c0-k0", "a1", "2 GiB", "Healthy"]);
  assert.equal(await page.textContent('#node-media tr[data-medium="a1"] td[data-label="State"]'), "Online");
  await shots(page, "nodes-02-storage-node-copies");

  // Killed: past storage_node_timeout the page turns Offline by itself, and
  // the copy it held is Lost.
  await sn1.kill();
  await waitText(page, "#node-state", "Offline");
  await waitText(page, 'tr[data-copy="data/c0-k0"] .copy-state', "Lost");
  assert.equal(await page.textContent('#node-media tr[data-medium="a1"] td[data-label="State"]'), "Failed");
  await shots(page, "nodes-03-storage-node-offline");
  await page.click('a[href="#/nodes"]');
  await waitText(page, `${row} .node-state`, "Offline");
  await shots(page, "nodes-04-list-offline");
  await page.context().close();

  // Someone who is not an administrator sees the node, not the copies.
  addUser(server, "user@example.com", "user-password-123");
  const userPage = await newPage();
  await signIn(userPage, server.base, "user@example.com", "user-password-123");
  await userPage.goto(`${server.base}/ui/#/nodes/sn-1`);
  await waitText(userPage, "#node-state", "Offline");
  assert.equal(await userPage.textContent("#node-copies .muted"), "Only administrators see the copies a node holds.");
  assert.equal(await userPage.locator("#node-copies tr[data-copy]").count(), 0);
  await userPage.context().close();
});
