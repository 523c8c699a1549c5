// Teams against their quotas: per team and flavor, the guarantee, what is in use (and of it
// borrowed), and what the team lends, as bars on one scale; its weight, its fair-share
// position (under fair share: the lowest is served first) and its waiting jobs.

import { api } from "/ui/api.js";
import { el, gpuHoursBy, learnTeams, show, teamColour } from "/ui/draw.js";

const editor = { team: null, document: null, lint: null };

export async function drawTeams(main, me, refresh) {
  if (editor.team) return; // the quota editor stays as the admin left it until saved or closed
  const [teams, usage] = await Promise.all([api("/teams"), api("/reports/usage")]);
  learnTeams(teams.map((team) => team.name));
  const ranked = teams.filter((team) => team.fairSharePosition !== null)
    .map((team) => team.fairSharePosition);
  const fair = ranked.length > 0;
  const scale = Math.max(1, ...teams.flatMap((team) => team.flavors.map(
    (flavor) => Math.max(flavor.guaranteeGpus + flavor.borrowedGpus, flavor.usedGpus))));
  show(
    main,
    el("table", { class: "teams", "data-testid": "teams" },
      el("thead", {}, el("tr", {},
        ...["Team", "Flavor", "Guarantee", "In use", "Borrowed", "Lent", "", "Weight",
          ...(fair ? ["Fair-share position"] : []), "Waiting",
          ...(me.role === "admin" ? [""] : [])].map((name) => el("th", {}, name)))),
      el("tbody", {}, ...teams.flatMap((team) => rows(team, scale, fair ? ranked : null, me.role === "admin"
        ? () => openEditor(main, team.name, refresh) : null))),
    ),
    el("p", { class: "note" },
      "Bars on one scale: the outline is the guarantee, the fill what the team uses ",
      "(hatched: borrowed from others); lent is what others use of its guarantee.",
      fair ? " Fair-share position: the team's weighted borrowed share now plus its decayed "
        + "usage over its weight; of jobs of one priority waiting to borrow, the team lowest "
        + "goes first (— : weight 0, served last)." : ""),
    week(usage),
  );
}

