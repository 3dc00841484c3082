/// <reference lib="dom" />
/**
 * The dashboard's script (`GET /dashboard.js`): browser code, compiled by tsc with the server
 * and served from the compiled file (a module script, so the Content-Security-Policy can forbid
 * inline code). It polls `/status` every 1.5 s with fetch and redraws in place (no reload);
 * every value from the server is written with `textContent` or an SVG attribute, never parsed
 * as HTML. With a token configured, `/status` answers 401 until the operator types the token;
 * it is kept in sessionStorage (this tab only) and sent as `Authorization: Bearer`. Nothing
 * here sends anything but GET /status.
 *
 * The types below say what the page reads, all optional: the page also shows servers of other
 * versions, so it checks every field it uses. Nothing runs when loaded outside a browser.
 */

/** Who holds or waits for a row. */
interface Owner {
  session?: string | null;
  client?: string;
}

interface HaInfo {
  role?: string;
  since?: number | string;
  token?: number | string | null;
  locker?: unknown;
  address?: string;
  master?: { address: string; token: number | string; since: number | string };
  peers?: {
    id: string;
    address: string;
    role: string;
    state?: string;
    seenAt: number | string;
  }[];
  failovers?: { at: number | string; role: string; token?: number | null; reason?: string }[];
}

/** A fleet member's view of its fleet (`status.fleet`, only on a `serve --fleet` server). */
interface FleetInfo {
  /** This member's id; `null` while it is not a member (left, or lost its lease). */
  id?: string | null;
  address?: string;
  leaseMs?: number;
  members?: { id: string; address: string; live?: boolean; leaving?: boolean; regions?: number }[];
  regions?: number;
  unserved?: number;
  /** Oldest first. */
  moves?: { at: number | string; region: string; change: string; why?: string }[];
}

interface Lane {
  size?: number;
  busy?: number;
  queued?: number;
  parked?: number;
  completed?: number;
}

/** What the page reads of `GET /status`. */
interface Status {
  server?: string;
  listening?: string;
  uptimeMs?: number;
  connections?: number;
  scanners?: number;
  tables?: { name: string; families?: string[]; regions?: number; rows?: number; cells?: number }[];
  regions?: {
    table?: string;
    startKey?: string;
    endKey?: string;
    /** `null` in a fleet while no live server serves it. */
    server?: string | null;
    /** `null` for a region another fleet member serves (or nobody does). */
    rows?: number | null;
    cells?: number | null;
  }[];
  sessions?: {
    client?: string;
    session?: string;
    connected?: boolean;
    leaseMs?: number;
    leaseRemainingMs?: number;
    locks?: number;
    waiting?: number;
    scanners?: number;
    ageMs?: number;
  }[];
  sessionsOpen?: number;
  locks?: {
    table: string;
    row: string;
    client?: string;
    session?: string;
    token?: number;
    leaseRemainingMs?: number;
    renews?: boolean;
  }[];
  locksHeld?: number;
  waits?: {
    table: string;
    row: string;
    waiter?: Owner | null;
    holder?: Owner | null;
    explicit?: boolean;
    waitedMs?: number;
  }[];
  waiting?: number;
  deadlocks?: {
    detected?: number;
    last?: {
      at: number | string;
      table: string;
      cycle?: { waiter?: Owner | null; row: string }[];
    } | null;
  };
  handlers?: Record<string, Lane | undefined>;
  calls?: { ok?: Record<string, number>; failed?: Record<string, number> };
  rates?: {
    intervalMs?: number;
    now?: number;
    buckets?: { at: number; calls: number; errors: number }[];
  };
  ha?: HaInfo;
  fleet?: FleetInfo;
}

interface Column {
  title: string;
  num?: boolean;
  wrap?: boolean;
}

type Cell = string | number | Node | undefined | null;

