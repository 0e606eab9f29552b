// The svs web console: hash-routed pages over the public JSON API.
import { api, session, isAdmin, signIn, signOut, scheduleRefresh, whenSignedOut, changeOwnPassword } from "./api.js";
import {
  JOB_KINDS, jobKindLabel, jobTitle, resizeTarget, sizeText, sliceName, SLICE_HINT, staleNote, policyHint, policyCopies,
  attachmentText, volumeMatches, jobCancellable, jobCancelled, jobStateText, cancelQuestion,
  jobSteerable, jobPaused, jobRateText, rateQuestion, rateDefault, rateValue, steerVerb, steerNotice,
} from "./text.js";
import {
  h, every, stopTimers, errorBox, noticeBox, actionBox, progressBar, stateTag, table, cell, fmtBytes, fmtTime,
  changeDetector, livePoll,
} from "./dom.js";
import { nodesPage, nodePage } from "./nodes.js";

const main = document.getElementById("main");
const top = document.getElementById("top");
let signInNotice = "";

function volumePath(v) {
  return `/volumes/${encodeURIComponent(v)}`;
}

function snapshotPath(v, s) {
  return `${volumePath(v)}/snapshots/${encodeURIComponent(s)}`;
}

// Volume states that last: anything else is a change in progress.
const SETTLED_VOLUME_STATES = ["Ready", "Degraded", "Failed"];

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
function hostState(a) {
  if (!a.hoststate) return h("span", { class: "host muted", title: "No agent has reported on this attachment." }, "host —");
  const detail = hostDetail(a);
  const when = a.hostupdated ? ` (reported ${fmtTime(a.hostupdated)})` : "";
  return h("span", { class: "host" }, "host ",
    h("span", { class: `state host-state state-${a.hoststate.toLowerCase()}`, title: `${detail || a.hoststate}${when}` }, a.hoststate));
}

// ---- routing ----
const pages = { signin: signInPage, volumes: volumesPage, snapshots: snapshotsPage, jobs: jobsPage, media: mediaPage, nodes: nodesPage, policies: policiesPage, users: usersPage, account: accountPage };

