// fairlock's operator page: reads locks.json every refresh_ms and draws
// it. No framework; every value from Redis goes in as text, never as HTML.
'use strict';

const $ = (id) => document.getElementById(id);
const meta = (name) => document.querySelector(`meta[name="${name}"]`)?.content || '';
const releaseToken = meta('fairlock-token');
let refreshMs = Number(meta('fairlock-refresh-ms')) || 1000;

// What is shown: a page of the locks in use (page, q), or one lock (kind, name).
const view = { page: 1, q: '', kind: '', name: '' };
let timer = 0, reading = 0, lastRead = null;
// lock key -> its rows shown last time ('h' or 'w', then the token) -> when
// each was first shown, 0 for the rows already there when the lock was
// first drawn. A new row is marked for freshMs, across redraws.
const seen = new Map();
const freshMs = 2500; // as the animation in page.css

// el makes an element: attributes (class, text, data-*, on*), then children.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'text') e.textContent = v;
    else if (k === 'style') Object.assign(e.style, v); // an attribute would be refused by the page's CSP
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

function duration(ms) {
  if (ms < 1000) return `${ms} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} m ${String(Math.floor(s % 60)).padStart(2, '0')} s`;
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, '0')} m`;
}

// shortToken shows a token by its ends: its session's first and last
// characters and its number in the session, without the priority and
// permits it carries, which have columns of their own. The whole token is
// the cell's title and goes in the confirmation of a release.
function shortToken(t) {
  const m = /^([^:]*)(:[^!#]*)/.exec(t);
  if (!m || m[1].length <= 14) return t;
  return `${m[1].slice(0, 6)}…${m[1].slice(-4)}${m[2]}`;
}

const plural = (n, one, many) => `${n.toLocaleString()} ${n === 1 ? one : many}`;
const percent = (f) => `${Math.round(f * 100)}%`;

// ---- reading ----

function address() {
  const p = new URLSearchParams();
  if (view.name) {
    p.set('kind', view.kind); p.set('name', view.name); p.set('waiters', '1000');
  } else {
    p.set('page', view.page);
    if (view.q) p.set('q', view.q);
  }
  return `locks.json?${p}`;
}

async function read() {
  clearTimeout(timer);
  const mine = ++reading;
  // A Redis that does not answer takes the client's retries to say so
  // (a second or two): meanwhile the page says it is waiting.
  const slow = setTimeout(() => {
    if (mine === reading) $('status').textContent = 'Waiting for Redis to answer…';
  }, 1000);
  let data;
  try {
    const r = await fetch(address(), { cache: 'no-store', headers: { Accept: 'application/json' } });
    try { data = await r.json(); } catch { data = { error: `the server answered ${r.status} ${r.statusText}, without the locks` }; }
  } catch (e) {
    data = { error: `the page's server did not answer (${e.message})` };
  }
  clearTimeout(slow);
  if (mine !== reading) return; // a newer reading started meanwhile
  if (data.error) showError(data.error); else draw(data);
  if (!document.hidden) timer = setTimeout(read, refreshMs);
}

function showError(msg) {
  const b = $('banner');
  b.hidden = false;
  b.textContent = `Redis could not be read: ${msg}. Trying again every ${duration(refreshMs)}` +
    (lastRead ? `; the locks below are as read at ${lastRead.toLocaleTimeString()}.` : '.');
  $('locks').classList.add('stale');
  $('status').classList.remove('live');
  $('status').textContent = lastRead ? `last read ${lastRead.toLocaleTimeString()}` : 'not read yet';
  if (!lastRead) $('locks').replaceChildren(el('p', { class: 'empty', text: 'Nothing read yet.' }));
}

// ---- drawing ----