const POLL_MS = 1500;
const STALE_MS = 6000;
const KEY = 'locksmith.dashboard.token';
const SVG = 'http://www.w3.org/2000/svg';
const MAX_ROWS = 200;
/** The fleet's moves the Fleet card lists, newest first. */
const MOVES_SHOWN = 10;
let timer: number | undefined;
let lastOk = 0;
let gated = false;
/** Where the token stays when sessionStorage is unavailable (this page's life only). */
let kept: string | null = null;

function $(id: string): HTMLElement {
  const e = document.getElementById(id);
  if (e === null) throw new Error(`the page has no #${id}`);
  return e;
}

// ---- small DOM helpers: text only ------------------------------------------------------
function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  cls?: string,
  text?: unknown,
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function put(id: string, ...nodes: Node[]): void {
  $(id).replaceChildren(...nodes);
}
function empty(text: string): HTMLElement {
  return el('p', 'empty', text);
}
/** A table: columns [{title, num?}], rows of cells (string, number or Node). */
function table(columns: Column[], rows: Cell[][], total?: number): HTMLElement {
  const t = el('table');
  const head = el('tr');
  const cls = (c: Column | undefined) => (c?.num ? 'num' : c?.wrap ? 'wrap' : '');
  for (const c of columns) head.append(el('th', cls(c), c.title));
  const thead = el('thead');
  thead.append(head);
  t.append(thead);
  const body = el('tbody');
  for (const row of rows.slice(0, MAX_ROWS)) {
    const tr = el('tr');
    row.forEach((cell, i) => {
      const td = el('td', cls(columns[i]));
      if (cell instanceof Node) td.append(cell);
      else td.textContent = cell === undefined || cell === null ? '—' : String(cell);
      tr.append(td);
    });
    body.append(tr);
  }
  t.append(body);
  const all = total === undefined ? rows.length : total;
  if (all <= MAX_ROWS && all === rows.length) return t;
  const wrap = el('div');
  wrap.append(t, el('p', 'more', `showing ${Math.min(rows.length, MAX_ROWS)} of ${all}`));
  return wrap;
}
function bar(value: number, max: number, hotAt?: number): HTMLElement {
  const b = el('span', 'bar');
  const fill = el('span');
  const ratio = max > 0 ? Math.max(0, Math.min(1, value / max)) : 0;
  fill.style.width = `${(ratio * 100).toFixed(1)}%`;
  if (hotAt !== undefined && ratio >= hotAt) b.classList.add('hot');
  b.append(fill);
  return b;
}
function withBar(text: string, value: number, max: number, hotAt?: number): HTMLElement {
  const s = el('span');
  s.append(bar(value, max, hotAt), el('span', '', text));
  return s;
}
function tag(text: string, kind?: string): HTMLElement {
  return el('span', `tag ${kind || ''}`, text);
}
function owner(o: Owner | null | undefined): string | undefined {
  if (!o) return 'anonymous call';
  return o.session ? `${o.client} (${o.session})` : o.client;
}

// ---- formatting -------------------------------------------------------------------------
function dur(ms: unknown): string {
  if (typeof ms !== 'number' || !Number.isFinite(ms)) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${String(Math.floor(s % 60)).padStart(2, '0')} s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${String(m % 60).padStart(2, '0')} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}
function clock(at: unknown): string {
  if (typeof at !== 'number' && typeof at !== 'string') return '—';
  const d = new Date(at);
  if (Number.isNaN(d.getTime())) return String(at);
  // Today: the time is enough; otherwise the date too.
  return d.toDateString() === new Date().toDateString()
    ? d.toLocaleTimeString()
    : d.toLocaleString();
}
function ago(at: unknown, now: number): string {
  const t = typeof at === 'number' || typeof at === 'string' ? new Date(at).getTime() : Number.NaN;
  return Number.isNaN(t) ? '' : ` (${dur(Math.max(0, now - t))} ago)`;
}
function num(n: unknown): string {
  return typeof n === 'number' ? n.toLocaleString() : '—';
}
/**
 * A fencing or mastership token: its digits as the server, the CLI and the logs print them
 * (no grouping), everywhere on the page, so one can be searched for and compared as it is.
 */
