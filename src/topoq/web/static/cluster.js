// The cluster (#cluster): capacity now, the GPUs in use hour by hour over the last day and
// GPU-hours per day against what the cluster offers, admissions and preemptions over the last
// hour, the nodes that are not healthy, and the policy in force with its versions. A team's token sees its own teams' part of the
// figures that are per job (the API decides).

import { api } from "/ui/api.js";
import { el, gpuHoursBy, percent, show } from "/ui/draw.js";

const BUCKET_S = 300;
const WINDOW_S = 3600;
const HOUR_S = 3600;
const HOURS_SHOWN = 24;

export async function drawCluster(main, me) {
  const [topology, nodes, usage, events, policy, versions] = await Promise.all([
    api("/topology"),
    api("/nodes"),
    api("/reports/usage?hourly=true"),
    api(`/events?since_s=${WINDOW_S}&limit=1000`),
    api("/policy"),
    api("/policy/versions"),
  ]);
  const failed = nodes.filter((node) => !node.ready);
  const cordoned = nodes.filter((node) => node.ready && node.cordoned);
  show(
    main,
    el("section", { class: "card", "data-testid": "capacity" },
      el("h2", {}, "Capacity now"),
      el("p", {}, `${nodes.length} nodes, ${topology.gpus} GPUs: `,
        el("strong", { "data-figure": "gpus-used" }, topology.gpusUsed), ` in use (${percent(topology.gpusUsed, topology.gpus)}%), `,
        el("strong", { "data-figure": "gpus-free" }, topology.gpusFree), " free on schedulable nodes; ",
        el("span", { "data-figure": "nodes-failed" }, failed.length), " failed, ",
        el("span", { "data-figure": "nodes-cordoned" }, cordoned.length), " cordoned"),
      el("div", { class: "occupancy wide" },
        el("div", { class: "occupancy-used", style: { width: `${percent(topology.gpusUsed, topology.gpus)}%` } }))),
    hourly(usage, topology.gpus, me),
    gpuHours(usage, topology.gpus, me),
    timeline(events, me),
    health(failed, cordoned),
    el("section", { class: "card", "data-testid": "policy" },
      el("h2", {}, `Policy in force: ${policy.document?.metadata?.name ?? "(none)"}, version ${policy.version ?? "—"}`),
      el("table", {}, el("thead", {}, el("tr", {}, ...["Version", "Set by", "At"].map((h) => el("th", {}, h)))),
        el("tbody", {}, ...versions.slice().reverse().slice(0, 20).map((v) => el("tr", { "data-version": v.version },
          el("td", { class: "number" }, v.version), el("td", {}, v.actor), el("td", {}, new Date(v.at * 1000).toLocaleString())))))),
  );
}

