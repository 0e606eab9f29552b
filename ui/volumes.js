// The console's Volumes page (the list, creating a volume, the resize
// dialog) and one volume's page (its slices, attachments, snapshots and
// jobs), with the volume helpers the snapshots page shares. Kept apart from
// app.js, which imports what it needs from here.
import { api } from "./api.js";
import {
  resizeTarget, sizeText, sliceName, SLICE_HINT, staleNote, attachmentText, volumeMatches, jobCancellable,
  resizeRefusal, zonesText, healthText, SNAPSHOT_USED_HINT, connectCommands, sortedBy,
} from "./text.js";
import {
  h, errorBox, noticeBox, actionBox, progressBar, stateTag, table, cell, fmtBytes, fmtTime, changeDetector, livePoll,
  pageTitle, confirmDialog,
} from "./dom.js";
import { ioSection } from "./io.js";
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
  main.append(h("h1", {}, "Volumes"), err, actionErr, note, recoveryPanel,
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
  let snapshots = [];
  let targets = new Map(); // volume id → size its running resize grows it to
  let sort = null; // { column, ascending } once a header was clicked; else the API's order (by name)
  const shown = changeDetector();
  async function load() {
    try {
      [volumes, attachments, snapshots] = await Promise.all([api.get("/volumes"), api.get("/attachments"), api.get("/snapshots")]);
      targets = await resizeTargets(volumes);
      err.show(null);
    } catch (e) {
      err.show(new Error(`Could not load volumes: ${e.message}`));
      return;
    }
    draw();
  }

  const snapshotCount = (v) => snapshots.filter((s) => s.volumeid === v.volumeid).length;
  // The sortable columns: what each sorts by.
  const sortKeys = {
    Name: (v) => v.name, Type: (v) => volumeType(v), Size: (v) => v.size, Used: (v) => v.writtenbytes,
    Policy: (v) => v.policy, Zones: (v) => zonesText(v), Health: (v) => healthText(v), Snapshots: snapshotCount,
    State: (v) => v.state,
  };

  function draw() {
    const query = search.value.trim();
    if (!shown.changed(volumes, attachments, snapshots, [...targets], query, sort)) return;
    const attachedTo = (v) => attachmentText(attachments.filter((a) => a.volumeid === v.volumeid));
    const matching = volumes.filter((v) => volumeMatches(v, attachedTo(v), query));
    const ordered = sort ? sortedBy(matching, sortKeys[sort.column], sort.ascending) : matching;
    const rows = ordered.map((v) =>
      h("tr", { "data-volume": v.name },
        cell("Name",
          h("a", { href: `#/volumes/${encodeURIComponent(v.name)}`, class: "vol-link" }, v.name),
          v.contentsnapshot
            ? h("span", { class: "clone-of muted" }, `clone of ${v.contentvolume}@${v.contentsnapshot}`)
            : null,
        ),
        cell("Type", volumeType(v)),
        cell("Size", h("span", { class: "size" }, sizeText(v.size, targets.get(v.volumeid)))),
        cell("Used", h("span", { class: "used", title: v.writtenbytes == null ? "Not measured" : `${v.writtenbytes} bytes of data` },
          v.writtenbytes == null ? "—" : fmtBytes(v.writtenbytes))),
        cell("Policy", v.policy),
        cell("Zones", h("span", { class: "zones" }, zonesText(v))),
        cell("Attached", h("span", { class: "attached" }, attachedTo(v) || "—")),
        cell("Health", h("span", { class: "health" }, stateTag(healthText(v)))),
        cell("Snapshots", h("span", { class: "snapshot-count" }, String(snapshotCount(v)))),
        // Only a job in progress has a bar (under its state): a settled volume's "100 %" says nothing.
        cell("State", stateTag(v.state), volumeBusy(v) ? h("div", {}, progressBar(v.progress)) : null),
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
    const headers = ["Name", "Type", "Size", "Used", "Policy", "Zones", "Attached", "Health", "Snapshots", "State", ""];
    const wrap = table(headers, rows, volumes.length ? `No volume matches "${query}".` : "No volumes yet.");
    sortableHeaders(wrap, sortKeys, sort, (column) => {
      sort = sort && sort.column === column ? { column, ascending: !sort.ascending } : { column, ascending: true };
      draw();
    });
    list.replaceChildren(wrap, h("p", { class: "hint", id: "volume-list-hint" },
      "Used: the bytes of data written to the volume (one copy; never-written space, other copies and snapshots not counted). " +
      "Zones: every zone its copies are in. Health: its copies' state."));
  }

  async function remove(v) {
    const of = (list) => list.filter((x) => x.volumeid === v.volumeid);
    if (!await confirmDelete(v.name, of(attachments), of(snapshots))) return;
    actionErr.show(null);
    const force = of(attachments).length > 0 || of(snapshots).length > 0;
    try {
      const r = await api.del(`${volumePath(v.name)}${force ? "?force=true" : ""}`);
      note.show(`${r.Message} (job ${r.JobID}).`);
    } catch (e) {
      note.show(null);
      const force = h("button", { type: "button", class: "danger force", onclick: () => forceRemove(v) }, "Delete anyway (force)");
      actionErr.show(new Error(`Could not delete "${v.name}": ${e.message}`), e.status === 409 ? force : null);
    }
    load();
  }

  async function forceRemove(v) {
    const of = (list) => list.filter((x) => x.volumeid === v.volumeid);
    if (!await confirmDelete(v.name, of(attachments), of(snapshots), true)) return;
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

// Asks before deleting volume `name`, saying what goes with it: the nodes
// it is attached to (detached: their NBD connections close) and its
// snapshots (deleted with it). With either, the delete is sent with
// `force` (without it the server refuses: 409). Resolves true to delete.
export function confirmDelete(name, attachments, snapshots, forced = false) {
  const nodes = [...new Set(attachments.map((a) => a.snapshotid && a.snapshotid !== "top"
    ? `${a.node} (snapshot ${a.snapshotname || a.snapshotid})` : a.node))];
  const n = snapshots.length;
  const body = [h("p", {}, `Delete volume "${name}"? Its data is lost.`)];
  if (nodes.length) {
    body.push(h("p", { id: "confirm-attached" },
      `It is attached to ${nodes.join(", ")}: it is detached first, their NBD connections are closed.`));
  }
  if (n) {
    body.push(h("p", { id: "confirm-snapshots" },
      `It has ${n} ${n === 1 ? "snapshot" : "snapshots"} (${snapshots.map((s) => s.name).join(", ")}): ` +
      `${n === 1 ? "it is" : "they are"} deleted with it.`));
  }
  const force = forced || nodes.length > 0 || n > 0;
  return confirmDialog({
    title: `Delete ${name}`,
    body,
    confirmLabel: force ? "Delete with its attachments and snapshots" : "Delete",
    danger: true,
  });
}

// Makes the headers of `wrap` (a table()) that `keys` names sort buttons:
// `aria-sort` on the sorted one, an arrow beside its label; `onSort(label)`
// on a click.
function sortableHeaders(wrap, keys, sort, onSort) {
  for (const th of wrap.querySelectorAll("thead th")) {
    const label = th.textContent;
    if (!keys[label]) continue;
    const sorted = sort && sort.column === label;
    th.setAttribute("aria-sort", sorted ? (sort.ascending ? "ascending" : "descending") : "none");
    th.replaceChildren(h("button", { type: "button", class: "sort", "data-sort": label, onclick: () => onSort(label) },
      label, h("span", { class: "sort-mark", "aria-hidden": "true" }, sorted ? (sort.ascending ? " ▲" : " ▼") : "")));
  }
}

// Under an attachment: the commands that connect a Linux host to its NBD
// export, each with a Copy button.
function connectBox(a) {
  const commands = connectCommands(a);
  if (!commands.length) return null;
  return h("div", { class: "connect", "data-connect": a.node },
    h("h3", {}, `Connect from ${a.node}`),
    commands.map(({ tool, command }) => copyCommand(`connect-${a.node}-${tool}`, command)),
    a.uri.startsWith("nbds:")
      ? h("p", { class: "hint" }, "TLS: both need svs's CA certificate (/etc/svs/ca.pem; for qemu copied to /etc/svs/qemu-tls/ca-cert.pem), see docs/tls.md.")
      : null);
}

// A command in a code box with a Copy button (the clipboard API where the
// page may use it; else the text is selected and copied the old way).
function copyCommand(id, command) {
  const code = h("code", { class: "command", id }, command);
  const done = h("span", { class: "muted copied", role: "status" });
  const copy = h("button", {
    type: "button", class: "secondary copy", "aria-label": `Copy: ${command}`,
    onclick: async () => {
      let ok = false;
      try {
        await navigator.clipboard.writeText(command);
        ok = true;
      } catch {
        const range = document.createRange();
        range.selectNodeContents(code);
        getSelection().removeAllRanges();
        getSelection().addRange(range);
        ok = document.execCommand && document.execCommand("copy");
      }
      done.textContent = ok ? "Copied" : "Press Ctrl+C to copy";
    },
  }, "Copy");
  return h("div", { class: "command-line" }, code, copy, done);
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
  // The in-place message already starts with its outcome ("In place: ..."): said once.
  const lead = `${outcome}:`;
  const message = plan.message.startsWith(lead) ? plan.message.slice(lead.length).trim() : plan.message;
  const parts = [
    h("p", { class: "preview-outcome" }, h("strong", {}, `${lead} `), message),
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
    return !Number.isInteger(n) || n < min || n > max ? resizeRefusal(n, current, min, max) : null;
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
    ...pageTitle([["Volumes", "#/volumes"]], volumeName, `Volume ${volumeName}`),
    err, actionErr, note, summary, jobPanel, copies, attached, attachForm, snaps, jobs,
  );
  // Under the summary; live every 5 s.
  jobPanel.after(ioSection(vPath));

  let volume = null;
  let resizingTo = null; // the size a running resize grows the volume to
  let cancellable = null; // the running job that Cancel stops (and Pause / Rate steer), if any
  let allAttachments = []; // every attachment of the volume (live and snapshots), as last loaded
  let allSnapshots = [];
  let nodeList = null; // GET /nodes, for the Attach form
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
    allAttachments = attachments;
    allSnapshots = snapshots;
    renderAttachments(attachments.filter((a) => a.snapshotid === "top"));
    renderNodeChoices();
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
      table(["Node", "State", "Access", "Host", "NBD URI", ""], rows, "Not attached."),
      ...live.filter((a) => a.state === "Attached").map(connectBox));
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
      cell("Space", h("span", { class: "used", title: `${s.used} bytes` }, fmtBytes(s.used))),
      cell("State", stateTag(s.state)),
    ));
    snaps.replaceChildren(
      h("h2", {}, "Snapshots ", h("a", { class: "manage", href: `#/snapshots/${encodeURIComponent(volumeName)}` }, "manage")),
      table(["Name", "Time", "Volume size", "Space", "State"], rows, ""),
      h("p", { class: "hint snapshot-space-hint" }, SNAPSHOT_USED_HINT));
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

  async function remove(forced) {
    if (!await confirmDelete(volumeName, allAttachments, allSnapshots, forced)) return;
    const force = forced || allAttachments.length > 0 || allSnapshots.length > 0;
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

  // The Attach form's nodes: those with an address; a node the volume is
  // attached to already is shown disabled, "(attached)".
  function renderNodeChoices() {
    if (!nodeList) return;
    const usable = nodeList.filter((n) => n.address);
    const taken = new Set(allAttachments.filter((a) => a.snapshotid === "top").map((a) => a.node));
    const before = attachNode.value;
    const options = usable.map((n) => h("option", { value: n.name, disabled: taken.has(n.name) },
      `${n.name} (${n.address})${taken.has(n.name) ? " (attached)" : ""}`));
    const free = usable.filter((n) => !taken.has(n.name));
    if (!usable.length) options.push(h("option", { value: "" }, "— no node has an address —"));
    else if (!free.length) options.unshift(h("option", { value: "" }, "— attached to every node —"));
    attachNode.replaceChildren(...options);
    attachNode.value = free.some((n) => n.name === before) ? before : (free[0]?.name ?? "");
  }
  api.get("/nodes").then(
    (nodes) => {
      nodeList = nodes;
      renderNodeChoices();
    },
    (e) => attachErr.show(new Error(`Could not load nodes: ${e.message}`)),
  );
  load();
  // Live, behind the resize dialog too (its job shows here as it runs).
  livePoll(2000, () => true, load);
}
