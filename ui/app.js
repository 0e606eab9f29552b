// The svs web console: hash-routed pages over the public JSON API.
import { api, session, isAdmin, signIn, signOut, scheduleRefresh, whenSignedOut } from "./api.js";

const main = document.getElementById("main");
const top = document.getElementById("top");
let timers = []; // cleared whenever the page changes
let signInNotice = "";

// ---- small DOM helpers (text is always set as text, never as HTML) ----
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "value") el.value = v;
    // Through the CSSOM: a style attribute is inline style, which the
    // console's Content-Security-Policy (style-src 'self') blocks.
    else if (k === "style") el.style.cssText = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function every(ms, fn) {
  const id = setInterval(fn, ms);
  timers.push(() => clearInterval(id));
  return () => clearInterval(id);
}

function errorBox() {
  const box = h("div", { class: "error", role: "alert", hidden: true });
  box.show = (e) => {
    box.textContent = e ? (e.message || String(e)) : "";
    box.hidden = !e;
  };
  return box;
}

function noticeBox() {
  const box = h("div", { class: "notice", role: "status", hidden: true });
  box.show = (text) => {
    box.textContent = text || "";
    box.hidden = !text;
  };
  return box;
}

function progressBar(value) {
  const v = Math.max(0, Math.min(100, Number(value) || 0));
  return h(
    "span",
    { class: "progress", title: `${v}%` },
    h("span", { class: "bar" }, h("span", { class: "fill", style: `width:${v}%` })),
    h("span", { class: "pct" }, `${v}%`),
  );
}

function stateTag(state) {
  return h("span", { class: `state state-${String(state).toLowerCase()}` }, state);
}

function table(headers, rows, empty) {
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      {},
      h("thead", {}, h("tr", {}, headers.map((t) => h("th", {}, t)))),
      h(
        "tbody",
        {},
        rows.length
          ? rows
          : h("tr", {}, h("td", { colspan: headers.length, class: "empty" }, empty)),
      ),
    ),
  );
}

function cell(label, ...content) {
  return h("td", { "data-label": label }, ...content);
}

// Bytes for people: 0 B, 512 B, 64.0 KiB, 1.5 GiB.
function fmtBytes(n) {
  let v = Number(n) || 0;
  if (v < 1024) return `${v} B`;
  const units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
  let i = -1;
  do {
    v /= 1024;
    i++;
  } while (v >= 1024 && i < units.length - 1);
  return `${v.toFixed(1)} ${units[i]}`;
}

// A message from a refused call: it stays until the next action starts
// (list reloads use their own box), with optional follow-up buttons.
function actionBox() {
  const box = h("div", { class: "error", role: "alert", hidden: true });
  box.show = (e, ...buttons) => {
    box.replaceChildren();
    if (e) box.append(h("span", { class: "message" }, e.message || String(e)), ...buttons);
    box.hidden = !e;
  };
  return box;
}

function volumePath(v) {
  return `/volumes/${encodeURIComponent(v)}`;
}

function snapshotPath(v, s) {
  return `${volumePath(v)}/snapshots/${encodeURIComponent(s)}`;
}

// Volume states that last: anything else is a change in progress.
const SETTLED_VOLUME_STATES = ["Ready", "Degraded", "Failed"];

function fmtTime(t) {
  if (!t) return "—";
  const d = new Date(t);
  return isNaN(d) ? t : d.toLocaleString();
}

// A volume's type, with the filesystem svs makes on a `file` volume.
function volumeType(v) {
  return v.filesystem ? `${v.type} · ${v.filesystem}` : v.type;
}

// What the node's agent last reported about an attachment, in one line:
// device, mount path, filesystem size, and its note or error.
function hostDetail(a) {
  return [
    a.hostdevice,
    a.hostmountpath && `on ${a.hostmountpath}`,
    a.filesystembytes != null && `${fmtBytes(a.filesystembytes)} filesystem`,
    a.hostdetail,
  ].filter(Boolean).join(" · ");
}

// The host state of an attachment ("—" until an agent reports), with the
// detail on hover.
function hostState(a) {
  if (!a.hoststate) return h("span", { class: "host muted", title: "No agent has reported on this attachment." }, "host —");
  const detail = hostDetail(a);
  const when = a.hostupdated ? ` (reported ${fmtTime(a.hostupdated)})` : "";
  return h("span", { class: "host" }, "host ",
    h("span", { class: `state host-state state-${a.hoststate.toLowerCase()}`, title: `${detail || a.hoststate}${when}` }, a.hoststate));
}

// The command line that runs a node's agent against this service.
const AGENT_CREDENTIAL_PATH = "/etc/svs/agent.credential";
function agentCommand(node) {
  return `svs agent --url ${location.origin} --node ${node} --credential-file ${AGENT_CREDENTIAL_PATH}`;
}

// A read-only text field with a Copy button (the clipboard API needs a
// secure context: elsewhere the text is selected and copied the old way).
function copyField(id, value) {
  const input = h("input", { id, class: "copy-value", readonly: true, value, spellcheck: "false" });
  const done = h("span", { class: "muted copied", role: "status" });
  const button = h("button", {
    type: "button",
    class: "secondary copy",
    onclick: async () => {
      input.select();
      let ok = false;
      try {
        await navigator.clipboard.writeText(value);
        ok = true;
      } catch {
        ok = document.execCommand && document.execCommand("copy");
      }
      done.textContent = ok ? "Copied" : "Press Ctrl+C to copy";
    },
  }, "Copy");
  return h("div", { class: "copy-field" }, input, button, done);
}

