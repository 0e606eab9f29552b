// What the console says for what the API names in code: jobs, slices and
// policies. Pure functions (no DOM, no calls), shared by the pages.

import { fmtBytes } from "./dom.js";

// Each job kind in words, e.g. for the Jobs page's filter.
export const JOB_KINDS = {
  volume_create: "Create volume",
  volume_delete: "Delete volume",
  volume_modify_extend: "Resize volume",
  volume_recovery: "Recover volume",
  volume_grow_filesystem: "Grow filesystem",
  attachment_create: "Attach",
  attachment_delete: "Detach",
  attachment_modify: "Change attachment",
  snapshot_create: "Take snapshot",
  snapshot_delete: "Delete snapshot",
  snapshot_rollback: "Roll back",
};

// A kind this console does not know yet, in words: "filesystem_grow" →
// "Filesystem grow".
function kindWords(type) {
  const words = String(type || "job").replace(/_/g, " ");
  return words.charAt(0).toUpperCase() + words.slice(1);
}

export function jobKindLabel(type) {
  return JOB_KINDS[type] || kindWords(type);
}

// A job in one line, from its kind, its arguments and its volume's name:
// "Resize web 30 → 100 GiB", "Attach web to host-1 read-only".
export function jobTitle(j) {
  const a = j.args && typeof j.args === "object" ? j.args : {};
  const vol = j.objectname || a.name || (j.object ? String(j.object).slice(0, 8) : "a volume");
  // Attachments of a snapshot carry its id (`top` is the live volume).
  const ofSnapshot = a.snapshot !== undefined && a.snapshot !== "top";
  const target = ofSnapshot ? `a snapshot of ${vol}` : vol;
  switch (j.type) {
    case "volume_create": {
      const what = [a.size !== undefined && `${a.size} GiB`, a.policy && `policy ${a.policy}`].filter(Boolean).join(", ");
      const shape = what ? ` (${what})` : "";
      return a.source ? `Create ${vol}${shape} as a clone of a snapshot` : `Create ${vol}${shape}`;
    }
    case "volume_delete":
      return a.force ? `Delete ${vol} with its attachments and snapshots` : `Delete ${vol}`;
    case "volume_modify_extend":
      return a.fromsize !== undefined && a.size !== undefined
        ? `Resize ${vol} ${a.fromsize} → ${a.size} GiB`
        : a.size !== undefined ? `Resize ${vol} to ${a.size} GiB` : `Resize ${vol}`;
    case "volume_recovery":
      return `Recover ${vol}`;
    case "volume_grow_filesystem":
      return `Grow the filesystem of ${vol}`;
    case "attachment_create":
      return a.node
        ? `Attach ${target} to ${a.node}${a.readonly || ofSnapshot ? " read-only" : ""}`
        : `Attach ${target}`;
    case "attachment_delete":
      return a.node ? `Detach ${target} from ${a.node}` : `Detach ${target}`;
    case "attachment_modify":
      return a.node
        ? `Make ${target} ${a.readonly ? "read-only" : "read-write"} on ${a.node}`
        : `Change the attachment of ${target}`;
    case "snapshot_create":
      return a.name ? `Snapshot ${vol} as ${a.name}` : `Snapshot ${vol}`;
    case "snapshot_delete":
      return a.name ? `Delete snapshot ${a.name} of ${vol}` : `Delete a snapshot of ${vol}`;
    case "snapshot_rollback":
      return a.name ? `Roll ${vol} back to snapshot ${a.name}` : `Roll ${vol} back to a snapshot`;
    default:
      return `${kindWords(j.type)} on ${vol}`;
  }
}

// The target size of a running resize job, else null.
export function resizeTarget(j) {
  const running = j && j.type === "volume_modify_extend" && (j.state === "Pending" || j.state === "Running");
  return running && j.args && j.args.size !== undefined ? Number(j.args.size) : null;
}

// A volume's size, with where a running resize takes it: "30 → 100 GiB".
export function sizeText(size, target) {
  return target && target !== size ? `${size} → ${target} GiB` : `${size} GiB`;
}

// One vocabulary for slices (the API's `name`, job statuses, the CLI): a
// slice is one column of one copy, named c<copy>-k<column>, both counted
// from 0.
export function sliceName(s) {
  return s.name || `c${s.copy}-k${s.column}`;
}

export const SLICE_HINT = "Slice cC-kK is column K of copy C (both counted from 0), as job statuses name it.";