function route() {
  stopTimers();
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
function volumesPage() {
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

// Shows a job with live progress, polling every 500 ms until Done / Error.
function followJob(id, panel, onEnd) {
  panel.hidden = false;
  const state = h("span", { id: "job-state" }, "Pending");
  const pct = h("span", { id: "job-progress" }, "0");
  const fill = h("span", { class: "fill", style: "width:0%" });
  const detail = h("p", { id: "job-detail", class: "detail" });
  // What a running job is doing now, e.g. a slice moving with its bytes, rate and time left.
  const status = h("p", { id: "job-status", class: "detail job-status", hidden: true });
  const reason = errorBox();
  reason.id = "job-error";
  // What the job is and the volume it works on, once read.
  const what = h("p", { id: "job-what", class: "muted" });
  // Cancel, while the job is one that can be; Pause / Resume and Rate while
  // its copies can be steered: the server's answer, or its refusal, below them.
  let job = null;
  const cancelNote = noticeBox();
  cancelNote.id = "job-cancel-notice";
  const cancelErr = actionBox();
  cancelErr.id = "job-cancel-error";
  const cancel = h("button", {
    type: "button", class: "secondary cancel-job", id: "job-cancel", hidden: true,
    onclick: async () => {
      if (job && await cancelJob(job, cancelNote, cancelErr)) cancel.hidden = true;
    },
  }, "Cancel");
  const steer = async (change) => {
    const now = job && await steerJob(job, change, cancelNote, cancelErr);
    if (now) show(now);
  };
  const pause = h("button", {
    type: "button", class: "secondary pause-job", id: "job-pause", hidden: true,
    title: "Stop the job's copies at their last checkpoint; writes to the volume go on",
    onclick: () => steer({ paused: true }),
  }, "Pause");
  const resume = h("button", {
    type: "button", class: "secondary resume-job", id: "job-resume", hidden: true,
    title: "Go on copying from the last checkpoint", onclick: () => steer({ paused: false }),
  }, "Resume");
  const rateButton = h("button", {
    type: "button", class: "secondary rate-job", id: "job-set-rate", hidden: true,
    title: "Set this job's own copy rate", onclick: () => {
      const change = job && askRate(job);
      if (change) steer(change);
    },
  }, "Rate");
  // The job's own copy rate, when it has one.
  const rate = h("span", { id: "job-rate", class: "job-rate", hidden: true });
  panel.replaceChildren(
    h("h3", {}, `Job ${id}`),
    what,
    h("p", {}, "State: ", state, " · Progress: ", pct, "%", rate),
    h("span", { class: "bar wide" }, fill),
    status,
    detail,
    reason,
    h("div", { class: "actions job-actions" }, pause, resume, rateButton, cancel),
    cancelNote,
    cancelErr,
  );
  // Draws the job as last read (or as a PATCH answered it).
  function show(j) {
    job = j;
    const ended = jobEnded(j);
    state.replaceChildren(jobStateTag(j));
    pct.textContent = String(j.progress);
    fill.style.width = `${j.progress}%`;
    for (const how of ["failed", "cancelled"]) {
      fill.classList.toggle(how, ended === how);
      fill.parentElement.classList.toggle(how, ended === how);
    }
    detail.textContent = (j.details || []).at(-1) || "";
    status.textContent = runningStatus(j);
    status.hidden = !status.textContent;
    what.textContent = jobTitle(j);
    what.title = j.type;
    cancel.hidden = !jobCancellable(j);
    const steerable = jobSteerable(j);
    pause.hidden = !steerable || j.paused;
    resume.hidden = !steerable || !j.paused;
    rateButton.hidden = !steerable;
    rate.textContent = jobRateText(j) ? ` · Rate: ${jobRateText(j)}` : "";
    rate.hidden = !rate.textContent;
  }
  let busy = false;
  const stop = every(500, async () => {
    if (busy) return;
    busy = true;
    try {
      const j = await api.get(`/jobs/${encodeURIComponent(id)}`);
      show(j);
      const ended = jobEnded(j);
      const last = (j.details || []).at(-1) || "";
      if (j.state === "Done" || j.state === "Error") {
        stop();
        // A cancelled job did not fail: its last message says what the cancel left.
        cancelNote.show(null);
        if (ended === "failed") reason.show(new Error(`The job failed: ${last || j.status || "no reason given"}`));
        onEnd && onEnd(j);
      }
    } catch (e) {
      reason.show(new Error(`Could not read job ${id}: ${e.message}`));
    } finally {
      busy = false;
    }
  });
}

// How a job ended, for its bar: "failed" (red), "cancelled" (grey), or false.
function jobEnded(j) {
  if (j.state !== "Error") return false;
  return jobCancelled(j) ? "cancelled" : "failed";
}

// A job's state tag: "Cancelled" (grey) rather than `Error` for a
// cancelled job, "Cancelling" while its cancel is under way, "Paused"
// (amber, its status on hover) while its copies wait.
function jobStateTag(j) {
  const tag = stateTag(jobStateText(j));
  if (jobPaused(j)) tag.title = j.status;
  return tag;
}

// The job's own copy rate under its state, when it has one ("Rate: 64.0 MiB/s").
function jobRate(j) {
  const text = jobRateText(j);
  return text ? h("span", { class: "job-rate", title: "This job's own copy rate (the service's movement_rate otherwise)" }, `Rate: ${text}`) : null;
}

// A job's progress bar: red when it failed, grey when it was cancelled.
function jobBar(j) {
  return progressBar(j.progress, jobEnded(j));
}

// The Cancel button of a job that can be cancelled (else nothing).
function cancelButton(j, onclick, id) {
  if (!jobCancellable(j)) return null;
  return h("button", {
    type: "button", class: "secondary cancel-job", id,
    title: `Stop job ${j.id} and undo what it did`, onclick,
  }, "Cancel");
}

// Pause or Resume (as the job is) and Rate of a job whose copies can be
// steered (else nothing); `onSteer(change)` sends the change. `ids` name
// them where a page shows one job (`{ pause, resume, rate }`).
function steerButtons(j, onSteer, ids = {}) {
  if (!jobSteerable(j)) return [];
  const pauseOrResume = j.paused
    ? h("button", {
      type: "button", class: "secondary resume-job", id: ids.resume,
      title: `Go on copying job ${j.id}'s slices from their last checkpoint`, onclick: () => onSteer({ paused: false }),
    }, "Resume")
    : h("button", {
      type: "button", class: "secondary pause-job", id: ids.pause,
      title: `Stop job ${j.id}'s copies at their last checkpoint; writes to the volume go on`, onclick: () => onSteer({ paused: true }),
    }, "Pause");
  const rate = h("button", {
    type: "button", class: "secondary rate-job", id: ids.rate,
    title: `Set job ${j.id}'s own copy rate`, onclick: () => {
      const change = askRate(j);
      if (change) onSteer(change);
    },
  }, "Rate");
  return [pauseOrResume, rate];
}

// A job's buttons, side by side: Pause / Resume, Rate and Cancel, those
// that apply; null when none does.
function jobButtons(j, onCancel, onSteer, ids = {}) {
  const buttons = [...steerButtons(j, onSteer, ids), cancelButton(j, onCancel, ids.cancel)].filter(Boolean);
  return buttons.length ? h("span", { class: "job-buttons" }, buttons) : null;
}

// Asks for a job's own copy rate ("64 MiB"; empty: the service's rate):
// the change to send, or null when the question was dismissed.
function askRate(j) {
  const answer = prompt(rateQuestion(j), rateDefault(j));
  return answer === null ? null : { movementrate: rateValue(answer) };
}

// Pauses, resumes or sets the rate of job `j` (`PATCH /jobs/{job}` with
// `change`, no question asked): what the server took goes to `note`, a
// refusal to `errBox`; `start` first clears what the page showed of its
// last action. The job as the server answered it, or null.
async function steerJob(j, change, note, errBox, start) {
  if (start) start();
  errBox.show(null);
  note.show(null);
  try {
    const now = await api.patch(`/jobs/${encodeURIComponent(j.id)}`, change);
    note.show(steerNotice(now, change));
    return now;
  } catch (e) {
    errBox.show(new Error(`Could not ${steerVerb(change)} job ${j.id}: ${e.message}`));
    return null;
  }
}

// Asks first, then cancels job `j` (`DELETE /jobs/{job}`): the server's
// message goes to `note`, a refusal to `errBox`; `start` (once confirmed)
// clears what the page showed of its last action. Before sending, the job
// is read again: one that ended meanwhile is left alone (a DELETE would
// remove its record). True once the cancel is under way.
async function cancelJob(j, note, errBox, start) {
  if (!confirm(cancelQuestion(j))) return false;
  if (start) start();
  errBox.show(null);
  note.show(null);
  const path = `/jobs/${encodeURIComponent(j.id)}`;
  try {
    const now = await api.get(path);
    if (now.state === "Done" || now.state === "Error") {
      errBox.show(new Error(`Could not cancel job ${j.id}: it ended (${jobStateText(now)}) before the cancel was sent.`));
      return false;
    }
    const r = await api.del(path);
    note.show(`${r.Message}.`);
    return true;
  } catch (e) {
    errBox.show(new Error(`Could not cancel job ${j.id}: ${e.message}`));
    return false;
  }
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

// The status of a running job when it says more than its state: what it is
// doing now (`Moving slice ... (1 of 2): 12.0 MiB of 32.0 MiB, ...`).
function runningStatus(j) {
  const running = j.state === "Running" || j.state === "Pending";
  return running && j.status && j.status !== j.state ? j.status : "";
}

// The volume a job works on: its name (kept after the volume is deleted),
// linked to the volume's page, with its id on hover.
function jobObject(j) {
  if (!j.objectname) return h("code", { title: j.object }, String(j.object).slice(0, 8));
  return h("a", { href: `#/volumes/${encodeURIComponent(j.objectname)}`, class: "job-object", title: j.object }, j.objectname);
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

function volumePage([volumeName]) {
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

// A time in a table that may wrap between date and time, to keep tables narrow.
function timeCell(label, t) {
  const td = cell(label, fmtTime(t));
  td.classList.add("time");
  return td;
}

// A job's Job cell: what it does in words ("Resize web 30 → 100 GiB"), its
// kind as the API names it on hover.
function jobCell(j) {
  const td = cell("Job", h("span", { class: "job-title", title: j.type, "data-type": j.type }, jobTitle(j)));
  td.classList.add("wrap");
  return td;
}

// A job's State cell: its state, its own copy rate when it has one, and
// below them Pause / Resume and Rate while its copies can be steered
// (`onSteer(change)`) and Cancel while it can be cancelled (`onCancel`).
function jobStateCell(j, onCancel, onSteer) {
  return cell("State", jobStateTag(j), jobRate(j), jobButtons(j, onCancel, onSteer));
}

// A job's Details cell: what a running job does now, else its messages
// (the last one, with the others folded).
function jobDetailsCell(j) {
  const details = j.details || [];
  const now = runningStatus(j);
  const td = cell("Details", now
    ? h("span", { class: "job-status" }, now)
    : details.length > 1
      ? h("details", {}, h("summary", {}, details.at(-1)), h("ol", {}, details.map((d) => h("li", {}, d))))
      : details[0] || "—");
  td.classList.add("wrap");
  return td;
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
const JOB_TYPES = Object.keys(JOB_KINDS);
const JOB_STATES = ["Pending", "Running", "Done", "Error"];

function jobsPage() {
  const err = errorBox();
  const actionErr = actionBox();
  actionErr.id = "job-action-error";
  const note = noticeBox();
  note.id = "job-notice";
  const params = { type: "", state: "", object: "", page: 1, count: 25 };
  const type = h("select", { id: "job-type", onchange: () => { params.type = type.value; params.page = 1; load(); } },
    h("option", { value: "" }, "All jobs"), JOB_TYPES.map((t) => h("option", { value: t }, jobKindLabel(t))));
  const state = h("select", { id: "job-state-filter", onchange: () => { params.state = state.value; params.page = 1; load(); } },
    h("option", { value: "" }, "All states"), JOB_STATES.map((t) => h("option", { value: t }, t)));
  const count = h("select", { id: "job-count", onchange: () => { params.count = Number(count.value); params.page = 1; load(); } },
    [10, 25, 100].map((n) => h("option", { value: n, selected: n === 25 }, `${n} per page`)));
  const prev = h("button", { type: "button", class: "secondary", onclick: () => { params.page--; load(); } }, "‹ Previous");
  const next = h("button", { type: "button", class: "secondary", onclick: () => { params.page++; load(); } }, "Next ›");
  const object = h("input", { id: "job-object", type: "search", placeholder: "Volume name or id",
    onchange: () => { params.object = object.value.trim(); params.page = 1; load(); } });
  const pageNo = h("span", { id: "job-page" });
  const live = h("span", { class: "muted", id: "job-live" });
  const list = h("div", {}, h("p", { class: "muted" }, "Loading jobs…"));
  main.append(
    h("h1", {}, "Jobs"),
    h("div", { class: "toolbar" }, type, state, object, count, live),
    err,
    actionErr,
    note,
    list,
    h("div", { class: "pager" }, prev, pageNo, next),
  );
  let active = false;
  const shown = changeDetector();
  async function load() {
    const q = new URLSearchParams({ page: params.page, count: params.count, type: params.type, state: params.state, object: params.object });
    let jobs;
    try {
      jobs = await api.get(`/jobs?${q}`);
      err.show(null);
    } catch (e) {
      err.show(new Error(`Could not load jobs: ${e.message}`));
      return;
    }
    active = jobs.some((j) => j.state === "Pending" || j.state === "Running");
    live.textContent = active ? "Jobs running: following them live" : "";
    pageNo.textContent = `Page ${params.page}`;
    prev.disabled = params.page <= 1;
    next.disabled = jobs.length < params.count;
    if (!shown.changed(jobs)) return;
    const rows = jobs.map((j) =>
      h("tr", { "data-job": j.id },
        cell("ID", j.id),
        jobCell(j),
        cell("Volume", jobObject(j)),
        jobStateCell(j, () => cancel(j), (c) => steer(j, c)),
        cell("Progress", jobBar(j)),
        jobDetailsCell(j),
        timeCell("Started", j.starttime),
        timeCell("Ended", j.endtime),
      ));
    list.replaceChildren(table(["ID", "Job", "Volume", "State", "Progress", "Details", "Started", "Ended"], rows, "No jobs match."));
  }

  // Cancels a running job (asked first); the list then shows it
  // `Cancelling`, and `Cancelled` once it is undone.
  async function cancel(j) {
    await cancelJob(j, note, actionErr);
    shown.reset();
    load();
  }

  // Pauses, resumes or sets the rate of a running job; the list then shows
  // it `Paused`, or running on at its rate.
  async function steer(j, change) {
    await steerJob(j, change, note, actionErr);
    shown.reset();
    load();
  }
  load();
  // Live: jobs started elsewhere show up, running ones move on.
  livePoll(2000, () => true, load);
}

// ---- media ----
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
              // Allocated: what slices, snapshots and running jobs booked; written: what the disk holds.
              const used = m.size - m.freesize;
              const pct = m.size ? Math.round((used / m.size) * 100) : 0;
              const written = m.writtenbytes ?? null;
              const writtenPct = written !== null && used ? Math.min(100, (written / (used * 1024 ** 3)) * 100) : 0;
              return h("div", { class: failed ? "medium failed" : "medium", "data-medium": m.mediaid },
                h("div", { class: "medium-head" },
                  h("strong", {}, m.mediaid), " ", stateTag(m.state || "Online"), " ", managedBy(m),
                  // Failing a medium is for administrators (the server says 403 to others).
                  admin && !failed
                    ? h("button", { type: "button", class: "danger fail", onclick: () => markFailed(m) }, "Mark failed")
                    : null,
                ),
                h("span", { class: "bar wide capacity", title: `${pct}% allocated` + (written !== null ? `, ${fmtBytes(written)} written` : "") },
                  h("span", { class: "fill", style: `width:${pct}%` }, h("span", { class: "written", style: `width:${writtenPct}%` }))),
                h("div", { class: "muted usage" }, failed
                  ? `Failed: its slices are lost and it takes no new ones · ${m.size} GiB total · ${m.volumescount} volume(s)`
                  : `${used} GiB allocated · ${written !== null ? fmtBytes(written) : "unknown"} written · ` +
                    `${m.freesize} GiB free · ${m.size} GiB total · ${m.volumescount} volume(s)`),
                failed ? null : apiActions(m),
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