function tok(t: unknown): string {
  return typeof t === 'number' || typeof t === 'string' ? String(t) : '—';
}
function arr<T>(v: readonly T[] | undefined): readonly T[] {
  return Array.isArray(v) ? v : [];
}
/** How many there are in all: the server's count beside a list it cuts, else the list's length. */
function countOf(count: number | undefined, list: readonly unknown[] | undefined): number {
  return typeof count === 'number' ? count : arr(list).length;
}

// ---- sections ---------------------------------------------------------------------------
/** A fleet member has no master/slave role: each region has its own server (the Fleet card). */
function roleOf(s: Status): string {
  if (s.fleet !== undefined && s.fleet !== null) return 'fleet member';
  return typeof s.ha?.role === 'string' ? s.ha.role : 'standalone';
}
/** The mastership token, when this server is part of a master/slave set and has one. */
function tokenOf(s: Status): number | string | undefined {
  const t = s.ha?.token;
  return !['standalone', 'fleet member'].includes(roleOf(s)) &&
    (typeof t === 'number' || typeof t === 'string')
    ? t
    : undefined;
}

function renderHeader(s: Status, now: number): number | string {
  const role = roleOf(s);
  const r = $('role');
  r.textContent = role;
  r.className = `role role-${['master', 'slave', 'standalone'].includes(role) ? role : 'other'}`;
  const parts = [s.server || 'locksmith', s.ha?.address || s.listening || ''];
  if (tokenOf(s) !== undefined) parts.push(`token ${tok(tokenOf(s))}`);
  if (role === 'slave') {
    parts.push(s.ha?.master ? `master at ${s.ha.master.address}` : 'no master known');
  }
  $('headline').textContent = parts.filter(Boolean).join(' · ');
  document.title = `locksmith ${role} · ${s.listening || ''}`;
  return s.ha?.since !== undefined ? s.ha.since : now - (s.uptimeMs || 0);
}

function renderOverview(s: Status, now: number, since: number | string): void {
  const ha = s.ha;
  const token = tokenOf(s);
  const items: [string, unknown][] = [
    ['role', roleOf(s)],
    ['since', clock(since) + ago(since, now)],
    [
      'mastership token',
      token !== undefined
        ? tok(token)
        : roleOf(s) === 'standalone'
          ? 'none (standalone)'
          : roleOf(s) === 'fleet member'
            ? 'none (each region has its epoch: see the Fleet card)'
            : 'none yet',
    ],
    ['listening', s.listening],
    ['advertised', ha?.address],
    [
      'master',
      ha?.master
        ? `${ha.master.address} (token ${tok(ha.master.token)}, since ${clock(ha.master.since)})`
        : roleOf(s) === 'slave'
          ? 'unknown'
          : undefined,
    ],
    [
      'locker',
      ha?.locker !== undefined
        ? typeof ha.locker === 'string'
          ? ha.locker
          : JSON.stringify(ha.locker)
        : undefined,
    ],
    ['uptime', dur(s.uptimeMs)],
    ['connections', num(s.connections)],
    ['sessions', num(countOf(s.sessionsOpen, s.sessions))],
    ['row locks held', num(countOf(s.locksHeld, s.locks))],
    ['waiting for a row', num(countOf(s.waiting, s.waits))],
    ['scanners', num(s.scanners)],
  ];
  const dl = $('overview');
  dl.replaceChildren();
  for (const [k, v] of items) {
    if (v === undefined || v === null || v === '') continue;
    dl.append(el('dt', '', k), el('dd', '', v));
  }
}

