// Shared helpers of the console's end-to-end tests (e2e/*.test.mjs): a real
// `svs serve` (SVS_BIN) driven through real headless Chromium
// (/usr/bin/chromium) with playwright-core. Importing this module launches
// the browser before a file's tests and stops it and the servers after.
import { before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { createInterface } from "node:readline";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";

export const ROOT = path.resolve(import.meta.dirname, "..");
export const BIN = path.resolve(ROOT, process.env.SVS_BIN || "target/debug/svs");
export const ARTIFACTS = path.join(import.meta.dirname, "artifacts");
export const EMAIL = "admin@example.com";
export const PASSWORD = "e2e-password-123";
export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };

let browser;
const servers = [];

before(async () => {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
});

after(async () => {
  await browser?.close();
  for (const s of servers) s.stop();
});

/** Starts `svs serve` on free ports with the given media; resolves once it listens.
 * With `log` (a log filter, e.g. "info"), its log is kept (`server.log()`)
 * instead of shown. */
export async function startServer(media, movementRate = "0", extraToml = "", { log } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "svs-e2e-"));
  let toml = `movement_rate = "${movementRate}"\n${extraToml}`;
  for (const [id, node, zone, size] of media) {
    toml += `\n[[media]]\nid = "${id}"\nnode = "${node}"\nzone = "${zone}"\ndirectory = "${path.join(dir, "media", id)}"\nsize_gib = ${size}\n`;
  }
  fs.writeFileSync(path.join(dir, "svs.toml"), toml);
  const child = spawn(BIN, ["serve", "--listen", "127.0.0.1:0", "--nbd-listen", "127.0.0.1:0",
    "--config", path.join(dir, "svs.toml"), "--data-dir", path.join(dir, "data")], {
    // svs warns about SVS_* variables that are not its settings: pass only ours.
    env: { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("SVS_"))), SVS_ADMIN_EMAIL: EMAIL, SVS_ADMIN_PASSWORD: PASSWORD, SVS_LOG: log || "warn" },
    stdio: ["ignore", "pipe", log ? "pipe" : "inherit"],
  });
  let logText = "";
  child.stderr?.on("data", (chunk) => { logText += chunk; });
  const lines = createInterface({ input: child.stdout });
  const base = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("svs did not start in 30 s")), 30_000);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`svs exited with ${code}`));
    });
    lines.once("line", (line) => {
      clearTimeout(timer);
      const m = /^svs listening on (\S+)/.exec(line);
      m ? resolve(m[1].startsWith("http") ? m[1] : `http://${m[1]}`) : reject(new Error(`unexpected first line: ${line}`));
    });
  });
  lines.on("line", () => {}); // keep draining stdout
  const server = {
    base,
    dir,
    mediumDir: (id) => path.join(dir, "media", id),
    log: () => logText,
    stop() {
      child.kill("SIGTERM");
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  servers.push(server);
  return server;
}

/** A free TCP port on `ip` (a loopback address: binding it proves it works). */
async function freePort(ip) {
  const probe = net.createServer();
  await new Promise((resolve, reject) => {
    probe.once("error", reject);
    probe.listen(0, ip, resolve);
  });
  const { port } = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** Starts a real `svs storage-node` for `server`: node `node` (added with a
 * storage credential `credential`), its slice server on `ip`, its media
 * `[name, GiB]` in directories of its own. `kill()` is SIGKILL. */
export async function startStorageNode(server, node, ip, media, credential) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "svs-e2e-node-"));
  const sliceAddress = `${ip}:${await freePort(ip)}`;
  fs.writeFileSync(path.join(dir, "node.credential"), credential, { mode: 0o600 });
  let toml = `api = "${server.base}"\nnode = "${node}"\ncredential_file = "${path.join(dir, "node.credential")}"\n` +
    `slice_listen = "${sliceAddress}"\nstate_dir = "${path.join(dir, "state")}"\n`;
  for (const [name, gib] of media) {
    const medium = path.join(dir, "media", name);
    fs.mkdirSync(medium, { recursive: true });
    toml += `\n[[media]]\nname = "${name}"\ndirectory = "${medium}"\nsize = "${gib} GiB"\n`;
  }
  fs.writeFileSync(path.join(dir, "node.toml"), toml);
  const log = fs.openSync(path.join(dir, "node.log"), "a");
  const child = spawn(BIN, ["storage-node", "--config", path.join(dir, "node.toml")], {
    env: { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("SVS_"))), SVS_LOG: "info" },
    stdio: ["ignore", "ignore", log],
  });
  fs.closeSync(log);
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const storageNode = {
    dir,
    sliceAddress,
    log: () => fs.readFileSync(path.join(dir, "node.log"), "utf8"),
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
    stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  servers.push(storageNode);
  return storageNode;
}

