// The dashboard: sign in with an API token, then one view at a time (#topology, #teams,
// #queue, #cluster, #job/<id>). While the tab is visible it asks GET /changes every POLL_MS
// (one small answer) and redraws the view from the API only when the mark moved, the view
// changed, or STALE_MS passed (ages, GPU-hours: what time alone moves). A job's view redraws
// every LIVE_MS: its pods' logs grow without any mark moving.

import { api, ApiFailure, signedIn, signIn, signOut } from "/ui/api.js";
import { drawCluster } from "/ui/cluster.js";
import { drawJob } from "/ui/job.js";
import { drawQueue } from "/ui/queue.js";
import { drawTeams } from "/ui/teams.js";
import { drawTopology } from "/ui/topology.js";

const VIEWS = { topology: drawTopology, teams: drawTeams, queue: drawQueue, cluster: drawCluster };
const POLL_MS = 1000;
const STALE_MS = 15000;
const LIVE_MS = 2000;
const LIVE_VIEWS = new Set(["job"]);

const main = document.getElementById("view");
const form = document.getElementById("sign-in");
const tabs = document.getElementById("tabs");
const who = document.getElementById("who");
const status = document.getElementById("status");
const signOutButton = document.getElementById("sign-out");

let me = null;
let timer = null;
let drawing = false;
let again = false; // asked to redraw while drawing: once more when done
let drawn = { mark: null, hash: null, at: 0 }; // what the view on screen was drawn from

// The view the address names: #topology, #teams, #queue, or #job/<id>.
function currentView() {
  const [name, ...rest] = location.hash.slice(1).split("/");
  if (name === "job" && rest.length) return { name, draw: drawJob, argument: decodeURIComponent(rest.join("/")) };
  return name in VIEWS ? { name, draw: VIEWS[name] } : { name: "topology", draw: VIEWS.topology };
}

function showSignIn(message = "") {
  clearTimeout(timer);
  me = null;
  form.hidden = false;
  tabs.hidden = true;
  signOutButton.hidden = true;
  who.textContent = "";
  main.replaceChildren();
  document.getElementById("sign-in-error").textContent = message;
  document.getElementById("token").focus();
}

async function start() {
  if (!signedIn()) return showSignIn();
  try {
    me = await api("/whoami");
  } catch (failure) {
    signOut();
    return showSignIn(failure.status === 401 ? "That token is not valid." : failure.message);
  }
  form.hidden = true;
  tabs.hidden = false;
  signOutButton.hidden = false;
  who.textContent = `${me.name} · ${me.role}${me.teams.length ? ` · ${me.teams.join(", ")}` : ""}`;
  document.body.dataset.role = me.role;
  refresh();
}

// Redraw the view now (after an action, a change of view, the tab shown again).
function refresh() {
  drawn.mark = null;
  return poll();
}

// Ask whether anything changed; redraw the view when it did (or it is due), then ask again.
async function poll() {
  clearTimeout(timer);
  if (!me) return;
  const view = currentView();
  for (const link of tabs.querySelectorAll("a")) {
    link.classList.toggle("current", link.dataset.view === view.name);
  }
  if (drawing) {
    again = true;
    return;
  }
  drawing = true;
  try {
    const { mark } = await api("/changes");
    const age = Date.now() - drawn.at;
    const due = mark !== drawn.mark || location.hash !== drawn.hash || age >= STALE_MS
      || (LIVE_VIEWS.has(view.name) && age >= LIVE_MS);
    if (due) {
      await view.draw(main, me, refresh, view.argument);
      drawn = { mark, hash: location.hash, at: Date.now() };
      status.textContent = `updated ${new Date().toLocaleTimeString()}`;
      status.classList.remove("error");
    }
  } catch (failure) {
    if (failure instanceof ApiFailure && failure.status === 401) {
      signOut();
      drawing = false;
      return showSignIn("The token is no longer valid: sign in again.");
    }
    drawn.mark = null; // drawn again at the next poll
    status.textContent = `could not update: ${failure.message}`;
    status.classList.add("error");
  } finally {
    drawing = false;
  }
  if (again) {
    again = false;
    return poll();
  }
  if (document.visibilityState === "visible") timer = setTimeout(poll, POLL_MS);
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  const field = document.getElementById("token");
  signIn(field.value);
  field.value = "";
  start();
});
signOutButton.addEventListener("click", () => {
  signOut();
  showSignIn();
});
window.addEventListener("hashchange", refresh);
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible") refresh();
});

start();
