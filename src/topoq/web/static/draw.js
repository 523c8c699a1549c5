// Small helpers to build the views' elements (no HTML strings: text is always text).

export function el(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") element.className = value;
    else if (name === "style") Object.assign(element.style, value);
    else if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name.startsWith("data-")) element.setAttribute(name, String(value));
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

// A categorical palette (Tableau 10, then 10 more), each team its own colour while there are
// colours enough: the teams are numbered in name order as the views learn them from /teams,
// so a team has the same colour on every view.
const PALETTE = [
  "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
  "#9c755f", "#bab0ac", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
  "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
];
const colours = new Map();

export function learnTeams(names) {
  for (const name of [...names].sort()) {
    if (!colours.has(name)) colours.set(name, PALETTE[colours.size % PALETTE.length]);
  }
}

export function teamColour(team) {
  if (!colours.has(team)) learnTeams([team]);
  return colours.get(team);
}

// ``parent``'s children replaced by ``children``, leaving out the absent ones.
export function show(parent, ...children) {
  parent.replaceChildren(...children.flat().filter((child) => child !== null && child !== undefined && child !== false));
}

export function percent(part, whole) {
  return whole > 0 ? Math.round((100 * part) / whole) : 0;
}

export function age(seconds) {
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172800) return `${Math.round(seconds / 3600)} h`;
  return `${Math.round(seconds / 86400)} d`;
}

// GPU-hours of a usage report (GET /reports/usage) summed by ``key`` of its rows (team or
// day): inside the guarantee and borrowed.
export function gpuHoursBy(usage, key) {
  const sums = new Map();
  for (const row of usage.days) {
    const hours = sums.get(row[key]) ?? { guarantee: 0, borrowed: 0 };
    hours.guarantee += row.gpuHoursInGuarantee;
    hours.borrowed += row.gpuHoursBorrowed;
    sums.set(row[key], hours);
  }
  return sums;
}