// ---- routing ----
const pages = { signin: signInPage, volumes: volumesPage, snapshots: snapshotsPage, jobs: jobsPage, media: mediaPage, nodes: nodesPage, policies: policiesPage };

function route() {
  timers.forEach((stop) => stop());
  timers = [];
  const [name, ...rest] = (location.hash.replace(/^#\/?/, "") || "volumes").split("/");
  const signedIn = !!session();
  if (!signedIn && name !== "signin") {
    location.hash = "#/signin";
    return;
  }
  if (signedIn && name === "signin") {
    location.hash = "#/volumes";
    return;
  }
  const page = pages[name] || notFoundPage;
  top.hidden = !signedIn;
  for (const a of top.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.page === (name === "snapshots" ? "volumes" : name));
  }
  main.replaceChildren();
  page(rest.map(decodeURIComponent));
}

whenSignedOut((message) => {
  signInNotice = message;
  if (location.hash !== "#/signin") location.hash = "#/signin";
  else route();
});

document.getElementById("signout").addEventListener("click", async () => {
  try {
    await signOut();
    signInNotice = "You are signed out.";
  } catch (e) {
    signInNotice = `Signed out locally; the server answered: ${e.message}`;
  }
  location.hash = "#/signin";
});

window.addEventListener("hashchange", route);
scheduleRefresh();
route();

function notFoundPage() {
  main.append(h("h1", {}, "Not found"), h("p", {}, h("a", { href: "#/volumes" }, "Go to volumes")));
}

// ---- sign in ----
function signInPage() {
  const err = errorBox();
  const note = noticeBox();
  note.show(signInNotice);
  signInNotice = "";
  const email = h("input", { id: "email", type: "email", autocomplete: "username", required: true });
  const password = h("input", { id: "password", type: "password", autocomplete: "current-password", required: true });
  const button = h("button", { type: "submit" }, "Sign in");
  const form = h(
    "form",
    {
      class: "card signin",
      onsubmit: async (ev) => {
        ev.preventDefault();
        err.show(null);
        button.disabled = true;
        try {
          await signIn(email.value.trim(), password.value);
          location.hash = "#/volumes";
        } catch (e) {
          err.show(e);
        } finally {
          button.disabled = false;
        }
      },
    },
    h("h1", {}, "Sign in to svs"),
    note,
    h("label", { for: "email" }, "Email"),
    email,
    h("label", { for: "password" }, "Password"),
    password,
    err,
    button,
  );
  main.append(form);
  email.focus();
}

// ---- volumes ----
function volumesPage(args) {
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
  main.append(h("h1", {}, "Storage › Volumes"), err, actionErr, note, recoveryPanel, list, create);

  api.get("/policies").then(
    (ps) => {
      policySelect.replaceChildren(
        ...(ps.length ? ps.map((p) => h("option", { value: p.name }, p.name)) : [h("option", { value: "" }, "— create a policy first —")]),
      );
    },
    (e) => createErr.show(new Error(`Could not load policies: ${e.message}`)),
  );

  let volumes = [];
  async function load() {
    try {
      volumes = await api.get("/volumes");
      err.show(null);
    } catch (e) {
      err.show(new Error(`Could not load volumes: ${e.message}`));
      return;
    }
    const rows = volumes.map((v) =>
      h("tr", { "data-volume": v.name },
        cell("Name",
          h("a", { href: `#/volumes/${encodeURIComponent(v.name)}`, class: "vol-link" }, v.name),
          v.contentsnapshot
            ? h("span", { class: "clone-of muted" }, `clone of ${v.contentvolume}@${v.contentsnapshot}`)
            : null,
        ),
        cell("Type", volumeType(v)),
        cell("Size", `${v.size} GiB`),
        cell("Policy", v.policy),
        cell("State", stateTag(v.state)),
        cell("Progress", progressBar(v.progress)),
        cell("", h("span", { class: "actions" },
          h("a", { class: "button secondary resize", href: `#/volumes/${encodeURIComponent(v.name)}` }, "Resize"),
          h("a", { class: "button secondary snapshots", href: `#/snapshots/${encodeURIComponent(v.name)}` }, "Snapshots"),
          (v.state === "Degraded" || v.state === "Failed") && !v.volumerecoveryjob
            ? h("button", { type: "button", class: "recover", onclick: () => recover(v) }, "Recover")
            : null,
          h("button", { type: "button", class: "danger", onclick: () => remove(v) }, "Delete"),
        )),
      ),
    );
    list.replaceChildren(table(["Name", "Type", "Size", "Policy", "State", "Progress", ""], rows, "No volumes yet."));
    if (args[0]) {
      const v = volumes.find((x) => x.name === args[0] || x.volumeid === args[0]);
      if (v && !dialogOpen) openResize(v);
      else if (!v && !dialogOpen) err.show(new Error(`There is no volume named "${args[0]}".`));
    }
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

  let dialogOpen = false;
  function openResize(v) {
    dialogOpen = true;
    // The dialog follows its own job under the same element ids.
    recoveryPanel.hidden = true;
    recoveryPanel.replaceChildren();
    const min = v.size + 1;
    const max = v.size * 10;
    const dErr = errorBox();
    const input = h("input", { id: "resize-size", type: "number", min, max, step: 1, value: String(min), required: true });
    const move = h("input", { id: "resize-move", type: "checkbox" });
    const jobPanel = h("div", { id: "resize-job", class: "job", hidden: true });
    const submit = h("button", { type: "submit", id: "resize-submit" }, "Resize");
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
            const n = Number(input.value);
            if (!Number.isInteger(n) || n < min || n > max) {
              dErr.show(new Error(`The new size must be a whole number of GiB from ${min} to ${max}.`));
              return;
            }
            submit.disabled = true;
            try {
              const r = await api.patch(`/volumes/${encodeURIComponent(v.name)}`, { size: n, allowdatamovement: move.checked });
              followJob(r.JobID, jobPanel, () => load());
            } catch (e) {
              dErr.show(e);
              submit.disabled = false;
            }
          },
        },
        h("h2", {}, `Resize ${v.name}`),
        h("p", {}, `Current size: ${v.size} GiB.`),
        h("label", { for: "resize-size" }, "New size (GiB)"),
        input,
        h("p", { class: "hint", id: "resize-range" }, `Allowed: ${min} – ${max} GiB`),
        h("label", { class: "toggle" }, move, h("span", {}, "Allow Data Movement")),
        h("p", { class: "hint" }, "Lets slices move to other media when the ones they are on lack room."),
        dErr,
        jobPanel,
        h("div", { class: "buttons" },
          submit,
          h("button", { type: "button", class: "secondary", id: "resize-close", onclick: () => dialog.close() }, "Close"),
        ),
      ),
    );
    dialog.addEventListener("close", () => {
      dialogOpen = false;
      dialog.remove();
      if (location.hash.startsWith("#/volumes/")) history.replaceState(null, "", "#/volumes");
      args = [];
      load();
    });
    main.append(dialog);
    dialog.showModal();
    input.focus();
  }

  load();
  // Keep states and progress current while something is happening.
  every(2000, () => {
    if (!dialogOpen && volumes.some((v) => !SETTLED_VOLUME_STATES.includes(v.state) || Number(v.progress) < 100)) load();
  });
}

