// The console's Volumes page (the list, creating a volume, the resize
// dialog) and one volume's page (its slices, attachments, snapshots and
// jobs), with the volume helpers the snapshots page shares. Kept apart from
// app.js, which imports what it needs from here.
import { api } from "./api.js";
import {
  resizeTarget, sizeText, sliceName, SLICE_HINT, staleNote, attachmentText, volumeMatches, jobCancellable,
  iopsText, throughputText, ioScale, ioLatestText,
} from "./text.js";
import {
  h, errorBox, noticeBox, actionBox, progressBar, stateTag, table, cell, fmtBytes, fmtTime, changeDetector, livePoll,
  lineChart, onLeave,
} from "./dom.js";
import {
  followJob, cancelJob, steerJob, jobRate, jobButtons, jobBar, timeCell, jobCell, jobStateCell, jobDetailsCell,
} from "./jobs.js";

const main = document.getElementById("main");

export function volumePath(v) {
  return `/volumes/${encodeURIComponent(v)}`;
}

export function snapshotPath(v, s) {
  return `${volumePath(v)}/snapshots/${encodeURIComponent(s)}`;
}

// Volume states that last: anything else is a change in progress.
export const SETTLED_VOLUME_STATES = ["Ready", "Degraded", "Failed"];

// A volume's type, with the filesystem svs makes on a `file` volume.
export function volumeType(v) {
  return v.filesystem ? `${v.type} · ${v.filesystem}` : v.type;
}

// What the node's agent last reported about an attachment, in one line:
// device, mount path, filesystem size, and its note or error.
export function hostDetail(a) {
  return [
    a.hostdevice,
    a.hostmountpath && `on ${a.hostmountpath}`,
    a.filesystembytes != null && `${fmtBytes(a.filesystembytes)} filesystem`,
    fsMismatch(a.filesystemsize, a.volumesize, a.growerror),
    a.hostdetail,
  ].filter(Boolean).join(" · ");
}

// A filesystem smaller than its volume (a growth failed), in words; "" when it fills it.
function fsMismatch(fsSize, volumeSize, why) {
  if (fsSize == null || volumeSize == null || fsSize >= volumeSize) return "";
  return `filesystem ${fsSize} GiB of ${volumeSize} GiB${why ? `: ${why}` : ""}`;
}

// The volume page's filesystem line: the size it fills, and when a growth
// failed a red badge with why and a button that grows it again.
function filesystemFact(v, grow) {
  if (v.filesystemsize == null) return null;
  if (v.filesystemsize >= v.size) {
    return [h("dt", {}, "Filesystem"), h("dd", { id: "volume-filesystem" }, `${v.filesystemsize} GiB (fills the volume)`)];
  }
  return [h("dt", {}, "Filesystem"), h("dd", { id: "volume-filesystem", class: "fs-mismatch" },
    h("span", { class: "state state-error", id: "volume-fs-mismatch" }, `${v.filesystemsize} GiB of ${v.size} GiB`),
    " ", h("span", { class: "muted" }, v.filesystemerror ? `growth failed: ${v.filesystemerror}` : "not grown yet"),
    " ", busyButton(v, { class: "secondary grow-filesystem", onclick: grow }, "Grow filesystem"))];
}

// The host state of an attachment ("—" until an agent reports), with the
// detail on hover.
export function hostState(a) {
  if (!a.hoststate) return h("span", { class: "host muted", title: "No agent has reported on this attachment." }, "host —");
  const detail = hostDetail(a);
  const when = a.hostupdated ? ` (reported ${fmtTime(a.hostupdated)})` : "";
  return h("span", { class: "host" }, "host ",
    h("span", { class: `state host-state state-${a.hoststate.toLowerCase()}`, title: `${detail || a.hoststate}${when}` }, a.hoststate));
}

