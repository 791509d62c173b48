// view-threads.js: the threads board (a column per status, filterable by
// agent, team, run and task; each column fetches its newest threads only)
// and one thread's transcript: messages, artifacts (blobs downloadable),
// lease history and events.

import * as api from './api.js';
import {answerForm, cancelButton} from './actions.js';
import {STATUSES, TERMINAL, agentLink, empty, h, icon, jsonText, kindBadge, leaseBar, shortId, statusBadge, when} from './dom.js';

const PAGE = 50;
const STATUS_TITLE = {pending: 'Pending', claimed: 'Claimed', in_progress: 'In progress', blocked: 'Blocked', done: 'Done', failed: 'Failed', cancelled: 'Cancelled'};
const FILTERS = ['agent', 'team', 'run', 'task'];

// limits is how many threads each column shows (Show more raises it).
const limits = new Map();

function filtersOf(route) {
  const f = {};
  for (const k of FILTERS) f[k] = (route.params.get(k) || '').trim();
  f.mail = route.params.get('mail') === '1' || route.params.get('mail') === 'true';
  return f;
}

function card(t) {
  const pri = t.priority && t.priority !== 'normal' ? h('span', {class: `prio prio-${t.priority}`}, t.priority) : null;
  return h('li', {class: 'card-item'}, h('a', {class: `card st-${t.status}`, href: `#/thread/${encodeURIComponent(t.thread_id)}`, 'data-thread-id': t.thread_id},
    h('span', {class: 'card-subject'}, t.subject || '(no subject)'),
    h('span', {class: 'card-meta'},
      h('span', {class: 'who', title: `created by ${t.created_by || '?'}, assigned to ${t.assigned_to || 'nobody yet'}`}, t.created_by || '?', ' → ', t.assigned_to || '…'),
      pri,
      t.mail ? h('span', {class: 'chip chip-mail'}, icon('mail'), 'mail') : null),
    h('span', {class: 'card-foot muted'},
      t.run_id ? h('span', {class: 'chip'}, 'run ', t.run_id) : null,
      t.task_id ? h('span', {class: 'chip'}, 'task ', t.task_id) : null,
      h('span', {class: 'msgs', title: 'messages'}, `${t.message_count ?? 0} msg`),
      when(t.updated_at))));
}

function columnPath(status, f) {
  return '/api/threads' + api.qs({status, agent: f.agent, team: f.team, run: f.run, task: f.task, mail: f.mail ? 'true' : '', limit: limits.get(status) || PAGE});
}

async function fillColumn(col, status, f, ctx) {
  const list = col.querySelector('.cards');
  const count = col.querySelector('.col-count');
  let threads;
  try {
    threads = (await api.get(columnPath(status, f))).threads || [];
  } catch (err) {
    if (!ctx.live()) return;
    list.replaceChildren(h('li', {class: 'error-box small'}, err.message));
    return;
  }
  if (!ctx.live()) return;
  const limit = limits.get(status) || PAGE;
  const more = threads.length >= limit;
  count.textContent = more ? `${threads.length}+` : String(threads.length);
  list.replaceChildren(...threads.map(card));
  if (!threads.length) list.appendChild(h('li', {class: 'col-empty muted'}, 'none'));
  const btn = col.querySelector('.more');
  btn.hidden = !more;
  col.dataset.loaded = 'true';
}