// Shows a job with live progress, polling every 500 ms until Done / Error.
function followJob(id, panel, onEnd) {
  panel.hidden = false;
  const state = h("span", { id: "job-state" }, "Pending");
  const pct = h("span", { id: "job-progress" }, "0");
  const fill = h("span", { class: "fill", style: "width:0%" });
  const detail = h("p", { id: "job-detail", class: "detail" });
  const reason = errorBox();
  reason.id = "job-error";
  panel.replaceChildren(
    h("h3", {}, `Job ${id}`),
    h("p", {}, "State: ", state, " · Progress: ", pct, "%"),
    h("span", { class: "bar wide" }, fill),
    detail,
    reason,
  );
  let busy = false;
  const stop = every(500, async () => {
    if (busy) return;
    busy = true;
    try {
      const j = await api.get(`/jobs/${encodeURIComponent(id)}`);
      state.replaceChildren(stateTag(j.state));
      pct.textContent = String(j.progress);
      fill.style.width = `${j.progress}%`;
      const last = (j.details || []).at(-1) || "";
      detail.textContent = last;
      if (j.state === "Done" || j.state === "Error") {
        stop();
        if (j.state === "Error") reason.show(new Error(`The job failed: ${last || j.status || "no reason given"}`));
        onEnd && onEnd(j);
      }
    } catch (e) {
      reason.show(new Error(`Could not read job ${id}: ${e.message}`));
    } finally {
      busy = false;
    }
  });
}

// ---- snapshots of one volume ----

// A modal form: `fields` inside, `submit` gets (errorBox) and closes the
// dialog when it resolves true; `onClose` runs once it is gone.
function modal(id, title, fields, submitLabel, submit, onClose) {
  const dErr = errorBox();
  const button = h("button", { type: "submit", id: `${id}-submit` }, submitLabel);
  const dialog = h(
    "dialog",
    { id, class: "card" },
    h(
      "form",
      {
        novalidate: true,
        onsubmit: async (ev) => {
          ev.preventDefault();
          dErr.show(null);
          button.disabled = true;
          try {
            if (await submit(dErr)) dialog.close();
          } finally {
            button.disabled = false;
          }
        },
      },
      h("h2", {}, title),
      fields,
      dErr,
      h("div", { class: "buttons" },
        button,
        h("button", { type: "button", class: "secondary", id: `${id}-close`, onclick: () => dialog.close() }, "Cancel"),
      ),
    ),
  );
  dialog.addEventListener("close", () => {
    dialog.remove();
    onClose && onClose();
  });
  main.append(dialog);
  dialog.showModal();
  return dialog;
}

