// The svs web console: hash-routed pages over the public JSON API. The
// volume pages are in volumes.js, the Jobs page in jobs.js, the node pages
// in nodes.js; this file routes to them and has the other pages.
import { api, session, isAdmin, signIn, signOut, scheduleRefresh, whenSignedOut, changeOwnPassword } from "./api.js";
import { policyHint, policyCopies, capacityParts, capacityText, CAPACITY_PARTS, plural, snapshotSpaceText, SNAPSHOT_USED_HINT } from "./text.js";
import {
  h, every, stopTimers, errorBox, noticeBox, actionBox, stateTag, table, cell, fmtBytes, fmtTime, capacityBar, capacityLegend,
  pageTitle, confirmDialog,
} from "./dom.js";
import { nodesPage, nodePage } from "./nodes.js";
import { overviewPage } from "./overview.js";
import { followJob, jobsPage } from "./jobs.js";
import {
  volumePath, snapshotPath, SETTLED_VOLUME_STATES, volumeType, hostDetail, hostState, volumesPage, volumePage,
} from "./volumes.js";

const main = document.getElementById("main");
const top = document.getElementById("top");
let signInNotice = "";

// ---- routing ----
const pages = { signin: signInPage, overview: overviewPage, volumes: volumesPage, snapshots: snapshotsPage, jobs: jobsPage, media: mediaPage, nodes: nodesPage, policies: policiesPage, users: usersPage, account: accountPage };