// Beside a lost copy's health: a stale copy (its storage node stopped
// answering, or its file went missing) missed the writes of a generation
// of the volume's front, and is never read until a recovery rebuilds it.
export function staleNote(slice) {
  if (slice.health !== "Lost" || slice.stalegeneration == null) return "";
  return ` stale: missed generation ${slice.stalegeneration}, not read until rebuilt`;
}

// Copies a policy keeps of every slice: 1 + the largest resiliency.
export function policyCopies(media, node, zone) {
  return 1 + Math.max(Number(media) || 0, Number(node) || 0, Number(zone) || 0);
}

// The policy form's hint for the chosen resiliencies.
export function policyHint(media, node, zone) {
  const copies = policyCopies(media, node, zone);
  const levels = `media ${Number(media) || 0}, node ${Number(node) || 0}, zone ${Number(zone) || 0}`;
  if (copies === 1) {
    return `1 copy of every slice (1 + the largest resiliency of ${levels}): losing its medium loses data.`;
  }
  const apart = ["medium", Number(node) > 0 && "node", Number(zone) > 0 && "zone"].filter(Boolean);
  const where = apart.length > 1 ? `${apart.slice(0, -1).join(", ")} and ${apart.at(-1)}` : apart[0];
  return `${copies} copies of every slice (1 + the largest resiliency of ${levels}), ` +
    `each copy of a column on a different ${where}.`;
}

// What a volume is attached to, in one line: "host-1, host-2 read-only,
// host-3 (snapshot s1)"; a change in progress says so.
export function attachmentText(list) {
  return list.map((a) => {
    const what = a.snapshotid && a.snapshotid !== "top"
      ? `${a.node} (snapshot ${a.snapshotname || a.snapshotid})`
      : `${a.node}${a.readonly ? " read-only" : ""}`;
    return a.state && a.state !== "Attached" ? `${what} ${a.state.toLowerCase()}` : what;
  }).join(", ");
}

// Whether a volume matches the list's search: every word of the query is
// in its name, type, zone, policy, state or attachments (any case).
export function volumeMatches(v, attached, query) {
  const words = String(query || "").toLowerCase().split(/\s+/).filter(Boolean);
  if (!words.length) return true;
  const haystack = [v.name, v.type, v.filesystem, v.zone, ...(v.zones || []), v.policy, v.state, attached].join(" ").toLowerCase();
  return words.every((w) => haystack.includes(w));
}

// The kinds of job a cancel (DELETE /jobs/{job}) stops and undoes while
// they are Pending or Running.
export const CANCELLABLE_KINDS = ["volume_create", "volume_modify_extend", "volume_recovery"];

export function jobRunning(j) {
  return !!j && (j.state === "Pending" || j.state === "Running");
}

// A job that ended because it was cancelled: the API's `Error` with status `Cancelled`.
export function jobCancelled(j) {
  return !!j && j.state === "Error" && j.status === "Cancelled";
}

// Whether the console offers Cancel: a cancellable kind, not ended, no
// cancel asked for yet.
export function jobCancellable(j) {
  return jobRunning(j) && CANCELLABLE_KINDS.includes(j.type) && !j.cancelrequested;
}

// A job's state as the console shows it: "Cancelled" rather than `Error`
// for one that was cancelled, "Cancelling" while a cancel is under way,
// "Paused" while its copies wait (paused on request, or outside the
// service's movement window: the API's `Running` with a "Paused:" status),
// else the API's state.
export function jobStateText(j) {
  if (jobCancelled(j)) return "Cancelled";
  if (jobRunning(j) && j.cancelrequested) return "Cancelling";
  if (jobPaused(j)) return "Paused";
  return j.state;
}

// The confirmation before a cancel, saying what it undoes:
// "Cancel job 12 (volume_modify_extend on 'data')? The data movement stops ...".
export function cancelQuestion(j) {
  const a = j.args && typeof j.args === "object" ? j.args : {};
  const vol = j.objectname || a.name || (j.object ? String(j.object).slice(0, 8) : "a volume");
  const what = {
    volume_modify_extend: "The data movement stops and every slice goes back where it was; " +
      `the volume keeps its size${a.fromsize !== undefined ? ` of ${a.fromsize} GiB` : ""}.`,
    volume_recovery: "The rebuild stops: copies already rebuilt stay, the others stay lost until the volume is recovered again.",
    volume_create: "The volume is not created: what was placed of it is removed.",
  }[j.type] || "The job stops and what it did is undone.";
  return `Cancel job ${j.id} (${j.type} on '${vol}')? ${what}`;
}

// The kinds of job whose copies can be paused, resumed and given a rate of
// their own (PATCH /jobs/{job}): a resize's data movement, a recovery.
export const STEERABLE_KINDS = ["volume_modify_extend", "volume_recovery"];

