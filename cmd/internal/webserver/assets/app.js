// app.js: the dashboard's shell. It routes the hash (#/agents, #/thread/ID,
// …) to a view, follows the server's event stream (/api/events, SSE) and,
// on events, re-renders what they can change: bursts are coalesced, and a
// refresh starts at most ~30 ms after the event that asks for it; the page never polls and
// never reloads. After a render caused by events, body[data-last-event-id]
// names the newest event it shows.

import * as api from './api.js';
import {h, icon, keepState, restoreState, tickAges} from './dom.js';
import {agentsView} from './view-agents.js';
import {attentionView} from './view-attention.js';
import {waitsView} from './view-waits.js';
import {threadsView, threadView} from './view-threads.js';
import {queueView} from './view-queue.js';
import {teamsView} from './view-teams.js';
import {eventsView} from './view-events.js';
import {searchView} from './view-search.js';

const VIEWS = {
  agents: agentsView,
  attention: attentionView,
  waits: waitsView,
  threads: threadsView,
  thread: threadView,
  queue: queueView,
  teams: teamsView,
  events: eventsView,
  search: searchView,
};

const FEED_MAX = 2000;
const DEBOUNCE_MS = 30;
// Under a stream of more than BUSY_RATE events a second (a script sending
// as fast as it can), a page renders at most every BUSY_MS: ten pages
// re-rendering a hundred times a second would take a core from the agents
// writing. A change after a quiet spell still shows within DEBOUNCE_MS.
const BUSY_RATE = 20;
const BUSY_MS = 2000;
const arrivals = []; // when the events of the last second came
function gap() {
  const now = performance.now();
  while (arrivals.length && now - arrivals[0] > 1000) arrivals.shift();
  return arrivals.length > BUSY_RATE ? BUSY_MS : DEBOUNCE_MS;
}
// The views a presence change (no event of the log) can change.
const PRESENCE_VIEWS = new Set(['agents', 'attention', 'waits']);

const main = document.getElementById('main');
const live = document.getElementById('live');
const toastBox = document.getElementById('toast');

// ---- shared context handed to every view ----

const ctx = {
  info: {as: 'human'},
  feed: [], // events received since the page opened, oldest first
  route: null,
  gen: 0,
  // as is the identity answers and cancels are sent as: typed on the page, else inbox web's --as.
  as() {
    try {
      return localStorage.getItem('inbox.as') || ctx.info.as || 'human';
    } catch {
      return ctx.info.as || 'human';
    }
  },
  setAs(name) {
    try {
      if (name && name !== ctx.info.as) localStorage.setItem('inbox.as', name);
      else localStorage.removeItem('inbox.as');
    } catch { /* storage refused: the field still works for this answer */ }
  },
  // swap replaces el's children, keeping what a person typed, opened or focused there.
  swap(el, ...nodes) {
    const st = keepState(el);
    el.replaceChildren(...nodes.flat().filter(Boolean));
    restoreState(el, st);
  },
  toast,
  refreshCounts: () => scheduleCounts(),
  // refreshNow re-renders the current view (after an action of the page's own).
  refreshNow: () => {
    pendingEvents.push(null);
    schedule();
  },
};

function toast(message, kind) {
  const el = h('div', {class: `toast toast-${kind || 'info'}`, role: kind === 'error' ? 'alert' : 'status'}, message);
  toastBox.appendChild(el);
  setTimeout(() => el.remove(), kind === 'error' ? 9000 : 4000);
}

// ---- routing ----

function parseRoute() {
  let hash = location.hash.replace(/^#\/?/, '');
  let query = '';
  const q = hash.indexOf('?');
  if (q >= 0) {
    query = hash.slice(q + 1);
    hash = hash.slice(0, q);
  }
  const parts = hash.split('/').filter(Boolean);
  let name = parts[0] || 'agents';
  if (!VIEWS[name]) name = 'agents';
  let arg = parts.slice(1).join('/');
  try {
    arg = decodeURIComponent(arg);
  } catch { /* keep it raw */ }
  return {name, arg, params: new URLSearchParams(query)};
}

let viewRoot = null;

async function navigate() {
  const route = parseRoute();
  ctx.route = route;
  const gen = ++ctx.gen;
  const view = VIEWS[route.name];
  document.title = `${view.title(route)} · inbox`;
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === route.name || (route.name === 'thread' && a.dataset.nav === 'threads')) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  closeMenu();
  const search = document.getElementById('q');
  if (route.name === 'search' && document.activeElement !== search) search.value = route.params.get('q') || '';
  viewRoot = h('div', {class: 'view', 'data-view': route.name});
  viewRoot.appendChild(h('p', {class: 'loading'}, 'Loading…'));
  main.replaceChildren(viewRoot);
  await runView(view, viewRoot, route, null, gen);
}

