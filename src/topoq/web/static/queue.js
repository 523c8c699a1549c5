// The queue: the waiting jobs in scheduling order (GET /queue) — the next cycle's turn, team,
// priority, size, topology asked for, age, expected start where known, why each waits in
// words with its numbers and what would let it start; held jobs and jobs waiting on another
// last. Other teams' jobs show their id, team, size and turn only.

import { api } from "/ui/api.js";
import { age, el, learnTeams, show, teamColour } from "/ui/draw.js";

const PAGE = 500;

export async function drawQueue(main) {
  const [queue, teams] = await Promise.all([api(`/queue?limit=${PAGE}`), api("/teams")]);
  learnTeams(teams.map((team) => team.name));
  const now = Date.now() / 1000;
  show(
    main,
    el("p", { class: "summary" },
      `${queue.total} job(s) waiting, ${queue.inLine} in line`,
      queue.total > queue.items.length ? ` (the first ${queue.items.length} shown)` : ""),
    el("table", { class: "queue", "data-testid": "queue" },
      el("thead", {}, el("tr", {},
        ...["#", "Job", "Team", "Priority", "GPUs", "Topology", "Waiting", "Expected start", "Why it waits"]
          .map((name) => el("th", {}, name)))),
      el("tbody", {}, ...queue.items.map((job) => el("tr", { "data-job": job.id, "data-position": job.position ?? "" },
        el("td", { class: "number", title: job.position ? "its turn in the next cycle" : "not in line" },
          job.position ?? "—"),
        el("td", {}, job.visible ? el("a", { href: `#job/${encodeURIComponent(job.id)}` }, job.id) : job.id,
          job.held ? el("span", { class: "badge" }, "held") : null),
        el("td", {}, el("span", { class: "swatch", style: { background: teamColour(job.team) } }), job.team),
        el("td", {}, job.visible ? (job.priorityClass ?? "default") : "—"),
        el("td", { class: "number" }, job.gpus),
        el("td", {}, job.topology ?? "—"),
        el("td", { class: "number" }, job.submittedAt ? age(now - job.submittedAt) : "—"),
        el("td", {}, job.etaAt ? new Date(job.etaAt * 1000).toLocaleTimeString() : "—"),
        el("td", { class: "reason", "data-reason": job.reason ?? "" }, job.visible ? why(job) : "another team's job"),
      ))),
    ),
  );
}

// The reason in words, the dependencies still open, and what would let the job start.
function why(job) {
  const open = (job.waitingOn ?? []).map((dep) => `${dep.kind} ${dep.job}`);
  return [
    el("code", {}, job.reason ?? "not tried yet"),
    job.reasonMessage ? ` ${job.reasonMessage}` : "",
    open.length ? ` (waits on ${open.join(", ")})` : "",
    job.remedies?.length
      ? el("ul", { class: "remedies", "data-testid": "remedies" }, ...job.remedies.map((r) => el("li", {}, r)))
      : null,
  ];
}
