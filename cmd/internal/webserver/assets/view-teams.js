// view-teams.js: every team, its members and what each owes
// (acknowledgments not given, mail waiting, leases held).

import * as api from './api.js';
import {agentLink, empty, h, shortId, stateBadge, when} from './dom.js';

function member(name, a) {
  const owes = (a && a.unacknowledged) || [];
  const held = (a && a.live_leases) || [];
  return h('li', {class: 'member', 'data-agent': name},
    h('div', {class: 'member-name'}, agentLink(name), stateBadge(a ? a.state : 'unknown')),
    h('div', {class: 'member-debts'},
      owes.length
        ? h('span', {class: 'pill pill-owe', title: owes.join(', ')}, `owes ${owes.length} ack${owes.length > 1 ? 's' : ''}`)
        : h('span', {class: 'muted small'}, 'owes nothing'),
      a && a.mailbox_depth ? h('span', {class: 'pill pill-mail'}, `${a.mailbox_depth} in mailbox`) : null,
      held.length ? h('span', {class: 'pill'}, `holds ${held.length} lease${held.length > 1 ? 's' : ''}`) : null),
    owes.length ? h('div', {class: 'owed-list muted small'}, owes.slice(0, 6).map((m) => h('code', {title: m}, shortId(m))), owes.length > 6 ? ` +${owes.length - 6}` : null) : null);
}

export const teamsView = {
  title: () => 'Teams',
  async show(root, route, ctx) {
    const [teams, agents] = await Promise.all([api.get('/api/teams'), api.get('/api/agents').catch(() => ({agents: []}))]);
    if (!ctx.live()) return;
    const byName = new Map((agents.agents || []).map((a) => [a.agent, a]));
    const list = (teams.teams || []).slice().sort((a, b) => a.name.localeCompare(b.name));
    ctx.swap(root,
      h('div', {class: 'view-head'}, h('h1', null, 'Teams'), h('p', {class: 'lede'}, 'Members of each team and what each one owes.')),
      list.length
        ? h('div', {class: 'team-grid'}, list.map((t) => {
          const members = t.members || [];
          const debt = members.reduce((n, m) => n + (((byName.get(m) || {}).unacknowledged) || []).length, 0);
          return h('section', {class: 'block team', 'data-team': t.name},
            h('div', {class: 'block-head'},
              h('h2', null, '@', t.name),
              h('span', {class: 'muted small'}, `${members.length} member${members.length === 1 ? '' : 's'}`, debt ? ` · ${debt} ack${debt > 1 ? 's' : ''} owed` : '')),
            h('ul', {class: 'members'}, members.map((m) => member(m, byName.get(m)))),
            h('p', {class: 'small team-foot'},
              h('a', {href: `#/threads?team=${encodeURIComponent(t.name)}`}, 'threads of this team'),
              t.created_by ? h('span', {class: 'muted'}, ' · created by ', agentLink(t.created_by), ' ', when(t.created_at)) : null));
        }))
        : empty('No teams yet.', 'inbox team create NAME MEMBER… makes one; --to @NAME then reaches every member.'));
  },
};
