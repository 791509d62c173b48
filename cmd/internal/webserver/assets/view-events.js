// view-events.js: the live feed of the event log, newest first, filterable
// by type, agent and thread; new events are added as they are pushed.

import * as api from './api.js';
import {agentLink, h, shortId, statusBadge, threadLink, when} from './dom.js';

const SHOWN = 500;
const BACKLOG = 200;
let backlogLoaded = false;

// loadBacklog puts the log's newest events before those pushed since the page opened.
async function loadBacklog(ctx) {
  if (backlogLoaded) return;
  const data = await api.get(`/api/events${api.qs({limit: BACKLOG})}`);
  backlogLoaded = true;
  const first = ctx.feed.length ? Number(ctx.feed[0].event_id) : Infinity;
  const older = (data.events || []).filter((e) => Number(e.event_id) < first);
  ctx.feed.unshift(...older);
}
const TYPES = ['thread_created', 'message_added', 'thread_claimed', 'lease_renewed', 'thread_updated', 'thread_done',
  'thread_failed', 'thread_cancelled', 'lease_expired', 'thread_read', 'team_created', 'team_members_added', 'team_members_removed'];

function matches(e, f) {
  if (f.type && e.event_type !== f.type) return false;
  if (f.agent && !String(e.agent || '').toLowerCase().includes(f.agent)) return false;
  if (f.thread) {
    const hay = `${e.thread_id || ''} ${e.summary || ''}`.toLowerCase();
    if (!hay.includes(f.thread)) return false;
  }
  return true;
}

function row(e) {
  const t = new Date(e.created_at);
  return h('li', {class: `event ev-${e.event_type}`, 'data-event-id': e.event_id, 'data-thread-id': e.thread_id || null},
    h('span', {class: 'ev-time mono', title: e.created_at}, Number.isNaN(t.getTime()) ? '' : t.toLocaleTimeString()),
    h('span', {class: `ev-type ev-${e.event_type}`}, (e.event_type || '').replace(/_/g, ' ')),
    h('span', {class: 'ev-agent'}, e.agent ? agentLink(e.agent) : null),
    h('span', {class: 'ev-what'},
      e.status ? statusBadge(e.status) : null,
      e.summary ? h('span', {class: 'ev-summary'}, e.summary) : null,
      e.thread_id ? threadLink(e.thread_id, shortId(e.thread_id)) : null),
    h('span', {class: 'ev-ago muted small'}, when(e.created_at)));
}

function readFilters(root) {
  const v = (n) => (root.querySelector(`[name="${n}"]`) || {value: ''}).value.trim().toLowerCase();
  return {type: v('type'), agent: v('agent'), thread: v('thread')};
}

export const eventsView = {
  title: () => 'Events',
  async show(root, route, ctx, events) {
    const list = root.querySelector('.feed');
    if (events && list) {
      // Live: add the new ones on top, keep the rest as they are.
      const f = readFilters(root);
      const fresh = events.filter((e) => matches(e, f)).reverse().map(row);
      list.prepend(...fresh);
      for (const el of fresh) el.classList.add('fresh');
      while (list.children.length > SHOWN) list.lastElementChild.remove();
      root.querySelector('.feed-empty').hidden = list.children.length > 0;
      root.querySelector('.feed-count').textContent = String(ctx.feed.length);
      return;
    }
    try {
      await loadBacklog(ctx);
    } catch { /* the live feed still works */ }
    if (!ctx.live()) return;
    const types = [...new Set([...TYPES, ...ctx.feed.map((e) => e.event_type)])].filter(Boolean);
    const p = route.params;
    const typeSel = h('select', {name: 'type', id: 'ev-type', 'data-keep': 'ev-type'}, h('option', {value: ''}, 'all types'), types.map((t) => h('option', {value: t, selected: p.get('type') === t || null}, t.replace(/_/g, ' '))));
    const agent = h('input', {name: 'agent', id: 'ev-agent', 'data-keep': 'ev-agent', placeholder: 'any agent', value: p.get('agent') || '', autocomplete: 'off'});
    const thread = h('input', {name: 'thread', id: 'ev-thread', 'data-keep': 'ev-thread', placeholder: 'thread id or words', value: p.get('thread') || '', autocomplete: 'off'});
    const feed = h('ol', {class: 'feed', 'aria-live': 'polite', 'aria-relevant': 'additions'});
    const none = h('p', {class: 'feed-empty empty'}, 'Waiting for events… every change to the store appears here as it happens.');
    const apply = () => {
      const f = readFilters(root);
      const rows = [];
      for (let i = ctx.feed.length - 1; i >= 0 && rows.length < SHOWN; i--) if (matches(ctx.feed[i], f)) rows.push(row(ctx.feed[i]));
      feed.replaceChildren(...rows);
      none.hidden = rows.length > 0;
    };
    for (const el of [typeSel, agent, thread]) el.addEventListener('input', apply);
    ctx.swap(root,
      h('div', {class: 'view-head'}, h('h1', null, 'Events'),
        h('p', {class: 'lede'}, 'The event log as it is written, pushed to this page: ', h('span', {class: 'feed-count'}, String(ctx.feed.length)), ' shown (the newest of the log, then every one pushed since you opened this page).')),
      h('form', {class: 'filters', role: 'search', 'aria-label': 'Filter events', onsubmit: (e) => e.preventDefault()},
        h('div', {class: 'field'}, h('label', {for: 'ev-type'}, 'Type'), typeSel),
        h('div', {class: 'field'}, h('label', {for: 'ev-agent'}, 'Agent'), agent),
        h('div', {class: 'field'}, h('label', {for: 'ev-thread'}, 'Thread'), thread)),
      h('section', {class: 'block feed-block'}, feed, none));
    apply();
  },
};
