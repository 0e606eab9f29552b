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

// Runs `fn` once the page is left (with the timers), e.g. to stop watching
// an element's size.
export function onLeave(fn) {
  timers.push(fn);
}

// An SVG element, like `h` (attributes are SVG presentation attributes, not
// inline style, which the Content-Security-Policy would block; colours
// come from style.css through `class`).
const SVG_NS = "http://www.w3.org/2000/svg";
export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
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


// An in-page confirmation (a modal <dialog>, not the browser's confirm()):
// `body` is text or nodes (an array for several). Resolves true when the
// confirm button is pressed, false on Cancel, Escape or closing it. The
// dialog has id "confirm-dialog", its buttons "confirm-ok" / "confirm-cancel".
export function confirmDialog({ title, body = "", confirmLabel = "OK", cancelLabel = "Cancel", danger = false }) {
  return new Promise((resolve) => {
    document.getElementById("confirm-dialog")?.remove();
    const ok = h("button", { type: "button", id: "confirm-ok", class: danger ? "danger" : undefined }, confirmLabel);
    const cancel = h("button", { type: "button", id: "confirm-cancel", class: "secondary" }, cancelLabel);
    const content = (Array.isArray(body) ? body : [body]).map((b) => (b instanceof Node ? b : h("p", {}, b)));
    const dialog = h("dialog", { id: "confirm-dialog", class: "card confirm", "aria-labelledby": "confirm-title" },
      h("h2", { id: "confirm-title" }, title),
      h("div", { class: "confirm-body" }, content),
      h("div", { class: "buttons" }, ok, cancel));
    let answer = false;
    ok.addEventListener("click", () => { answer = true; dialog.close(); });
    cancel.addEventListener("click", () => dialog.close());
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(answer);
    });
    document.body.append(dialog);
    dialog.showModal();
    // The safe choice has the focus: Enter does not delete.
    cancel.focus();
  });
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


// A line chart over time, drawn in SVG: `series` are [{ name, class,
// points: [[ms, value]] }] over [start, end] (ms), the y axis from 0 to
// `scale.max` with `scale.ticks` ([{ value, label }]) and `scale.title`
// (the unit) over it. `width` is the chart's width in pixels (its box's),
// the drawing scales with the box in between redraws. `attrs` go on the
// <svg> (ids, data-*).
export function lineChart({ width, height = 180, start, end, series, scale, xLabels, title, attrs = {} }) {
  const w = Math.max(240, Math.round(width) || 600);
  const m = { left: 64, right: 14, top: 18, bottom: 24 };
  const x = (t) => m.left + ((t - start) / Math.max(1, end - start)) * (w - m.left - m.right);
  const y = (v) => height - m.bottom - (Math.min(v, scale.max) / scale.max) * (height - m.top - m.bottom);
  const grid = scale.ticks.map((t) => [
    svg("line", { class: "grid", x1: m.left, x2: w - m.right, y1: y(t.value), y2: y(t.value) }),
    svg("text", { class: "tick", x: m.left - 6, y: y(t.value) + 4, "text-anchor": "end" }, t.label),
  ]);
  const xTicks = xLabels.map(([t, label], i) =>
    svg("text", { class: "tick", x: x(t), y: height - 6, "text-anchor": i === 0 ? "start" : i === xLabels.length - 1 ? "end" : "middle" }, label));
  const lines = series.map((s) => {
    const pts = s.points.filter(([t]) => t >= start && t <= end);
    const last = pts.at(-1);
    return svg("g", { class: `series ${s.class}`, "data-series": s.name },
      svg("polyline", { points: pts.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" ") }),
      // The latest value stands out (and a single sample shows at all).
      last ? svg("circle", { cx: x(last[0]).toFixed(1), cy: y(last[1]).toFixed(1), r: 3 },
        svg("title", {}, `${s.name}: ${s.format ? s.format(last[1]) : last[1]}`)) : null);
  });
  return svg("svg", {
    class: "chart", viewBox: `0 0 ${w} ${height}`, width: w, height, role: "img", "aria-label": title, ...attrs,
  },
  svg("title", {}, title),
  svg("text", { class: "axis-title", x: 4, y: 11 }, scale.title),
  grid,
  svg("line", { class: "axis", x1: m.left, x2: m.left, y1: m.top - 4, y2: height - m.bottom }),
  xTicks,
  lines);
}

// A capacity bar of `size` GiB split into its parts ([{ part, label, gib }],
// each drawn with the class `part-<part>`), free last: `data-testid`
// "capacity-bar", `data-size` and `data-<part>` in GiB, each part's figure on
// hover. The parts but free sit in a `.used` box (`size − free`), which
// `inner` (e.g. a written marker) is drawn over.
export function capacityBar(size, parts, { inner = null, title = "", compact = false } = {}) {
  const total = Math.max(Number(size) || 0, parts.reduce((sum, p) => sum + (Number(p.gib) || 0), 0));
  const pct = (gib) => (total ? (gib / total) * 100 : 0);
  const share = (gib) => `${gib} GiB (${Math.round(pct(gib))}%)`;
  const span = (p) => h("span", {
    class: `part part-${p.part}`, "data-part": p.part, title: `${p.label}: ${share(p.gib)}`,
  });
  const usedParts = parts.filter((p) => p.part !== "free");
  const free = parts.find((p) => p.part === "free");
  const used = usedParts.reduce((sum, p) => sum + p.gib, 0);
  const usedBox = h("span", { class: "used", style: `width:${pct(used)}%` }, usedParts.filter((p) => p.gib > 0).map((p) => {
    const el = span(p);
    el.style.width = `${used ? (p.gib / used) * 100 : 0}%`;
    return el;
  }), inner);
  const freeBox = free ? span(free) : null;
  if (freeBox) freeBox.style.width = `${pct(free.gib)}%`;
  const attrs = Object.fromEntries(parts.map((p) => [`data-${p.part}`, p.gib]));
  return h("span", {
    class: compact ? "capacity-bar compact" : "capacity-bar", "data-testid": "capacity-bar", "data-size": size, ...attrs,
    role: "img", "aria-label": title || parts.map((p) => `${p.label} ${p.gib} GiB`).join(", "), title: title || undefined,
  }, usedBox, freeBox);
}

// What each colour of a capacity bar means (once per page).
export function capacityLegend(parts) {
  return h("p", { class: "capacity-legend muted" },
    parts.map(([part, label]) => h("span", { class: "legend-item" }, h("span", { class: `swatch part-${part}` }), label)));
}

// A detail page's head: a breadcrumb of the pages above it (`trail`:
// [[label, href]], each linked) ending with the page itself, then its
// heading (`heading`, else `current`). Every detail page starts this way.
export function pageTitle(trail, current, heading = current) {
  const crumbs = trail.flatMap(([label, href]) => [h("a", { href }, label), h("span", { class: "sep", "aria-hidden": "true" }, "›")]);
  return [
    h("nav", { class: "breadcrumb", "aria-label": "Breadcrumb" }, crumbs, h("span", { "aria-current": "page" }, current)),
    h("h1", {}, heading),
  ];
}