function snapshotsPage([volumeName]) {
  const vPath = volumePath(volumeName);
  const err = errorBox(); // loading the lists; a reload clears it
  const actionErr = actionBox(); // refused calls; only the next action clears it
  actionErr.id = "snapshot-action-error";
  const note = noticeBox();
  note.id = "snapshot-notice";
  const jobPanel = h("div", { id: "snapshot-job", class: "job card", hidden: true });
  const info = h("p", { id: "snapshot-volume", class: "muted" }, "Loading…");
  const live = h("div", { id: "volume-attachments" });
  const list = h("div", {}, h("p", { class: "muted" }, "Loading snapshots…"));
  const name = h("input", { id: "snap-name", required: true, maxlength: 63, pattern: "[A-Za-z0-9._\\-]+", placeholder: "before-upgrade" });
  const consistency = h("select", { id: "snap-consistency" },
    h("option", { value: "crash" }, "crash"), h("option", { value: "application" }, "application"));
  const takeErr = errorBox();
  const take = h(
    "form",
    {
      class: "card inline-form",
      id: "take-snapshot",
      onsubmit: async (ev) => {
        ev.preventDefault();
        takeErr.show(null);
        startAction();
        try {
          const r = await api.post(`${vPath}/snapshots`, { name: name.value.trim(), consistency: consistency.value });
          note.show(`${r.Message} (job ${r.JobID}).`);
          name.value = "";
          followJob(r.JobID, jobPanel, () => load());
        } catch (e) {
          takeErr.show(e);
        }
        load();
      },
    },
    h("h2", {}, "Take a snapshot"),
    h("div", { class: "fields" },
      h("label", {}, "Name", name),
      h("label", {}, "Consistency", consistency),
      h("button", { type: "submit" }, "Take snapshot"),
    ),
    h("p", { class: "hint" }, "A point-in-time image of the whole volume; it costs only what changes after it."),
    takeErr,
  );
  main.append(
    h("h1", {}, h("a", { href: "#/volumes" }, "Storage › Volumes"), ` › ${volumeName} › Snapshots`),
    info, err, actionErr, note, jobPanel, live, h("h2", {}, "Snapshots"), list, take,
  );

  let volume = null;
  let snapshots = [];
  let attachments = [];
  let dialogOpen = false;

  // A new action starts clean: no old message, no old job's panel.
  function startAction() {
    actionErr.show(null);
    note.show(null);
    jobPanel.hidden = true;
    jobPanel.replaceChildren();
  }

  const attachmentsOf = (s) => attachments.filter((a) => a.snapshotid === s.snapshotid);

  async function load() {
    try {
      [volume, snapshots, attachments] = await Promise.all([
        api.get(vPath), api.get(`${vPath}/snapshots`), api.get(`${vPath}/attachments`),
      ]);
      err.show(null);
    } catch (e) {
      err.show(new Error(`Could not load the snapshots of "${volumeName}": ${e.message}`));
      return;
    }
    info.replaceChildren(`${volumeType(volume)} · ${volume.size} GiB · policy ${volume.policy} · `, stateTag(volume.state),
      volume.contentsnapshot ? ` · clone of ${volume.contentvolume}@${volume.contentsnapshot}` : "");
    // The live volume's attachments, with what each node's agent reports.
    const liveRows = attachments.filter((a) => a.snapshotid === "top").map((a) => {
      const detail = hostDetail(a);
      return h("tr", { "data-attachment": a.node },
        cell("Node", a.node),
        cell("State", stateTag(a.state)),
        cell("Access", a.readonly ? "read-only" : "read-write"),
        cell("Host", h("div", { class: "host-cell" }, hostState(a), detail ? h("span", { class: "host-detail muted" }, detail) : null)),
        cell("URI", h("code", { class: "uri" }, a.uri)),
      );
    });
    live.replaceChildren(...(liveRows.length
      ? [h("h2", {}, "Attachments"), table(["Node", "State", "Access", "Host", "URI"], liveRows, "")]
      : []));
    const rows = snapshots.map((s) => {
      const on = attachmentsOf(s);
      return h("tr", { "data-snapshot": s.name },
        cell("Name", s.name),
        cell("Time", fmtTime(s.time)),
        cell("Volume size", `${s.volumesize} GiB`),
        cell("Used", h("span", { class: "used", title: `${s.used} bytes` }, fmtBytes(s.used))),
        cell("State", stateTag(s.state)),
        cell("Attachments", on.length
          ? h("div", { class: "attachments" }, on.map((a) =>
            h("div", { class: "attachment", "data-node": a.node },
              `${a.node} `, stateTag(a.state), " ", hostState(a), " ", h("code", { class: "uri" }, a.uri),
              hostDetail(a) ? h("span", { class: "host-detail muted" }, hostDetail(a)) : null)))
          : "—"),
        cell("", h("span", { class: "actions" },
          h("button", { type: "button", class: "secondary attach", onclick: () => openAttach(s) }, "Attach"),
          h("button", { type: "button", class: "secondary rollback", onclick: () => rollback(s) }, "Roll back"),
          h("button", { type: "button", class: "secondary clone", onclick: () => openClone(s) }, "Clone"),
          h("button", { type: "button", class: "danger", onclick: () => remove(s, false) }, "Delete"),
        )),
      );
    });
    list.replaceChildren(table(["Name", "Time", "Volume size", "Used", "State", "Attachments", ""], rows, "No snapshots yet."));
  }

  async function remove(s, force) {
    const on = attachmentsOf(s).map((a) => a.node);
    const question = on.length || force
      ? `Snapshot "${s.name}" is attached${on.length ? ` to ${on.join(", ")}` : ""}. Delete it together with its attachments?`
      : `Delete snapshot "${s.name}"? The other snapshots and the volume stay as they are.`;
    if (!confirm(question)) return;
    startAction();
    try {
      const r = await api.del(`${snapshotPath(volumeName, s.name)}${on.length || force ? "?force=true" : ""}`);
      note.show(`${r.Message} (job ${r.JobID}).`);
      followJob(r.JobID, jobPanel, () => load());
    } catch (e) {
      // Attached since the list was loaded: offer force.
      const again = e.status === 409 && /attached/.test(e.message)
        ? h("button", { type: "button", class: "danger force", onclick: () => remove(s, true) }, "Delete with its attachments")
        : null;
      actionErr.show(new Error(`Could not delete "${s.name}": ${e.message}`), again);
    }
    load();
  }

  async function rollback(s) {
    if (!confirm(`Roll volume "${volumeName}" back to snapshot "${s.name}" (${fmtTime(s.time)})? What was written after it is lost; newer snapshots stay.`)) return;
    startAction();
    try {
      const r = await api.patch(`${snapshotPath(volumeName, s.name)}/rollback`, {});
      note.show(`${r.Message} (job ${r.JobID}).`);
      followJob(r.JobID, jobPanel, () => load());
    } catch (e) {
      // Attached read-write: the server names the nodes; offer to detach them.
      const writers = attachments.filter((a) => a.snapshotid === "top" && !a.readonly);
      const detachButtons = e.status === 409
        ? writers.map((a) => h("button", { type: "button", class: "secondary detach", "data-node": a.node, onclick: () => detach(a) }, `Detach from ${a.node}`))
        : [];
      actionErr.show(new Error(`Could not roll back to "${s.name}": ${e.message}`), ...detachButtons);
    }
    load();
  }

  async function detach(a) {
    if (!confirm(`Detach volume "${volumeName}" from node ${a.node}? Its NBD connections are closed.`)) return;
    startAction();
    try {
      const r = await api.del(`${snapshotPath(volumeName, a.snapshotid)}/attachments/${encodeURIComponent(a.node)}`);
      note.show(`${r.Message} (job ${r.JobID}).`);
      followJob(r.JobID, jobPanel, () => load());
    } catch (e) {
      actionErr.show(new Error(`Could not detach from ${a.node}: ${e.message}`));
    }
    load();
  }

  async function openAttach(s) {
    startAction();
    dialogOpen = true;
    const node = h("select", { id: "attach-node", required: true }, h("option", { value: "" }, "Loading nodes…"));
    const dialog = modal("attach-dialog", `Attach ${s.name} read-only`,
      [h("label", { for: "attach-node" }, "Node"), node,
        h("p", { class: "hint" }, "The node opens the snapshot over NBD, read-only, as it was when it was taken.")],
      "Attach",
      async (dErr) => {
        if (!node.value) {
          dErr.show(new Error("Choose a node."));
          return false;
        }
        try {
          const r = await api.post(`${snapshotPath(volumeName, s.name)}/attachments`, { node: node.value, readonly: true });
          note.show(`${r.Message} (job ${r.JobID}).`);
          const target = node.value;
          followJob(r.JobID, jobPanel, async (j) => {
            await load();
            if (j.state !== "Done") return;
            const a = attachmentsOf(s).find((x) => x.node === target);
            if (a) note.show(`Snapshot "${s.name}" is attached read-only to ${target}: ${a.uri}`);
          });
          return true;
        } catch (e) {
          dErr.show(e);
          return false;
        }
      },
      () => {
        dialogOpen = false;
        load();
      });
    try {
      const nodes = (await api.get("/nodes")).filter((n) => n.address);
      node.replaceChildren(...(nodes.length
        ? nodes.map((n) => h("option", { value: n.name }, `${n.name} (${n.address})`))
        : [h("option", { value: "" }, "— no node has an address —")]));
    } catch (e) {
      dialog.querySelector(".error")?.show?.(new Error(`Could not load nodes: ${e.message}`));
    }
  }

  async function openClone(s) {
    startAction();
    dialogOpen = true;
    const cname = h("input", { id: "clone-name", required: true, maxlength: 63, value: `${volumeName}-${s.name}` });
    const size = h("input", { id: "clone-size", type: "number", min: s.volumesize, step: 1, value: String(s.volumesize), required: true });
    const policy = h("select", { id: "clone-policy" }, h("option", { value: volume?.policy || "" }, volume?.policy || ""));
    modal("clone-dialog", `Clone ${volumeName}@${s.name} into a new volume`,
      [h("label", { for: "clone-name" }, "Name"), cname,
        h("label", { for: "clone-size" }, "Size (GiB)"), size,
        h("p", { class: "hint", id: "clone-range" }, `At least ${s.volumesize} GiB (the snapshot's size).`),
        h("label", { for: "clone-policy" }, "Policy"), policy],
      "Clone",
      async (dErr) => {
        const n = Number(size.value);
        if (!Number.isInteger(n) || n < s.volumesize) {
          dErr.show(new Error(`The size must be a whole number of GiB, at least ${s.volumesize}.`));
          return false;
        }
        const newName = cname.value.trim();
        try {
          const r = await api.post("/volumes", {
            name: newName, size: n, policy: policy.value, type: volume?.type || "block",
            contentvolume: volumeName, contentsnapshot: s.name,
          });
          note.show(`${r.Message} (job ${r.JobID}).`);
          followJob(r.JobID, jobPanel, async (j) => {
            await load();
            if (j.state === "Done") note.show(`Volume "${newName}" is a clone of ${volumeName}@${s.name}.`);
          });
          return true;
        } catch (e) {
          dErr.show(e);
          return false;
        }
      },
      () => {
        dialogOpen = false;
        load();
      });
    try {
      const ps = await api.get("/policies");
      policy.replaceChildren(...ps.map((p) => h("option", { value: p.name, selected: p.name === volume?.policy }, p.name)));
    } catch {
      // The volume's own policy stays offered.
    }
  }

  load();
  let ticks = 0;
  every(2000, () => {
    const moving = snapshots.some((s) => s.state !== "Ready") ||
      attachments.some((a) => a.state !== "Attached") ||
      (volume && !SETTLED_VOLUME_STATES.includes(volume.state));
    // Agents report host states at any time: look again every 6 s while attached.
    const reported = attachments.length > 0 && ++ticks % 3 === 0;
    if (!dialogOpen && (moving || reported)) load();
  });
}