function route() {
  stopTimers();
  // The overview is the first page; the volume list is one click away.
  const [name, ...rest] = (location.hash.replace(/^#\/?/, "") || "overview").split("/");
  const signedIn = !!session();
  if (!signedIn && name !== "signin") {
    location.hash = "#/signin";
    return;
  }
  if (signedIn && name === "signin") {
    location.hash = "#/overview";
    return;
  }
  // #/volumes/<name> and #/nodes/<name> are one volume's, one node's page.
  const page = name === "volumes" && rest.length ? volumePage
    : name === "nodes" && rest.length ? nodePage
      : pages[name] || notFoundPage;
  top.hidden = !signedIn;
  for (const a of top.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.page === (name === "snapshots" ? "volumes" : name));
    // Pages only administrators can use are not offered to others.
    if (a.hasAttribute("data-admin-only")) a.hidden = !isAdmin();
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
          location.hash = "#/overview";
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
    ...pageTitle([["Volumes", "#/volumes"], [volumeName, `#/volumes/${encodeURIComponent(volumeName)}`]], "Snapshots", `Snapshots of ${volumeName}`),
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
        cell("Space", h("span", { class: "used", title: `${s.used} bytes` }, fmtBytes(s.used))),
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
    list.replaceChildren(table(["Name", "Time", "Volume size", "Space", "State", "Attachments", ""], rows, "No snapshots yet."),
      h("p", { class: "hint snapshot-space-hint" }, SNAPSHOT_USED_HINT));
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

// ---- media ----

const GIB = 1024 ** 3;
const gib = (n) => fmtBytes((Number(n) || 0) * GIB);

// A drain's dry run (RelocationPlan) in sentences, for its confirmation.
function drainPlanText(plan) {
  const moves = plan.moves || [];
  const stuck = plan.stuck || [];
  const volumes = [...new Set(moves.map((mv) => mv.volume))];
  const to = [...new Set(moves.map((mv) => mv.to))];
  const lines = ["It takes no new slices from now on, and one job moves every slice off it while its volumes stay in use " +
    "(each volume's snapshots, attachments and recovery wait while its own slices move)."];
  if (moves.length) {
    const time = plan.estimatedseconds != null && plan.movementrate
      ? `about ${plan.estimatedseconds} s at most at ${fmtBytes(plan.movementrate)}/s`
      : "unthrottled";
    lines.push(`It moves ${plural(moves.length, "slice")} of ${plural(volumes.length, "volume")} (${volumes.join(", ")}), ` +
      `${gib(plan.gib)} of data at most, to ${to.join(", ")}; ${time}.`);
  } else {
    lines.push("It holds no slice: nothing moves.");
  }
  if (stuck.length) {
    lines.push(`${plural(stuck.length, "slice")} cannot move and stay on it: ` +
      stuck.map((st) => `${st.volume} ${st.slice} (${st.reason})`).join("; ") + ".");
  }
  lines.push("Follow, pause or cancel the job on the Jobs page.");
  return lines.map((text, i) => h("p", { id: i === 1 ? "drain-plan" : undefined }, text));
}

// The capacity bars' colours, and the written strip the media's bars add.
const MEDIA_LEGEND = [...CAPACITY_PARTS, ["written", "Written to disk"]];

function mediaPage() {
  const err = errorBox();
  const actionErr = actionBox();
  actionErr.id = "media-action-error";
  const note = noticeBox();
  note.id = "media-notice";
  const body = h("div", {}, h("p", { class: "muted" }, "Loading media…"));
  main.append(h("h1", {}, "Media"), err, actionErr, note, body);
  const admin = isAdmin();
  const addErr = errorBox();
  addErr.id = "add-medium-error";

  if (admin) {
    const id = h("input", { id: "medium-id", required: true, maxlength: 63, pattern: "[A-Za-z0-9._\\-]+", placeholder: "disk-7" });
    const node = h("input", { id: "medium-node", required: true, maxlength: 63, pattern: "[A-Za-z0-9._\\-]+", placeholder: "node-d" });
    const zone = h("input", { id: "medium-zone", required: true, maxlength: 63, pattern: "[A-Za-z0-9._\\-]+", placeholder: "zone-d" });
    const dir = h("input", { id: "medium-directory", required: true, pattern: "/.*", placeholder: "/srv/svs/disk-7" });
    const size = h("input", { id: "medium-size", type: "number", required: true, min: 1, step: 1, placeholder: "100" });
    main.append(h("form", {
      class: "card inline-form",
      id: "add-medium",
      onsubmit: async (ev) => {
        ev.preventDefault();
        startAction();
        try {
          const m = await api.post("/media", {
            mediaid: id.value.trim(), node: node.value.trim(), zone: zone.value.trim(),
            media: dir.value.trim(), size: Number(size.value),
          });
          note.show(`Medium ${m.mediaid} added: ${m.size} GiB on node ${m.node} in zone ${m.zone}. New volumes may be placed on it now.`);
          for (const input of [id, node, zone, dir, size]) input.value = "";
        } catch (e) {
          addErr.show(e);
        }
        load();
      },
    },
    h("h2", {}, "Add medium"),
    h("div", { class: "fields" },
      h("label", {}, "ID", id),
      h("label", {}, "Node", node),
      h("label", {}, "Zone", zone),
      h("label", {}, "Directory", dir),
      h("label", {}, "Size (GiB)", size),
      h("button", { type: "submit" }, "Add medium"),
    ),
    h("p", { class: "hint" }, "A directory on the server that svs keeps slices in (created if missing). " +
      "Media added here are kept in the database; media of the configuration file are changed there."),
    addErr));
  }

  // A new action starts clean; its outcome stays until the next one.
  function startAction() {
    actionErr.show(null);
    addErr.show(null);
    note.show(null);
  }

  // Who manages the medium, and what an administrator may do about it here.
  function managedBy(m) {
    return h("span", { class: "tag managed-by" }, m.managedby === "api" ? "added through the API" : "configuration file");
  }

  function apiActions(m) {
    if (!admin || m.managedby !== "api") return null;
    const size = h("input", { type: "number", class: "size-input", min: 1, step: 1, value: m.size, "aria-label": `New size of ${m.mediaid} in GiB` });
    return h("form", {
      class: "medium-edit",
      onsubmit: (ev) => { ev.preventDefault(); resize(m, Number(size.value)); },
    },
    h("label", {}, "Size (GiB) ", size),
    h("button", { type: "submit", class: "secondary set-size" }, "Set size"),
    h("button", { type: "button", class: "danger remove", onclick: () => remove(m) }, "Remove"));
  }

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
              const draining = m.status === "Draining";
              // Allocated: what slices, snapshots and running jobs booked; written: what the disk holds.
              const used = m.size - m.freesize;
              const pct = m.size ? Math.round((used / m.size) * 100) : 0;
              const written = m.writtenbytes ?? null;
              const writtenPct = written !== null && used ? Math.min(100, (written / (used * 1024 ** 3)) * 100) : 0;
              return h("div", { class: failed ? "medium failed" : "medium", "data-medium": m.mediaid },
                h("div", { class: "medium-head" },
                  h("strong", {}, m.mediaid), " ", stateTag(draining ? "Draining" : (m.state || "Online")), " ", managedBy(m),
                  // Draining and failing a medium are for administrators (the server says 403 to others):
                  // small outline buttons at the row's end, not the page's main action.
                  admin && !failed
                    ? h("span", { class: "medium-actions" },
                      draining
                        ? h("button", { type: "button", class: "secondary ready", onclick: () => setReady(m) }, "Set ready")
                        : h("button", { type: "button", class: "secondary drain", onclick: () => drain(m) }, "Drain…"),
                      h("button", { type: "button", class: "danger fail", onclick: () => markFailed(m) }, "Mark failed"))
                    : null,
                ),
                // Split into what slices, running jobs and snapshots hold, and free; the written
                // part a dark strip along the bottom of what is allocated.
                capacityBar(m.size, capacityParts(m), {
                  title: `${pct}% in use: ${capacityText(m)}` + (written !== null ? `; ${fmtBytes(written)} written` : ""),
                  inner: written !== null ? h("span", { class: "written", style: `width:${writtenPct}%`, title: `${fmtBytes(written)} written` }) : null,
                }),
                // Every size through one formatter (the API gives GiB, written bytes).
                h("div", { class: "muted usage" }, failed
                  ? `Failed: its slices are lost and it takes no new ones · ${gib(m.size)} total · ${plural(m.volumescount, "volume")}`
                  : draining
                  ? `Draining: it takes no new slices · ${gib(used)} allocated · ${plural(m.volumescount, "volume")} still on it · ${gib(m.size)} total`
                  // Slices and snapshots apart: a 20 GiB volume reads "20 GiB allocated to slices", its
                  // snapshots' bytes (and the whole GiB of free space they set aside) beside it.
                  : `${gib(m.allocatedsize)} allocated to slices · ${m.bookedsize ? `${gib(m.bookedsize)} booked by running jobs · ` : ""}` +
                    `${m.snapshotbytes || m.snapshotsize ? `${snapshotSpaceText(m)} · ` : ""}${written !== null ? fmtBytes(written) : "unknown"} written · ` +
                    `${gib(m.freesize)} free · ${gib(m.size)} total · ${plural(m.volumescount, "volume")}`),
                failed ? null : apiActions(m),
              );
            }),
          ),
        ),
      ),
    );
    body.replaceChildren(...(sections.length ? [capacityLegend(MEDIA_LEGEND), ...sections] : [h("p", {}, "No media configured.")]));
  }

  // The drain's dry run first: the confirmation says what would move
  // (slices, volumes, data, where to, how long) and what could not.
  async function drain(m) {
    startAction();
    const path = `/media/${encodeURIComponent(m.mediaid)}`;
    let plan;
    try {
      plan = await api.patch(`${path}?dryrun=true`, { state: "Draining" });
    } catch (e) {
      actionErr.show(new Error(`Could not plan the drain of "${m.mediaid}": ${e.message}`));
      return;
    }
    const ok = await confirmDialog({
      title: `Drain medium "${m.mediaid}"?`,
      body: drainPlanText(plan),
      confirmLabel: "Drain",
    });
    if (!ok) return;
    try {
      const started = await api.patch(path, { state: "Draining" });
      note.show(`${started.Message}.`);
    } catch (e) {
      actionErr.show(new Error(`Could not drain "${m.mediaid}": ${e.message}`));
    }
    load();
  }

  async function setReady(m) {
    startAction();
    try {
      const medium = await api.patch(`/media/${encodeURIComponent(m.mediaid)}`, { state: "Ready" });
      note.show(`Medium ${medium.mediaid} takes new slices again (${medium.freesize} GiB free).`);
    } catch (e) {
      actionErr.show(new Error(`Could not set "${m.mediaid}" ready: ${e.message}`));
    }
    load();
  }

  async function markFailed(m) {
    const question = `Mark medium "${m.mediaid}" failed? Its slices are lost at once: ` +
      `volumes with a copy on it turn Degraded (Failed where it held the only copy) until they are recovered. ` +
      "A failed medium does not come back.";
    if (!confirm(question)) return;
    startAction();
    try {
      const medium = await api.patch(`/media/${encodeURIComponent(m.mediaid)}`, { state: "Failed" });
      note.show(`Medium ${medium.mediaid} is ${medium.state}. Recover the volumes that lost a copy on the Volumes page.`);
    } catch (e) {
      actionErr.show(new Error(`Could not mark "${m.mediaid}" failed: ${e.message}`));
    }
    load();
  }

  async function resize(m, size) {
    startAction();
    try {
      const medium = await api.patch(`/media/${encodeURIComponent(m.mediaid)}`, { size });
      note.show(`Medium ${medium.mediaid} is now ${medium.size} GiB (${medium.freesize} GiB free).`);
    } catch (e) {
      actionErr.show(new Error(`Could not resize "${m.mediaid}": ${e.message}`));
    }
    load();
  }

  async function remove(m) {
    if (!confirm(`Remove medium "${m.mediaid}"? svs stops using it; its directory stays on the server.`)) return;
    startAction();
    try {
      await api.del(`/media/${encodeURIComponent(m.mediaid)}`);
      note.show(`Medium ${m.mediaid} removed.`);
    } catch (e) {
      actionErr.show(new Error(`Could not remove "${m.mediaid}": ${e.message}`));
    }
    load();
  }

  load();
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
  // How many copies the chosen resiliencies make, as they change.
  const copiesHint = h("p", { class: "hint", id: "pol-copies" });
  const showCopies = () => { copiesHint.textContent = policyHint(rm.value, rn.value, rz.value); };
  for (const select of [rm, rn, rz]) select.addEventListener("change", showCopies);
  showCopies();
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
  copiesHint,
  h("p", { class: "hint" }, "A resiliency of N survives at least N failures of its kind (media, nodes or zones): copies = 1 + the largest of the three."),
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
        cell("Copies", policyCopies(p.resiliencymedia, p.resiliencynode, p.resiliencyzone)),
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
    list.replaceChildren(table(["Name", "Media", "Node", "Zone", "Copies", "Optimization", "Created by", ""], rows, "No policies yet."));
  }
  load();
}