function renderServers(s: Status, now: number): void {
  const ha = s.ha;
  if (
    !ha ||
    !Array.isArray(ha.peers) ||
    (['standalone', 'fleet member'].includes(roleOf(s)) && !ha.peers.length)
  ) {
    put(
      'servers',
      empty(
        s.fleet
          ? 'A fleet member: the fleet’s servers are listed in the Fleet card.'
          : 'Standalone: no other servers (start with serve --ha to run master/slave).',
      ),
    );
    return;
  }
  const rows = ha.peers.map((p) => [
    p.id,
    p.address + (p.address === ha.address ? ' (this server)' : ''),
    p.state === 'gone'
      ? tag(`gone (was ${p.role})`, 'off')
      : tag(p.role, p.role === 'master' ? 'on' : ''),
    clock(p.seenAt) + ago(p.seenAt, now),
  ]);
  put(
    'servers',
    rows.length
      ? table(
          [{ title: 'id' }, { title: 'address' }, { title: 'role' }, { title: 'last seen' }],
          rows,
        )
      : empty('No other server seen yet.'),
  );
}

function renderTables(s: Status): void {
  const rows = arr(s.tables).map((t) => [
    t.name,
    arr(t.families).join(', '),
    num(t.regions),
    num(t.rows),
    num(t.cells),
  ]);
  put(
    'tables',
    rows.length
      ? table(
          [
            { title: 'table' },
            { title: 'families' },
            { title: 'regions', num: true },
            { title: 'rows', num: true },
            { title: 'cells', num: true },
          ],
          rows,
        )
      : empty(
          roleOf(s) === 'slave'
            ? 'A slave serves no tables until it becomes master.'
            : 'No tables.',
        ),
  );
}

/**
 * The Fleet card: only a fleet member's status has `fleet`, so the page does not declare it;
 * it is made here as the page makes its cards (`section.card#fleet-card`, its title, `#fleet`),
 * after 'Servers seen', and removed again when a status comes without `fleet`.
 * Returns whether it is there.
 */
function fleetCard(show: boolean): boolean {
  const card = document.getElementById('fleet-card');
  if (!show) {
    card?.remove();
    return false;
  }
  if (card === null) {
    const section = el('section', 'card wide');
    section.id = 'fleet-card';
    const body = el('div');
    body.id = 'fleet';
    section.append(el('h2', '', 'Fleet'), body);
    $('servers-card').after(section);
  }
  return true;
}

/** A fleet member's state: gone once its lease ran out; leaving while it hands over. */
function memberState(m: { live?: boolean; leaving?: boolean }): HTMLElement {
  if (!m.live) return tag('gone', 'off');
  return m.leaving ? tag('leaving') : tag('live', 'on');
}

/** This member, the fleet's members and regions, and the regions this member moved lately. */
function renderFleet(s: Status, now: number): void {
  const f = typeof s.fleet === 'object' && s.fleet !== null ? s.fleet : undefined;
  fleetCard(f !== undefined);
  if (f === undefined) return;
  const unserved = typeof f.unserved === 'number' ? f.unserved : 0;
  const items: [string, Cell][] = [
    ['this server', f.address],
    ['member id', f.id ? el('span', 'mono', f.id) : 'none (not a member now)'],
    ['lease', dur(f.leaseMs)],
    ['regions', num(f.regions)],
    [
      'served by nobody',
      unserved > 0 ? tag(`${num(unserved)} (being taken over)`, 'off') : num(f.unserved),
    ],
  ];
  const dl = el('dl');
  for (const [k, v] of items) {
    const dd = el('dd');
    if (v instanceof Node) dd.append(v);
    else dd.textContent = v === undefined || v === null ? '—' : String(v);
    dl.append(el('dt', '', k), dd);
  }
  // This server's row: its id, or its address while it has none (it left the fleet).
  const isThis = (m: { id: string; address: string }) =>
    f.id ? m.id === f.id : m.address === f.address;
  const members = arr(f.members).map((m) => [
    m.address + (isThis(m) ? ' (this server)' : ''),
    el('span', 'mono', m.id),
    memberState(m),
    num(m.regions),
  ]);
  const moves = arr(f.moves)
    .slice(-MOVES_SHOWN)
    .reverse()
    .map((m) => [
      clock(m.at) + ago(m.at, now),
      el('span', 'mono', m.region),
      tag(m.change, m.change === 'claimed' ? 'on' : m.change === 'lost' ? 'off' : ''),
      m.why,
    ]);
  put(
    'fleet',
    dl,
    el('h3', '', 'Members'),
    members.length
      ? table(
          [
            { title: 'address' },
            { title: 'id' },
            { title: 'state' },
            { title: 'regions', num: true },
          ],
          members,
        )
      : empty('No member seen yet.'),
    el('h3', '', 'Regions this server moved lately (newest first)'),
    moves.length
      ? table(
          [
            { title: 'when' },
            { title: 'region' },
            { title: 'change' },
            { title: 'why', wrap: true },
          ],
          moves,
          arr(f.moves).length,
        )
      : empty('No region moved yet.'),
  );
}

