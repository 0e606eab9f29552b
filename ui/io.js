// A volume's I/O on its page: IOPS, throughput and latency over the last 10
// minutes (GET /volumes/{v}/iostats), with the last sample and the window's
// peak in words. Kept apart from volumes.js, which places the section.
import { api } from "./api.js";
import { h, lineChart, livePoll, onLeave } from "./dom.js";
import { iopsText, throughputText, latencyText, ioScale, latencyScale, ioLatestText, ioPeakText } from "./text.js";

// What GET /volumes/{v}/iostats covers: one sample every 5 s for 10 minutes.
const IO_WINDOW_MS = 10 * 60 * 1000;
const IO_POLL_MS = 5000;

// One time axis style on every chart: minutes before the newest sample.
const X_LABELS = [[IO_WINDOW_MS, "10 min ago"], [IO_WINDOW_MS / 2, "5 min ago"], [0, "now"]];

// The section: the newest sample and the window's peak in words, a legend
// (write solid, read dashed and drawn over it, so equal lines both show),
// and the three charts, asked for again every 5 s while the page is shown.
export function ioSection(vPath) {
  const latest = h("p", { id: "io-latest", "data-testid": "io-latest", class: "io-latest" }, "Loading I/O…");
  const peakLine = h("p", { id: "io-peak", class: "io-latest muted", hidden: true });
  const iopsBox = h("figure", { class: "io-chart", id: "io-iops" });
  const rateBox = h("figure", { class: "io-chart", id: "io-throughput" });
  const latencyBox = h("figure", { class: "io-chart", id: "io-latency" });
  const charts = h("div", { class: "io-charts", hidden: true }, iopsBox, rateBox, latencyBox);
  const legend = h("p", { class: "io-legend muted", hidden: true },
    h("span", { class: "legend-item" }, h("span", { class: "swatch io-write" }), "write"),
    h("span", { class: "legend-item" }, h("span", { class: "swatch io-read" }), "read (dashed)"),
    " · the last 10 minutes of NBD reads and writes this service served, one sample every 5 s");
  const section = h("section", { id: "volume-io", "data-testid": "volume-io" },
    h("h2", {}, "I/O"), latest, peakLine, legend, charts);
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
    const empty = !samples.length;
    charts.hidden = empty;
    legend.hidden = empty;
    peakLine.hidden = empty;
    if (empty) {
      latest.textContent = "No I/O served yet.";
      return;
    }
    const points = samples.map((s) => ({ ...s, t: Date.parse(s.time) }));
    const last = points.at(-1);
    // The newest sample is the right edge: the server's clock, not the browser's.
    const end = last.t;
    const start = end - IO_WINDOW_MS;
    const xLabels = X_LABELS.map(([before, label]) => [end - before, label]);
    latest.textContent = `Last 5 s: ${ioLatestText(last)}`;
    latest.title = `The sample of ${new Date(end).toLocaleTimeString()}`;
    peakLine.textContent = `Peak of the last 10 min (highest 5-s sample): ${ioPeakText(points)}`;
    // Write first, read over it: a read line equal to the write line stays visible (dashed).
    const series = (key, name, format) => ({
      name, class: `io-${name}`, format,
      points: points.filter((p) => p[key] != null).map((p) => [p.t, Number(p[key]) || 0]),
    });
    const pair = (read, write, format) => [series(write, "write", format), series(read, "read", format)];
    const peak = (a, b) => Math.max(0, ...points.map((p) => Math.max(Number(p[a]) || 0, Number(p[b]) || 0)));
    drawnWidth = charts.clientWidth;
    const iops = ioScale(peak("readiops", "writeiops"), false);
    iopsBox.replaceChildren(h("figcaption", {}, "Operations per second"), lineChart({
      width: iopsBox.clientWidth, start, end, xLabels,
      title: `Read and write operations per second, last 10 minutes; last: read ${iopsText(last.readiops)}, write ${iopsText(last.writeiops)}`,
      scale: iops,
      series: pair("readiops", "writeiops", iopsText),
      attrs: {
        id: "iops-chart", "data-testid": "iops-chart", "data-points": points.length, "data-unit": iops.title,
        "data-latest-read-iops": last.readiops, "data-latest-write-iops": last.writeiops, "data-latest-time": last.time,
      },
    }));
    const rate = ioScale(peak("readthroughput", "writethroughput"), true);
    rateBox.replaceChildren(h("figcaption", {}, "Throughput"), lineChart({
      width: rateBox.clientWidth, start, end, xLabels,
      title: `Read and write bytes per second, last 10 minutes; last: read ${throughputText(last.readthroughput)}, write ${throughputText(last.writethroughput)}`,
      scale: rate,
      series: pair("readthroughput", "writethroughput", throughputText),
      attrs: {
        id: "throughput-chart", "data-testid": "throughput-chart", "data-points": points.length, "data-unit": rate.title,
        "data-latest-read-bps": last.readthroughput, "data-latest-write-bps": last.writethroughput, "data-latest-time": last.time,
      },
    }));
    // A period without reads (writes) has no latency of them: no point there.
    const latency = latencyScale(peak("readlatencyus", "writelatencyus"));
    latencyBox.replaceChildren(h("figcaption", {}, "Latency (mean per request)"), lineChart({
      width: latencyBox.clientWidth, start, end, xLabels,
      title: `Mean read and write latency, last 10 minutes; last: read ${latencyText(last.readlatencyus)}, write ${latencyText(last.writelatencyus)}`,
      scale: latency,
      series: pair("readlatencyus", "writelatencyus", latencyText),
      attrs: {
        id: "latency-chart", "data-testid": "latency-chart", "data-points": points.length, "data-unit": latency.title,
        "data-latest-read-us": last.readlatencyus ?? "", "data-latest-write-us": last.writelatencyus ?? "",
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
