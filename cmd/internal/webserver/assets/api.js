// api.js: the page's only way to the server: same-origin fetches of /api/…
// (the token travels in the HttpOnly cookie), one in-flight request per URL.

// ApiError is a refused call: the HTTP status and the CLI's error code and message.
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code || '';
  }
}

let onUnauthorized = () => {};

// setUnauthorized names what to do when the server answers 401 (no or bad token).
export function setUnauthorized(fn) {
  onUnauthorized = fn;
}

async function decode(res) {
  let body = null;
  const text = await res.text();
  if (text) {
    try {
      body = JSON.parse(text);
    } catch {
      body = null;
    }
  }
  if (res.status === 401) {
    onUnauthorized();
    throw new ApiError(401, 'unauthorized', 'open the URL inbox web printed (it carries the token)');
  }
  if (!res.ok || (body && body.ok === false)) {
    const e = (body && body.error) || {};
    throw new ApiError(res.status, e.code, e.message || (text && !body ? text.trim() : `HTTP ${res.status}`));
  }
  return body || {};
}

const inflight = new Map();
// fresh keeps each answer until the store changes (changed): the view and
// the header counts that both want the agents after one event cost one
// request, not two.
const fresh = new Map();
let generation = 0;

// changed says the store changed (an event, a presence change, an action
// of the page's own): answers fetched before are not reused.
export function changed() {
  generation++;
  fresh.clear();
}

// get fetches one API path; concurrent calls for the same path share one
// request, and a later call before the next change gets the same answer.
export function get(path) {
  const have = inflight.get(path) || fresh.get(path);
  if (have) return have;
  const gen = generation;
  const p = fetch(path, {credentials: 'same-origin', headers: {Accept: 'application/json'}})
    .then(decode)
    .finally(() => inflight.delete(path));
  inflight.set(path, p);
  p.then(() => {
    if (gen === generation) fresh.set(path, p);
  }, () => {});
  return p;
}

// post sends one of the two actions (answer, cancel) as JSON.
export async function post(path, body) {
  changed();
  const res = await fetch(path, {
    method: 'POST',
    credentials: 'same-origin',
    headers: {'Content-Type': 'application/json', Accept: 'application/json'},
    body: JSON.stringify(body),
  });
  changed();
  return decode(res);
}

// qs builds a query string from the non-empty values of an object.
export function qs(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v === undefined || v === null || v === '' || v === false) continue;
    u.set(k, String(v));
  }
  const s = u.toString();
  return s ? '?' + s : '';
}

// threadPath is /api/threads/{id} with the id escaped.
export function threadPath(id, rest) {
  return `/api/threads/${encodeURIComponent(id)}${rest || ''}`;
}