function filterBar(f, route, ctx) {
  const field = (name, label, placeholder, list) => h('div', {class: 'field'},
    h('label', {for: `flt-${name}`}, label),
    h('input', {id: `flt-${name}`, name, value: f[name], placeholder, autocomplete: 'off', spellcheck: 'false', list: list || null}));
  const form = h('form', {class: 'filters', role: 'search', 'aria-label': 'Filter threads'},
    field('agent', 'Agent', 'any agent', 'dl-agents'),
    field('team', 'Team', 'any team', 'dl-teams'),
    field('run', 'Run', 'any run'),
    field('task', 'Task', 'any task'),
    h('label', {class: 'check'}, h('input', {type: 'checkbox', name: 'mail', checked: f.mail || null}), ' mail too'),
    h('div', {class: 'filter-actions'},
      h('button', {type: 'submit', class: 'btn'}, 'Filter'),
      FILTERS.some((k) => f[k]) || f.mail ? h('a', {class: 'btn btn-quiet', href: '#/threads'}, 'Clear') : null),
    h('datalist', {id: 'dl-agents'}), h('datalist', {id: 'dl-teams'}));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const fd = new FormData(form);
    const p = {};
    for (const k of FILTERS) p[k] = String(fd.get(k) || '').trim();
    p.mail = fd.get('mail') ? '1' : '';
    const st = route.params.get('status');
    if (st) p.status = st;
    location.hash = '#/threads' + api.qs(p);
  });
  // Suggestions for the fields, fetched after the board.
  Promise.allSettled([api.get('/api/agents'), api.get('/api/teams')]).then(([a, t]) => {
    if (!ctx.live()) return;
    if (a.status === 'fulfilled') form.querySelector('#dl-agents').replaceChildren(...(a.value.agents || []).map((x) => h('option', {value: x.agent})));
    if (t.status === 'fulfilled') form.querySelector('#dl-teams').replaceChildren(...(t.value.teams || []).map((x) => h('option', {value: x.name})));
  });
  return form;
}

// affected names the columns a batch of events can change.
function affected(root, events) {
  const out = new Set();
  for (const e of events) {
    if (!e.thread_id) continue;
    if (e.status) out.add(e.status);
    if (e.payload_json && typeof e.payload_json.from === 'string') out.add(e.payload_json.from);
    if (e.event_type === 'thread_created') out.add(e.status || 'pending');
    const c = root.querySelector(`.card[data-thread-id="${CSS.escape(e.thread_id)}"]`);
    if (c) out.add(c.closest('.col').dataset.status);
    if (!e.status && !c && e.event_type !== 'thread_read') for (const s of STATUSES) if (!TERMINAL.has(s)) out.add(s);
  }
  return out;
}

// placeNew shows a new work thread at once from its pushed event (which
// carries its id, subject, creator and status); the column's fetch that
// follows fills in the rest (its assignee, priority).
function placeNew(board, events) {
  for (const e of events) {
    if (e.event_type !== 'thread_created' || e.kind !== 'task' || !e.thread_id) continue;
    const col = board.querySelector(`.col[data-status="${CSS.escape(e.status || 'pending')}"]`);
    if (!col || board.querySelector(`.card[data-thread-id="${CSS.escape(e.thread_id)}"]`)) continue;
    const list = col.querySelector('.cards');
    for (const el of list.querySelectorAll('.col-empty')) el.remove();
    list.prepend(card({thread_id: e.thread_id, subject: e.summary, created_by: e.agent, assigned_to: '', status: e.status || 'pending',
      run_id: e.run_id, task_id: e.task_id, message_count: 1, updated_at: e.created_at}));
  }
}

