// The topology map: the network tree as nested domains, each node a box of GPU cells coloured
// by the team of the job on them; failed and cordoned nodes marked; large domains collapse to
// occupancy bars. Click a GPU to select its job (all its GPUs light up, its span per level is
// shown); click a node's name for its state and, for admins, cordon and uncordon.

import { api } from "/ui/api.js";
import { el, learnTeams, percent, show, teamColour } from "/ui/draw.js";

const HOSTNAME = "kubernetes.io/hostname";
const COLLAPSE_ABOVE = 128; // nodes: a larger domain starts as an occupancy bar

const state = { toggled: new Set(), job: null, node: null, jobDetail: null, draining: null };

export async function drawTopology(main, me, refresh) {
  const [topology, nodes, teamList] = await Promise.all([api("/topology"), api("/nodes"), api("/teams")]);
  learnTeams(teamList.map((team) => team.name));
  if (state.job && (!state.jobDetail || state.jobDetail.id !== state.job)) {
    state.jobDetail = await api(`/jobs/${encodeURIComponent(state.job)}`).catch(() => null);
  }
  const levels = topology.levels.filter((level) => level !== HOSTNAME);
  const root = grouped(nodes, levels);
  const failed = nodes.filter((node) => !node.ready).length;
  const cordoned = nodes.filter((node) => node.ready && node.cordoned).length;
  const teams = [...new Set(nodes.flatMap((node) => node.holders.map((h) => h.team)))].sort();
  show(
    main,
    el(
      "section",
      { class: "summary", "data-testid": "topology-summary" },
      el("strong", {}, topology.name),
      ` · ${nodes.length} nodes · ${topology.gpusUsed} of ${topology.gpus} GPUs in use`,
      ` (${percent(topology.gpusUsed, topology.gpus)}%) · ${topology.gpusFree} free`,
      failed ? el("span", { class: "badge failed" }, `${failed} failed`) : null,
      cordoned ? el("span", { class: "badge cordoned" }, `${cordoned} cordoned`) : null,
    ),
    legend(teams),
    el("div", { class: "map-and-panel" },
      el("section", { class: "map", "data-testid": "map" },
        ...root.children.map((domain) => drawDomain(domain, levels, 0, refresh))),
      panel(nodes, me, refresh),
    ),
    topology.outside.length
      ? el("p", { class: "note" }, `${topology.outside.length} node(s) outside the tree: `,
          topology.outside.map((node) => `${node.name} (${node.reason})`).join(", "))
      : null,
  );
}

function grouped(nodes, levels) {
  const root = { path: "", value: "", children: [], nodes: [], byValue: new Map() };
  for (const node of nodes) {
    let domain = root;
    for (const level of levels) {
      const value = node.labels[level] ?? "(none)";
      if (!domain.byValue.has(value)) {
        const path = domain.path ? `${domain.path}/${value}` : value;
        const child = { path, value, level, children: [], nodes: [], byValue: new Map() };
        domain.byValue.set(value, child);
        domain.children.push(child);
      }
      domain = domain.byValue.get(value);
    }
    domain.nodes.push(node);
  }
  const sort = (domain) => {
    domain.children.sort((a, b) => a.value.localeCompare(b.value, undefined, { numeric: true }));
    domain.nodes.sort((a, b) => a.name.localeCompare(b.name, undefined, { numeric: true }));
    domain.children.forEach(sort);
  };
  sort(root);
  return root;
}

function totals(domain) {
  let gpus = 0, used = 0, count = 0;
  const walk = (d) => {
    for (const node of d.nodes) { gpus += node.gpus; used += node.gpusUsed; count += 1; }
    d.children.forEach(walk);
  };
  walk(domain);
  // shares of a GPU are thousandths: summing them as floats must not show 0.30000000000000004
  return { gpus, used: Math.round(used * 1000) / 1000, count };
}

function drawDomain(domain, levels, depth, refresh) {
  const { gpus, used, count } = totals(domain);
  const collapsedByDefault = count > COLLAPSE_ABOVE;
  const collapsed = collapsedByDefault !== state.toggled.has(domain.path);
  const levelName = domain.level.split("/").pop();
  const header = el(
    "button",
    {
      type: "button",
      class: "domain-name",
      "aria-expanded": String(!collapsed),
      onclick: () => {
        if (state.toggled.has(domain.path)) state.toggled.delete(domain.path);
        else state.toggled.add(domain.path);
        refresh();
      },
    },
    `${levelName} ${domain.value}`,
    el("span", { class: "figures" }, ` ${used}/${gpus} GPUs · ${count} nodes`),
  );
  const body = collapsed
    ? occupancy(used, gpus)
    : el("div", { class: `children depth-${depth}` },
        ...domain.children.map((child) => drawDomain(child, levels, depth + 1, refresh)),
        ...domain.nodes.map((node) => drawNode(node, refresh)));
  return el(
    "div",
    { class: `domain depth-${depth}`, "data-domain": domain.path, "data-level": domain.level },
    header,
    body,
  );
}

function occupancy(used, gpus) {
  return el("div", { class: "occupancy", title: `${used} of ${gpus} GPUs in use` },
    el("div", { class: "occupancy-used", style: { width: `${percent(used, gpus)}%` } }));
}

