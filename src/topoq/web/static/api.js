// The REST API, with the token signed in with (kept in this tab's session storage only).

const TOKEN_KEY = "topoq.token";

export class ApiFailure extends Error {
  constructor(status, message, hint) {
    super(hint ? `${message} (${hint})` : message);
    this.status = status;
  }
}

export function signedIn() {
  return Boolean(sessionStorage.getItem(TOKEN_KEY));
}

export function signIn(token) {
  sessionStorage.setItem(TOKEN_KEY, token.trim());
}

export function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
}

export async function api(path, { method = "GET", body } = {}) {
  const headers = { Authorization: `Bearer ${sessionStorage.getItem(TOKEN_KEY) ?? ""}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(`/api/v1${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
  });
  if (!response.ok) {
    let detail = {};
    try {
      detail = (await response.json()).detail ?? {};
    } catch {
      // not JSON: the status says enough
    }
    throw new ApiFailure(response.status, detail.message ?? response.statusText, detail.hint);
  }
  return response.status === 204 ? null : response.json();
}