export const threadsView = {
  title: () => 'Threads',
  relevant: (events) => events.some((e) => e.thread_id),
  async show(root, route, ctx, events) {
    const f = filtersOf(route);
    const only = (route.params.get('status') || '').split(',').filter((s) => STATUSES.includes(s));
    const statuses = only.length ? only : STATUSES;
    let board = root.querySelector('.board');
    if (events && board) {
      const want = affected(root, events);
      if (!FILTERS.some((k) => f[k])) placeNew(board, events);
      await Promise.all(statuses.filter((s) => want.has(s)).map((s) => fillColumn(board.querySelector(`.col[data-status="${s}"]`), s, f, ctx)));
      return;
    }
    board = h('div', {class: 'board', style: null});
    board.classList.add(`cols-${statuses.length}`);
    for (const st of statuses) {
      const more = h('button', {type: 'button', class: 'btn btn-quiet more', hidden: true}, 'Show more');
      const col = h('section', {class: `col col-${st}`, 'data-status': st, 'aria-labelledby': `col-${st}`},
        h('header', {class: 'col-head'}, h('h2', {id: `col-${st}`}, statusBadge(st)), h('span', {class: 'col-count', 'aria-label': 'threads shown'}, '…')),
        h('ol', {class: 'cards'}, h('li', {class: 'col-empty muted'}, 'loading…')),
        more);
      more.addEventListener('click', () => {
        limits.set(st, (limits.get(st) || PAGE) + PAGE);
        fillColumn(col, st, f, ctx);
      });
      board.appendChild(col);
    }
    const active = FILTERS.filter((k) => f[k]).map((k) => `${k} ${f[k]}`);
    ctx.swap(root,
      h('div', {class: 'view-head'}, h('h1', null, 'Threads'),
        h('p', {class: 'lede'}, active.length ? `Threads of ${active.join(', ')}, newest first.` : 'Every thread by status, newest first.',
          only.length ? [' Showing ', only.join(', '), ' only (', h('a', {href: '#/threads' + api.qs({...Object.fromEntries(FILTERS.map((k) => [k, f[k]])), mail: f.mail ? '1' : ''})}, 'all statuses'), ').'] : null)),
      filterBar(f, route, ctx),
      board);
    // Progressive: each column renders as soon as its answer lands.
    await Promise.all(statuses.map((st) => fillColumn(board.querySelector(`.col[data-status="${st}"]`), st, f, ctx)));
  },
};

// ---- one thread ----

function blobRef(a) {
  const m = a.metadata_json || {};
  if (typeof m.blob === 'string' && m.blob) return m.blob.split('/').pop();
  if (typeof m.sha256 === 'string' && m.sha256) return m.sha256;
  if (a.kind === 'blob' && a.path) return String(a.path).split('/').pop();
  return '';
}

function bytes(n) {
  if (!Number.isFinite(n)) return '';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}

function artifact(a) {
  const ref = a.kind === 'blob' || (a.metadata_json && a.metadata_json.blob) ? blobRef(a) : '';
  const m = a.metadata_json || {};
  const name = m.name || m.filename || (a.path ? String(a.path).split('/').pop() : a.artifact_id);
  return h('li', {class: 'artifact', 'data-artifact-id': a.artifact_id || null},
    h('span', {class: 'chip'}, a.kind || 'file'),
    ref
      ? h('a', {href: `/api/blobs/${encodeURIComponent(ref)}`, download: m.field ? `${m.field}-${ref.slice(0, 12)}` : ref.slice(0, 12), class: 'download', 'data-action': 'download'}, icon('download'), m.field ? `${m.field} (blob)` : shortId(ref))
      : h('code', {class: 'path', title: a.path || ''}, a.path || name),
    m.bytes !== undefined ? h('span', {class: 'muted small'}, bytes(Number(m.bytes))) : null,
    m.sha256 ? h('span', {class: 'muted small mono', title: `sha256 ${m.sha256}`}, `sha256 ${String(m.sha256).slice(0, 10)}…`) : null);
}

function message(m) {
  const payload = jsonText(m.payload_json);
  const long = (m.body || '').length > 1600;
  const body = m.body && m.body !== m.summary ? h('div', {class: 'msg-body'}, m.body) : null;
  return h('li', {class: `msg msg-${m.kind || 'x'}`, id: `msg-${m.seq}`, 'data-message-id': m.message_id},
    h('div', {class: 'msg-head'},
      h('span', {class: 'msg-from'}, agentLink(m.from_agent)),
      m.to_agent ? h('span', {class: 'muted'}, ' → ', agentLink(m.to_agent)) : null,
      kindBadge(m.kind),
      m.type && m.type !== m.kind ? h('span', {class: 'chip'}, m.type) : null,
      m.status ? h('span', {class: 'muted small'}, 'set ', statusBadge(m.status)) : null,
      m.request_id ? h('span', {class: 'chip', title: m.request_id}, 'request') : null,
      h('span', {class: 'msg-when muted'}, `#${m.seq} · `, when(m.created_at))),
    m.summary ? h('p', {class: 'msg-summary'}, m.summary) : null,
    body && long ? h('details', {class: 'msg-long', 'data-keep': `body-${m.message_id}`}, h('summary', null, `body (${bytes(m.body.length)})`), body) : body,
    payload ? h('details', {class: 'payload', 'data-keep': `payload-${m.message_id}`}, h('summary', null, 'payload'), h('pre', {class: 'json'}, payload)) : null,
    (m.artifacts || []).length ? h('ul', {class: 'artifacts'}, m.artifacts.map(artifact)) : null);
}