async function runView(view, root, route, events, gen) {
  const live = () => gen === ctx.gen && root.isConnected;
  try {
    await view.show(root, route, {...ctx, live}, events);
  } catch (err) {
    if (!live()) return;
    if (err instanceof api.ApiError && err.status === 401) return;
    ctx.swap(root, h('div', {class: 'error-box', role: 'alert'}, h('strong', null, 'Could not load this view: '), err.message || String(err)));
  }
}

// ---- live: the event stream ----

let pendingEvents = [];
let timer = null;
let running = false;
let lastId = 0;
let source = null;

function setLive(state, title) {
  live.dataset.state = state;
  live.title = title;
  live.querySelector('.live-text').textContent = state === 'live' ? 'live' : state === 'offline' ? 'offline' : 'reconnecting';
}

function connect() {
  if (source) source.close();
  // Start after the last event this page has seen (at first, the log's end
  // when /api/info answered): nothing between the first render and the
  // stream is lost. A reconnect sends Last-Event-ID.
  source = api.openStream(`/api/events?after_event=${lastId}`, {
    open() {
      setLive('live', 'pushed from the event log as it happens');
    },
    message(e) {
      // A wait started or ended (no event of the log says so): the views
      // that show who waits refresh; the threads and search views ignore it.
      if (e.type === 'presence') {
        api.changed();
        pendingEvents.push({event_type: 'presence'});
        schedule();
        return;
      }
      onEvent(e);
    },
    dropped() {
      setLive('reconnecting', 'the connection dropped; reconnecting, to resume from the last event');
    },
    refused(status) {
      if (status === 401) unauthorized();
      else setLive('reconnecting', `the stream was refused (HTTP ${status}); retrying`);
    },
  });
}

function onEvent(e) {
  let ev;
  try {
    ev = JSON.parse(e.data);
  } catch {
    return;
  }
  const id = Number(e.lastEventId || ev.event_id) || 0;
  if (id && id <= lastId) return; // already shown (a resume never repeats one, but be safe)
  if (id) lastId = id;
  if (ev.event_id === undefined) ev.event_id = id;
  ctx.feed.push(ev);
  if (ctx.feed.length > FEED_MAX) ctx.feed.splice(0, ctx.feed.length - FEED_MAX);
  pendingEvents.push(ev);
  arrivals.push(performance.now());
  api.changed();
  schedule();
}

let lastFlush = 0;

// schedule refreshes soon after an event: at once (a few ms, for the rest of
// the same network read) when the page has been quiet, else at most
// DEBOUNCE_MS after the previous refresh, so a burst costs one or two.
function schedule() {
  if (timer || running) return;
  const g = gap();
  const wait = Math.max(4, lastFlush + g - performance.now());
  timer = setTimeout(flush, Math.min(wait, g));
}

async function flush() {
  timer = null;
  running = true;
  const batch = pendingEvents;
  pendingEvents = [];
  // A presence change (a wait started or ended) is not an event of the log:
  // it refreshes only the views that show who waits.
  const presence = batch.some((e) => e && e.event_type === 'presence');
  const events = batch.filter((e) => e && e.event_type !== 'presence');
  const maxId = events.reduce((m, e) => Math.max(m, Number(e.event_id) || 0), 0);
  try {
    const route = ctx.route;
    const view = route && VIEWS[route.name];
    if (view && viewRoot && viewRoot.isConnected) {
      const relevant = batch.includes(null) || (presence && PRESENCE_VIEWS.has(route.name)) ||
        (events.length > 0 && (!view.relevant || view.relevant(events, route)));
      if (relevant) await runView(view, viewRoot, route, batch.includes(null) ? null : events, ctx.gen);
    }
  } finally {
    running = false;
    lastFlush = performance.now();
    if (maxId) document.body.dataset.lastEventId = String(maxId);
    // The counts come after the view: they never delay what the person is looking at.
    scheduleCounts();
    if (pendingEvents.length) schedule();
  }
}

// ---- header counts ----

let countsTimer = null;

function scheduleCounts() {
  if (countsTimer) return;
  countsTimer = setTimeout(loadCounts, gap());
}