/** Every region, each table's in key order, with its key range (as HBase prints keys). */
function renderRegions(s: Status): void {
  const rows = arr(s.regions).map((r) => [
    r.table,
    r.startKey === '' ? '(start)' : r.startKey,
    r.endKey === '' ? '(end)' : r.endKey,
    r.server === null ? tag('nobody (being taken over)', 'off') : r.server,
    // `null` where another fleet member serves the region: num() shows an em dash.
    num(r.rows),
    num(r.cells),
  ]);
  put(
    'regions',
    rows.length
      ? table(
          [
            { title: 'table' },
            { title: 'first row', wrap: true },
            { title: 'up to (not incl.)', wrap: true },
            { title: 'served by' },
            { title: 'rows', num: true },
            { title: 'cells', num: true },
          ],
          rows,
        )
      : empty('No regions: no tables.'),
  );
}

function renderSessions(s: Status): void {
  const rows = arr(s.sessions).map((x) => [
    x.client,
    el('span', 'mono', x.session),
    tag(x.connected ? 'connected' : 'disconnected', x.connected ? 'on' : 'off'),
    typeof x.leaseRemainingMs === 'number'
      ? withBar(
          `${dur(x.leaseRemainingMs)} of ${dur(x.leaseMs)}`,
          x.leaseRemainingMs,
          x.leaseMs ?? 0,
        )
      : dur(x.leaseMs),
    num(x.locks),
    num(x.waiting),
    num(x.scanners),
    dur(x.ageMs),
  ]);
  put(
    'sessions',
    rows.length
      ? table(
          [
            { title: 'client' },
            { title: 'session' },
            { title: '' },
            { title: 'lease remaining' },
            { title: 'locks', num: true },
            { title: 'waiting', num: true },
            { title: 'scanners', num: true },
            { title: 'age', num: true },
          ],
          rows,
          countOf(s.sessionsOpen, s.sessions),
        )
      : empty('No sessions.'),
  );
}

function renderLocks(s: Status): void {
  const locks = arr(s.locks);
  const longest = locks.reduce((m, l) => Math.max(m, l.leaseRemainingMs || 0), 1);
  const rows = locks.map((l) => [
    l.table,
    el('span', 'mono', l.row),
    `${l.client} (${l.session})`,
    el('span', 'mono', tok(l.token)),
    withBar(
      l.renews ? `${dur(l.leaseRemainingMs)} (renews with its session)` : dur(l.leaseRemainingMs),
      l.leaseRemainingMs || 0,
      longest,
    ),
  ]);
  put(
    'locks',
    rows.length
      ? table(
          [
            { title: 'table' },
            { title: 'row' },
            { title: 'owner' },
            { title: 'fencing token', num: true },
            { title: 'lease remaining' },
          ],
          rows,
          countOf(s.locksHeld, locks),
        )
      : empty('No row lock held.'),
  );
}

