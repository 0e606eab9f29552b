// The public JSON API, the session (tokens in sessionStorage) and its refresh.

const KEY = "svs.session";
let refreshTimer = null;
let onSignedOut = () => {};

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function session() {
  try {
    return JSON.parse(sessionStorage.getItem(KEY) || "null");
  } catch {
    return null;
  }
}

// A refresh answers a new RefreshToken (the one used is retired): keep the
// newest one the server gave, else the one we had.
function store(tokens, previousRefreshToken) {
  const s = {
    idToken: tokens.IdToken,
    accessToken: tokens.AccessToken,
    refreshToken: tokens.RefreshToken ?? previousRefreshToken,
    expiresAt: Date.now() + Number(tokens.ExpiresIn || 3600) * 1000,
    lifetime: Number(tokens.ExpiresIn || 3600) * 1000,
  };
  sessionStorage.setItem(KEY, JSON.stringify(s));
  scheduleRefresh();
  return s;
}

// Whether the signed-in user is an administrator, from the IdToken's `admin`
// claim. Only decides which actions the console offers: the server checks
// the signed token on every call.
export function isAdmin() {
  const s = session();
  if (!s || !s.idToken) return false;
  try {
    const payload = s.idToken.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(payload.padEnd(Math.ceil(payload.length / 4) * 4, "="))).admin === true;
  } catch {
    return false;
  }
}

export function clearSession() {
  sessionStorage.removeItem(KEY);
  if (refreshTimer) clearTimeout(refreshTimer);
  refreshTimer = null;
}

export function whenSignedOut(fn) {
  onSignedOut = fn;
}

// Refresh at 80% of the token's lifetime (at least 1 minute before expiry
// when the lifetime allows it).
export function scheduleRefresh() {
  if (refreshTimer) clearTimeout(refreshTimer);
  const s = session();
  if (!s) return;
  const margin = Math.min(60_000, s.lifetime * 0.2);
  const wait = Math.max(0, s.expiresAt - margin - Date.now());
  refreshTimer = setTimeout(() => refresh().catch(() => {}), wait);
}

// One refresh at a time, shared by every caller: each refresh retires the
// RefreshToken it uses, so two at once would present the same token twice,
// which the server takes for a stolen copy and ends the session.
let refreshing = null;

export function refresh() {
  if (!refreshing) {
    refreshing = refreshOnce().finally(() => {
      refreshing = null;
    });
  }
  return refreshing;
}

async function refreshOnce() {
  const s = session();
  if (!s) throw new ApiError(401, "You are not signed in.");
  try {
    const t = await call("POST", "/refresh", { RefreshToken: s.refreshToken }, false);
    return store(t, s.refreshToken);
  } catch (e) {
    if (e.status === 401) {
      clearSession();
      onSignedOut("Your session ended; please sign in again.");
    }
    throw e;
  }
}

async function call(method, path, body, auth) {
  const headers = {};
  if (body !== undefined) headers["content-type"] = "application/json";
  if (auth) {
    let s = session();
    if (!s) {
      onSignedOut("Please sign in.");
      throw new ApiError(401, "You are not signed in.");
    }
    if (s.expiresAt - Date.now() < 5_000) s = await refresh();
    headers.authorization = `Bearer ${s.idToken}`;
  }
  let res;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError(0, `Cannot reach the server (${e.message}).`);
  }
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!res.ok) {
    const message =
      (data && (data.message || data.Message)) ||
      text.trim() ||
      `The server answered ${res.status} ${res.statusText}.`;
    if (res.status === 401 && auth) {
      clearSession();
      onSignedOut(message);
    }
    throw new ApiError(res.status, message);
  }
  return data;
}

export const api = {
  get: (path) => call("GET", path, undefined, true),
  post: (path, body) => call("POST", path, body, true),
  patch: (path, body) => call("PATCH", path, body, true),
  put: (path, body) => call("PUT", path, body, true),
  del: (path) => call("DELETE", path, undefined, true),
};

export async function signIn(email, password) {
  const t = await call("POST", "/signin", { email, password }, false);
  return store(t);
}

export async function signOut() {
  const s = session();
  try {
    if (s) await call("POST", "/signout", { AccessToken: s.accessToken }, false);
  } finally {
    clearSession();
  }
}

// Changing one's own password ends every session of the user, this one
// included: the answer carries the new session's tokens, kept here.
export async function changeOwnPassword(currentpassword, newpassword) {
  const t = await call("PUT", "/users/me/password", { currentpassword, newpassword }, true);
  return store(t);
}