const LEASE_EVENTS = new Set(['thread_claimed', 'lease_renewed', 'lease_expired', 'thread_done', 'thread_failed', 'thread_cancelled']);

function leaseHistory(events) {
  const rows = events.filter((e) => LEASE_EVENTS.has(e.event_type));
  if (!rows.length) return h('p', {class: 'muted'}, 'Never claimed.');
  return h('ol', {class: 'lease-history'}, rows.map((e) => {
    const p = e.payload_json || {};
    return h('li', {class: `lh lh-${e.event_type}`, 'data-event-id': e.event_id},
      h('div', {class: 'lh-what'}, h('strong', null, e.event_type.replace(/^thread_/, '').replace(/_/g, ' ')), ' ', agentLink(e.agent),
        p.lease_token !== undefined ? h('span', {class: 'token small lh-token'}, `token ${p.lease_token}`) : null),
      h('div', {class: 'muted small'}, when(e.created_at),
        p.expires_at ? ` · until ${new Date(p.expires_at).toLocaleTimeString()}` : ''));
  }));
}

function eventsTable(events) {
  if (!events.length) return h('p', {class: 'muted'}, 'No events.');
  return h('div', {class: 'table-wrap'}, h('table', {class: 'table compact cards-on-phone'},
    h('thead', null, h('tr', null, ['#', 'When', 'Event', 'Agent', 'Status', 'Summary'].map((c) => h('th', {scope: 'col'}, c)))),
    h('tbody', null, events.map((e) => h('tr', {'data-event-id': e.event_id},
      h('td', {'data-label': '#', class: 'num muted'}, e.event_id),
      h('td', {'data-label': 'When', class: 'nowrap'}, when(e.created_at)),
      h('td', {'data-label': 'Event'}, h('span', {class: `ev ev-${e.event_type}`}, e.event_type)),
      h('td', {'data-label': 'Agent'}, agentLink(e.agent)),
      h('td', {'data-label': 'Status'}, e.status ? statusBadge(e.status) : ''),
      h('td', {'data-label': 'Summary', class: 'wrap'}, e.summary || ''))))));
}

const SHOW_LAST = 300;
const expanded = new Set();