function draw(data) {
  refreshMs = data.refresh_ms || refreshMs;
  lastRead = new Date(data.read_at);
  $('banner').hidden = true;
  $('locks').classList.remove('stale');
  const status = $('status');
  status.classList.add('live');
  status.textContent = view.name ? `read ${lastRead.toLocaleTimeString()}` :
    `${plural(data.in_use, 'lock', 'locks')} in use` + (view.q ? `, ${data.matching.toLocaleString()} matching` : '') +
    ` · read ${lastRead.toLocaleTimeString()}, every ${duration(refreshMs)}`;
  $('pager').hidden = !!view.name || data.pages <= 1;
  $('pageinfo').textContent = `page ${data.page} of ${data.pages}`;
  $('prev').disabled = data.page <= 1;
  $('next').disabled = data.page >= data.pages;
  view.page = data.page;
  $('back').hidden = !view.name;
  $('controls').hidden = !!view.name;
  const sections = data.locks.map((lk) => drawLock(lk, data.force_release));
  if (sections.length === 0) sections.push(el('p', { class: 'empty', text: view.q ? 'No lock in use matches.' : 'No lock is in use.' }));
  $('locks').replaceChildren(...sections);
}

function summary(lk) {
  const waiting = Math.max(lk.queued, lk.waiters.length);
  let held;
  if (lk.kind === 'semaphore') held = lk.capacity ? `${lk.in_use} of ${lk.capacity} permits in use` : 'idle';
  else if (lk.kind === 'rwmutex') {
    const writer = lk.holders.some((h) => h.lock === 'write');
    held = writer ? 'held by a writer' : lk.holders.length ? `held by ${plural(lk.holders.length, 'reader', 'readers')}` : 'free';
  } else held = lk.holders.length ? 'held' : 'free';
  const fence = lk.kind === 'mutex' ? `fence ≤ ${lk.fence}` : `last fence ${lk.fence}`;
  return el('p', { class: 'summary' },
    el('span', { class: lk.holders.length ? 'held' : '', text: held }), ' · ',
    el('span', { class: waiting ? 'waiting' : '', text: waiting ? `${waiting.toLocaleString()} waiting` : 'nobody waits' }),
    ` · ${fence}`);
}

// columns says which optional columns a lock shows, as the fairlock command does.
function columns(lk) {
  const parties = [...lk.holders, ...lk.waiters];
  return {
    permits: lk.kind === 'semaphore',
    lock: lk.kind === 'rwmutex',
    group: lk.kind === 'semaphore' || parties.some((p) => p.group),
    priority: parties.some((p) => p.priority > 0),
    multi: parties.some((p) => p.multi),
  };
}

function drawLock(lk, force) {
  const key = `${lk.kind}/${lk.name}`;
  const before = seen.get(key);
  const now = new Map();
  const t0 = Date.now();
  // fresh is how long ago a row was first shown, if that is recent, else -1.
  const fresh = (role, token) => {
    const since = before ? (before.get(role + token) ?? t0) : 0;
    now.set(role + token, since);
    return since && t0 - since < freshMs ? t0 - since : -1;
  };
  const cols = columns(lk);
  const link = `#lock=${encodeURIComponent(lk.kind)}/${encodeURIComponent(lk.name)}`;
  const sec = el('section', { class: 'lock', 'data-kind': lk.kind, 'data-name': lk.name },
    el('h2', {}, el('span', { class: 'kind', text: lk.kind }), el('a', { href: link, text: lk.name })),
    summary(lk));
  if (lk.holders.length) {
    sec.append(el('h3', { text: 'Holders' }), holderTable(lk, cols, force, fresh));
  }
  if (lk.waiters.length) {
    sec.append(el('h3', { text: 'Waiters, next first' }), waiterTable(lk, cols, fresh));
    const more = lk.queued - lk.waiters.length;
    if (more > 0) {
      sec.append(el('p', { class: 'more' }, `… and ${more.toLocaleString()} more `, view.name ? null : el('a', { href: link, text: 'show all' })));
    }
  }
  if (lk.groups.length) sec.append(el('h3', { text: 'Groups' }), drawGroups(lk));
  if (lk.lanes.length) sec.append(el('h3', { text: 'Priority lanes' }), drawLanes(lk));
  seen.set(key, now);
  return sec;
}

function cell(label, content, cls) {
  return el('td', { 'data-label': label, class: cls }, content);
}

