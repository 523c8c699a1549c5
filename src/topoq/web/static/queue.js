// The queue: pending jobs (the newest first, as the API lists them) with team, priority,
// size, age, expected start where known, and why each waits in words.

import { api } from "/ui/api.js";
import { age, el, learnTeams, show, teamColour } from "/ui/draw.js";

const PAGE = 500;

export async function drawQueue(main) {
  const [listed, teams] = await Promise.all([api(`/jobs?phase=pending&limit=${PAGE}`), api("/teams")]);
  learnTeams(teams.map((team) => team.name));
  const now = Date.now() / 1000;
  show(
    main,
    el("p", { class: "summary" }, `${listed.total} job(s) waiting`,
      listed.total > listed.items.length ? ` (the newest ${listed.items.length} shown)` : ""),
    el("table", { class: "queue", "data-testid": "queue" },
      el("thead", {}, el("tr", {},
        ...["Job", "Team", "Priority", "GPUs", "Waiting", "Expected start", "Why it waits"]
          .map((name) => el("th", {}, name)))),
      el("tbody", {}, ...listed.items.map((job) => el("tr", { "data-job": job.id },
        el("td", {}, job.visible ? el("a", { href: `#job/${encodeURIComponent(job.id)}` }, job.id) : job.id,
          job.held ? el("span", { class: "badge" }, "held") : null),
        el("td", {}, el("span", { class: "swatch", style: { background: teamColour(job.team) } }), job.team),
        el("td", {}, job.visible ? (job.priorityClass ?? "default") : "—"),
        el("td", { class: "number" }, job.gpus),
        el("td", { class: "number" }, job.submittedAt ? age(now - job.submittedAt) : "—"),
        el("td", {}, job.etaAt ? new Date(job.etaAt * 1000).toLocaleTimeString() : "—"),
        el("td", { class: "reason", "data-reason": job.reason ?? "" },
          job.visible
            ? [el("code", {}, job.reason ?? "not tried yet"), job.reasonMessage ? ` ${job.reasonMessage}` : ""]
            : "another team's job",
        ),
      ))),
    ),
  );
}
