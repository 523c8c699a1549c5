// The dashboard: sign in with an API token, then one view at a time (#topology, #teams,
// #queue, #cluster, #job/<id>), each redrawn from the API every REFRESH_MS while the tab is visible.

import { api, ApiFailure, signedIn, signIn, signOut } from "/ui/api.js";
import { drawCluster } from "/ui/cluster.js";
import { drawJob } from "/ui/job.js";
import { drawQueue } from "/ui/queue.js";
import { drawTeams } from "/ui/teams.js";
import { drawTopology } from "/ui/topology.js";

const VIEWS = { topology: drawTopology, teams: drawTeams, queue: drawQueue, cluster: drawCluster };
const REFRESH_MS = 2000;

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

async function refresh() {
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
  {
    drawing = true;
    try {
      await view.draw(main, me, refresh, view.argument);
      status.textContent = `updated ${new Date().toLocaleTimeString()}`;
      status.classList.remove("error");
    } catch (failure) {
      if (failure instanceof ApiFailure && failure.status === 401) {
        signOut();
        drawing = false;
        return showSignIn("The token is no longer valid: sign in again.");
      }
      status.textContent = `could not update: ${failure.message}`;
      status.classList.add("error");
    } finally {
      drawing = false;
    }
  }
  if (again) {
    again = false;
    return refresh();
  }
  if (document.visibilityState === "visible") timer = setTimeout(refresh, REFRESH_MS);
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