// Whether the console offers Pause / Resume and Rate: a steerable kind that
// copies data (an in-place resize has nothing to copy), not ended, no
// cancel asked for.
export function jobSteerable(j) {
  if (!jobRunning(j) || !STEERABLE_KINDS.includes(j.type) || j.cancelrequested) return false;
  return j.type !== "volume_modify_extend" || !j.args || j.args.allowdatamovement !== false;
}

// A running job whose copies wait: paused on request (`paused`), or held
// by the movement window (its status then starts "Paused:" too).
export function jobPaused(j) {
  return jobRunning(j) && (j.paused === true || /^Paused:/.test(j.status || ""));
}

// A copy rate in bytes per second, for people: "64.0 MiB/s", "unthrottled".
export function rateText(bytes) {
  return Number(bytes) === 0 ? "unthrottled" : `${fmtBytes(bytes)}/s`;
}

// The job's own copy rate, when it has one ("64.0 MiB/s"), else "".
export function jobRateText(j) {
  return j && j.movementrate != null ? rateText(j.movementrate) : "";
}

// The question of the Rate button, and what its field starts with (the
// job's own rate, in a form the server reads back).
export function rateQuestion(j) {
  const now = j.movementrate == null ? "the service's movement rate" : rateText(j.movementrate);
  return `Copy rate of job ${j.id} (${jobTitle(j)}), per second: e.g. 64 MiB; 0 for unthrottled; ` +
    `empty for the service's movement rate. Now: ${now}.`;
}

export function rateDefault(j) {
  if (j.movementrate == null) return "";
  return Number(j.movementrate) === 0 ? "0" : fmtBytes(j.movementrate);
}

// What the Rate field sends as `movementrate`: null (the service's rate)
// for an empty field, else the text ("64 MiB"; a trailing "/s" dropped).
export function rateValue(input) {
  const text = String(input ?? "").trim().replace(/\s*\/\s*s$/i, "");
  return text === "" ? null : text;
}

// What a PATCH /jobs/{job} is doing, for its refusal: "pause", "resume",
// "set the rate of".
export function steerVerb(change) {
  if (change.paused === true) return "pause";
  if (change.paused === false) return "resume";
  return "set the rate of";
}

// The console's line once the server took a PATCH /jobs/{job}: from the
// job it answered.
export function steerNotice(j, change) {
  if (change.paused === true) {
    return `Job ${j.id} paused: its copies stop at their last checkpoint (writes to the volume go on); Resume goes on from there.`;
  }
  if (change.paused === false) {
    return jobPaused(j) && /window/.test(j.status || "")
      ? `Job ${j.id} resumed; its copies wait for the movement window to open.`
      : `Job ${j.id} resumed: its copies go on from their last checkpoint.`;
  }
  return j.movementrate == null
    ? `Job ${j.id} copies at the service's movement rate again.`
    : `Job ${j.id} now copies ${Number(j.movementrate) === 0 ? "unthrottled" : `at ${rateText(j.movementrate)}`}.`;
}

// ---- capacity and I/O ----

// The parts of a medium's or node's capacity (GiB), as its capacity bar
// draws them: slices placed, booked by running jobs, held by snapshots,
// free. What a failed medium no longer offers (its `freesize` is 0) is
// "unavailable".
export const CAPACITY_PARTS = [
  ["allocated", "Allocated to slices"],
  ["booked", "Booked by running jobs"],
  // Whole GiB of free space, rounded up from what the snapshots hold.
  ["snapshot", "Set aside for snapshots"],
  ["free", "Free"],
];

export function capacityParts(x) {
  const gib = { allocated: x.allocatedsize, booked: x.bookedsize, snapshot: x.snapshotsize, free: x.freesize };
  const parts = CAPACITY_PARTS.map(([part, label]) => ({ part, label, gib: Number(gib[part]) || 0 }));
  const rest = (Number(x.size) || 0) - parts.reduce((sum, p) => sum + p.gib, 0);
  if (rest > 0) parts.splice(3, 0, { part: "unavailable", label: "Unavailable", gib: rest });
  return parts;
}

// A capacity in one line: "12 GiB allocated to slices · 2 GiB booked · 1 GiB
// snapshots · 85 GiB free of 100 GiB".
export function capacityText(x) {
  const [allocated, booked] = [x.allocatedsize, x.bookedsize].map((n) => Number(n) || 0);
  return `${allocated} GiB allocated to slices · ${booked} GiB booked · ${snapshotSpaceText(x)} · ` +
    `${x.freesize} GiB free of ${x.size} GiB`;
}