// ---- volumes ----
export function volumesPage() {
  const err = errorBox();
  const actionErr = actionBox();
  actionErr.id = "volume-action-error";
  const note = noticeBox();
  // The job a Recover started, followed here (a resize has its own dialog).
  const recoveryPanel = h("div", { id: "volume-job", class: "card job", hidden: true });
  const list = h("div", {}, h("p", { class: "muted" }, "Loading volumes…"));
  const policySelect = h("select", { id: "vol-policy", required: true });
  const name = h("input", { id: "vol-name", required: true, maxlength: 63, pattern: "[A-Za-z0-9._\\-]+", placeholder: "db01" });
  const size = h("input", { id: "vol-size", type: "number", min: 1, max: 1048576, step: 1, required: true, value: "10" });
  const filesystem = h("select", { id: "vol-fs" }, h("option", { value: "ext4" }, "ext4"), h("option", { value: "xfs" }, "xfs"));
  // svs makes the filesystem of a `file` volume: only then is it asked for.
  const filesystemField = h("label", { id: "vol-fs-field", hidden: true }, "Filesystem", filesystem);
  const type = h("select", { id: "vol-type", onchange: () => { filesystemField.hidden = type.value !== "file"; } },
    h("option", { value: "block" }, "block"), h("option", { value: "file" }, "file"));
  const createErr = errorBox();
  const create = h(
    "form",
    {
      class: "card inline-form",
      id: "create-volume",
      onsubmit: async (ev) => {
        ev.preventDefault();
        createErr.show(null);
        try {
          const body = {
            name: name.value.trim(),
            size: Number(size.value),
            policy: policySelect.value,
            type: type.value,
          };
          if (type.value === "file") body.filesystem = filesystem.value;
          const r = await api.post("/volumes", body);
          note.show(`${r.Message} (job ${r.JobID}).`);
          name.value = "";
          load();
        } catch (e) {
          createErr.show(e);
        }
      },
    },
    h("h2", {}, "Create a volume"),
    h("div", { class: "fields" },
      h("label", {}, "Name", name),
      h("label", {}, "Size (GiB)", size),
      h("label", {}, "Policy", policySelect),
      h("label", {}, "Type", type),
      filesystemField,
      h("button", { type: "submit" }, "Create"),
    ),
    createErr,
  );
  // Narrows the list as one types; the live refreshes keep it.
  const search = h("input", { id: "vol-search", type: "search", placeholder: "Search name, zone, node, policy, state",
    "aria-label": "Search volumes", oninput: () => draw() });
  main.append(h("h1", {}, "Storage › Volumes"), err, actionErr, note, recoveryPanel,
    h("div", { class: "toolbar" }, search), list, create);

  api.get("/policies").then(
    (ps) => {
      policySelect.replaceChildren(
        ...(ps.length ? ps.map((p) => h("option", { value: p.name }, p.name)) : [h("option", { value: "" }, "— create a policy first —")]),
      );
    },
    (e) => createErr.show(new Error(`Could not load policies: ${e.message}`)),
  );

  let volumes = [];
  let attachments = [];
  let targets = new Map(); // volume id → size its running resize grows it to
  const shown = changeDetector();
  async function load() {
    try {
      [volumes, attachments] = await Promise.all([api.get("/volumes"), api.get("/attachments")]);
      targets = await resizeTargets(volumes);
      err.show(null);
    } catch (e) {
      err.show(new Error(`Could not load volumes: ${e.message}`));
      return;
    }
    draw();
  }

  function draw() {
    const query = search.value.trim();
    if (!shown.changed(volumes, attachments, [...targets], query)) return;
    const attachedTo = (v) => attachmentText(attachments.filter((a) => a.volumeid === v.volumeid));
    const rows = volumes.filter((v) => volumeMatches(v, attachedTo(v), query)).map((v) =>
      h("tr", { "data-volume": v.name },
        cell("Name",
          h("a", { href: `#/volumes/${encodeURIComponent(v.name)}`, class: "vol-link" }, v.name),
          v.contentsnapshot
            ? h("span", { class: "clone-of muted" }, `clone of ${v.contentvolume}@${v.contentsnapshot}`)
            : null,
        ),
        cell("Type", volumeType(v)),
        cell("Size", h("span", { class: "size" }, sizeText(v.size, targets.get(v.volumeid)))),
        cell("Policy", v.policy),
        cell("Zone", v.zone || "—"),
        cell("Attached", h("span", { class: "attached" }, attachedTo(v) || "—")),
        cell("State", stateTag(v.state)),
        // Only a job in progress has a bar: a settled volume's "100 %" says nothing.
        cell("Progress", volumeBusy(v) ? progressBar(v.progress) : h("span", { class: "muted" }, "—")),
        cell("", h("span", { class: "actions" },
          busyButton(v, { class: "secondary resize", onclick: () => openResize(v) }, "Resize"),
          h("a", { class: "button secondary snapshots", href: `#/snapshots/${encodeURIComponent(v.name)}` }, "Snapshots"),
          (v.state === "Degraded" || v.state === "Failed") && !v.volumerecoveryjob
            ? h("button", { type: "button", class: "recover", onclick: () => recover(v) }, "Recover")
            : null,
          busyButton(v, { class: "danger", onclick: () => remove(v) }, "Delete"),
        )),
      ),
    );
    list.replaceChildren(table(["Name", "Type", "Size", "Policy", "Zone", "Attached", "State", "Progress", ""], rows,
      volumes.length ? `No volume matches "${query}".` : "No volumes yet."));
  }

  async function remove(v) {
    if (!confirm(`Delete volume "${v.name}"? Its data is lost.`)) return;
    actionErr.show(null);
    try {
      const r = await api.del(volumePath(v.name));
      note.show(`${r.Message} (job ${r.JobID}).`);
    } catch (e) {
      note.show(null);
      const force = h("button", { type: "button", class: "danger force", onclick: () => forceRemove(v) }, "Delete anyway (force)");
      actionErr.show(new Error(`Could not delete "${v.name}": ${e.message}`), e.status === 409 ? force : null);
    }
    load();
  }

  async function forceRemove(v) {
    if (!confirm(`Delete volume "${v.name}" with its attachments and snapshots? Its data is lost.`)) return;
    actionErr.show(null);
    try {
      const r = await api.del(`${volumePath(v.name)}?force=true`);
      note.show(`${r.Message} (job ${r.JobID}).`);
    } catch (e) {
      actionErr.show(new Error(`Could not delete "${v.name}": ${e.message}`));
    }
    load();
  }

  // Rebuilds the copies lost with a failed medium (a volume_recovery job).
  async function recover(v) {
    actionErr.show(null);
    try {
      const r = await api.post(`${volumePath(v.name)}/recover`);
      note.show(`${r.Message} (job ${r.JobID}).`);
      followJob(r.JobID, recoveryPanel, () => load());
    } catch (e) {
      note.show(null);
      actionErr.show(new Error(`Could not recover "${v.name}": ${e.message}`));
    }
    load();
  }

  function openResize(v) {
    // The dialog follows its own job under the same element ids.
    recoveryPanel.hidden = true;
    recoveryPanel.replaceChildren();
    resizeDialog(v, () => load());
  }

  load();
  // Live, behind the resize dialog too: a change made elsewhere (another
  // console, the API, the CLI) shows within 2 s; the list is redrawn only
  // when what the server says changed.
  livePoll(2000, () => true, load);
}