/** Runs qemu-io against an NBD `uri` again and again (each run the
 * qemu-io `commands`, e.g. "write -P 0x5a 0 4M", then `pauseMs` of rest)
 * until `stop()`, which kills a run under way and resolves once the loop
 * ended; stopped with the servers after the file's tests too, so a failed
 * test leaves no writer behind. `runs`, `failures` and `lastOutput` say how
 * it went. */
export function startNbdWriter(uri, commands, pauseMs = 100) {
  let child = null;
  let stopped = false;
  const writer = { runs: 0, failures: 0, lastOutput: "" };
  const loop = (async () => {
    while (!stopped) {
      const { code, text } = await new Promise((resolve) => {
        let out = "";
        child = spawn("qemu-io", ["-f", "raw", ...commands.flatMap((c) => ["-c", c]), uri],
          { stdio: ["ignore", "pipe", "pipe"] });
        child.stdout.on("data", (d) => { out += d; });
        child.stderr.on("data", (d) => { out += d; });
        child.once("error", (e) => resolve({ code: -1, text: `qemu-io: ${e.message} (install qemu-utils)` }));
        child.once("close", (c) => resolve({ code: c, text: out }));
      });
      child = null;
      if (stopped && code !== 0) break; // the run stop() killed
      writer.runs++;
      writer.lastOutput = text;
      if (code !== 0 || /failed|can't open/i.test(text)) writer.failures++;
      if (!stopped) await new Promise((r) => setTimeout(r, pauseMs));
    }
  })();
  writer.stop = () => {
    stopped = true;
    if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    return loop;
  };
  servers.push(writer);
  return writer;
}

/** Polls `check` (async) every 200 ms until it is true; fails after `ms`
 * with `what()` in the message. */
export async function eventually(ms, check, what = () => "") {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Writes 32 MiB of `byte` at the start of a slice file, so that moving or
 * rebuilding it takes a few seconds at a throttled rate. */
export function fillSlice(server, medium, volumeId, copy, column, byte) {
  const slice = path.join(server.mediumDir(medium), volumeId, `c${copy}-k${column}.slice`);
  const fd = fs.openSync(slice, "r+");
  fs.writeSync(fd, Buffer.alloc(32 * 1024 * 1024, byte), 0, 32 * 1024 * 1024, 0);
  fs.closeSync(fd);
}

/** A mirrored 15 GiB volume `data` on m1 + m2 whose growth needs its copy on
 * m2 moved to m3 (32 MiB of data in it), with movements paced at `rate`. */
export async function volumeNeedingMovement(rate) {
  const server = await startServer([["m1", "n1", "z1", 20], ["m2", "n2", "z2", 16], ["m3", "n3", "z3", 30]], rate);
  const api = await apiClient(server.base);
  await api.policy("none", 0, 0, 0);
  await api.policy("mirror", 1, 1, 0);
  await api.volume("filler", 20, "none"); // takes m3
  const id = await api.volume("data", 15, "mirror"); // m1 + m2
  const r = await api.call("DELETE", "/volumes/filler");
  await api.waitJob(r.JobID);
  fillSlice(server, "m2", id, 1, 0, 0xab);
  return { server, api, id };
}

/** A small API client for setting up scenarios without the UI. */
export async function apiClient(base) {
  const signin = await (await fetch(`${base}/signin`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ email: EMAIL, password: PASSWORD }),
  })).json();
  const call = async (method, p, body) => {
    const r = await fetch(`${base}${p}`, {
      method,
      headers: { authorization: signin.IdToken, "content-type": "application/json" },
      body: body && JSON.stringify(body),
    });
    const json = await r.json();
    assert.ok(r.ok, `${method} ${p}: ${r.status} ${JSON.stringify(json)}`);
    return json;
  };
  const waitJob = async (id) => {
    for (let i = 0; i < 300; i++) {
      const j = await call("GET", `/jobs/${id}`);
      if (j.state === "Done" || j.state === "Error") return j;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`job ${id} did not finish`);
  };
  return {
    call,
    waitJob,
    policy: (name, m, n, z) => call("POST", "/policies", { name, resiliencymedia: m, resiliencynode: n, resiliencyzone: z }),
    async volume(name, size, policy) {
      const r = await call("POST", "/volumes", { name, size, policy });
      const j = await waitJob(r.JobID);
      assert.equal(j.state, "Done", JSON.stringify(j));
      return r.ObjectID;
    },
  };
}

