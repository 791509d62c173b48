// dom.js: building elements without innerHTML, and the small pieces every
// view draws (badges, ages, lease bars, highlighted snippets).
//
// Everything the store holds is written by agents, so it is only ever set
// as text (textContent, attribute values), never parsed as HTML.

const SVGNS = 'http://www.w3.org/2000/svg';

function put(el, props) {
  for (const [k, v] of Object.entries(props || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.setAttribute('class', v);
    else if (k === 'text') el.textContent = String(v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'value' && 'value' in el) el.value = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false || c === '') continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// h builds an HTML element: h('a', {href: '#/x', class: 'y'}, 'text', child).
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  put(el, props);
  append(el, children);
  return el;
}

// s builds an SVG element the same way.
export function s(tag, props, ...children) {
  const el = document.createElementNS(SVGNS, tag);
  put(el, props);
  append(el, children);
  return el;
}

// icon draws one of the few inline icons (24x24 strokes).
const ICONS = {
  agents: 'M16 11a4 4 0 1 0-8 0 4 4 0 0 0 8 0ZM4 21c.8-3.5 4-6 8-6s7.2 2.5 8 6',
  attention: 'M12 3 2 20h20L12 3Zm0 6v5m0 3v.5',
  waits: 'M5 6a2 2 0 1 0 0 .1M19 18a2 2 0 1 0 0 .1M19 6a2 2 0 1 0 0 .1M7 6h10M18 8l-5 8M6.5 7.5l10.5 9',
  threads: 'M4 4h4v16H4zM10 4h4v10h-4zM16 4h4v6h-4z',
  queue: 'M4 6h16M4 12h10M4 18h6M18 14l3 3-3 3',
  teams: 'M9 10a3 3 0 1 0 0-6 3 3 0 0 0 0 6Zm8 0a2.5 2.5 0 1 0 0-5M3 20c.6-3 3-5 6-5s5.4 2 6 5m1-5c2.5 0 4.4 1.7 5 4',
  events: 'M3 12h4l3-7 4 14 3-7h4',
  search: 'M10.5 17a6.5 6.5 0 1 0 0-13 6.5 6.5 0 0 0 0 13ZM15.5 15.5 21 21',
  menu: 'M4 7h16M4 12h16M4 17h16',
  download: 'M12 4v11m-5-5 5 5 5-5M5 20h14',
  lock: 'M7 11V8a5 5 0 0 1 10 0v3M5 11h14v10H5z',
  mail: 'M3 6h18v12H3zM3 7l9 6 9-6',
  warn: 'M12 3 2 20h20L12 3Zm0 6v5m0 3v.5',
  back: 'M15 5l-7 7 7 7',
};

export function icon(name, label) {
  const svg = s('svg', {class: 'icon', viewBox: '0 0 24 24', 'aria-hidden': label ? null : 'true', role: label ? 'img' : null, 'aria-label': label || null},
    s('path', {d: ICONS[name] || '', fill: 'none', stroke: 'currentColor', 'stroke-width': '2', 'stroke-linecap': 'round', 'stroke-linejoin': 'round'}));
  return svg;
}

// ---- time ----

// secondsSince returns the seconds from an RFC 3339 time to now (0 when unparsable).
export function secondsSince(iso) {
  const t = Date.parse(iso || '');
  if (Number.isNaN(t)) return NaN;
  return (Date.now() - t) / 1000;
}

// duration says a length of time in words: "40 s", "12 min", "1 h 5 min", "3 days".
export function duration(sec) {
  if (!Number.isFinite(sec)) return '';
  sec = Math.max(0, Math.round(sec));
  if (sec < 60) return `${sec} s`;
  const m = Math.floor(sec / 60);
  if (m < 60) return `${m} min`;
  const hr = Math.floor(m / 60);
  if (hr < 48) return m % 60 && hr < 10 ? `${hr} h ${m % 60} min` : `${hr} h`;
  const d = Math.floor(hr / 24);
  return `${d} days`;
}

// ago says how long ago a time was: "just now", "12 min ago".
export function ago(iso) {
  const sec = secondsSince(iso);
  if (!Number.isFinite(sec)) return '';
  // Seconds would change the page every second in every open page: under
  // a minute, two steps are enough.
  if (sec < 10) return 'just now';
  if (sec < 60) return 'under a minute ago';
  return `${duration(sec)} ago`;
}

// when returns a <time> whose words ("asked 12 min ago") the page clock keeps current.
export function when(iso, prefix) {
  if (!iso) return h('span', {class: 'muted'}, '—');
  const d = new Date(iso);
  const el = h('time', {datetime: iso, title: Number.isNaN(d.getTime()) ? iso : d.toLocaleString(), 'data-ago': iso, 'data-prefix': prefix || ''});
  el.textContent = (prefix ? prefix + ' ' : '') + ago(iso);
  return el;
}

// setText sets el's text only when it changes: an unchanged write still
// makes the browser lay the page out and paint it again, every second, in
// every open page.
function setText(el, text) {
  if (el && el.textContent !== text) el.textContent = text;
}

// setWidth sets a bar's width only when it changes (see setText).
function setWidth(el, pct) {
  const w = pct.toFixed(0) + '%';
  if (el && el.style.width !== w) el.style.width = w;
}

// tickAges re-renders every age and lease bar under root from the local clock.
export function tickAges(root) {
  for (const el of root.querySelectorAll('[data-ago]')) {
    const p = el.dataset.prefix;
    setText(el, (p ? p + ' ' : '') + ago(el.dataset.ago));
  }
  for (const el of root.querySelectorAll('[data-lease-expires]')) updateLease(el);
  for (const el of root.querySelectorAll('[data-run-started]')) updateRun(el);
}

// ---- badges ----

const STATUS_LABEL = {pending: 'pending', claimed: 'claimed', in_progress: 'in progress', blocked: 'blocked', done: 'done', failed: 'failed', cancelled: 'cancelled'};
export const STATUSES = Object.keys(STATUS_LABEL);
export const TERMINAL = new Set(['done', 'failed', 'cancelled']);

export function statusBadge(status) {
  return h('span', {class: `badge st-${status || 'unknown'}`}, STATUS_LABEL[status] || status || '?');
}

export function stateBadge(state) {
  return h('span', {class: `state state-${state || 'unknown'}`}, h('span', {class: 'dot', 'aria-hidden': 'true'}), state || 'unknown');
}

export function kindBadge(kind) {
  if (!kind) return null;
  return h('span', {class: `kind kind-${kind}`}, kind);
}

export function agentLink(name) {
  if (!name) return h('span', {class: 'muted'}, '—');
  return h('a', {class: 'agent-name', href: `#/threads?agent=${encodeURIComponent(name)}`, title: `threads of ${name}`}, name);
}

export function threadLink(id, label) {
  if (!id) return null;
  return h('a', {class: 'thread-link', href: `#/thread/${encodeURIComponent(id)}`}, label || shortId(id));
}

// shortId keeps an id readable: its prefix and its tail (ids of one store
// share their leading time digits, so the tail is what tells them apart).
export function shortId(id) {
  if (!id || id.length <= 16) return id || '';
  const i = id.indexOf('_');
  return (i > 0 ? id.slice(0, i + 1) : '') + '…' + id.slice(-8);
}

// ---- lease bar ----

// leaseBar draws the time a lease has left against its length, with its fencing token.
export function leaseBar(lease) {
  if (!lease) return null;
  const el = h('div', {class: 'lease', role: 'meter', 'aria-valuemin': '0', 'aria-valuemax': '100',
    'data-lease-claimed': lease.claimed_at || '', 'data-lease-expires': lease.expires_at || ''},
  h('div', {class: 'lease-track'}, h('div', {class: 'lease-fill'})),
  h('div', {class: 'lease-text'},
    h('span', {class: 'lease-left'}),
    h('span', {class: 'token', title: 'fencing token: a write with an older token is refused'}, icon('lock'), `token ${lease.lease_token ?? '?'}`)));
  updateLease(el);
  return el;
}

function updateLease(el) {
  const claimed = Date.parse(el.dataset.leaseClaimed);
  const expires = Date.parse(el.dataset.leaseExpires);
  if (Number.isNaN(expires)) return;
  const now = Date.now();
  const total = Math.max(1, expires - (Number.isNaN(claimed) ? now : claimed));
  const left = expires - now;
  const pct = Math.max(0, Math.min(100, (left / total) * 100));
  setWidth(el.querySelector('.lease-fill'), pct);
  if (el.getAttribute('aria-valuenow') !== pct.toFixed(0)) el.setAttribute('aria-valuenow', pct.toFixed(0));
  el.classList.toggle('lease-low', pct < 20 && left > 0);
  el.classList.toggle('lease-expired', left <= 0);
  const txt = left > 0 ? `${duration(left / 1000)} left of ${duration(total / 1000)}` : `expired ${duration(-left / 1000)} ago`;
  if (el.getAttribute('aria-label') !== `lease: ${txt}`) el.setAttribute('aria-label', `lease: ${txt}`);
  setText(el.querySelector('.lease-left'), txt);
}

// runBar draws a running task's age against its timeout (or just its age).
export function runBar(started, timeoutSec) {
  const el = h('div', {class: 'lease run', 'data-run-started': started || '', 'data-run-timeout': timeoutSec || 0},
    h('div', {class: 'lease-track'}, h('div', {class: 'lease-fill'})),
    h('div', {class: 'lease-text'}, h('span', {class: 'lease-left'})));
  updateRun(el);
  return el;
}

function updateRun(el) {
  const age = secondsSince(el.dataset.runStarted);
  const to = Number(el.dataset.runTimeout) || 0;
  const t = el.querySelector('.lease-left');
  const fill = el.querySelector('.lease-fill');
  if (!Number.isFinite(age)) return;
  if (to > 0) {
    const pct = Math.max(0, Math.min(100, (age / to) * 100));
    setWidth(fill, pct);
    el.classList.toggle('lease-low', pct > 80);
    setText(t, `running ${duration(age)} of ${duration(to)} timeout`);
  } else {
    el.classList.add('no-timeout');
    setText(t, `running ${duration(age)} · no timeout`);
  }
}

// ---- text ----

// queryTerms splits a search query as inbox search does: "quoted phrases" and words.
export function queryTerms(q) {
  const out = [];
  const re = /"([^"]*)"|(\S+)/g;
  let m;
  while ((m = re.exec(q || '')) !== null) {
    const t = (m[1] ?? m[2] ?? '').trim();
    if (t) out.push(t.split(/\s+/));
  }
  return out;
}