// ---- live lists, busy volumes, the resize dialog ----

// A volume is busy while a job works on it (Pending or Running): its state
// is a transition, or its status is the job's instead of `Online`.
function volumeBusy(v) {
  return !SETTLED_VOLUME_STATES.includes(v.state) || (v.status && v.status !== "Online");
}

// The size each Resizing volume's running resize grows it to, by volume id:
// its newest resize job (one call per volume, only while one resizes).
async function resizeTargets(volumes) {
  const resizing = volumes.filter((v) => v.state === "Resizing");
  const newest = await Promise.all(resizing.map((v) =>
    api.get(`/jobs?${new URLSearchParams({ object: v.volumeid, type: "volume_modify_extend", count: 1 })}`)));
  return new Map(resizing.map((v, i) => [v.volumeid, resizeTarget(newest[i][0])]));
}

// A volume's action button, disabled (saying why) while the volume is busy.
function busyButton(v, attrs, label) {
  const busy = volumeBusy(v);
  return h("button", {
    type: "button",
    ...attrs,
    disabled: busy,
    title: busy ? `A job is working on "${v.name}" (${v.status || v.state}); wait until it ends.` : undefined,
  }, label);
}

// What a resize's dry run answered, as lines of the preview panel: the
// outcome and its message, each move (bytes of data, nodes), each growth,
// and the time the moves take at the movement rate.
function planView(plan) {
  const outcome = { inplace: "In place", movement: "With data movement", refused: "Refused" }[plan.outcome] || plan.outcome;
  const parts = [
    h("p", { class: "preview-outcome" }, h("strong", {}, `${outcome}: `), plan.message),
  ];
  if (plan.moves.length) {
    parts.push(h("p", {}, "Slices that move:"), h("ul", { class: "preview-moves" },
      ...plan.moves.map((m) => h("li", {},
        `${m.slice}: ${m.from} (${m.fromnode}) → ${m.to} (${m.tonode}), ${fmtBytes(m.bytes)}${m.measured ? "" : " at most"} of data`))));
  }
  if (plan.growths.length) {
    parts.push(h("p", {}, "Slices that grow where they are:"), h("ul", { class: "preview-growths" },
      ...plan.growths.map((g) => h("li", {}, `${g.slice} on ${g.medium}: ${g.from} → ${g.to} GiB`))));
  }
  if (plan.moves.length) {
    const time = plan.estimatedseconds == null
      ? "unthrottled (no movement rate set)"
      : `about ${plan.estimatedseconds} s at ${fmtBytes(plan.movementrate)}/s`;
    parts.push(h("p", { class: "preview-estimate" }, `Data to copy: ${fmtBytes(plan.bytestocopy)}, ${time}.`));
  }
  parts.push(h("p", { class: "hint" }, "Resize now carries out this plan, or is refused if it changed meanwhile."));
  return parts;
}