// What snapshots hold on a medium or node, in the unit a snapshot's own
// space is shown in (its `used`: the sum of them), with the whole GiB of
// free space that sets aside: "112.2 MiB held by snapshots (1 GiB of free
// space set aside for them)".
export function snapshotSpaceText(x) {
  const gib = Number(x.snapshotsize) || 0;
  const held = x.snapshotbytes == null ? `${gib} GiB` : fmtBytes(x.snapshotbytes);
  return `${held} held by snapshots` + (gib ? ` (${gib} GiB of free space set aside for them)` : "");
}

// The top of a chart's axis: 1, 2 or 5 × 10^k at or above `v` (1 for nothing).
export function niceMax(v) {
  if (!(v > 0)) return 1;
  const exp = 10 ** Math.floor(Math.log10(v));
  const f = v / exp;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * exp;
}

// Operations per second: "812", "3.5", "12.4k".
export function iopsText(n) {
  const v = Number(n) || 0;
  if (v >= 10_000) return `${(v / 1000).toFixed(1)}k`;
  if (v >= 10 || Number.isInteger(v)) return String(Math.round(v));
  return v.toFixed(1);
}

// Bytes per second: "0 B/s", "512 B/s", "3.2 MiB/s".
export function throughputText(n) {
  const v = Number(n) || 0;
  return v < 1024 ? `${Math.round(v)} B/s` : `${fmtBytes(v)}/s`;
}

const RATE_UNITS = ["B/s", "KiB/s", "MiB/s", "GiB/s", "TiB/s"];

// A chart's y axis: its top, its ticks and its unit. IOPS as they are,
// from 0 to at least 1 with whole-number ticks only (a fraction of an
// operation per second reads as noise); bytes per second in the unit of
// the largest value ("MiB/s"), ticks 0, half and top as plain numbers of it.
export function ioScale(max, bytes) {
  if (!bytes) {
    const top = Math.max(1, niceMax(max));
    // 1 → 0, 1; 2 → 0, 1, 2; 5 → 0 … 5; 10 → 0, 5, 10; 50 → 0, 25, 50.
    const step = Number.isInteger(top / 2) ? top / 2 : Number.isInteger(top / 5) ? top / 5 : top;
    const ticks = [];
    for (let v = 0; v <= top; v += step) ticks.push({ value: v, label: String(v) });
    return { max: top, title: "IOPS", ticks };
  }
  let k = 0;
  while (k < RATE_UNITS.length - 1 && max >= 1024 ** (k + 1)) k++;
  return unitScale(max, 1024 ** k, RATE_UNITS[k]);
}

// An axis in `unit` (`per` of the raw value): 0, half and a nice top.
function unitScale(max, per, title) {
  const top = niceMax(max / per);
  const label = (v) => (Number.isInteger(v) ? String(v) : v.toFixed(1));
  return { max: top * per, title, ticks: [0, top / 2, top].map((v) => ({ value: v * per, label: label(v) })) };
}

// A latency axis from microseconds: in µs, ms or s, as the largest value needs.
export function latencyScale(maxUs) {
  if (maxUs >= 1e6) return unitScale(maxUs, 1e6, "s");
  if (maxUs >= 1e3) return unitScale(maxUs, 1e3, "ms");
  return unitScale(maxUs, 1, "µs");
}

// A latency in microseconds, for people: "85 µs", "1.2 ms", "2.05 s"; "—"
// for none (a period without such requests).
export function latencyText(us) {
  if (us === null || us === undefined || us === "") return "—";
  const v = Number(us) || 0;
  if (v >= 1e6) return `${(v / 1e6).toFixed(2)} s`;
  if (v >= 1e3) return `${(v / 1e3).toFixed(1)} ms`;
  return `${Math.round(v)} µs`;
}

// The highest sample of each measure over `samples`, in words: "read 12
// IOPS, 1.0 MiB/s · write 900 IOPS, 3.5 MiB/s".
export function ioPeakText(samples) {
  const most = (key) => Math.max(0, ...samples.map((s) => Number(s[key]) || 0));
  return ioLatestText({
    readiops: most("readiops"), writeiops: most("writeiops"),
    readthroughput: most("readthroughput"), writethroughput: most("writethroughput"),
  });
}

// The latest I/O sample in words: "read 0 IOPS, 0 B/s · write 812 IOPS, 3.2 MiB/s".
export function ioLatestText(s) {
  return `read ${iopsText(s.readiops)} IOPS, ${throughputText(s.readthroughput)} · ` +
    `write ${iopsText(s.writeiops)} IOPS, ${throughputText(s.writethroughput)}`;
}