export const threadView = {
  title: (route) => `Thread ${shortId(route.arg)}`,
  relevant: (events, route) => events.some((e) => e.thread_id === route.arg),
  async show(root, route, ctx) {
    const id = route.arg;
    const [tv, ev] = await Promise.allSettled([api.get(api.threadPath(id)), api.get(api.threadPath(id, '/events'))]);
    if (!ctx.live()) return;
    if (tv.status === 'rejected') {
      if (tv.reason.status === 404) {
        ctx.swap(root, h('div', {class: 'view-head'}, h('a', {class: 'back', href: '#/threads'}, icon('back'), 'Threads'), h('h1', null, 'Thread not found')),
          empty(`No thread ${id} in this store.`, 'It may have been archived (inbox archive).'));
        return;
      }
      throw tv.reason;
    }
    const t = tv.value.thread || {};
    const msgs = tv.value.messages || [];
    const lease = tv.value.lease || null;
    const events = ev.status === 'fulfilled' ? ev.value.events || [] : [];
    const live = !TERMINAL.has(t.status);
    const lastQ = [...msgs].reverse().find((m) => m.kind === 'question');
    // An answer newer than the question: the worker resumes when it wakes.
    const answered = lastQ && msgs.find((m) => m.kind === 'answer' && Number(m.seq) > Number(lastQ.seq));
    const hidden = expanded.has(id) ? 0 : Math.max(0, msgs.length - SHOW_LAST);
    const showAll = h('button', {type: 'button', class: 'btn btn-quiet'}, `Show ${hidden} earlier message${hidden > 1 ? 's' : ''}`);
    showAll.addEventListener('click', () => {
      expanded.add(id);
      ctx.refreshNow();
    });
    ctx.swap(root,
      h('div', {class: 'view-head thread-head', 'data-thread-id': t.thread_id},
        h('a', {class: 'back', href: '#/threads'}, icon('back'), 'Threads'),
        h('h1', null, t.subject || '(no subject)'),
        h('div', {class: 'facts'},
          statusBadge(t.status),
          t.priority && t.priority !== 'normal' ? h('span', {class: `prio prio-${t.priority}`}, t.priority) : null,
          h('span', null, agentLink(t.created_by), ' → ', agentLink(t.assigned_to)),
          t.run_id ? h('a', {class: 'chip', href: `#/threads?run=${encodeURIComponent(t.run_id)}`}, 'run ', t.run_id) : null,
          t.task_id ? h('a', {class: 'chip', href: `#/threads?task=${encodeURIComponent(t.task_id)}`}, 'task ', t.task_id) : null,
          h('span', {class: 'muted'}, 'created ', when(t.created_at), ' · updated ', when(t.updated_at)),
          h('code', {class: 'muted small'}, t.thread_id))),
      h('div', {class: 'thread-grid'},
        h('div', {class: 'thread-main'},
          t.status === 'blocked' && answered
            ? h('section', {class: 'block answered-block', 'data-answered': 'true'},
              h('div', {class: 'block-head'}, h('h2', null, 'Answered'),
                h('span', {class: 'muted'}, agentLink(answered.from_agent), ' answered ', when(answered.created_at), '; ', agentLink((lastQ && lastQ.from_agent) || t.assigned_to), ' resumes when it wakes.')),
              h('blockquote', {class: 'question answer'}, h('p', {class: 'q-summary'}, answered.summary || answered.body || '')),
              h('div', {class: 'form-actions'}, cancelButton(t.thread_id, ctx, t.subject)))
            : null,
          t.status === 'blocked' && !answered
            ? h('section', {class: 'block answer-block'},
              h('div', {class: 'block-head'}, h('h2', null, `${(lastQ && lastQ.from_agent) || t.assigned_to || 'The worker'} waits for an answer`)),
              lastQ ? h('blockquote', {class: 'question'}, h('p', {class: 'q-summary'}, lastQ.summary || ''), lastQ.body && lastQ.body !== lastQ.summary ? h('p', {class: 'q-body'}, lastQ.body) : null) : null,
              answerForm(t.thread_id, ctx, {extra: cancelButton(t.thread_id, ctx, t.subject)}))
            : null,
          h('section', {class: 'block'},
            h('div', {class: 'block-head'}, h('h2', null, `Transcript`), h('span', {class: 'muted'}, `${msgs.length} message${msgs.length === 1 ? '' : 's'}`)),
            hidden ? showAll : null,
            msgs.length ? h('ol', {class: 'transcript'}, msgs.slice(hidden).map(message)) : empty('No messages.'))),
        h('aside', {class: 'thread-side'},
          h('section', {class: 'block'},
            h('div', {class: 'block-head'}, h('h2', null, 'Lease')),
            lease
              ? [h('p', null, 'held by ', agentLink(lease.agent_id), ' since ', when(lease.claimed_at)), leaseBar(lease)]
              : h('p', {class: 'muted'}, live ? 'Nobody holds it.' : 'Released.'),
            live && t.status !== 'blocked' ? h('div', {class: 'form-actions'}, cancelButton(t.thread_id, ctx, t.subject)) : null),
          h('section', {class: 'block'},
            h('div', {class: 'block-head'}, h('h2', null, 'Lease history')),
            leaseHistory(events)))),
      h('details', {class: 'block events-block', 'data-keep': 'thread-events', open: true},
        h('summary', null, h('h2', null, `Events (${events.length})`)),
        ev.status === 'rejected' ? h('p', {class: 'error-box'}, ev.reason.message) : eventsTable(events)));
  },
};