function escapeRe(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

// highlight returns text as nodes with every whole-word match of the query's terms in <mark>.
export function highlight(text, q) {
  const terms = queryTerms(q)
    .map((words) => words.map((w) => w.replace(/^[^\p{L}\p{N}]+|[^\p{L}\p{N}]+$/gu, '')).filter(Boolean))
    .filter((w) => w.length)
    .map((words) => words.map(escapeRe).join('[^\\p{L}\\p{N}]+'));
  const frag = document.createDocumentFragment();
  if (!terms.length || !text) {
    frag.append(text || '');
    return frag;
  }
  terms.sort((a, b) => b.length - a.length);
  const re = new RegExp(`(?<![\\p{L}\\p{N}_])(?:${terms.join('|')})(?![\\p{L}\\p{N}_])`, 'giu');
  let last = 0;
  let m;
  while ((m = re.exec(text)) !== null) {
    if (m[0] === '') { re.lastIndex++; continue; }
    frag.append(text.slice(last, m.index), h('mark', null, m[0]));
    last = m.index + m[0].length;
  }
  frag.append(text.slice(last));
  return frag;
}

// jsonText pretty-prints a payload for a <pre>, or returns '' for an empty one.
export function jsonText(v) {
  if (v === null || v === undefined) return '';
  if (typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 0) return '';
  try {
    return JSON.stringify(v, null, 2);
  } catch {
    return String(v);
  }
}

// ---- keeping what a person typed across a live re-render ----

// keepState remembers every [data-keep] field's value, open <details> and the focus under root.
export function keepState(root) {
  const st = {values: new Map(), open: new Map(), focus: null, sel: null};
  for (const el of root.querySelectorAll('[data-keep]')) {
    const k = el.dataset.keep;
    if (el.tagName === 'DETAILS') {
      st.open.set(k, el.open);
    } else if ('value' in el) {
      st.values.set(k, el.type === 'checkbox' ? el.checked : el.value);
    }
  }
  const a = document.activeElement;
  if (a && root.contains(a) && a.dataset && a.dataset.keep) {
    st.focus = a.dataset.keep;
    try { st.sel = [a.selectionStart, a.selectionEnd]; } catch { st.sel = null; }
  }
  return st;
}

// restoreState puts back what keepState remembered.
export function restoreState(root, st) {
  if (!st) return;
  for (const el of root.querySelectorAll('[data-keep]')) {
    const k = el.dataset.keep;
    if (el.tagName === 'DETAILS') {
      if (st.open.has(k) && el.open !== st.open.get(k)) el.open = st.open.get(k);
    } else if (st.values.has(k)) {
      if (el.type === 'checkbox') el.checked = st.values.get(k);
      else el.value = st.values.get(k);
    }
  }
  if (st.focus) {
    const el = root.querySelector(`[data-keep="${CSS.escape(st.focus)}"]`);
    if (el) {
      el.focus({preventScroll: true});
      if (st.sel && st.sel[0] !== null) { try { el.setSelectionRange(st.sel[0], st.sel[1]); } catch { /* not a text field */ } }
    }
  }
}

// empty draws a friendly empty state.
export function empty(title, detail) {
  return h('div', {class: 'empty'}, h('p', {class: 'empty-title'}, title), detail ? h('p', {class: 'muted'}, detail) : null);
}

// section draws a titled block.
export function section(title, extra, ...children) {
  return h('section', {class: 'block'}, h('div', {class: 'block-head'}, h('h2', null, title), extra || null), ...children);
}
