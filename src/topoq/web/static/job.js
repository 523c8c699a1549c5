// One job (#job/<id>): what it asks for, where it runs (its pods' nodes and ranks, by
// domain), why it waits, its phase history with causes, and its pods' latest output, live;
// cancel, hold and release where the token may.

import { api } from "/ui/api.js";
import { age, el, show, teamColour } from "/ui/draw.js";

const LOG_TAIL_BYTES = 4096;
const WRITERS = new Set(["admin", "team-admin", "member"]);

export async function drawJob(main, me, refresh, id) {
  const job = await api(`/jobs/${encodeURIComponent(id)}`);
  const [why, logs] = await Promise.all([
    job.phase === "pending" ? api(`/jobs/${encodeURIComponent(id)}/explain`) : null,
    job.allocation || job.phase === "succeeded" || job.phase === "failed"
      ? api(`/jobs/${encodeURIComponent(id)}/logs?tail_bytes=${LOG_TAIL_BYTES}`).catch(() => null)
      : null,
  ]);
  const mayAct = WRITERS.has(me.role) && (me.role === "admin" || me.teams.includes(job.team));
  const act = (verb) => async () => {
    await api(`/jobs/${encodeURIComponent(id)}/${verb}`, { method: "POST" });
    refresh();
  };
  const finished = ["succeeded", "failed", "cancelled"].includes(job.phase);
  show(
    main,
    el("p", {}, el("a", { href: "#queue" }, "← queue"), " · ", el("a", { href: "#topology" }, "topology")),
    el("section", { class: "card job", "data-testid": "job", "data-job": job.id },
      el("h1", {}, job.id, " ",
        el("span", { class: `badge phase-${job.phase}`, "data-phase": job.phase }, job.phase)),
      el("p", {},
        el("span", { class: "swatch", style: { background: teamColour(job.team) } }),
        `team ${job.team} · ${job.gpus} GPUs in ${job.pods} pod(s) · priority ${job.priorityClass ?? "default"}`,
        job.user ? ` · submitted by ${job.user}` : "",
        job.submittedAt ? ` at ${new Date(job.submittedAt * 1000).toLocaleString()}` : ""),
      mayAct && !finished
        ? el("p", { class: "actions" },
            el("button", { type: "button", class: "action", "data-action": "cancel", onclick: act("cancel") }, "Cancel"),
            job.phase === "pending" && !job.held
              ? el("button", { type: "button", class: "action", "data-action": "hold", onclick: act("hold") }, "Hold")
              : null,
            job.held
              ? el("button", { type: "button", class: "action", "data-action": "release", onclick: act("release") }, "Release")
              : null)
        : null,
    ),
    why ? waiting(why) : null,
    job.allocation ? placement(job) : null,
    el("section", { class: "card" }, el("h2", {}, "Asks for"),
      el("table", {}, el("thead", {}, el("tr", {}, ...["Pod set", "Pods", "Each", "Topology", "Node selector", "Image"].map((h) => el("th", {}, h)))),
        el("tbody", {}, ...job.workload.podSets.map((set) => el("tr", {},
          el("td", {}, set.name), el("td", { class: "number" }, set.count),
          el("td", {}, Object.entries(set.requests).map(([name, amount]) => `${amount} ${name}`).join(", ")),
          el("td", {}, topologyText(set.topology)),
          el("td", {}, Object.entries(set.nodeSelector ?? {}).map(([key, value]) => `${key}=${value}`).join(", ") || "—"),
          el("td", {}, set.image ?? "—"))))),
      el("p", { "data-testid": "terms" },
        `time limit ${job.timeLimitS ? age(job.timeLimitS) : "its class's, or none"}`,
        ` · retries ${job.failures} of ${job.maxRetry} used · preempted ${job.preemptions} time(s)`,
        job.dependencies.length
          ? ` · runs after ${job.dependencies.map((dep) => `${dep.job} (${dep.kind})`).join(", ")}` : "")),
    el("section", { class: "card", "data-testid": "history" }, el("h2", {}, "History"),
      el("ol", { class: "history" }, ...job.history.map((change) => el("li", { "data-phase": change.phase },
        el("time", {}, new Date(change.at * 1000).toLocaleTimeString()), " ",
        el("strong", {}, change.phase), change.cause ? ` — ${change.cause}` : "")))),
    logs ? el("section", { class: "card", "data-testid": "logs" },
      el("h2", {}, `Output, attempt ${logs.attempt} (the last ${LOG_TAIL_BYTES} bytes)`),
      el("pre", { class: "logs" }, logs.text || "(nothing yet)")) : null,
  );
}

function waiting(why) {
  return el("section", { class: "card", "data-testid": "why" },
    el("h2", {}, "Why it waits"),
    el("p", {}, el("code", { "data-reason": why.reason ?? "" }, why.reason ?? ""), " ", why.message),
    Object.keys(why.numbers).length
      ? el("dl", { class: "span" }, ...Object.entries(why.numbers).flatMap(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]))
      : null,
    why.remedies.length
      ? [el("h3", {}, "What would let it start"), el("ul", {}, ...why.remedies.map((remedy) => el("li", {}, remedy)))]
      : null);
}

function placement(job) {
  const byDomain = new Map();
  for (const assignment of job.allocation.assignments) {
    const path = Object.entries(assignment.domain)
      .filter(([level]) => level !== "kubernetes.io/hostname") // nodes are drawn as boxes
      .map(([, value]) => value)
      .join(" / ") || "(cluster)";
    if (!byDomain.has(path)) byDomain.set(path, []);
    byDomain.get(path).push(assignment);
  }
  return el("section", { class: "card", "data-testid": "placement" },
    el("h2", {}, "Where it runs"),
    el("p", {}, "Spans ", Object.entries(job.allocation.span).map(([level, count]) => `${count} ${level.split("/").pop()}`).join(", ")),
    el("div", { class: "mini-map" }, ...[...byDomain].map(([path, assignments]) =>
      el("div", { class: "domain" }, el("div", { class: "domain-name" }, path),
        el("div", { class: "children" }, ...assignments.map((a) =>
          el("div", { class: "node", "data-node": a.node ?? "" },
            el("div", { class: "node-name" }, a.node ?? "?"),
            el("div", { class: "ranks" }, a.count > 1 ? `${a.podSet} ranks ${a.firstRank}–${a.firstRank + a.count - 1}` : `${a.podSet} rank ${a.firstRank}`))))))));
}

function topologyText(topology) {
  if (!topology) return "any";
  const parts = [];
  if (topology.required) parts.push(`required in one ${topology.required.split("/").pop()}`);
  if (topology.preferred) parts.push(`preferred in one ${topology.preferred.split("/").pop()}`);
  return parts.join("; ") || "any";
}
