// Numbers for people: 1.2k, 3.4 MiB, 1.2k/s, "3 min ago". The exact value goes in the
// element's title (and data-value) wherever one of these is shown.

/** 1234 → "1.2k", 999 → "999", 2500000 → "2.5M". */
export function count(n) {
  if (n === null || n === undefined) return "—";
  const abs = Math.abs(n);
  const units = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [size, unit] of units) {
    if (abs >= size) return `${trim(n / size)}${unit}`;
  }
  return Number.isInteger(n) ? String(n) : trim(n);
}

function trim(x) {
  const digits = Math.abs(x) >= 100 ? 0 : 1;
  return x.toFixed(digits).replace(/\.0$/, "");
}

/** A rate per second: "1.2k/s", "0/s". */
export const rate = (perSecond) => (perSecond === null ? "—" : `${count(perSecond)}/s`);

/** Bytes in binary units: "512 B", "3.4 MiB". */
export function bytes(n) {
  if (n === null || n === undefined) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${n} B` : `${trim(value)} ${units[unit]}`;
}

/** A duration in ms: "250 ms", "30 s", "5 min", "2 h", "3 d". */
export function duration(ms) {
  if (ms === null || ms === undefined) return "—";
  const abs = Math.abs(ms);
  if (abs < 1000) return `${Math.round(ms)} ms`;
  if (abs < 60e3) return `${trim(ms / 1e3)} s`;
  if (abs < 3600e3) return `${trim(ms / 60e3)} min`;
  if (abs < 86400e3) return `${trim(ms / 3600e3)} h`;
  return `${trim(ms / 86400e3)} d`;
}

/** A Unix-ms time relative to now: "3 min ago", "in 20 s", "just now". */
export function ago(atMs, nowMs = Date.now()) {
  if (atMs === null || atMs === undefined) return "—";
  const delta = nowMs - atMs;
  if (Math.abs(delta) < 1000) return "just now";
  const rounded = duration(Math.abs(delta)).replace(/\.\d+/, "");
  return delta > 0 ? `${rounded} ago` : `in ${rounded}`;
}

/** A deadline relative to now: "in 12 s", "in 5 min", "expired" once it has passed. */
export function deadline(atMs, nowMs = Date.now()) {
  if (atMs === null || atMs === undefined) return "—";
  const left = atMs - nowMs;
  if (left <= 0) return "expired";
  if (left < 60e3) return `in ${Math.ceil(left / 1000)} s`;
  return `in ${duration(left).replace(/\.\d+/, "")}`;
}

/** The exact local time, for a title. */
export const exact = (atMs) => new Date(atMs).toLocaleString();

/** A payload as text, pretty JSON (when it parses) or hex, from its UTF-8 or base64 form. */
export function payload(text, base64, how) {
  const raw = base64 !== undefined && base64 !== null
    ? Uint8Array.from(atob(base64), (c) => c.charCodeAt(0))
    : new TextEncoder().encode(text ?? "");
  if (how === "hex") {
    const hex = Array.from(raw, (b) => b.toString(16).padStart(2, "0"));
    const lines = [];
    for (let i = 0; i < hex.length; i += 16) {
      lines.push(`${i.toString(16).padStart(6, "0")}  ${hex.slice(i, i + 16).join(" ")}`);
    }
    return lines.join("\n");
  }
  const decoded = text ?? new TextDecoder("utf-8", { fatal: false }).decode(raw);
  if (how === "json") {
    try {
      return JSON.stringify(JSON.parse(decoded), null, 2);
    } catch {
      return `${decoded}\n(not JSON)`;
    }
  }
  return base64 ? `${decoded}\n(not UTF-8; shown with replacement characters)` : decoded;
}