// The resize dialog of volume `v`: checks the range before sending, follows
// the job, and once it is Done shows the volume's new size (a further resize
// starts from it). `onClose` runs once it is gone.
function resizeDialog(v, onClose) {
  let current = v.size;
  const bounds = () => ({ min: current + 1, max: current * 10 });
  const dErr = errorBox();
  const currentSize = h("p", { id: "resize-current" });
  // The outcome of the last resize, once the dialog is ready for another.
  const done = noticeBox();
  done.id = "resize-done";
  const range = h("p", { class: "hint", id: "resize-range" });
  const input = h("input", { id: "resize-size", type: "number", step: 1, required: true });
  const move = h("input", { id: "resize-move", type: "checkbox" });
  const jobPanel = h("div", { id: "resize-job", class: "job", hidden: true });
  const submit = h("button", { type: "submit", id: "resize-submit" }, "Resize");
  // The last preview (a dry run) and the inputs it was made for: a resize
  // with the same inputs carries out exactly that plan, or is refused
  // naming what changed since.
  const previewPanel = h("div", { id: "resize-preview", class: "preview", hidden: true });
  let previewed = null;
  const inputs = () => ({ size: Number(input.value), allowdatamovement: move.checked });
  const samePlan = () =>
    previewed && previewed.size === Number(input.value) && previewed.allowdatamovement === move.checked;
  const preview = h("button", {
    type: "button", class: "secondary", id: "resize-preview-button",
    onclick: async () => {
      dErr.show(null);
      const wrong = problem();
      if (wrong) {
        dErr.show(new Error(wrong));
        return;
      }
      try {
        const asked = inputs();
        const plan = await api.patch(`${volumePath(v.name)}?dryrun=true`, asked);
        previewed = { ...asked, token: plan.plan };
        previewPanel.replaceChildren(...planView(plan));
        previewPanel.hidden = false;
      } catch (e) {
        previewed = null;
        previewPanel.hidden = true;
        dErr.show(e);
      }
    },
  }, "Preview");
  // A changed input makes the shown preview stale.
  const staleIfChanged = () => {
    if (previewed && !samePlan()) {
      previewed = null;
      previewPanel.hidden = true;
    }
  };
  move.addEventListener("change", staleIfChanged);
  const problem = () => {
    const n = Number(input.value);
    const { min, max } = bounds();
    return !Number.isInteger(n) || n < min || n > max ? `The new size must be a whole number of GiB from ${min} to ${max}.` : null;
  };
  const showSize = (size) => {
    current = size;
    const { min, max } = bounds();
    Object.assign(input, { min, max, value: String(min) });
    currentSize.textContent = `Current size: ${current} GiB.`;
    range.textContent = `Allowed: ${min} – ${max} GiB`;
  };
  showSize(v.size);
  // A corrected value takes the old complaint away at once.
  input.addEventListener("input", () => {
    if (!problem()) dErr.show(null);
    staleIfChanged();
  });
  const dialog = h(
    "dialog",
    { id: "resize-dialog", class: "card" },
    h(
      "form",
      {
        novalidate: true,
        onsubmit: async (ev) => {
          ev.preventDefault();
          dErr.show(null);
          const wrong = problem();
          if (wrong) {
            dErr.show(new Error(wrong));
            return;
          }
          submit.disabled = true;
          done.show(null);
          try {
            const planned = samePlan() ? `?plan=${encodeURIComponent(previewed.token)}` : "";
            const r = await api.patch(`${volumePath(v.name)}${planned}`, inputs());
            previewed = null;
            previewPanel.hidden = true;
            followJob(r.JobID, jobPanel, async (j) => {
              if (j.state === "Done") {
                try {
                  showSize((await api.get(volumePath(v.name))).size);
                  // Ready for the next resize: the finished job's panel
                  // goes (a failed one stays), its outcome stays in a line.
                  move.checked = false;
                  jobPanel.hidden = true;
                  done.show(`Resized ${v.name} to ${current} GiB (job ${j.id} Done).`);
                } catch (e) {
                  dErr.show(new Error(`Could not read the new size: ${e.message}`));
                }
              }
              submit.disabled = false;
            });
          } catch (e) {
            dErr.show(e);
            submit.disabled = false;
          }
        },
      },
      h("h2", {}, `Resize ${v.name}`),
      done,
      currentSize,
      h("label", { for: "resize-size" }, "New size (GiB)"),
      input,
      range,
      h("label", { class: "toggle" }, move, h("span", {}, "Allow Data Movement")),
      h("p", { class: "hint" }, "Lets slices move to other media when the ones they are on lack room."),
      dErr,
      previewPanel,
      jobPanel,
      h("div", { class: "buttons" },
        submit,
        preview,
        h("button", { type: "button", class: "secondary", id: "resize-close", onclick: () => dialog.close() }, "Close"),
      ),
    ),
  );
  dialog.addEventListener("close", () => {
    dialog.remove();
    onClose && onClose();
  });
  main.append(dialog);
  dialog.showModal();
  input.focus();
}

