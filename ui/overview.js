// The console's first page after sign-in: the storage at a glance
// (capacity used and free over every medium, volumes by health, nodes
// online and offline, the jobs running now), each tile linked to its page.
// Built from the lists the other pages read (GET /media, /volumes, /nodes,
// /jobs), asked for again every 10 s while it is shown.
import { api } from "./api.js";
import { h, errorBox, stateTag, fmtBytes, capacityBar, capacityLegend, changeDetector, livePoll } from "./dom.js";
import { CAPACITY_PARTS, capacityParts, jobTitle, jobRunning, plural } from "./text.js";
import { jobBar } from "./jobs.js";

const main = document.getElementById("main");
const GIB = 1024 ** 3;
const gib = (n) => fmtBytes((Number(n) || 0) * GIB);

// Volume states that mean lost copies; every other state is healthy
// (a change in progress included: its copies are all there).
const UNHEALTHY = ["Degraded", "Failed"];

// The sum of every medium's capacity, part by part (GiB).
export function capacitySum(media) {
  const sum = { size: 0, allocatedsize: 0, bookedsize: 0, snapshotsize: 0, freesize: 0 };
  for (const m of media) for (const k of Object.keys(sum)) sum[k] += Number(m[k]) || 0;
  return sum;
}

export function overviewPage() {
  const err = errorBox();
  err.id = "overview-error";
  const tiles = h("div", { class: "overview" }, h("p", { class: "muted" }, "Loading…"));
  const jobs = h("section", { id: "overview-jobs" });
  main.append(h("h1", {}, "Overview"), err, tiles, jobs);
  const shown = changeDetector();

  async function load() {
    let media, volumes, nodes, running, pending;
    try {
      [media, volumes, nodes, running, pending] = await Promise.all([
        api.get("/media"), api.get("/volumes"), api.get("/nodes"),
        api.get("/jobs?state=Running&count=100"), api.get("/jobs?state=Pending&count=100"),
      ]);
      err.show(null);
    } catch (e) {
      err.show(new Error(`Could not load the overview: ${e.message}`));
      return;
    }
    const active = [...running, ...pending].filter(jobRunning).sort((a, b) => b.id - a.id);
    if (!shown.changed(media, volumes, nodes, active)) return;
    tiles.replaceChildren(capacityTile(media), volumesTile(volumes), nodesTile(nodes));
    jobs.replaceChildren(...jobsList(active));
  }

  load();
  livePoll(10_000, () => true, load);
}

// A tile: its title linked to the page with the details, a big figure,
// and lines under it.
function tile(id, title, href, figure, ...lines) {
  return h("section", { class: "card tile", id },
    h("h2", {}, h("a", { href }, title)),
    h("p", { class: "figure" }, figure),
    lines);
}

function capacityTile(media) {
  const sum = capacitySum(media);
  const used = sum.size - sum.freesize;
  const pct = sum.size ? Math.round((used / sum.size) * 100) : 0;
  return tile("overview-capacity", "Capacity", "#/media",
    h("span", { id: "overview-used", "data-gib": used }, `${gib(used)} used`),
    h("p", { id: "overview-free", "data-gib": sum.freesize },
      `${gib(sum.freesize)} free of ${gib(sum.size)} (${pct}% used) · ${plural(media.length, "medium", "media")}`),
    sum.size ? capacityBar(sum.size, capacityParts(sum)) : null,
    sum.size ? capacityLegend(CAPACITY_PARTS) : null);
}

function volumesTile(volumes) {
  const degraded = volumes.filter((v) => v.state === "Degraded");
  const failed = volumes.filter((v) => v.state === "Failed");
  const healthy = volumes.length - degraded.length - failed.length;
  const named = (list) => list.flatMap((v, i) => [i ? ", " : "", h("a", { href: `#/volumes/${encodeURIComponent(v.name)}` }, v.name)]);
  return tile("overview-volumes", "Volumes", "#/volumes",
    plural(volumes.length, "volume"),
    h("p", { id: "overview-volume-health" },
      h("span", { class: "healthy", "data-count": healthy }, `${healthy} healthy`), " · ",
      h("span", { class: "degraded", "data-count": degraded.length }, `${degraded.length} degraded`), " · ",
      h("span", { class: "failed", "data-count": failed.length }, `${failed.length} failed`)),
    degraded.length || failed.length
      ? h("p", { class: "attention" }, "Lost copies: ", named(volumes.filter((v) => UNHEALTHY.includes(v.state))),
        " (recover them on the Volumes page)")
      : null);
}

function nodesTile(nodes) {
  const online = nodes.filter((n) => n.state === "Online");
  const offline = nodes.filter((n) => n.state !== "Online");
  return tile("overview-nodes", "Nodes", "#/nodes",
    plural(nodes.length, "node"),
    h("p", { id: "overview-node-states" },
      h("span", { class: "online", "data-count": online.length }, `${online.length} online`), " · ",
      h("span", { class: "offline", "data-count": offline.length }, `${offline.length} offline`)),
    offline.length
      ? h("p", { class: "attention" }, "Not online: ", offline.flatMap((n, i) =>
        [i ? ", " : "", h("a", { href: `#/nodes/${encodeURIComponent(n.name)}` }, n.name), " ", stateTag(n.state)]))
      : null);
}

// The jobs running now, newest first, each linked to its volume.
function jobsList(active) {
  const items = active.map((j) => h("li", { "data-job": j.id },
    j.objectname && !String(j.type).startsWith("media_")
      ? h("a", { href: `#/volumes/${encodeURIComponent(j.objectname)}` }, jobTitle(j))
      : h("a", { href: "#/jobs" }, jobTitle(j)),
    " ", stateTag(j.state), " ", jobBar(j)));
  return [
    h("h2", {}, h("a", { href: "#/jobs" }, "Running jobs"), " ", h("span", { class: "muted", id: "overview-jobs-count" }, `(${active.length})`)),
    items.length ? h("ul", { class: "overview-jobs" }, items) : h("p", { class: "muted" }, "No job is running."),
  ];
}
