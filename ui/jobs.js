// The console's jobs: the Jobs page, the job rows it shares with a volume's
// page, the panel that follows a started job, and a running job's Cancel,
// Pause / Resume and Rate (DELETE and PATCH /jobs/{job}). Kept apart from
// app.js, which imports what it needs from here.
import { api } from "./api.js";
import {
  JOB_KINDS, jobKindLabel, jobTitle, jobCancellable, jobCancelled, jobStateText, cancelQuestion,
  jobSteerable, jobPaused, jobRateText, rateQuestion, rateDefault, rateValue, steerVerb, steerNotice, durationText,
} from "./text.js";
import {
  h, every, errorBox, noticeBox, actionBox, progressBar, stateTag, table, cell, fmtTime, changeDetector, livePoll,
} from "./dom.js";

const main = document.getElementById("main");

// Shows a job with live progress, polling every 500 ms until Done / Error.
export function followJob(id, panel, onEnd) {
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
export function jobRate(j) {
  const text = jobRateText(j);
  return text ? h("span", { class: "job-rate", title: "This job's own copy rate (the service's movement_rate otherwise)" }, `Rate: ${text}`) : null;
}

// A job's progress: a bar while it runs, red where it stopped when it
// failed, grey when it was cancelled; a finished job has a "Done" badge,
// not a full bar.
export function jobBar(j) {
  if (j.state === "Done") return h("span", { class: "state state-done job-done", title: `Done at ${fmtTime(j.endtime)}` }, "✓ Done");
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
export function jobButtons(j, onCancel, onSteer, ids = {}) {
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
export async function steerJob(j, change, note, errBox, start) {
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
export async function cancelJob(j, note, errBox, start) {
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
  // A drain's or a rebalance's object is a medium or a scope of media.
  if (String(j.type).startsWith("media_")) return h("a", { href: "#/media", class: "job-object", title: j.object }, j.objectname);
  return h("a", { href: `#/volumes/${encodeURIComponent(j.objectname)}`, class: "job-object", title: j.object }, j.objectname);
}

// A time in a table that may wrap between date and time, to keep tables narrow.
export function timeCell(label, t) {
  const td = cell(label, fmtTime(t));
  td.classList.add("time");
  return td;
}

// A job's Job cell: what it does in words ("Resize web 30 → 100 GiB"), its
// kind as the API names it on hover.
export function jobCell(j) {
  const td = cell("Job", h("span", { class: "job-title", title: j.type, "data-type": j.type }, jobTitle(j)));
  td.classList.add("wrap");
  return td;
}

// A job's State cell: its state, its own copy rate when it has one, and
// below them Pause / Resume and Rate while its copies can be steered
// (`onSteer(change)`) and Cancel while it can be cancelled (`onCancel`).
export function jobStateCell(j, onCancel, onSteer) {
  return cell("State", jobStateTag(j), jobRate(j), jobButtons(j, onCancel, onSteer));
}

// A job's Details cell: what a running job does now, else its messages
// (the last one, with the others folded).
export function jobDetailsCell(j) {
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

// A job's Duration cell: how long it ran ("3 min 12 s"), "… so far"
// while it runs; its start and end on hover.
function durationCell(j) {
  const running = j.state === "Pending" || j.state === "Running";
  const text = durationText(j.starttime, running ? null : j.endtime, Date.now());
  const td = cell("Duration", h("span", {
    class: "job-duration", title: `Started ${fmtTime(j.starttime)}${j.endtime ? `, ended ${fmtTime(j.endtime)}` : ""}`,
  }, text && running ? `${text} so far` : text || "—"));
  td.classList.add("time");
  return td;
}

// The pager's line: "Page 2 of 3 · jobs 26–50 of 57"; without a total,
// what the page shows ("Page 2 · jobs 26–50").
function pagerText(first, shownCount, total, page, perPage) {
  const range = !shownCount ? "no jobs" : shownCount === 1 ? `job ${first + 1}` : `jobs ${first + 1}–${first + shownCount}`;
  if (!total || !shownCount) return `Page ${page} · ${range}`;
  if (total.atLeast) return `Page ${page} · ${range} of ${total.n} or more`;
  const pages = Math.max(1, Math.ceil(total.n / perPage));
  return `Page ${page} of ${pages} · ${range} of ${total.n}`;
}

// ---- jobs ----
const COUNT_MAX = 1000; // GET /jobs's largest page
const JOB_TYPES = Object.keys(JOB_KINDS);
const JOB_STATES = ["Pending", "Running", "Done", "Error"];

export function jobsPage() {
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
  // The API gives no total: it is counted with one list of up to
  // COUNT_MAX jobs, asked for again only when the filters or the page's
  // jobs change (a new job, a removed one), not on every live refresh.
  let total = null;
  let countedFor = null;
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
    await countJobs(jobs);
    const first = (params.page - 1) * params.count;
    pageNo.textContent = pagerText(first, jobs.length, total, params.page, params.count);
    prev.disabled = params.page <= 1;
    next.disabled = total === null || total.atLeast ? jobs.length < params.count : first + jobs.length >= total.n;
    if (!shown.changed(jobs)) return;
    const rows = jobs.map((j) =>
      h("tr", { "data-job": j.id },
        cell("ID", j.id),
        jobCell(j),
        cell("Volume", jobObject(j)),
        cell("User", h("span", { class: "job-user", title: j.useremail || undefined }, j.username || j.useremail || "—")),
        jobStateCell(j, () => cancel(j), (c) => steer(j, c)),
        cell("Progress", jobBar(j)),
        jobDetailsCell(j),
        timeCell("Started", j.starttime),
        durationCell(j),
      ));
    list.replaceChildren(table(["ID", "Job", "Volume", "User", "State", "Progress", "Details", "Started", "Duration"], rows, "No jobs match."));
  }

  // The number of jobs the filters match: this page's own when it is the
  // first and not full, else counted (see `total`).
  async function countJobs(jobs) {
    if (params.page === 1 && jobs.length < params.count) {
      total = { n: jobs.length, atLeast: false };
      countedFor = null;
      return;
    }
    const key = JSON.stringify([params, jobs.map((j) => j.id)]);
    if (key === countedFor) return;
    const q = new URLSearchParams({ page: 1, count: COUNT_MAX, type: params.type, state: params.state, object: params.object });
    try {
      const all = await api.get(`/jobs?${q}`);
      total = { n: all.length, atLeast: all.length >= COUNT_MAX };
      countedFor = key;
    } catch {
      total = null; // the pager says what it knows without it
    }
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
