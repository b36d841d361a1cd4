// The toolgraph operators' dashboard: a runs list that updates live (pages/runs.js), a run view
// (pages/run.js: graph, timeline, call details, reviews, cancel, recording, each a module of panels/),
// the limits in use (pages/limits.js) and the replicas and their leases (pages/replicas.js). Hash
// routes: #/ (list, filters in the query), #/runs/<id>?call=<callId>, #/limits and #/replicas. No
// framework: each page renders HTML strings at most once per frame. This module routes and mounts
// the pages.

import { find, markNav, parseHash } from './dom.js';
import { initLogin } from './login.js';
import { LimitsPage } from './pages/limits.js';
import { ReplicasPage } from './pages/replicas.js';
import { RunPage } from './pages/run.js';
import { RunsPage } from './pages/runs.js';

const main = find(document, '#main');
/** @type {ReplicasPage | RunPage | LimitsPage | RunsPage | null} */
let page = null;

function route(force = false) {
  const { path, params } = parseHash();
  const m = /^\/runs\/([^/?]+)$/.exec(path);
  if (path === '/replicas') {
    mount(new ReplicasPage());
    markNav('replicas');
    return;
  }
  if (m) {
    const id = decodeURIComponent(m[1]);
    if (!force && page instanceof RunPage && page.id === id) {
      page.select(params.get('call'), false);
      return;
    }
    mount(new RunPage(id, params));
  } else if (path === '/limits') {
    if (!force && page instanceof LimitsPage) return;
    mount(new LimitsPage());
    markNav('limits');
    return;
  } else {
    mount(new RunsPage(params));
  }
  markNav(m ? null : params.get('attention') === '1' ? 'attention' : 'runs');
}

/** @param {ReplicasPage | RunPage | LimitsPage | RunsPage} next */
function mount(next) {
  page?.destroy();
  page = next;
  main.innerHTML = '';
  main.append(next.el);
  next.start();
}

window.addEventListener('hashchange', () => route());

initLogin({ onForget: () => route(true) });
route();