function setCount(name, n, title) {
  const el = document.querySelector(`[data-count="${name}"]`);
  if (!el) return;
  el.querySelector('.n').textContent = n === null ? '–' : String(n);
  el.classList.toggle('hot', Boolean(n));
  if (title) el.title = title;
  const badge = document.querySelector(`[data-nav-count="${name}"]`);
  if (badge) {
    badge.textContent = n ? String(n) : '';
    badge.hidden = !n;
  }
}

async function loadCounts() {
  countsTimer = null;
  const [agents, attention] = await Promise.allSettled([api.get('/api/agents'), api.get('/api/attention')]);
  if (agents.status === 'fulfilled') {
    const list = agents.value.agents || [];
    setCount('working', list.filter((a) => a.state === 'working').length);
    setCount('stuck', list.filter((a) => (a.live_leases || []).length || a.mailbox_depth > 0).length);
  }
  if (attention.status === 'fulfilled') {
    const items = attention.value.items || [];
    setCount('blocked', items.filter((i) => i.kind === 'blocked').length);
    setCount('attention', items.length);
  } else {
    setCount('blocked', null);
    setCount('attention', null);
  }
}

// ---- header: menu, search ----

function closeMenu() {
  const b = document.getElementById('menu');
  b.setAttribute('aria-expanded', 'false');
  document.getElementById('nav').dataset.open = 'false';
}

function setupHeader() {
  const b = document.getElementById('menu');
  b.replaceChildren(icon('menu'), h('span', {class: 'sr-only'}, 'Views'));
  b.addEventListener('click', () => {
    const open = b.getAttribute('aria-expanded') !== 'true';
    b.setAttribute('aria-expanded', String(open));
    document.getElementById('nav').dataset.open = String(open);
  });
  for (const a of document.querySelectorAll('[data-nav]')) a.prepend(icon(a.dataset.nav));
  const form = document.getElementById('search');
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const q = document.getElementById('q').value.trim();
    if (q) location.hash = `#/search?q=${encodeURIComponent(q)}`;
  });
}

function unauthorized() {
  setLive('offline', 'no session');
  if (source) source.close();
  main.replaceChildren(h('div', {class: 'view unauthorized', role: 'alert'},
    icon('lock'),
    h('h1', null, 'This browser has no session on this dashboard'),
    h('p', null, 'Open a launch URL of ', h('code', null, 'inbox web'), ': it prints one at start, good for one browser, once.'),
    h('p', {class: 'muted'}, 'Another comes from POST /api/launch with the token file\'s content as a bearer token. A session ends when the server does.')));
}

// download fetches a blob link's target with the session (a plain link
// cannot send it) and saves it; the link then says how many bytes came.
function setupDownloads() {
  document.addEventListener('click', (e) => {
    const a = e.target instanceof Element && e.target.closest('a[href^="/api/blobs/"]');
    if (!a) return;
    e.preventDefault();
    api.download(a.getAttribute('href'), a.getAttribute('download') || '').then((n) => {
      a.dataset.downloaded = String(n);
    }, (err) => toast(`Could not download: ${err.message || err}`, 'error'));
  });
}

// ---- start ----

async function start() {
  setupHeader();
  api.setUnauthorized(unauthorized);
  setupDownloads();
  // The visit that traded a launch token for a session carries the
  // session's secret: keep it (in this origin's storage) and drop it from
  // the page; the used token goes from the address bar and history.
  const meta = document.querySelector('meta[name="inbox-session"]');
  if (meta) {
    api.setSession(meta.content);
    meta.remove();
  }
  if (new URLSearchParams(location.search).has('token')) history.replaceState(null, '', location.pathname + location.hash);
  window.addEventListener('hashchange', navigate);
  setInterval(() => tickAges(document), 1000);
  try {
    ctx.info = await api.get('/api/info');
  } catch (err) {
    if (err.status === 401) return;
  }
  const store = document.getElementById('store');
  const path = String(ctx.info.store || '');
  const parts = path.split('/');
  store.textContent = path.length > 32 && parts.length > 3 ? '…/' + parts.slice(-2).join('/') : path;
  store.title = `${ctx.info.store || ''}${ctx.info.version ? ' · inbox ' + ctx.info.version : ''}`;
  lastId = Number(ctx.info.last_event_id) || 0;
  connect();
  // The view first: the header's counts (the attention list, whose first
  // reading of a large log takes a while) come once it is drawn.
  await navigate();
  scheduleCounts();
}

start();