function drawNode(node, refresh) {
  const cells = [];
  for (const holder of node.holders) {
    const ranks = holder.ranks.length ? ` · pod ${holder.ranks.join(", ")}` : "";
    for (let index = 0; index < holder.gpus; index += 1) {
      cells.push(el("span", {
        class: `gpu${holder.job === state.job ? " selected" : ""}${holder.stopping ? " stopping" : ""}`,
        "data-job": holder.job,
        "data-team": holder.team,
        title: `${holder.job} · team ${holder.team}${ranks} · ${holder.gpus} GPU(s) on ${node.name}`
          + (holder.stopping ? " · being stopped (preempted): its room is free once its pods are gone" : ""),
        style: { background: teamColour(holder.team) },
        onclick: () => { state.job = holder.job; state.jobDetail = null; refresh(); },
      }));
    }
  }
  for (let index = cells.length; index < node.gpus; index += 1) {
    cells.push(el("span", { class: "gpu free", title: "free" }));
  }
  const marks = [];
  if (!node.ready) marks.push("failed");
  else if (node.cordoned) marks.push("cordoned");
  return el(
    "div",
    {
      class: ["node", ...marks, node.name === state.node ? "chosen" : ""].join(" ").trim(),
      "data-node": node.name,
      "data-state": marks[0] ?? "ready",
    },
    el("button", {
      type: "button",
      class: "node-name",
      title: `${node.name}: ${marks[0] ?? "ready"}, ${node.gpusUsed}/${node.gpus} GPUs in use`,
      onclick: () => { state.node = node.name; refresh(); },
    }, node.name),
    el("div", { class: "cells" }, cells),
  );
}

function legend(teams) {
  return el("section", { class: "legend" },
    ...teams.map((team) => el("span", { class: "legend-item", "data-team": team },
      el("span", { class: "swatch", style: { background: teamColour(team) } }), team)),
    el("span", { class: "legend-item" }, el("span", { class: "swatch free" }), "free"),
    el("span", { class: "legend-item" }, el("span", { class: "swatch failed" }), "failed node"),
    el("span", { class: "legend-item" }, el("span", { class: "swatch cordoned" }), "cordoned (drained: cordoned, its gangs requeued)"),
    el("span", { class: "legend-item" }, el("span", { class: "swatch stopping" }), "being stopped (preempted)"),
  );
}

function panel(nodes, me, refresh) {
  const parts = [];
  if (state.job) {
    const detail = state.jobDetail;
    const span = detail?.allocation?.span ?? detail?.span ?? {};
    parts.push(el("section", { class: "card", "data-testid": "job-card" },
      el("h2", {}, `Job ${state.job}`),
      detail ? el("p", {}, `team ${detail.team} · ${detail.phase} · ${detail.gpus} GPUs`) : null,
      Object.keys(span).length
        ? el("dl", { class: "span" }, ...Object.entries(span).flatMap(([level, domains]) => [
            el("dt", {}, level.split("/").pop()), el("dd", {}, `${domains} domain(s)`)]))
        : null,
      el("a", { href: `#job/${encodeURIComponent(state.job)}`, class: "open" }, "Open the job"), " ",
      el("button", { type: "button", onclick: () => { state.job = null; refresh(); } }, "Clear"),
    ));
  }
  const node = nodes.find((candidate) => candidate.name === state.node);
  if (node) {
    const admin = me.role === "admin";
    const act = (verb) => async () => {
      await api(`/nodes/${encodeURIComponent(node.name)}/${verb}`, { method: "POST" });
      refresh();
    };
    parts.push(el("section", { class: "card", "data-testid": "node-card" },
      el("h2", {}, `Node ${node.name}`),
      el("p", {}, `${node.ready ? (node.cordoned ? "cordoned" : "ready") : "failed"} · `,
        `${node.gpusUsed}/${node.gpus} GPUs in use`),
      node.holders.length
        ? el("ul", {}, ...node.holders.map((h) => el("li", {}, `${h.job} (team ${h.team}, ${h.gpus} GPUs)`)))
        : el("p", {}, "no jobs"),
      admin && !node.cordoned
        ? el("button", { type: "button", class: "action", "data-action": "cordon", onclick: act("cordon") }, "Cordon")
        : null,
      admin && node.cordoned
        ? el("button", { type: "button", class: "action", "data-action": "uncordon", onclick: act("uncordon") }, "Uncordon")
        : null,
      admin && node.ready && state.draining !== node.name
        ? el("button", { type: "button", class: "action", "data-action": "drain",
            onclick: () => { state.draining = node.name; refresh(); } }, "Drain")
        : null,
      admin && state.draining === node.name
        ? el("p", { class: "confirm" },
            `Drain ${node.name}: cordon it and send its ${node.holders.length} gang(s) back to the queue? `,
            el("button", { type: "button", class: "action", "data-action": "confirm-drain",
              onclick: async () => { state.draining = null; await act("drain")(); } }, "Drain now"),
            el("button", { type: "button", onclick: () => { state.draining = null; refresh(); } }, "Keep it"))
        : null,
      el("button", { type: "button", onclick: () => { state.node = null; refresh(); } }, "Close"),
    ));
  }
  return el("aside", { class: "panel" }, parts);
}