// ---- jobs ----
const JOB_TYPES = ["volume_create", "volume_delete", "volume_modify_extend", "volume_recovery", "attachment_create", "attachment_delete", "attachment_modify", "snapshot_create", "snapshot_delete", "snapshot_rollback"];
const JOB_STATES = ["Pending", "Running", "Done", "Error"];

function jobsPage() {
  const err = errorBox();
  const params = { type: "", state: "", page: 1, count: 25 };
  const type = h("select", { id: "job-type", onchange: () => { params.type = type.value; params.page = 1; load(); } },
    h("option", { value: "" }, "All types"), JOB_TYPES.map((t) => h("option", { value: t }, t)));
  const state = h("select", { id: "job-state-filter", onchange: () => { params.state = state.value; params.page = 1; load(); } },
    h("option", { value: "" }, "All states"), JOB_STATES.map((t) => h("option", { value: t }, t)));
  const count = h("select", { id: "job-count", onchange: () => { params.count = Number(count.value); params.page = 1; load(); } },
    [10, 25, 100].map((n) => h("option", { value: n, selected: n === 25 }, `${n} per page`)));
  const prev = h("button", { type: "button", class: "secondary", onclick: () => { params.page--; load(); } }, "‹ Previous");
  const next = h("button", { type: "button", class: "secondary", onclick: () => { params.page++; load(); } }, "Next ›");
  const pageNo = h("span", { id: "job-page" });
  const live = h("span", { class: "muted", id: "job-live" });
  const list = h("div", {}, h("p", { class: "muted" }, "Loading jobs…"));
  main.append(
    h("h1", {}, "Jobs"),
    h("div", { class: "toolbar" }, type, state, count, live),
    err,
    list,
    h("div", { class: "pager" }, prev, pageNo, next),
  );
  let active = false;
  async function load() {
    const q = new URLSearchParams({ page: params.page, count: params.count, type: params.type, state: params.state });
    let jobs;
    try {
      jobs = await api.get(`/jobs?${q}`);
      err.show(null);
    } catch (e) {
      err.show(new Error(`Could not load jobs: ${e.message}`));
      return;
    }
    active = jobs.some((j) => j.state === "Pending" || j.state === "Running");
    live.textContent = active ? "Refreshing every 2 s while jobs run" : "";
    pageNo.textContent = `Page ${params.page}`;
    prev.disabled = params.page <= 1;
    next.disabled = jobs.length < params.count;
    const rows = jobs.map((j) => {
      const details = j.details || [];
      return h("tr", { "data-job": j.id },
        cell("ID", j.id),
        cell("Type", j.type),
        cell("Object", h("code", { title: j.object }, String(j.object).slice(0, 8))),
        cell("State", stateTag(j.state)),
        cell("Progress", progressBar(j.progress)),
        cell("Details", details.length > 1
          ? h("details", {}, h("summary", {}, details.at(-1)), h("ol", {}, details.map((d) => h("li", {}, d))))
          : details[0] || "—"),
        cell("Started", fmtTime(j.starttime)),
        cell("Ended", fmtTime(j.endtime)),
      );
    });
    list.replaceChildren(table(["ID", "Type", "Object", "State", "Progress", "Details", "Started", "Ended"], rows, "No jobs match."));
  }
  load();
  every(2000, () => { if (active) load(); });
}