function tokenCell(token) {
  return cell('Token', el('span', { title: token, text: shortToken(token) }), 'token');
}

function groupCell(p) {
  if (!p.group) return cell('Group', el('span', { class: 'none', text: '–' }));
  return cell('Group', p.weight > 1 ? `${p.group} ×${p.weight}` : p.group);
}

// multiCell names the MultiMutex request a party is a part of: the same
// label in each of its queues.
function multiCell(m) {
  if (!m) return cell('Multi', el('span', { class: 'none', text: '–' }));
  const i = m.indexOf('&');
  const short = i > 14 ? `${m.slice(0, 6)}…${m.slice(i - 4)}` : m;
  return cell('Multi', el('span', { title: m, text: short }), 'token');
}

function metaCell(m) {
  return cell('Metadata', m ? m : el('span', { class: 'none', text: '–' }), 'meta');
}

// row is a party's cells in the order of head's columns: first, the
// permits or read/write, mid, the group, the priority, the MultiMutex
// request, last.
function row(cols, p, first, mid, last) {
  const cells = [...first];
  if (cols.permits) cells.push(cell('Permits', String(p.permits), 'num'));
  if (cols.lock) cells.push(cell('Lock', p.lock));
  cells.push(...mid);
  if (cols.group) cells.push(groupCell(p));
  if (cols.priority) cells.push(cell('Priority', p.priority ? el('span', { class: 'pri', text: p.priority }) : '0', 'num'));
  if (cols.multi) cells.push(multiCell(p.multi));
  cells.push(...last);
  return cells;
}

function head(cols, first, mid, last) {
  const names = [...first];
  if (cols.permits) names.push('Permits');
  if (cols.lock) names.push('Lock');
  names.push(...mid);
  if (cols.group) names.push('Group');
  if (cols.priority) names.push('Priority');
  if (cols.multi) names.push('Multi');
  names.push(...last);
  return el('thead', {}, el('tr', {}, ...names.map((n) => el('th', { text: n }))));
}

// freshRow is a table row, marked if it was first shown age ms ago (age
// >= 0): its animation goes on where the last redraw left it.
function freshRow(age, token, cells) {
  const mark = age >= 0 ? { class: 'fresh', style: { animationDelay: `-${age}ms` } } : {};
  return el('tr', { ...mark, 'data-token': token }, ...cells);
}

function holderTable(lk, cols, force, fresh) {
  const rows = lk.holders.map((h) => {
    const last = [metaCell(h.metadata)];
    if (force) {
      last.push(cell('', el('button', { type: 'button', class: 'danger', text: 'Force release', onclick: () => confirmRelease(lk, h) }), 'action'));
    }
    const cells = row(cols, h, [tokenCell(h.token)],
      [cell('Fence', lk.kind === 'mutex' ? `≤ ${h.fence}` : String(h.fence), 'num'), cell('Lease left', duration(h.ttl_ms), 'num')], last);
    return freshRow(fresh('h', h.token), h.token, cells);
  });
  return el('table', { class: 'holders' }, head(cols, ['Token'], ['Fence', 'Lease left'], force ? ['Metadata', ''] : ['Metadata']),
    el('tbody', {}, ...rows));
}

function waiterTable(lk, cols, fresh) {
  const rows = lk.waiters.map((w) => {
    const cells = row(cols, w, [cell('Place', String(w.position), 'num'), tokenCell(w.token)],
      [cell('Waited', duration(w.waited_ms), 'num')], [metaCell(w.metadata)]);
    return freshRow(fresh('w', w.token), w.token, cells);
  });
  return el('table', { class: 'waiters' }, head(cols, ['Place', 'Token'], ['Waited'], ['Metadata']), el('tbody', {}, ...rows));
}