function gpuHours(usage, gpus, me) {
  const days = gpuHoursBy(usage, "day");
  const offered = gpus * 24;
  const scope = me.role === "admin" ? "every team" : `teams ${me.teams.join(", ")}`;
  return el("section", { class: "card", "data-testid": "gpu-hours" },
    el("h2", {}, `GPU-hours per day, the last 7 days (${scope})`),
    days.size === 0 ? el("p", { class: "note" }, "No GPU held in the window yet.") : el("table", {},
      el("thead", {}, el("tr", {}, ...["Day (UTC)", "In guarantee", "Borrowed", "Of a day's capacity", ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...[...days].sort().map(([day, hours]) => el("tr", { "data-day": day },
        el("td", {}, day),
        el("td", { class: "number" }, hours.guarantee.toFixed(1)),
        el("td", { class: "number" }, hours.borrowed.toFixed(1)),
        el("td", { class: "number" }, `${percent(hours.guarantee + hours.borrowed, offered)}%`),
        el("td", { class: "bar-cell" }, el("div", { class: "occupancy" },
          el("div", { class: "occupancy-used", style: { width: `${percent(hours.guarantee + hours.borrowed, offered)}%` } }))))))));
}

// The GPUs in use, on average, in each of the last HOURS_SHOWN UTC hours (the hour under way
// over its part gone by), against the cluster's GPUs now.
function hourly(usage, gpus, me) {
  const now = Date.now() / 1000;
  const current = Math.floor(now / HOUR_S) * HOUR_S;
  const byStart = new Map(usage.hours.map((hour) => [hour.start, hour]));
  const slots = Array.from({ length: HOURS_SHOWN }, (_, index) => {
    const start = current - (HOURS_SHOWN - 1 - index) * HOUR_S;
    const hour = byStart.get(start);
    const spent = Math.max(1, Math.min(HOUR_S, now - start)) / HOUR_S;
    const used = hour ? (hour.gpuHoursInGuarantee + hour.gpuHoursBorrowed) / spent : 0;
    const borrowed = hour ? hour.gpuHoursBorrowed / spent : 0;
    return { start, used, borrowed };
  });
  const scope = me.role === "admin" ? "every team" : `teams ${me.teams.join(", ")}`;
  const label = (slot) => new Date(slot.start * 1000).toISOString().slice(11, 16);
  return el("section", { class: "card", "data-testid": "utilisation" },
    el("h2", {}, `GPUs in use, hour by hour, the last day (${scope})`),
    el("div", { class: "timeline" }, ...slots.map((slot) => el("div", {
        class: "slot", "data-hour": slot.start, "data-gpus": slot.used,
        title: `${label(slot)} UTC: ${slot.used.toFixed(1)} of ${gpus} GPUs in use on average (${slot.borrowed.toFixed(1)} borrowed)` },
      el("div", { class: "used", style: { height: `${percent(slot.used, gpus)}%` } })))),
    el("p", { class: "note" }, `UTC hours, oldest on the left, from ${label(slots[0])}: `,
      "each bar is the GPUs held on average over the hour (the hour under way: so far) ",
      `against the cluster's ${gpus} GPUs.`));
}

function timeline(events, me) {
  const now = Date.now() / 1000;
  const buckets = Array.from({ length: WINDOW_S / BUCKET_S }, () => ({ admitted: 0, preempted: 0 }));
  for (const event of events) {
    const index = Math.floor((now - event.at) / BUCKET_S);
    if (index < 0 || index >= buckets.length) continue;
    const slot = buckets[buckets.length - 1 - index];
    if (event.phase === "admitted") slot.admitted += 1;
    if (event.phase === "preempting") slot.preempted += 1;
  }
  const most = Math.max(1, ...buckets.map((b) => Math.max(b.admitted, b.preempted)));
  const totals = buckets.reduce((sum, b) => ({ admitted: sum.admitted + b.admitted, preempted: sum.preempted + b.preempted }), { admitted: 0, preempted: 0 });
  return el("section", { class: "card", "data-testid": "timeline" },
    el("h2", {}, "Admissions and preemptions, the last hour"),
    el("p", {}, el("span", { "data-figure": "admitted" }, totals.admitted), " admitted, ",
      el("span", { "data-figure": "preempted" }, totals.preempted), " preempted",
      me.role === "admin" ? "" : " (your teams' jobs)"),
    el("div", { class: "timeline" }, ...buckets.map((b, index) => el("div", { class: "slot",
        title: `${(buckets.length - index) * BUCKET_S / 60} to ${(buckets.length - index - 1) * BUCKET_S / 60} min ago: ${b.admitted} admitted, ${b.preempted} preempted` },
      el("div", { class: "admitted", style: { height: `${percent(b.admitted, most)}%` } }),
      el("div", { class: "preempted", style: { height: `${percent(b.preempted, most)}%` } })))),
    el("p", { class: "note" }, "Five-minute slots, oldest on the left: admissions in blue, preemptions in red."));
}

function health(failed, cordoned) {
  const rows = [...failed.map((node) => [node, "failed"]), ...cordoned.map((node) => [node, "cordoned"])];
  return el("section", { class: "card", "data-testid": "health" },
    el("h2", {}, "Nodes that take no new work"),
    rows.length === 0 ? el("p", {}, "Every node is ready and schedulable.") : el("table", {},
      el("thead", {}, el("tr", {}, ...["Node", "State", "Jobs on it"].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...rows.map(([node, state]) => el("tr", { "data-node": node.name, "data-state": state },
        el("td", {}, node.name), el("td", {}, state), el("td", {}, node.jobs.join(", ") || "—"))))));
}