// ---- media ----
function mediaPage() {
  const err = errorBox();
  const actionErr = actionBox();
  actionErr.id = "media-action-error";
  const note = noticeBox();
  const body = h("div", {}, h("p", { class: "muted" }, "Loading media…"));
  main.append(h("h1", {}, "Media"), err, actionErr, note, body);
  const admin = isAdmin();

  async function load() {
    let media;
    try {
      media = await api.get("/media");
      err.show(null);
    } catch (e) {
      err.show(new Error(`Could not load media: ${e.message}`));
      return;
    }
    const zones = new Map();
    for (const m of media) {
      if (!zones.has(m.zone)) zones.set(m.zone, new Map());
      const nodes = zones.get(m.zone);
      if (!nodes.has(m.node)) nodes.set(m.node, []);
      nodes.get(m.node).push(m);
    }
    const sections = [...zones.keys()].sort().map((zone) =>
      h("section", { class: "zone" },
        h("h2", {}, `Zone ${zone}`),
        [...zones.get(zone).keys()].sort().map((node) =>
          h("div", { class: "card node" },
            h("h3", {}, `Node ${node}`),
            zones.get(zone).get(node).map((m) => {
              const failed = m.state === "Failed";
              const used = m.size - m.freesize;
              const pct = m.size ? Math.round((used / m.size) * 100) : 0;
              return h("div", { class: failed ? "medium failed" : "medium", "data-medium": m.mediaid },
                h("div", { class: "medium-head" },
                  h("strong", {}, m.mediaid), " ", stateTag(m.state || "Online"),
                  // Failing a medium is for administrators (the server says 403 to others).
                  admin && !failed
                    ? h("button", { type: "button", class: "danger fail", onclick: () => markFailed(m) }, "Mark failed")
                    : null,
                ),
                h("span", { class: "bar wide capacity", title: `${pct}% used` }, h("span", { class: "fill", style: `width:${pct}%` })),
                h("div", { class: "muted" }, failed
                  ? `Failed: its slices are lost and it takes no new ones · ${m.size} GiB total · ${m.volumescount} volume(s)`
                  : `${used} GiB used · ${m.freesize} GiB free · ${m.size} GiB total · ${m.volumescount} volume(s)`),
              );
            }),
          ),
        ),
      ),
    );
    body.replaceChildren(...(sections.length ? sections : [h("p", {}, "No media configured.")]));
  }

  async function markFailed(m) {
    const question = `Mark medium "${m.mediaid}" failed? Its slices are lost at once: ` +
      `volumes with a copy on it turn Degraded (Failed where it held the only copy) until they are recovered. ` +
      "A failed medium does not come back.";
    if (!confirm(question)) return;
    actionErr.show(null);
    note.show(null);
    try {
      const medium = await api.patch(`/media/${encodeURIComponent(m.mediaid)}`, { state: "Failed" });
      note.show(`Medium ${medium.mediaid} is ${medium.state}. Recover the volumes that lost a copy on the Volumes page.`);
    } catch (e) {
      actionErr.show(new Error(`Could not mark "${m.mediaid}" failed: ${e.message}`));
    }
    load();
  }

  load();
}