// "1 volume", "2 volumes", "0 slices": a count with its noun, singular
// only for one (`many` for irregular nouns: "copy" → "copies").
export function plural(n, noun, many = `${noun}s`) {
  return `${n} ${Number(n) === 1 ? noun : many}`;
}

// How long from `start` to `end` (RFC 3339; `end` null: until `now`, ms):
// "0 s", "42 s", "3 min 12 s", "2 h 5 min"; "" before the start.
export function durationText(start, end, now) {
  const from = Date.parse(start);
  const to = end ? Date.parse(end) : now;
  if (!start || isNaN(from) || isNaN(to)) return "";
  const secs = Math.max(0, Math.round((to - from) / 1000));
  if (secs < 60) return `${secs} s`;
  if (secs < 3600) return `${Math.floor(secs / 60)} min ${secs % 60} s`;
  return `${Math.floor(secs / 3600)} h ${Math.floor((secs % 3600) / 60)} min`;
}

// ---- the volume list and a volume's page ----

// Why a resize size is refused, with the bounds' reasons: a volume only
// grows, and by at most ten times its current size at once.
export function resizeRefusal(n, current, min, max) {
  const range = `enter a whole number of GiB from ${min} (more than the current ${current}) ` +
    `to ${max} (ten times the current size)`;
  if (Number.isFinite(n) && n < min) return `Volumes cannot shrink: ${range}.`;
  if (Number.isFinite(n) && n > max) return `A resize grows a volume to at most ten times its size: ${range}.`;
  return `${range.charAt(0).toUpperCase()}${range.slice(1)}.`;
}

// Every zone a volume's copies are in ("zone-a, zone-b"); the API's `zones`,
// else its `zone`.
export function zonesText(v) {
  return (v.zones && v.zones.length ? v.zones.join(", ") : v.zone) || "—";
}

// The health of a volume's copies, from its state: `Degraded` (it lost
// copies, every column still has one), `Failed` (a column lost every copy),
// else `Healthy` once placed.
export function healthText(v) {
  if (v.state === "Degraded" || v.state === "Failed") return v.state;
  return v.state === "Creating" ? "—" : "Healthy";
}

// What a snapshot's `used` means, said beside it wherever it is shown.
export const SNAPSHOT_USED_HINT =
  "Snapshot space: the bytes its saved chunks take on disk (data overwritten since it was taken, on every copy).";

// The commands that connect a Linux host to an attachment's NBD URI
// (`nbd://host:port/export`, `nbds://` with TLS): nbd-client and qemu-nbd,
// read-only for a read-only attachment. With TLS both need svs's CA
// (docs/tls.md): nbd-client as a file, qemu as a directory holding it as
// ca-cert.pem. [] for a URI they cannot read.
export function connectCommands(a) {
  const m = /^(nbds?):\/\/(\[[^\]]+\]|[^:/]+):(\d+)\/(.+)$/.exec(a.uri || "");
  if (!m) return [];
  const [, scheme, host, port, exportName] = m;
  const bare = host.replace(/^\[|\]$/g, "");
  const tls = scheme === "nbds";
  const ro = a.readonly;
  const nbdClient = ["nbd-client", "-N", exportName, ...(tls ? ["-cacertfile", "/etc/svs/ca.pem", "-tlshostname", bare] : []),
    ...(ro ? ["-readonly"] : []), bare, port, "/dev/nbd0"].join(" ");
  const qemuNbd = tls
    ? ["qemu-nbd", "--connect=/dev/nbd0", ...(ro ? ["--read-only"] : []),
      "--object", "tls-creds-x509,id=tls0,dir=/etc/svs/qemu-tls,endpoint=client",
      "--image-opts", `driver=nbd,host=${bare},port=${port},export=${exportName},tls-creds=tls0`].join(" ")
    : ["qemu-nbd", "--connect=/dev/nbd0", ...(ro ? ["--read-only"] : []), `${scheme}://${host}:${port}/${exportName}`].join(" ");
  return [{ tool: "nbd-client", command: nbdClient }, { tool: "qemu-nbd", command: qemuNbd }];
}

// Sorts `items` by `key(item)` (numbers as numbers, text in the page's
// collation; missing values last), ascending or not, without changing them.
export function sortedBy(items, key, ascending) {
  const missing = (x) => x === null || x === undefined || x === "";
  return [...items].sort((a, b) => {
    const [x, y] = [key(a), key(b)];
    if (missing(x) || missing(y)) return missing(x) - missing(y);
    const order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
    return ascending ? order : -order;
  });
}
