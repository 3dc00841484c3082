/**
 * The dashboard's page (`GET /`): a static shell with no data in it. Everything shown is
 * fetched from `/status` by `/dashboard.js` (a module script, compiled from dashboard-client.ts;
 * deferred like every module script) and written with `textContent`, so the page itself
 * is the same for everyone and safe to serve without the token; the Content-Security-Policy
 * allows only this server's own script and style (no inline code, see http-guard.ts).
 */
/** A card of the board: its title, and the element the script fills (`id`). */
function card(id: string, title: string, wide: boolean, body = `<div id="${id}"></div>`): string {
  return `  <section class="card${wide ? ' wide' : ''}" id="${id}-card">
    <h2>${title}</h2>
    ${body}
  </section>`;
}

const CARDS = [
  card('overview', 'This server', false, '<dl id="overview"></dl>'),
  card('servers', 'Servers seen', true),
  card('rates', 'Requests <span id="rates-now" class="aside"></span>', true),
  card('handlers', 'Handlers and lanes', false),
  card('tables', 'Tables', false),
  card('regions', 'Regions', true),
  card('sessions', 'Sessions', true),
  card('locks', 'Held row locks', true),
  card(
    'waits',
    'Waiting for a row',
    true,
    '<div id="waits"></div>\n    <div id="deadlocks"></div>',
  ),
  card('failovers', 'Failover history', true),
  card('calls', 'Calls by method', false),
].join('\n');

export const DASHBOARD_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>locksmith</title>
<link rel="icon" href="/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/dashboard.css">
<script type="module" src="/dashboard.js"></script>
</head>
<body>
<header>
  <h1>locksmith</h1>
  <span id="role" class="role">…</span>
  <span id="headline" class="headline"></span>
  <span id="live" class="live">connecting…</span>
</header>
<section id="gate" class="gate" hidden>
  <form id="token-form" autocomplete="off">
    <h2>This server needs its token</h2>
    <p>The token stays in this tab (sessionStorage) and goes only to this server, as
      <code>Authorization: Bearer</code>.</p>
    <input id="token-input" type="password" autocomplete="off" aria-label="token" placeholder="token">
    <button id="token-submit" type="submit">Show the dashboard</button>
    <p id="gate-message" class="gate-message"></p>
  </form>
</section>
<main id="board" hidden>
${CARDS}
</main>
<footer id="footer"></footer>
</body>
</html>
`;

/** The tab's icon: a padlock. */
export const DASHBOARD_ICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">
<path d="M10 14v-4a6 6 0 0 1 12 0v4" fill="none" stroke="#111827" stroke-width="3"/>
<rect x="6" y="14" width="20" height="15" rx="3" fill="#2563eb"/>
<circle cx="16" cy="21" r="2.5" fill="#fff"/>
</svg>
`;