// ---- nodes ----
function nodesPage() {
  const err = errorBox();
  const actionErr = actionBox();
  actionErr.id = "node-action-error";
  const note = noticeBox();
  note.id = "node-notice";
  // A credential issued here: shown once, until dismissed or the page changes.
  const issued = h("div", { id: "node-credential", class: "card credential", hidden: true });
  const list = h("div", {}, h("p", { class: "muted" }, "Loading nodes…"));
  const admin = isAdmin();
  const addErr = errorBox();
  main.append(h("h1", {}, "Nodes"), err, actionErr, note, issued, list);

  if (admin) {
    const name = h("input", { id: "node-name", required: true, maxlength: 63, pattern: "[A-Za-z0-9._\\-]+", placeholder: "host-7" });
    const address = h("input", { id: "node-address", required: true, placeholder: "10.0.0.7" });
    const zone = h("input", { id: "node-zone", placeholder: "(none)" });
    main.append(h("form", {
      class: "card inline-form",
      id: "add-node",
      onsubmit: async (ev) => {
        ev.preventDefault();
        addErr.show(null);
        startAction();
        const body = { name: name.value.trim(), address: address.value.trim() };
        if (zone.value.trim()) body.zone = zone.value.trim();
        try {
          const n = await api.post("/nodes", body);
          note.show(`Node ${n.name} added (address ${n.address}). Issue its agent credential to run the agent on it.`);
          name.value = "";
          address.value = "";
          zone.value = "";
        } catch (e) {
          addErr.show(e);
        }
        load();
      },
    },
    h("h2", {}, "Add node"),
    h("div", { class: "fields" },
      h("label", {}, "Name", name),
      h("label", {}, "Address", address),
      h("label", {}, "Zone", zone),
      h("button", { type: "submit" }, "Add node"),
    ),
    h("p", { class: "hint" }, "A host that attaches volumes: its NBD connections come from this IP address."),
    addErr));
  }

  // A new action starts clean, and a credential shown before is gone.
  function startAction() {
    actionErr.show(null);
    addErr.show(null);
    note.show(null);
    issued.hidden = true;
    issued.replaceChildren();
  }

  async function load() {
    let nodes;
    try {
      nodes = await api.get("/nodes");
      err.show(null);
    } catch (e) {
      err.show(new Error(`Could not load nodes: ${e.message}`));
      return;
    }
    const rows = nodes.map((n) =>
      h("tr", { "data-node": n.name },
        cell("Name", n.name),
        cell("Zone", n.zone || "—"),
        cell("Address", n.address || "—"),
        cell("Media", n.mediacount),
        cell("Volumes", n.volumescount),
        cell("Agent", h("span", { class: n.agentcredential ? "agent yes" : "agent no" }, n.agentcredential ? "yes" : "no")),
        cell("Agent seen", h("span", { class: "agent-seen" }, n.agentseen ? fmtTime(n.agentseen) : "never")),
        admin
          ? cell("", h("span", { class: "actions" },
            h("button", { type: "button", class: "secondary issue", onclick: () => issue(n) }, "Issue agent credential"),
            n.agentcredential
              ? h("button", { type: "button", class: "danger revoke", onclick: () => revoke(n) }, "Revoke")
              : null,
          ))
          : null,
      ),
    );
    const headers = ["Name", "Zone", "Address", "Media", "Volumes", "Agent", "Agent seen"];
    list.replaceChildren(table(admin ? [...headers, ""] : headers, rows, "No nodes."));
  }

  async function issue(n) {
    if (n.agentcredential && !confirm(`Issue a new agent credential for node ${n.name}? The one it has stops working at once.`)) return;
    startAction();
    try {
      const c = await api.post(`/nodes/${encodeURIComponent(n.name)}/credentials`, {});
      issued.replaceChildren(
        h("h2", {}, `Agent credential of node ${c.node}`),
        h("p", {}, "Shown only this once: copy it now. Issuing another one revokes it."),
        copyField("credential-value", c.credential),
        h("p", {}, `Save it on the host in ${AGENT_CREDENTIAL_PATH} (mode 0600), then run the agent there:`),
        copyField("agent-command", agentCommand(c.node)),
        h("div", { class: "buttons" },
          h("button", { type: "button", class: "secondary", id: "credential-done", onclick: () => { issued.hidden = true; issued.replaceChildren(); } }, "Done")),
      );
      issued.hidden = false;
    } catch (e) {
      actionErr.show(new Error(`Could not issue a credential for ${n.name}: ${e.message}`));
    }
    load();
  }

  async function revoke(n) {
    if (!confirm(`Revoke the agent credential of node ${n.name}? Its agent is refused from its next request.`)) return;
    startAction();
    try {
      await api.del(`/nodes/${encodeURIComponent(n.name)}/credentials`);
      note.show(`The agent credential of node ${n.name} is revoked.`);
    } catch (e) {
      actionErr.show(new Error(`Could not revoke the credential of ${n.name}: ${e.message}`));
    }
    load();
  }

  load();
  // The agents' last requests move on by themselves.
  every(5000, load);
}

