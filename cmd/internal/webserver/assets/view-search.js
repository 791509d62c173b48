// view-search.js: inbox search from the page: messages containing every
// word of the query, newest first, the matched words highlighted.

import * as api from './api.js';
import {agentLink, empty, h, highlight, kindBadge, shortId, when} from './dom.js';

const FIELDS = ['from', 'to', 'thread', 'kind', 'type', 'since'];

function result(r, q) {
  const m = r.message || {};
  const tid = r.thread_id || m.thread_id;
  return h('li', {class: 'result', 'data-thread-id': tid, 'data-message-id': m.message_id || null},
    h('div', {class: 'result-head'},
      h('a', {class: 'result-subject', href: `#/thread/${encodeURIComponent(tid)}`}, highlight(r.subject || '(no subject)', q)),
      h('span', {class: 'muted small'}, shortId(tid))),
    h('p', {class: 'snippet'}, highlight(r.snippet || m.summary || '', q)),
    h('div', {class: 'facts small'},
      h('span', null, agentLink(m.from_agent)), m.to_agent ? h('span', {class: 'muted'}, '→ ', agentLink(m.to_agent)) : null,
      kindBadge(m.kind), m.type && m.type !== m.kind ? h('span', {class: 'chip'}, m.type) : null,
      h('span', {class: 'muted'}, when(m.created_at))));
}

export const searchView = {
  title: (route) => `Search ${route.params.get('q') || ''}`.trim(),
  relevant: (events) => events.some((e) => e.message_id),
  async show(root, route, ctx) {
    const p = route.params;
    const q = (p.get('q') || '').trim();
    const params = {q, limit: p.get('limit') || 50};
    for (const k of FIELDS) params[k] = p.get(k) || '';
    const form = h('form', {class: 'filters search-filters', role: 'search', 'aria-label': 'Refine the search'},
      h('div', {class: 'field field-wide'}, h('label', {for: 'sq'}, 'Words'), h('input', {id: 'sq', name: 'q', value: q, type: 'search', placeholder: 'words or "a phrase"', autocomplete: 'off'})),
      FIELDS.map((k) => h('div', {class: 'field'}, h('label', {for: `s-${k}`}, k), h('input', {id: `s-${k}`, name: k, value: params[k], autocomplete: 'off',
        placeholder: k === 'since' ? '2h, or a time' : k === 'kind' ? 'question, answer…' : ''}))),
      h('div', {class: 'filter-actions'}, h('button', {type: 'submit', class: 'btn'}, 'Search')));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const fd = new FormData(form);
      const next = {};
      for (const [k, v] of fd.entries()) next[k] = String(v).trim();
      location.hash = '#/search' + api.qs(next);
    });
    if (!q) {
      ctx.swap(root, h('div', {class: 'view-head'}, h('h1', null, 'Search')), form,
        empty('Type words to find the messages that contain them all.', 'Quote a phrase to match it in order: "lease expired".'));
      return;
    }
    let data;
    try {
      data = await api.get('/api/search' + api.qs(params));
    } catch (err) {
      if (!ctx.live()) return;
      // inbox search exits 10 when nothing matches: an empty answer, not an error.
      if (err.code === 'no_match' || err.code === 'not_found' || err.status === 404) data = {results: []};
      else throw err;
    }
    if (!ctx.live()) return;
    const results = data.results || [];
    ctx.swap(root,
      h('div', {class: 'view-head'}, h('h1', null, 'Search'),
        h('p', {class: 'lede'}, results.length ? `${results.length}${results.length >= Number(params.limit) ? '+' : ''} message${results.length === 1 ? '' : 's'} with `
          : 'No message contains ', h('q', null, q), results.length ? ', newest first.' : '.')),
      form,
      results.length ? h('ol', {class: 'results'}, results.map((r) => result(r, q))) : empty('Nothing matches.', 'Every word must appear as a whole word; try fewer words.'));
  },
};
