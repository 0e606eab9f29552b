// End-to-end: a filesystem growth that failed shows on the volume's page (a
// red "2 GiB of 3 GiB" badge with the host's reason, the attachment's host
// detail, the failed job's red bar) and the page's button grows it again. The
// host's agent is played through its own routes (asAgent), as a real one
// reports.
import { test } from "node:test";
import assert from "node:assert/strict";
import { HOST, startServer, apiClient, shots, newPage, signIn, jobEnd, asAgent } from "./lib.mjs";

const REFUSED = "resize2fs: Permission denied to resize filesystem";

/** Waits until the agent's desired state asks for growth job `job`. */
async function askedToGrow(base, credential, job) {
  for (let i = 0; i < 100; i++) {
    const { body } = await asAgent(base, credential, "GET", "/nodes/host-1/agent/attachments");
    if (body.attachments[0]?.growjob === Number(job)) return body.attachments[0];
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the agent was never asked to grow for job ${job}`);
}

test("a failed filesystem growth shows on the volume's page and its button grows it again", async () => {
  const server = await startServer([["d1", "node-a", "zone-a", 20], ["d2", "node-b", "zone-b", 20]], "0", HOST);
  const api = await apiClient(server.base);
  await api.policy("mirror", 1, 1, 0);
  const created = await api.call("POST", "/volumes", { name: "g", type: "file", size: 2, policy: "mirror" });
  assert.equal((await api.waitJob(created.JobID)).state, "Done");
  const attached = await api.call("POST", "/volumes/g/snapshots/top/attachments", { node: "host-1" });
  assert.equal((await api.waitJob(attached.JobID)).state, "Done");
  const { credential } = await api.call("POST", "/nodes/host-1/credentials", {});
  const report = (body) => asAgent(server.base, credential, "PUT", `/nodes/host-1/agent/attachments/${created.ObjectID}/top`, body);
  assert.equal((await report({ hoststate: "Mounted", filesystemsize: 2 })).status, 204);

  // The resize waits for the host, which fails to grow the filesystem.
  const resize = await api.call("PATCH", "/volumes/g", { size: 3 });
  await askedToGrow(server.base, credential, resize.JobID);
  await report({ hoststate: "Mounted", filesystemsize: 2, growerror: REFUSED, growjob: Number(resize.JobID) });
  const failed = await api.waitJob(resize.JobID);
  assert.equal(failed.state, "Error", JSON.stringify(failed));

  const page = await newPage();
  await signIn(page, server.base);
  await page.goto(`${server.base}/ui/#/volumes/g`);
  await page.waitForSelector("#volume-fs-mismatch");
  assert.equal(await page.textContent("#volume-size"), "3 GiB");
  assert.equal(await page.textContent("#volume-fs-mismatch"), "2 GiB of 3 GiB");
  assert.match(await page.textContent("#volume-filesystem"), new RegExp(`growth failed: .*${REFUSED}`));
  const host = await page.textContent('#volume-attached tr[data-attachment="host-1"] td[data-label="Host"]');
  assert.ok(host.includes(`filesystem 2 GiB of 3 GiB: ${REFUSED}`), host);
  // The failed job's bar is red, not an accent-blue 98 %.
  const bar = `#volume-jobs tr[data-job="${resize.JobID}"] .progress`;
  assert.equal(await page.getAttribute(bar, "class"), "progress failed");
  assert.equal(await page.getAttribute(bar, "title"), `failed at ${failed.progress}%`);
  await shots(page, "50-volume-filesystem-smaller");

  // The button asks the host again; this time it grows.
  await page.click("#volume-filesystem button.grow-filesystem");
  await page.waitForFunction(() => /^Filesystem growth started \(job \d+\)\.$/.test(document.querySelector("#volume-notice")?.textContent || ""));
  const job = (await page.textContent("#volume-notice")).match(/job (\d+)/)[1];
  await askedToGrow(server.base, credential, job);
  await report({ hoststate: "Mounted", filesystemsize: 3, growjob: Number(job) });
  assert.equal(await jobEnd(page), "Done");
  await page.waitForFunction(() => document.querySelector("#volume-filesystem")?.textContent === "3 GiB (fills the volume)");
  assert.equal(await page.locator("#volume-fs-mismatch").count(), 0);
  await shots(page, "51-volume-filesystem-grown");
  await page.context().close();
});