// ---- policies ----
function policiesPage() {
  const err = errorBox();
  const actionErr = actionBox();
  actionErr.id = "policy-action-error";
  const note = noticeBox();
  const list = h("div", {}, h("p", { class: "muted" }, "Loading policies…"));
  const level = (id, def) => h("select", { id }, [0, 1, 2].map((n) => h("option", { value: n, selected: n === def }, n)));
  const name = h("input", { id: "pol-name", required: true, placeholder: "mirror" });
  const rm = level("pol-media", 0);
  const rn = level("pol-node", 0);
  const rz = level("pol-zone", 0);
  const createErr = errorBox();
  const form = h("form", {
    class: "card inline-form",
    id: "create-policy",
    onsubmit: async (ev) => {
      ev.preventDefault();
      createErr.show(null);
      try {
        const r = await api.post("/policies", {
          name: name.value.trim(),
          resiliencymedia: Number(rm.value),
          resiliencynode: Number(rn.value),
          resiliencyzone: Number(rz.value),
        });
        note.show(`${r.Message}.`);
        name.value = "";
        load();
      } catch (e) {
        createErr.show(e);
      }
    },
  },
  h("h2", {}, "Create a policy"),
  h("div", { class: "fields" },
    h("label", {}, "Name", name),
    h("label", {}, "Resiliency: media", rm),
    h("label", {}, "node", rn),
    h("label", {}, "zone", rz),
    h("button", { type: "submit" }, "Create"),
  ),
  h("p", { class: "hint" }, "Resiliency N keeps N extra copies of every slice on different media / nodes / zones."),
  createErr);
  main.append(h("h1", {}, "Policies"), err, actionErr, note, list, form);

  async function load() {
    let ps;
    try {
      ps = await api.get("/policies");
      err.show(null);
    } catch (e) {
      err.show(new Error(`Could not load policies: ${e.message}`));
      return;
    }
    const rows = ps.map((p) =>
      h("tr", { "data-policy": p.name },
        cell("Name", p.name),
        cell("Media", p.resiliencymedia),
        cell("Node", p.resiliencynode),
        cell("Zone", p.resiliencyzone),
        cell("Optimization", p.capacityoptimization),
        cell("Created by", p.createdbyuseremail || "—"),
        cell("", h("button", { type: "button", class: "danger", onclick: async () => {
          if (!confirm(`Delete policy "${p.name}"?`)) return;
          actionErr.show(null);
          try {
            const r = await api.del(`/policies/${encodeURIComponent(p.name)}`);
            note.show(`${r.Message}.`);
          } catch (e) {
            note.show(null);
            actionErr.show(new Error(`Could not delete "${p.name}": ${e.message}`));
          }
          load();
        } }, "Delete")),
      ),
    );
    list.replaceChildren(table(["Name", "Media", "Node", "Zone", "Optimization", "Created by", ""], rows, "No policies yet."));
  }
  load();
}