// ---- users (administrators) ----
function usersPage() {
  if (!isAdmin()) {
    main.append(
      h("h1", {}, "Users"),
      h("p", { class: "muted" }, "Only administrators manage users. Change your own password on the ",
        h("a", { href: "#/account" }, "Account page"), "."),
    );
    return;
  }
  const err = errorBox();
  const actionErr = actionBox();
  actionErr.id = "user-action-error";
  const note = noticeBox();
  note.id = "user-notice";
  const list = h("div", {}, h("p", { class: "muted" }, "Loading users…"));
  const me = session();
  const email = h("input", { id: "user-email", type: "email", required: true, placeholder: "name@example.com", autocomplete: "off" });
  const name = h("input", { id: "user-name", placeholder: "(from the e-mail)", autocomplete: "off" });
  const tenant = h("input", { id: "user-tenant", placeholder: "(yours)", autocomplete: "off" });
  const password = h("input", { id: "user-password", type: "password", required: true, minlength: 8, autocomplete: "new-password" });
  const admin = h("input", { id: "user-admin", type: "checkbox" });
  const createErr = errorBox();
  createErr.id = "create-user-error";
  const form = h("form", {
    class: "card inline-form",
    id: "create-user",
    // The server's messages say what is wrong, in the same words as the CLI's.
    novalidate: true,
    onsubmit: async (ev) => {
      ev.preventDefault();
      createErr.show(null);
      const body = { email: email.value.trim(), password: password.value, admin: admin.checked };
      if (name.value.trim()) body.name = name.value.trim();
      if (tenant.value.trim()) body.tenant = tenant.value.trim();
      try {
        const u = await api.post("/users", body);
        note.show(`Created user ${u.email} in tenant ${u.tenant}.`);
        for (const input of [email, name, tenant, password]) input.value = "";
        admin.checked = false;
        load();
      } catch (e) {
        createErr.show(e);
      }
    },
  },
  h("h2", {}, "Create a user"),
  h("div", { class: "fields" },
    h("label", {}, "E-mail", email),
    h("label", {}, "Name", name),
    h("label", {}, "Tenant", tenant),
    h("label", {}, "Password", password),
    h("label", { class: "check" }, admin, "Administrator"),
    h("button", { type: "submit" }, "Create"),
  ),
  h("p", { class: "hint" }, "Passwords have at least 8 characters. A new tenant is created on the fly. Administrators manage users, media and nodes for every tenant."),
  createErr);
  main.append(h("h1", {}, "Users"), err, actionErr, note, list, form);

  // One change of a user; the list shows the outcome either way.
  async function change(u, what, request, done) {
    actionErr.show(null);
    note.show(null);
    try {
      const r = await request();
      note.show(done(r));
    } catch (e) {
      actionErr.show(new Error(`Could not ${what} ${u.email}: ${e.message}`));
    }
    load();
  }

  function openReset(u) {
    const pw = h("input", { id: "reset-password", type: "password", minlength: 8, autocomplete: "new-password" });
    modal("reset-dialog", `New password for ${u.email}`,
      [h("label", { for: "reset-password" }, "New password"), pw,
        h("p", { class: "hint" }, "At least 8 characters. Every session of the user ends.")],
      "Set password",
      async (dErr) => {
        try {
          await api.post(`/users/${u.userid}/password`, { password: pw.value });
          note.show(`Password of ${u.email} reset; its sessions have ended.`);
          return true;
        } catch (e) {
          dErr.show(e);
          return false;
        }
      });
    pw.focus();
  }

  async function load() {
    let users;
    try {
      users = await api.get("/users");
      err.show(null);
    } catch (e) {
      err.show(new Error(`Could not load users: ${e.message}`));
      return;
    }
    const rows = users.map((u) => {
      const self = me && u.email.toLowerCase() === (sessionEmail() || "").toLowerCase();
      const path = `/users/${u.userid}`;
      const buttons = self
        ? [h("span", { class: "muted" }, "you")]
        : [
          h("button", { type: "button", class: "secondary toggle-disabled", onclick: () =>
            change(u, u.disabled ? "enable" : "disable", () => api.patch(path, { disabled: !u.disabled }),
              (r) => r.disabled ? `Disabled ${r.email}: it cannot sign in, and its sessions have ended.` : `Enabled ${r.email}.`),
          }, u.disabled ? "Enable" : "Disable"),
          h("button", { type: "button", class: "secondary toggle-admin", onclick: () =>
            change(u, u.admin ? "take the administrator role from" : "make an administrator of", () => api.patch(path, { admin: !u.admin }),
              (r) => r.admin ? `${r.email} is now an administrator.` : `${r.email} is no longer an administrator.`),
          }, u.admin ? "Remove admin" : "Make admin"),
          h("button", { type: "button", class: "secondary reset", onclick: () => openReset(u) }, "Reset password"),
          h("button", { type: "button", class: "danger delete", onclick: () => {
            if (!confirm(`Delete user ${u.email}? Its tenant's volumes stay; it can no longer sign in.`)) return;
            change(u, "delete", () => api.del(path), () => `Deleted user ${u.email}.`);
          } }, "Delete"),
        ];
      return h("tr", { "data-user": u.email },
        cell("E-mail", u.email),
        cell("Name", u.name),
        cell("Tenant", u.tenant),
        cell("Role", u.admin ? "Administrator" : "User"),
        cell("State", stateTag(u.disabled ? "Disabled" : "Enabled")),
        cell("", h("span", { class: "actions" }, buttons)),
      );
    });
    list.replaceChildren(table(["E-mail", "Name", "Tenant", "Role", "State", ""], rows, "No users."));
  }
  load();
}

