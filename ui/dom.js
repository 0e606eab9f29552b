// Small DOM helpers shared by the console's pages (app.js, jobs.js,
// nodes.js, volumes.js). Text is always set as text, never as HTML.

let timers = []; // cleared whenever the page changes

// Stops every timer the page that is left started (`every`).
export function stopTimers() {
  timers.forEach((stop) => stop());
  timers = [];
}

export function h(tag, attrs = {}, ...children) {
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

export function every(ms, fn) {
  const id = setInterval(fn, ms);
  timers.push(() => clearInterval(id));
  return () => clearInterval(id);
}

export function errorBox() {
  const box = h("div", { class: "error", role: "alert", hidden: true });
  box.show = (e) => {
    box.textContent = e ? (e.message || String(e)) : "";
    box.hidden = !e;
  };
  return box;
}

export function noticeBox() {
  const box = h("div", { class: "notice", role: "status", hidden: true });
  box.show = (text) => {
    box.textContent = text || "";
    box.hidden = !text;
  };
  return box;
}

// `ended`: true or "failed" when the job ended in Error (its bar is shown
// red), "cancelled" when it was cancelled (grey).
export function progressBar(value, ended = false) {
  const v = Math.max(0, Math.min(100, Number(value) || 0));
  const how = ended === true ? "failed" : ended || "";
  return h(
    "span",
    { class: how ? `progress ${how}` : "progress", title: how ? `${how} at ${v}%` : `${v}%` },
    h("span", { class: "bar" }, h("span", { class: "fill", style: `width:${v}%` })),
    h("span", { class: "pct" }, `${v}%`),
  );
}

export function stateTag(state) {
  return h("span", { class: `state state-${String(state).toLowerCase()}` }, state);
}

export function table(headers, rows, empty) {
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

export function cell(label, ...content) {
  return h("td", { "data-label": label }, ...content);
}

// Bytes for people: 0 B, 512 B, 64.0 KiB, 1.5 GiB.
export function fmtBytes(n) {
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
export function actionBox() {
  const box = h("div", { class: "error", role: "alert", hidden: true });
  box.show = (e, ...buttons) => {
    box.replaceChildren();
    if (e) box.append(h("span", { class: "message" }, e.message || String(e)), ...buttons);
    box.hidden = !e;
  };
  return box;
}


export function fmtTime(t) {
  if (!t) return "—";
  const d = new Date(t);
  return isNaN(d) ? t : d.toLocaleString();
}


// A read-only text field with a Copy button (the clipboard API needs a
// secure context: elsewhere the text is selected and copied the old way).
export function copyField(id, value) {
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


// Remembers what was last drawn: `changed(data)` is true only when the
// server's answer differs, so a live list is redrawn (and its buttons
// replaced) only when something changed.
export function changeDetector() {
  let last = null;
  return {
    changed(...data) {
      const key = JSON.stringify(data);
      if (key === last) return false;
      last = key;
      return true;
    },
    reset() {
      last = null;
    },
  };
}

// Calls `load` every `ms` while `when()` holds and the tab is visible (a
// hidden tab costs the server nothing), never two at once.
export function livePoll(ms, when, load) {
  let busy = false;
  every(ms, async () => {
    if (busy || document.hidden || !when()) return;
    busy = true;
    try {
      await load();
    } finally {
      busy = false;
    }
  });
}