function renderWaits(s: Status): void {
  const waits = arr(s.waits);
  const rows = waits.map((w) => [
    w.table,
    el('span', 'mono', w.row),
    owner(w.waiter),
    w.holder ? owner(w.holder) : 'a mutation',
    w.explicit ? 'lockRow' : 'mutation',
    dur(w.waitedMs),
  ]);
  if (rows.length) {
    put(
      'waits',
      table(
        [
          { title: 'table' },
          { title: 'row' },
          { title: 'waiter' },
          { title: 'held by' },
          { title: 'for' },
          { title: 'waiting for', num: true },
        ],
        rows,
        countOf(s.waiting, waits),
      ),
    );
  } else if (s.waits === undefined) {
    const count = arr(s.sessions).reduce((n, x) => n + (x.waiting || 0), 0);
    put(
      'waits',
      empty(
        count ? `${count} lock call(s) waiting (this server does not list them).` : 'Nobody waits.',
      ),
    );
  } else put('waits', empty('Nobody waits.'));
  const d = s.deadlocks;
  const box = el('div', 'deadlock none');
  if (!d) {
    box.textContent = '';
  } else if (!d.last) {
    box.textContent = `Deadlocks caught: ${num(d.detected)}.`;
  } else {
    box.className = 'deadlock';
    box.append(
      el('strong', '', `Deadlocks caught: ${num(d.detected)}. `),
      el('span', '', `Last at ${clock(d.last.at)} on table ${d.last.table}: `),
    );
    const chain = el('div', 'mono');
    const steps = arr(d.last.cycle);
    const first = steps[0];
    chain.textContent =
      steps.map((st) => `${owner(st.waiter)} \u2014[row ${st.row}]\u2192 `).join('') +
      (first ? owner(first.waiter) : '');
    box.append(
      chain,
      el(
        'div',
        '',
        'The request that would have closed the cycle was refused (DEADLOCK); nothing else was touched.',
      ),
    );
  }
  put('deadlocks', box);
}

function renderHandlers(s: Status): void {
  const h = s.handlers || {};
  const rows = Object.keys(h).map((name) => {
    const l = h[name] || {};
    return [
      name,
      withBar(`${num(l.busy)} / ${num(l.size)} busy`, l.busy || 0, l.size || 0, 0.9),
      num(l.queued),
      num(l.parked),
      num(l.completed),
    ];
  });
  put(
    'handlers',
    rows.length
      ? table(
          [
            { title: 'lane' },
            { title: 'handlers' },
            { title: 'queued', num: true },
            { title: 'parked', num: true },
            { title: 'completed', num: true },
          ],
          rows,
        )
      : empty('No handler figures.'),
  );
}

function renderCalls(s: Status): void {
  const ok = s.calls?.ok || {};
  const failed = s.calls?.failed || {};
  const names = Array.from(new Set(Object.keys(ok).concat(Object.keys(failed)))).sort();
  const rows = names.map((m) => [m, num(ok[m] || 0), num(failed[m] || 0)]);
  put(
    'calls',
    rows.length
      ? table(
          [{ title: 'method' }, { title: 'ok', num: true }, { title: 'failed', num: true }],
          rows,
        )
      : empty('No calls yet.'),
  );
}

function renderFailovers(s: Status, now: number): void {
  const ha = s.ha;
  if (!ha || !Array.isArray(ha.failovers) || (roleOf(s) === 'standalone' && !ha.failovers.length)) {
    put('failovers', empty('Standalone: no failover history.'));
    return;
  }
  const rows = ha.failovers
    .slice()
    .reverse()
    .map((f) => [clock(f.at) + ago(f.at, now), f.role, el('span', 'mono', tok(f.token)), f.reason]);
  put(
    'failovers',
    rows.length
      ? table(
          [
            { title: 'when' },
            { title: 'became' },
            { title: 'token', num: true },
            { title: 'why', wrap: true },
          ],
          rows,
        )
      : empty('No failover yet.'),
  );
}

// ---- the rate chart: plain SVG ------------------------------------------------------------
function svg(tagName: string, attrs: Record<string, string | number>, text?: string): SVGElement {
  const e = document.createElementNS(SVG, tagName);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}
function niceMax(v: number): number {
  if (v <= 1) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}