// ---- one volume ----

// What a volume's copies say about its health, in one line.
function volumeHealth(v, slices) {
  const lost = slices.filter((s) => s.health === "Lost").length;
  const copies = new Set(slices.map((s) => s.copy)).size;
  const columns = new Set(slices.map((s) => s.column)).size;
  const shape = `${copies} ${copies === 1 ? "copy" : "copies"} of ${columns} ${columns === 1 ? "column" : "columns"}`;
  if (v.state === "Failed") return `Failed: a column lost every copy (${lost} of ${slices.length} slices lost); its data is gone`;
  if (lost) return `Degraded: ${lost} of ${slices.length} slices lost; every column still has a copy`;
  return slices.length ? `Healthy: ${shape}` : "No slices yet";
}

// ---- a volume's I/O ----

// What GET /volumes/{v}/iostats covers: one sample every 5 s for 10 minutes.
const IO_WINDOW_MS = 10 * 60 * 1000;
const IO_POLL_MS = 5000;

// The volume page's I/O section: an IOPS chart and a throughput chart (read
// and write lines) over the last 10 minutes, the latest sample in words,
// asked for again every 5 s while the page is shown. Returns the section.
function ioSection(vPath) {
  const latest = h("p", { id: "io-latest", "data-testid": "io-latest", class: "io-latest" }, "Loading I/O…");
  const iopsBox = h("figure", { class: "io-chart", id: "io-iops" });
  const rateBox = h("figure", { class: "io-chart", id: "io-throughput" });
  const charts = h("div", { class: "io-charts", hidden: true }, iopsBox, rateBox);
  const legend = h("p", { class: "io-legend muted", hidden: true },
    h("span", { class: "legend-item" }, h("span", { class: "swatch io-read" }), "read"),
    h("span", { class: "legend-item" }, h("span", { class: "swatch io-write" }), "write"),
    " · the last 10 minutes of NBD reads and writes this service served, one sample every 5 s");
  const section = h("section", { id: "volume-io", "data-testid": "volume-io" }, h("h2", {}, "I/O"), latest, legend, charts);
  let samples = null;
  let drawnWidth = 0;

  async function load() {
    try {
      samples = await api.get(`${vPath}/iostats`);
    } catch (e) {
      // A deleted volume has no I/O to show; its page says it is gone.
      section.hidden = e.status === 404;
      if (e.status !== 404) latest.textContent = `Could not load the volume's I/O: ${e.message}`;
      return;
    }
    section.hidden = false;
    draw();
  }

  function draw() {
    if (!samples) return;
    if (!samples.length) {
      charts.hidden = true;
      legend.hidden = true;
      latest.textContent = "No I/O served yet.";
      return;
    }
    charts.hidden = false;
    legend.hidden = false;
    const points = samples.map((s) => ({ ...s, t: Date.parse(s.time) }));
    const last = points.at(-1);
    // The newest sample is the right edge: the server's clock, not the browser's.
    const end = last.t;
    const start = end - IO_WINDOW_MS;
    const at = new Date(end).toLocaleTimeString();
    latest.textContent = `${ioLatestText(last)} (at ${at})`;
    const xLabels = [[start, "10 min ago"], [start + IO_WINDOW_MS / 2, "5 min ago"], [end, at]];
    const series = (key, name, format) => ({ name, class: `io-${name}`, format, points: points.map((p) => [p.t, Number(p[key]) || 0]) });
    const peak = (a, b) => Math.max(0, ...points.map((p) => Math.max(Number(p[a]) || 0, Number(p[b]) || 0)));
    const rate = ioScale(peak("readthroughput", "writethroughput"), true);
    drawnWidth = charts.clientWidth;
    iopsBox.replaceChildren(h("figcaption", {}, "Operations per second"), lineChart({
      width: iopsBox.clientWidth, start, end, xLabels,
      title: `Read and write operations per second, last 10 minutes; latest: read ${iopsText(last.readiops)}, write ${iopsText(last.writeiops)}`,
      scale: ioScale(peak("readiops", "writeiops"), false),
      series: [series("readiops", "read", iopsText), series("writeiops", "write", iopsText)],
      attrs: {
        id: "iops-chart", "data-testid": "iops-chart", "data-points": points.length,
        "data-latest-read-iops": last.readiops, "data-latest-write-iops": last.writeiops, "data-latest-time": last.time,
      },
    }));
    rateBox.replaceChildren(h("figcaption", {}, "Throughput"), lineChart({
      width: rateBox.clientWidth, start, end, xLabels,
      title: `Read and write bytes per second, last 10 minutes; latest: read ${throughputText(last.readthroughput)}, write ${throughputText(last.writethroughput)}`,
      scale: rate,
      series: [series("readthroughput", "read", throughputText), series("writethroughput", "write", throughputText)],
      attrs: {
        id: "throughput-chart", "data-testid": "throughput-chart", "data-points": points.length, "data-unit": rate.title,
        "data-latest-read-bps": last.readthroughput, "data-latest-write-bps": last.writethroughput, "data-latest-time": last.time,
      },
    }));
  }

  // Drawn again at the width of its box when the window changes (a phone
  // turned, a narrower window), not only on the next sample.
  if (typeof ResizeObserver === "function") {
    const watch = new ResizeObserver(() => {
      if (!charts.hidden && charts.clientWidth && charts.clientWidth !== drawnWidth) draw();
    });
    watch.observe(charts);
    onLeave(() => watch.disconnect());
  }
  load();
  livePoll(IO_POLL_MS, () => true, load);
  return section;
}

