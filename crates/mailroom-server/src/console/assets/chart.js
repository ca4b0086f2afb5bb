// A small line chart of successive samples, drawn as SVG (no library).

const SVG = "http://www.w3.org/2000/svg";

/** An SVG sparkline of `values` (oldest first), `width` × `height` pixels. */
export function sparkline(values, label, width = 120, height = 28) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "chart");
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", label);
  const base = document.createElementNS(SVG, "line");
  base.setAttribute("class", "base");
  base.setAttribute("x1", 0);
  base.setAttribute("x2", width);
  base.setAttribute("y1", height - 1);
  base.setAttribute("y2", height - 1);
  svg.append(base);
  if (values.length > 1) {
    const top = Math.max(...values, 1);
    const step = width / (values.length - 1);
    const points = values.map((v, i) => `${(i * step).toFixed(1)},${(height - 2 - (v / top) * (height - 4)).toFixed(1)}`);
    const line = document.createElementNS(SVG, "polyline");
    line.setAttribute("points", points.join(" "));
    svg.append(line);
  }
  return svg;
}

/**
 * Successive samples of counters, kept per key, that answer rates (per second between
 * the last two samples) and the history a chart draws.
 */
export class Samples {
  constructor(kept = 40) {
    this.kept = kept;
    this.series = new Map();
  }

  /** Records `value` for `key` at `atMs` (default now). */
  add(key, value, atMs = performance.now()) {
    const list = this.series.get(key) || [];
    list.push([atMs, value]);
    if (list.length > this.kept) list.shift();
    this.series.set(key, list);
  }

  /** The rate per second over the last two samples, or null before there are two. */
  rate(key) {
    const list = this.series.get(key) || [];
    if (list.length < 2) return null;
    const [[t0, v0], [t1, v1]] = list.slice(-2);
    return t1 > t0 ? Math.max(0, ((v1 - v0) * 1000) / (t1 - t0)) : null;
  }

  /** The rates between each pair of samples, oldest first. */
  rates(key) {
    const list = this.series.get(key) || [];
    const out = [];
    for (let i = 1; i < list.length; i += 1) {
      const [t0, v0] = list[i - 1];
      const [t1, v1] = list[i];
      out.push(t1 > t0 ? Math.max(0, ((v1 - v0) * 1000) / (t1 - t0)) : 0);
    }
    return out;
  }

  /** The values themselves, oldest first. */
  values(key) {
    return (this.series.get(key) || []).map(([, v]) => v);
  }
}