function drawGroups(lk) {
  return el('div', { class: 'groups' }, ...lk.groups.map((g) => el('div', { class: 'group' },
    el('span', { class: 'name', text: (g.group || '(no group)') + (g.weight > 1 ? ` ×${g.weight}` : '') }),
    el('div', { class: 'bar', title: `holds ${percent(g.share)}; its weight's share is ${percent(g.fair_share)}` },
      el('span', { class: 'fill', style: { width: percent(g.share) } }),
      el('span', { class: 'fair', style: { left: `calc(${percent(g.fair_share)} - 1px)` } })),
    el('span', { class: 'note', text: `holds ${plural(g.held, 'permit', 'permits')} (${percent(g.share)}), ` +
      `${g.waiting} waiting · weight ${g.weight}: ${percent(g.fair_share)} of the permit-time while all wait` }))));
}

function drawLanes(lk) {
  return el('div', { class: 'lanes' }, ...lk.lanes.map((l) => el('div', { class: 'lane' },
    el('b', { text: `priority ${l.priority}` }),
    `: ${plural(l.holders, 'holder', 'holders')}, ${l.waiting} waiting` +
      (l.waiting ? `, the longest for ${duration(l.longest_wait_ms)}` : ''))));
}

// ---- force release ----

function confirmRelease(lk, h) {
  const d = $('confirm');
  $('confirm-what').textContent = `The ${lk.kind} ${lk.name}: its holder ${h.token}` +
    (h.metadata ? ` ("${h.metadata}")` : '') + `, fence ${lk.kind === 'mutex' ? '≤ ' : ''}${h.fence}, lease left ${duration(h.ttl_ms)}.`;
  const next = lk.waiters[0];
  $('confirm-next').textContent = next ? `Then the waiters that fit are granted in order, first ${next.token}` +
    (next.metadata ? ` ("${next.metadata}")` : '') + '.' : 'Nobody waits.';
  $('confirm-end').onclick = () => { d.close(); release(lk, h); };
  d.showModal();
}

async function release(lk, h) {
  const body = new URLSearchParams({ kind: lk.kind, name: lk.name, token: h.token, confirm: 'yes' });
  let msg, bad = false;
  try {
    const r = await fetch('release', { method: 'POST', body, headers: { 'X-Fairlock-Token': releaseToken } });
    const out = await r.json();
    if (!r.ok) { bad = true; msg = out.error; } else {
      msg = `Ended ${out.ended.map(shortToken).join(', ')}. ` + (out.granted.length ?
        `Granted ${out.granted.map((g) => `${shortToken(g.token)} (fence ${g.fence})`).join(', ')}.` : 'Nobody was granted.');
    }
  } catch (e) { bad = true; msg = `The release was not sent: ${e.message}`; }
  toast(msg, bad);
  read();
}

function toast(msg, bad) {
  const t = $('toast');
  t.textContent = msg;
  t.className = bad ? 'bad' : '';
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, 8000);
}

// ---- what is shown: the address's #fragment ----

function fromHash() {
  const h = new URLSearchParams(location.hash.slice(1));
  const lock = h.get('lock');
  const slash = lock ? lock.indexOf('/') : -1;
  view.kind = slash > 0 ? lock.slice(0, slash) : '';
  view.name = slash > 0 ? lock.slice(slash + 1) : '';
  view.page = Math.max(1, Number(h.get('page')) || 1);
  view.q = h.get('q') || '';
  $('filter').value = view.q;
}

function toHash() {
  const h = new URLSearchParams();
  if (view.page > 1) h.set('page', view.page);
  if (view.q) h.set('q', view.q);
  history.replaceState(null, '', `#${h}`);
}

function start() {
  fromHash();
  window.addEventListener('hashchange', () => { fromHash(); read(); });
  $('prev').onclick = () => { view.page--; toHash(); read(); };
  $('next').onclick = () => { view.page++; toHash(); read(); };
  let typing = 0;
  $('filter').addEventListener('input', () => {
    clearTimeout(typing);
    typing = setTimeout(() => { view.q = $('filter').value; view.page = 1; toHash(); read(); }, 250);
  });
  $('confirm-cancel').onclick = () => $('confirm').close();
  document.addEventListener('visibilitychange', () => { if (!document.hidden) read(); });
  read();
}

start();