export function volumePage([volumeName]) {
  const vPath = volumePath(volumeName);
  const err = errorBox();
  err.id = "volume-error";
  const actionErr = actionBox();
  actionErr.id = "volume-action-error";
  const note = noticeBox();
  note.id = "volume-notice";
  const jobPanel = h("div", { id: "volume-job", class: "card job", hidden: true });
  const summary = h("div", { id: "volume-summary", class: "card summary" }, h("p", { class: "muted" }, "Loading…"));
  const copies = h("section", { id: "volume-copies" });
  const attached = h("section", { id: "volume-attached" });
  const snaps = h("section", { id: "volume-snapshots" });
  const jobs = h("section", { id: "volume-jobs" });
  const attachNode = h("select", { id: "attach-node" }, h("option", { value: "" }, "Loading nodes…"));
  const attachReadonly = h("input", { id: "attach-readonly", type: "checkbox" });
  const attachErr = errorBox();
  const attachForm = h("form", {
    class: "card inline-form",
    id: "attach-volume",
    onsubmit: async (ev) => {
      ev.preventDefault();
      startAction();
      if (!attachNode.value) {
        attachErr.show(new Error("Choose a node."));
        return;
      }
      try {
        const r = await api.post(`${snapshotPath(volumeName, "top")}/attachments`, { node: attachNode.value, readonly: attachReadonly.checked });
        note.show(`${r.Message} (job ${r.JobID}).`);
        followJob(r.JobID, jobPanel, () => load());
      } catch (e) {
        attachErr.show(e);
      }
      load();
    },
  },
  h("h2", {}, "Attach"),
  h("div", { class: "fields" },
    h("label", {}, "Node", attachNode),
    h("label", { class: "toggle" }, attachReadonly, h("span", {}, "Read-only")),
    h("button", { type: "submit" }, "Attach"),
  ),
  h("p", { class: "hint" }, "The node opens the volume over NBD at the URI shown once it is attached."),
  attachErr);

  main.append(
    h("h1", {}, h("a", { href: "#/volumes" }, "Storage › Volumes"), ` › ${volumeName}`),
    err, actionErr, note, summary, jobPanel, copies, attached, attachForm, snaps, jobs,
  );
  // Under the summary; live every 5 s.
  jobPanel.after(ioSection(vPath));

  let volume = null;
  let resizingTo = null; // the size a running resize grows the volume to
  let cancellable = null; // the running job that Cancel stops (and Pause / Rate steer), if any
  const shown = changeDetector();

  // A new action starts clean: no old message, no old job's panel.
  function startAction() {
    actionErr.show(null);
    attachErr.show(null);
    note.show(null);
    jobPanel.hidden = true;
    jobPanel.replaceChildren();
  }

  async function load() {
    let slices, attachments, snapshots, jobList;
    try {
      // The jobs by name: a volume's name also finds its jobs after it is deleted.
      const jobsOf = api.get(`/jobs?${new URLSearchParams({ object: volumeName, count: 20 })}`);
      try {
        [volume, slices, attachments, snapshots, jobList] = await Promise.all([
          api.get(vPath), api.get(`${vPath}/slices`), api.get(`${vPath}/attachments`), api.get(`${vPath}/snapshots`), jobsOf,
        ]);
      } catch (e) {
        if (e.status !== 404) throw e;
        volume = null;
        jobList = await jobsOf;
      }
      err.show(null);
    } catch (e) {
      err.show(new Error(`Could not load volume "${volumeName}": ${e.message}`));
      return;
    }
    if (!shown.changed(volume, slices, attachments, snapshots, jobList)) return;
    if (!volume) {
      gone(jobList);
      return;
    }
    // Jobs of an earlier volume of the same name stay out.
    jobList = jobList.filter((j) => j.object === volume.volumeid);
    resizingTo = jobList.map(resizeTarget).find((t) => t !== null) ?? null;
    cancellable = jobList.find(jobCancellable) || null;
    renderSummary(slices);
    renderCopies(slices);
    renderAttachments(attachments.filter((a) => a.snapshotid === "top"));
    renderSnapshots(snapshots);
    renderJobs(jobList);
  }

  // Deleted (or never there): say so, and keep showing the jobs of that name.
  function gone(jobList) {
    summary.replaceChildren(h("p", { id: "volume-gone" }, `There is no volume named "${volumeName}" (any more).`));
    for (const section of [copies, attached, snaps]) section.replaceChildren();
    attachForm.hidden = true;
    renderJobs(jobList);
  }

  function renderSummary(slices) {
    const v = volume;
    const busy = volumeBusy(v);
    summary.replaceChildren(
      h("dl", { class: "facts" },
        h("dt", {}, "Type"), h("dd", {}, volumeType(v)),
        h("dt", {}, "Size"), h("dd", { id: "volume-size" }, sizeText(v.size, resizingTo)),
        h("dt", {}, "Policy"), h("dd", {}, v.policy),
        h("dt", {}, "State"), h("dd", { id: "volume-state" }, stateTag(v.state)),
        h("dt", {}, "Health"), h("dd", { id: "volume-health" }, volumeHealth(v, slices)),
        h("dt", {}, "Status"), h("dd", {}, h("span", { id: "volume-status" }, v.status),
          busy ? h("span", { class: "status-progress" }, " ", progressBar(v.progress)) : null,
          cancellable ? [" ", jobRate(cancellable), jobButtons(cancellable, () => cancel(cancellable), (c) => steer(cancellable, c), {
            cancel: "volume-cancel-job", pause: "volume-pause-job", resume: "volume-resume-job", rate: "volume-rate-job",
          })] : null),
        filesystemFact(v, growFilesystem),
        v.contentsnapshot ? [h("dt", {}, "Clone of"), h("dd", {}, `${v.contentvolume}@${v.contentsnapshot}`)] : null,
        h("dt", {}, "ID"), h("dd", {}, h("code", {}, v.volumeid)),
      ),
      h("div", { class: "actions", id: "volume-actions" },
        busyButton(v, { class: "secondary resize", onclick: openResize }, "Resize"),
        h("a", { class: "button secondary snapshots", href: `#/snapshots/${encodeURIComponent(v.name)}` }, "Snapshots"),
        (v.state === "Degraded" || v.state === "Failed") && !v.volumerecoveryjob
          ? h("button", { type: "button", class: "recover", onclick: recover }, "Recover")
          : null,
        busyButton(v, { class: "danger delete", onclick: () => remove(false) }, "Delete"),
      ),
    );
  }

  function renderCopies(slices) {
    const rows = [...slices]
      .sort((a, b) => a.copy - b.copy || a.column - b.column)
      .map((s) => h("tr", { "data-slice": sliceName(s) },
        cell("Slice", h("code", {}, sliceName(s))),
        cell("Copy", s.copy),
        cell("Column", s.column),
        cell("Medium", s.media),
        cell("Node", s.node),
        cell("Zone", s.zone || "—"),
        cell("Size", `${s.size} GiB`),
        cell("Health", stateTag(s.health === "Lost" ? "Lost" : "Healthy"),
          staleNote(s) ? h("span", { class: "stale-note" }, staleNote(s)) : null),
      ));
    copies.replaceChildren(h("h2", {}, "Slices"), h("p", { class: "hint" }, SLICE_HINT),
      table(["Slice", "Copy", "Column", "Medium", "Node", "Zone", "Size", "Health"], rows, "No slices yet."));
  }

  function renderAttachments(live) {
    attachForm.hidden = false;
    const rows = live.map((a) => {
      const detail = hostDetail(a);
      return h("tr", { "data-attachment": a.node },
        cell("Node", a.node),
        cell("State", stateTag(a.state)),
        cell("Access", a.readonly ? "read-only" : "read-write"),
        cell("Host", h("div", { class: "host-cell" }, hostState(a), detail ? h("span", { class: "host-detail muted" }, detail) : null)),
        cell("URI", h("code", { class: "uri" }, a.uri)),
        cell("", a.state === "Attached"
          ? h("button", { type: "button", class: "secondary detach", onclick: () => detach(a) }, "Detach")
          : null),
      );
    });
    attached.replaceChildren(h("h2", {}, "Attachments"),
      table(["Node", "State", "Access", "Host", "NBD URI", ""], rows, "Not attached."));
  }

  function renderSnapshots(snapshots) {
    if (!snapshots.length) {
      snaps.replaceChildren();
      return;
    }
    const rows = snapshots.map((s) => h("tr", { "data-snapshot": s.name },
      cell("Name", s.name),
      cell("Time", fmtTime(s.time)),
      cell("Volume size", `${s.volumesize} GiB`),
      cell("Used", fmtBytes(s.used)),
      cell("State", stateTag(s.state)),
    ));
    snaps.replaceChildren(
      h("h2", {}, "Snapshots ", h("a", { class: "manage", href: `#/snapshots/${encodeURIComponent(volumeName)}` }, "manage")),
      table(["Name", "Time", "Volume size", "Used", "State"], rows, ""));
  }

  function renderJobs(jobList) {
    const rows = jobList.map((j) => h("tr", { "data-job": j.id },
      cell("ID", j.id),
      jobCell(j),
      jobStateCell(j, () => cancel(j), (c) => steer(j, c)),
      cell("Progress", jobBar(j)),
      jobDetailsCell(j),
      timeCell("Started", j.starttime),
      timeCell("Ended", j.endtime),
    ));
    jobs.replaceChildren(h("h2", {}, "Jobs"),
      table(["ID", "Job", "State", "Progress", "Details", "Started", "Ended"], rows, "No jobs."));
  }

  function openResize() {
    startAction();
    resizeDialog(volume, () => {
      shown.reset();
      load();
    });
  }

  // Cancels a running job of the volume (asked first), then follows it
  // here until it ends `Cancelled`.
  async function cancel(j) {
    if (await cancelJob(j, note, actionErr, startAction)) followJob(j.id, jobPanel, () => load());
    shown.reset();
    load();
  }

  // Pauses, resumes or sets the rate of a running job of the volume; a job
  // the panel follows stays followed.
  async function steer(j, change) {
    await steerJob(j, change, note, actionErr, () => attachErr.show(null));
    shown.reset();
    load();
  }

  async function remove(force) {
    const question = force
      ? `Delete volume "${volumeName}" with its attachments and snapshots? Its data is lost.`
      : `Delete volume "${volumeName}"? Its data is lost.`;
    if (!confirm(question)) return;
    startAction();
    try {
      const r = await api.del(`${vPath}${force ? "?force=true" : ""}`);
      note.show(`${r.Message} (job ${r.JobID}).`);
      followJob(r.JobID, jobPanel, () => load());
    } catch (e) {
      const again = e.status === 409 && !force
        ? h("button", { type: "button", class: "danger force", onclick: () => remove(true) }, "Delete anyway (force)")
        : null;
      actionErr.show(new Error(`Could not delete "${volumeName}": ${e.message}`), again);
    }
    load();
  }

  // Grows the filesystem again after a growth failed (a volume_grow_filesystem job).
  async function growFilesystem() {
    startAction();
    try {
      const r = await api.post(`${vPath}/grow-filesystem`);
      note.show(`${r.Message} (job ${r.JobID}).`);
      followJob(r.JobID, jobPanel, () => load());
    } catch (e) {
      actionErr.show(new Error(`Could not grow the filesystem of "${volumeName}": ${e.message}`));
    }
    load();
  }

  async function recover() {
    startAction();
    try {
      const r = await api.post(`${vPath}/recover`);
      note.show(`${r.Message} (job ${r.JobID}).`);
      followJob(r.JobID, jobPanel, () => load());
    } catch (e) {
      actionErr.show(new Error(`Could not recover "${volumeName}": ${e.message}`));
    }
    load();
  }

  async function detach(a) {
    if (!confirm(`Detach volume "${volumeName}" from node ${a.node}? Its NBD connections are closed.`)) return;
    startAction();
    try {
      const r = await api.del(`${snapshotPath(volumeName, "top")}/attachments/${encodeURIComponent(a.node)}`);
      note.show(`${r.Message} (job ${r.JobID}).`);
      followJob(r.JobID, jobPanel, () => load());
    } catch (e) {
      actionErr.show(new Error(`Could not detach from ${a.node}: ${e.message}`));
    }
    load();
  }

  api.get("/nodes").then(
    (nodes) => {
      const usable = nodes.filter((n) => n.address);
      attachNode.replaceChildren(...(usable.length
        ? usable.map((n) => h("option", { value: n.name }, `${n.name} (${n.address})`))
        : [h("option", { value: "" }, "— no node has an address —")]));
    },
    (e) => attachErr.show(new Error(`Could not load nodes: ${e.message}`)),
  );
  load();
  // Live, behind the resize dialog too (its job shows here as it runs).
  livePoll(2000, () => true, load);
}