// The signed-in user's e-mail, from the IdToken (for display only).
function sessionEmail() {
  const s = session();
  if (!s || !s.idToken) return null;
  try {
    const payload = s.idToken.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(payload.padEnd(Math.ceil(payload.length / 4) * 4, "="))).email || null;
  } catch {
    return null;
  }
}

// ---- account: the signed-in user's own password ----
function accountPage() {
  const note = noticeBox();
  note.id = "account-notice";
  const err = errorBox();
  err.id = "password-error";
  const current = h("input", { id: "current-password", type: "password", required: true, autocomplete: "current-password" });
  const next = h("input", { id: "new-password", type: "password", required: true, minlength: 8, autocomplete: "new-password" });
  const repeat = h("input", { id: "repeat-password", type: "password", required: true, minlength: 8, autocomplete: "new-password" });
  const button = h("button", { type: "submit" }, "Change password");
  const form = h("form", {
    class: "card signin",
    id: "change-password",
    novalidate: true,
    onsubmit: async (ev) => {
      ev.preventDefault();
      err.show(null);
      note.show(null);
      if (next.value !== repeat.value) {
        err.show(new Error("The new passwords do not match."));
        return;
      }
      button.disabled = true;
      try {
        await changeOwnPassword(current.value, next.value);
        for (const input of [current, next, repeat]) input.value = "";
        note.show("Your password is changed. Your other sessions have ended; this one goes on.");
      } catch (e) {
        err.show(e);
      } finally {
        button.disabled = false;
      }
    },
  },
  h("h2", {}, "Change your password"),
  h("label", { for: "current-password" }, "Current password"), current,
  h("label", { for: "new-password" }, "New password (at least 8 characters)"), next,
  h("label", { for: "repeat-password" }, "Repeat the new password"), repeat,
  err,
  button);
  main.append(h("h1", {}, "Account"), h("p", {}, `Signed in as ${sessionEmail() || "—"}.`), note, form);
}