function renderRates(s: Status): void {
  const r = s.rates;
  if (!r || !Array.isArray(r.buckets) || !r.intervalMs) {
    put('rates', empty('This server keeps no rate history.'));
    $('rates-now').textContent = '';
    return;
  }
  const intervalMs = r.intervalMs;
  const W = 640;
  const H = 190;
  const L = 44;
  const R = 10;
  const T = 10;
  const B = 24;
  const now = r.now || Date.now();
  const span = 10 * 60 * 1000;
  const x0 = now - span;
  const pts = r.buckets
    .map((b) => {
      const elapsed = Math.max(1, Math.min(intervalMs, now - b.at));
      return {
        at: b.at,
        mid: b.at + elapsed / 2,
        calls: (b.calls * 1000) / elapsed,
        errors: (b.errors * 1000) / elapsed,
        n: b.calls,
        e: b.errors,
      };
    })
    .filter((p) => p.at + intervalMs > x0);
  const max = niceMax(pts.reduce((m, p) => Math.max(m, p.calls), 0));
  const X = (t: number) => L + ((t - x0) / span) * (W - L - R);
  const Y = (v: number) => T + (1 - v / max) * (H - T - B);
  const chart = svg('svg', {
    viewBox: `0 0 ${W} ${H}`,
    class: 'chart',
    id: 'rate-chart',
    role: 'img',
    'aria-label': 'calls per second over the last 10 minutes',
  });
  for (const f of [0, 0.5, 1]) {
    chart.append(svg('line', { class: 'grid', x1: L, x2: W - R, y1: Y(max * f), y2: Y(max * f) }));
    chart.append(
      svg(
        'text',
        { class: 'axis', x: L - 6, y: Y(max * f) + 4, 'text-anchor': 'end' },
        String(+(max * f).toFixed(2)),
      ),
    );
  }
  for (let m = 10; m >= 0; m -= 2) {
    chart.append(
      svg(
        'text',
        {
          class: 'axis',
          x: X(now - m * 60000),
          y: H - 6,
          'text-anchor': m === 10 ? 'start' : m === 0 ? 'end' : 'middle',
        },
        m === 0 ? 'now' : `\u2212${m} min`,
      ),
    );
  }
  const first = pts[0];
  const last = pts[pts.length - 1];
  if (first !== undefined && last !== undefined) {
    const line = (key: 'calls' | 'errors') =>
      pts.map((p) => `${X(p.mid).toFixed(1)},${Y(p[key]).toFixed(1)}`).join(' ');
    chart.append(
      svg('polygon', {
        class: 'area',
        points: `${X(first.mid).toFixed(1)},${Y(0)} ${line('calls')} ${X(last.mid).toFixed(1)},${Y(0)}`,
      }),
    );
    chart.append(svg('polyline', { class: 'calls', points: line('calls') }));
    chart.append(svg('polyline', { class: 'errors', points: line('errors') }));
    for (const p of pts) {
      const c = svg('circle', {
        class: 'pt',
        cx: X(p.mid).toFixed(1),
        cy: Y(p.calls).toFixed(1),
        r: pts.length > 60 ? 1.5 : 2.5,
        'data-calls': p.n,
        'data-at': p.at,
      });
      c.append(
        svg(
          'title',
          {},
          `${new Date(p.at).toLocaleTimeString()}: ${p.n} calls, ${p.e} errors (${p.calls.toFixed(1)}/s)`,
        ),
      );
      chart.append(c);
      if (p.e > 0) {
        chart.append(
          svg('circle', {
            class: 'pt err',
            cx: X(p.mid).toFixed(1),
            cy: Y(p.errors).toFixed(1),
            r: 2,
          }),
        );
      }
    }
  }
  const legend = el('div', 'legend');
  legend.append(
    el('span', 'k1', '\u25A0 calls/s'),
    el('span', '', '  '),
    el('span', 'k2', '\u25A0 errors/s'),
    el('span', '', `  (${intervalMs / 1000} s buckets, last 10 min)`),
  );
  put('rates', chart, legend);
  const done = pts.length > 1 ? pts[pts.length - 2] : pts[0];
  $('rates-now').textContent = done ? `${done.calls.toFixed(1)} calls/s` : '';
}