// GPU-hours of the last 7 days per team, inside its guarantee and borrowed (GET /reports/usage).
function week(usage) {
  const byTeam = gpuHoursBy(usage, "team");
  const most = Math.max(1, ...[...byTeam.values()].map((h) => h.guarantee + h.borrowed));
  return el("section", { class: "card", "data-testid": "week" },
    el("h2", {}, "GPU-hours, the last 7 days"),
    byTeam.size === 0 ? el("p", { class: "note" }, "No GPU held in the window yet.") : el("table", {},
      el("thead", {}, el("tr", {}, ...["Team", "In guarantee", "Borrowed", ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...[...byTeam].sort().map(([team, hours]) => el("tr", { "data-team": team },
        el("td", {}, el("span", { class: "swatch", style: { background: teamColour(team) } }), team),
        el("td", { class: "number", "data-figure": "hours-guarantee" }, hours.guarantee.toFixed(2)),
        el("td", { class: "number", "data-figure": "hours-borrowed" }, hours.borrowed.toFixed(2)),
        el("td", { class: "bar-cell" }, el("div", { class: "quota-bar" },
          el("div", { class: "used", style: { width: `${(100 * hours.guarantee) / most}%`, background: teamColour(team) } }),
          el("div", { class: "borrowed", style: { left: `${(100 * hours.guarantee) / most}%`, width: `${(100 * hours.borrowed) / most}%`, background: teamColour(team) } }))))))));
}

function rows(team, scale, ranked, edit) {
  const waiting = team.jobs.pending ?? 0;
  const flavors = team.flavors.length ? team.flavors : [null];
  return flavors.map((flavor, index) => el("tr", { "data-team": team.name, "data-flavor": flavor?.flavor ?? "" },
    index === 0
      ? el("th", { scope: "row", rowspan: flavors.length },
          el("span", { class: "swatch", style: { background: teamColour(team.name) } }), team.name)
      : null,
    el("td", {}, flavor?.flavor ?? "—"),
    el("td", { class: "number", "data-figure": "guarantee" }, flavor?.guaranteeGpus ?? 0),
    el("td", { class: "number", "data-figure": "used" }, flavor?.usedGpus ?? 0),
    el("td", { class: "number", "data-figure": "borrowed" }, flavor?.borrowedGpus ?? 0),
    el("td", { class: "number", "data-figure": "lent" }, flavor?.lentGpus ?? 0),
    el("td", { class: "bar-cell" }, flavor ? bar(team.name, flavor, scale) : null),
    index === 0 ? el("td", { class: "number", rowspan: flavors.length }, team.fairShareWeight) : null,
    index === 0 && ranked ? el("td", { class: "number", rowspan: flavors.length, "data-figure": "fair-share" },
      team.fairSharePosition === null ? "—"
        : `${team.fairSharePosition.toFixed(3)} (${ordinal(rankOf(team, ranked))})`) : null,
    index === 0
      ? el("td", { class: "number", rowspan: flavors.length, "data-figure": "waiting" }, waiting)
      : null,
    index === 0 && edit
      ? el("td", { rowspan: flavors.length },
          el("button", { type: "button", class: "action", "data-action": "edit-quota", onclick: edit }, "Edit quota"))
      : null,
  ));
}

function bar(team, flavor, scale) {
  const width = (gpus) => `${(100 * gpus) / scale}%`;
  const own = Math.max(0, flavor.usedGpus - flavor.borrowedGpus);
  return el("div", { class: "quota-bar", title:
      `guarantee ${flavor.guaranteeGpus}, in use ${flavor.usedGpus} (borrowed ${flavor.borrowedGpus}), lent ${flavor.lentGpus}` },
    el("div", { class: "guarantee", style: { width: width(flavor.guaranteeGpus) } }),
    el("div", { class: "used", style: { width: width(own), background: teamColour(team) } }),
    el("div", { class: "borrowed", style: { left: width(own), width: width(flavor.borrowedGpus), background: teamColour(team) } }),
  );
}

// The quota editor (admins): the team's guarantee per flavor (instances) and borrow limit,
// linted on the cluster's nodes before it can be saved as the next policy version.
async function openEditor(main, name, refresh) {
  const policy = await api("/policy");
  editor.team = name;
  editor.document = structuredClone(policy.document);
  editor.lint = null;
  const close = () => { editor.team = null; refresh(); };
  const spec = editor.document.teams.find((team) => team.name === name);
  const findings = el("div", { "data-testid": "lint" });
  const save = el("button", { type: "button", class: "action", "data-action": "save-quota", disabled: true }, "Save");
  const changed = () => { editor.lint = null; save.disabled = true; findings.replaceChildren(); };
  const number = (value, onchange, label) => el("input", {
    type: "number", min: "0", step: "1", value: String(value ?? 0), "aria-label": label,
    onchange: (event) => { onchange(Number(event.target.value)); changed(); } });
  const check = async () => {
    try {
      editor.lint = await api("/policy/lint", { method: "POST", body: editor.document });
    } catch (failure) {
      show(findings, el("p", { class: "error", "data-severity": "error" }, failure.message));
      return;
    }
    save.disabled = !editor.lint.accepted;
    show(findings,
      el("p", { "data-accepted": String(editor.lint.accepted) }, editor.lint.accepted
        ? "The policy lint finds no error: it can be saved."
        : "The policy lint finds an error: it cannot be saved as it is."),
      editor.lint.findings.length
        ? el("ul", {}, ...editor.lint.findings.map((finding) => el("li", { "data-severity": finding.severity },
            el("strong", {}, `${finding.severity} ${finding.code}: `), finding.message, ` (${finding.hint})`)))
        : null);
  };
  save.addEventListener("click", async () => {
    try {
      await api("/policy", { method: "PUT", body: editor.document });
      close();
    } catch (failure) {
      show(findings, el("p", { class: "error" }, failure.message));
    }
  });
  show(main,
    el("section", { class: "card", "data-testid": "quota-editor", "data-team": name },
      el("h2", {}, `Quota of team ${name}`),
      el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "Flavor"), el("th", {}, "Guarantee (instances)"))),
        el("tbody", {}, ...(spec.quotas ?? []).map((quota) => el("tr", { "data-flavor": quota.flavor },
          el("td", {}, quota.flavor),
          el("td", {}, number(quota.instances, (value) => { quota.instances = value; }, `${quota.flavor} instances`)))))),
      spec.sharing === "LendAndBorrow"
        ? el("p", {}, el("label", {}, "Borrow limit (% of the guarantee) ",
            number(spec.borrowLimitPercent, (value) => { spec.borrowLimitPercent = value; }, "borrow limit percent")))
        : null,
      el("p", { class: "actions" },
        el("button", { type: "button", class: "action", "data-action": "check-quota", onclick: check }, "Check"),
        save,
        el("button", { type: "button", "data-action": "close-editor", onclick: close }, "Close")),
      findings,
      el("p", { class: "note" }, "Saving sets the next policy version (kept, audited, and undone with a rollback).")));
}

// 1 + the teams standing strictly lower: teams at one position share its rank.
function rankOf(team, positions) {
  return 1 + positions.filter((position) => position < team.fairSharePosition).length;
}

function ordinal(n) {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? "th" : ({ 1: "st", 2: "nd", 3: "rd" }[n % 10] ?? "th");
  return `${n}${suffix}`;
}