/** Screenshots at desktop and phone sizes, then back to desktop. */
export async function shots(page, name) {
  await page.setViewportSize(DESKTOP);
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}-1280x800.png`) });
  await page.setViewportSize(PHONE);
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}-390x844.png`), fullPage: true });
  await page.setViewportSize(DESKTOP);
}

// The tests' own helpers (page.waitForFunction) evaluate strings, which the
// console's Content-Security-Policy forbids: they run with bypassCSP. The CSP
// test below drives the console without it.
export async function newPage({ bypassCSP = true } = {}) {
  const context = await browser.newContext({ viewport: DESKTOP, bypassCSP });
  const page = await context.newPage();
  page.on("dialog", (d) => d.accept()); // confirm() of deletes
  page.on("pageerror", (e) => console.error("page error:", e.message));
  return page;
}

/** Signs in; the console lands on its Overview, and (unless `overview`)
 * the test goes on from the volume list, one click away. */
export async function signIn(page, base, email = EMAIL, password = PASSWORD, { overview = false } = {}) {
  await page.goto(`${base}/ui/`);
  await page.fill("#email", email);
  await page.fill("#password", password);
  await page.click("button[type=submit]");
  await page.waitForSelector("header#top:not([hidden])");
  await page.waitForSelector("nav a[data-page=overview].active");
  if (!overview) {
    await page.click("nav a[data-page=volumes]");
    await page.waitForSelector("nav a[data-page=volumes].active");
  }
}

/** Waits for `selector` to show exactly `text` (trimmed). */
export async function waitText(page, selector, text, timeout = 30_000) {
  await page.waitForFunction(
    ([s, t]) => document.querySelector(s)?.textContent.trim() === t,
    [selector, text],
    { timeout },
  );
}

/** Opens the resize dialog of a volume, submits, and follows the job to its end. */
export async function resizeInUi(page, volume, size, move, { preview = false } = {}) {
  await page.click(`tr[data-volume="${volume}"] button.resize`);
  await page.waitForSelector("#resize-dialog[open]");
  await page.fill("#resize-size", String(size));
  if (move) await page.check("#resize-move");
  // With `preview`: the dry run first (its panel's text is returned), and
  // the resize then carries out that plan.
  let previewText = null;
  let sent = null;
  if (preview) {
    await page.click("#resize-preview-button");
    await page.waitForSelector("#resize-preview:not([hidden])");
    previewText = await page.textContent("#resize-preview");
    sent = page.waitForRequest((r) => r.method() === "PATCH" && r.url().includes(`/volumes/${volume}`));
  }
  await page.click("#resize-submit");
  const planned = sent && new URL((await sent).url()).searchParams.get("plan");
  const seen = [];
  const statuses = new Set(); // what the running job said it was doing
  for (let i = 0; i < 600; i++) {
    const state = (await page.textContent("#job-state").catch(() => "")) || "";
    const progress = Number(await page.textContent("#job-progress").catch(() => "0"));
    const status = (await page.textContent("#job-status").catch(() => "")) || "";
    seen.push(progress);
    if (status) statuses.add(status);
    if (state === "Done" || state === "Error") return { state, seen, statuses: [...statuses], previewText, planned };
    await page.waitForTimeout(100);
  }
  throw new Error(`resize job of ${volume} did not end; progress seen: ${seen}`);
}

export const HOST = '[[nodes]]\nname = "host-1"\naddress = "127.0.0.1"\n';

/** Waits until the followed job of the page ends; returns its state. */
export async function jobEnd(page) {
  await page.waitForFunction(() => /^(Done|Error)$/.test(document.querySelector("#job-state")?.textContent || ""), null, { timeout: 30_000 });
  return page.textContent("#job-state");
}

/** Adds a user to the running service (`svs user add`); not an administrator unless `admin`. */
export function addUser(server, email, password, admin = false) {
  const args = ["user", "add", "--email", email, "--tenant", "other",
    "--config", path.join(server.dir, "svs.toml"), "--data-dir", path.join(server.dir, "data")];
  if (admin) args.push("--admin");
  const out = spawnSync(BIN, args, {
    input: `${password}\n`,
    env: Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("SVS_"))),
  });
  assert.equal(out.status, 0, `user add: ${out.stderr}`);
}

/** The media holding the volume's slices (copy order). */
export async function mediaOf(api, volume) {
  return (await api.call("GET", `/volumes/${volume}/slices`)).map((s) => s.media);
}

/** Calls an agent route with a node credential, as the host's agent would. */
export async function asAgent(base, credential, method, p, body) {
  const r = await fetch(`${base}${p}`, {
    method,
    headers: { authorization: `Bearer ${credential}`, "content-type": "application/json" },
    body: body && JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}