// ---- polling and the token gate ---------------------------------------------------------------
function token(): string | null {
  try {
    return sessionStorage.getItem(KEY) || kept;
  } catch {
    return kept;
  }
}
function setLive(text: string, ok: boolean): void {
  const live = $('live');
  live.textContent = text;
  live.classList.toggle('stale', !ok);
}
function clearBoard(): void {
  $('board').hidden = true;
  fleetCard(false);
  for (const id of [
    'overview',
    'servers',
    'rates',
    'handlers',
    'tables',
    'regions',
    'sessions',
    'locks',
    'waits',
    'deadlocks',
    'failovers',
    'calls',
    'rates-now',
    'headline',
  ])
    $(id).replaceChildren();
  $('role').textContent = '…';
  $('role').className = 'role';
}
/** The token field (an `<input>` of the page). */
function tokenInput(): HTMLInputElement {
  return $('token-input') as HTMLInputElement;
}
function showGate(message: string): void {
  gated = true;
  clearBoard();
  $('gate').hidden = false;
  $('gate-message').textContent = message;
  setLive('token needed', false);
  tokenInput().focus();
}
function render(s: Status): void {
  const now = Date.now();
  const since = renderHeader(s, now);
  renderOverview(s, now, since);
  renderServers(s, now);
  renderFleet(s, now);
  renderTables(s);
  renderRegions(s);
  renderSessions(s);
  renderLocks(s);
  renderWaits(s);
  renderHandlers(s);
  renderCalls(s);
  renderFailovers(s, now);
  renderRates(s);
  $('board').hidden = false;
}
function schedule(): void {
  window.clearTimeout(timer);
  timer = window.setTimeout(() => void poll(), POLL_MS);
}
async function poll(): Promise<void> {
  if (gated) return;
  const t = token();
  const headers: Record<string, string> = t ? { authorization: `Bearer ${t}` } : {};
  let res: Response;
  try {
    res = await fetch('/status', {
      headers,
      cache: 'no-store',
      credentials: 'omit',
      redirect: 'error',
    });
  } catch {
    setLive(
      `server unreachable${lastOk ? ` · last update ${new Date(lastOk).toLocaleTimeString()}` : ''}`,
      false,
    );
    schedule();
    return;
  }
  if (res.status === 401) {
    kept = null;
    if (t) {
      try {
        sessionStorage.removeItem(KEY);
      } catch {}
    }
    showGate(t ? 'The server refused this token.' : '');
    return;
  }
  if (!res.ok) {
    setLive(`status answered HTTP ${res.status}`, false);
    schedule();
    return;
  }
  try {
    const status: Status = await res.json();
    render(status);
    lastOk = Date.now();
    setLive(`live · updated ${new Date(lastOk).toLocaleTimeString()}`, true);
    $('footer').textContent =
      `Read-only: this page only reads GET /status every ${POLL_MS / 1000} s.`;
  } catch (err) {
    setLive(`could not read the status: ${err instanceof Error ? err.message : err}`, false);
  }
  schedule();
}

function start(): void {
  window.setInterval(() => {
    if (!gated && lastOk && Date.now() - lastOk > STALE_MS) $('live').classList.add('stale');
  }, 1000);
  $('token-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const input = tokenInput();
    const value = input.value;
    if (!value) return;
    try {
      sessionStorage.setItem(KEY, value);
    } catch {
      kept = value;
    }
    input.value = '';
    $('gate').hidden = true;
    gated = false;
    setLive('connecting…', true);
    void poll();
  });
  void poll();
}

// Only in a browser: loaded by Node (the build's module-load check) this defines and runs nothing.
if (typeof document !== 'undefined') start();
