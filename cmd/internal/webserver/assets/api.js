// api.js: the page's only way to the server: same-origin fetches of /api/…,
// one in-flight request per URL. Each carries the session: its id in the
// HttpOnly cookie, which the browser sends (to every port of this host:
// alone it opens nothing), and its secret in the X-Inbox-Session header,
// which this page's script alone holds (its origin's storage is its own).
// The event stream and blob downloads are fetches too, for the header.

const SESSION_KEY = 'inbox.session';
let session = '';

// setSession keeps the secret the page that made the session was given.
export function setSession(secret) {
  session = secret;
  try {
    localStorage.setItem(SESSION_KEY, secret);
  } catch { /* storage refused: this tab keeps it in memory */ }
}

// secret is the session's secret: from storage each time, so a tab follows
// a session another tab of this browser started (a server started again).
function secret() {
  try {
    return localStorage.getItem(SESSION_KEY) || session;
  } catch {
    return session;
  }
}

// headers are the headers of an API call: the session's secret and extra.
function headers(extra) {
  const hdr = {Accept: 'application/json', ...extra};
  const s = secret();
  if (s) hdr['X-Inbox-Session'] = s;
  return hdr;
}

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
    throw new ApiError(401, 'unauthorized', 'open a launch URL of inbox web (it prints one; each opens one browser, once)');
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
  const p = fetch(path, {credentials: 'same-origin', headers: headers()})
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
    headers: headers({'Content-Type': 'application/json'}),
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

// download fetches a blob with the session and hands it to the browser as
// a download named name (a link cannot send the header).
export async function download(path, name) {
  const res = await fetch(path, {credentials: 'same-origin', headers: headers({Accept: '*/*'})});
  if (!res.ok) await decode(res);
  const blob = await res.blob();
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name || '';
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
  return blob.size;
}

// openStream follows the server's event stream (Server-Sent Events over a
// fetch, which can send the session's header as an EventSource cannot),
// as an EventSource does: it calls on.open once connected, on.message for
// each event ({type, data, lastEventId}), on.dropped when the connection
// is lost (it reconnects after the server's retry delay, resuming after
// the last event id with Last-Event-ID) and on.refused with the status of
// an answer that is not a stream (it stops on 401, else retries, slower
// each time). close() ends it.
export function openStream(path, on) {
  let closed = false;
  let ctrl = null;
  let lastEventId = '';
  let retryMs = 1000;
  let refusals = 0;
  const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  async function read(body) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buf = '';
    let type = '';
    let data = [];
    let id = null;
    for (;;) {
      const {value, done} = await reader.read();
      if (done) return;
      buf += decoder.decode(value, {stream: true});
      let nl;
      while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf.startsWith('\r\n', nl) ? 2 : 1));
        if (line === '') {
          if (id !== null) lastEventId = id;
          if (data.length) on.message({type: type || 'message', data: data.join('\n'), lastEventId});
          type = '';
          data = [];
          id = null;
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? '' : line.slice(colon + 1);
        if (val.startsWith(' ')) val = val.slice(1);
        if (field === 'event') type = val;
        else if (field === 'data') data.push(val);
        else if (field === 'id' && !val.includes('\0')) id = val;
        else if (field === 'retry' && /^\d+$/.test(val)) retryMs = Number(val);
      }
    }
  }

  async function run() {
    while (!closed) {
      ctrl = new AbortController();
      let wait = retryMs;
      try {
        const extra = {Accept: 'text/event-stream'};
        if (lastEventId) extra['Last-Event-ID'] = lastEventId;
        const res = await fetch(path, {credentials: 'same-origin', cache: 'no-store', headers: headers(extra), signal: ctrl.signal});
        if (!res.ok || !res.body || !(res.headers.get('Content-Type') || '').startsWith('text/event-stream')) {
          res.body && res.body.cancel().catch(() => {});
          if (closed) return;
          on.refused(res.status);
          if (res.status === 401) return;
          wait = 500 * 2 ** Math.min(++refusals, 6);
        } else {
          refusals = 0;
          on.open();
          await read(res.body);
          if (closed) return;
          on.dropped();
        }
      } catch {
        if (closed) return;
        on.dropped();
      }
      await pause(wait);
    }
  }
  run();
  return {
    close() {
      closed = true;
      if (ctrl) ctrl.abort();
    },
  };
}
