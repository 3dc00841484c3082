/** The dashboard's style sheet (`GET /dashboard.css`): served by the server, no CDN. */
export const DASHBOARD_CSS = `
:root {
  --bg: #f4f6f8; --card: #fff; --ink: #1d2630; --muted: #65717e; --line: #dde3e9;
  --accent: #2563eb; --ok: #15803d; --warn: #b45309; --bad: #b91c1c;
  color-scheme: light;
}
* { box-sizing: border-box; }
body {
  margin: 0; background: var(--bg); color: var(--ink);
  font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
}
header {
  display: flex; align-items: center; gap: 14px; flex-wrap: wrap;
  padding: 12px 20px; background: #111827; color: #f9fafb;
}
header h1 { margin: 0; font-size: 19px; letter-spacing: .02em; }
.headline { color: #cbd5e1; }
.live { margin-left: auto; font-size: 12px; color: #a7f3d0; }
.live.stale { color: #fca5a5; }
.role {
  text-transform: uppercase; font-weight: 700; font-size: 12px; letter-spacing: .08em;
  padding: 3px 10px; border-radius: 999px; background: #374151;
}
.role-master { background: var(--ok); }
.role-slave { background: var(--warn); }
.role-standalone { background: var(--accent); }
main {
  display: grid; gap: 14px; padding: 16px 20px; grid-auto-flow: row dense;
  grid-template-columns: repeat(auto-fill, minmax(360px, 1fr));
}
.card {
  background: var(--card); border: 1px solid var(--line); border-radius: 8px;
  padding: 12px 14px; min-width: 0; overflow-x: auto;
}
.card.wide { grid-column: span 2; }
@media (max-width: 800px) { .card.wide { grid-column: auto; } }
.card h2 { margin: 0 0 8px; font-size: 14px; color: var(--muted); font-weight: 600; }
.aside { font-weight: 400; margin-left: 8px; color: var(--ink); }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 4px 8px 4px 0; border-bottom: 1px solid var(--line); white-space: nowrap; }
th { font-size: 12px; color: var(--muted); font-weight: 600; }
td.wrap { white-space: normal; min-width: 14em; overflow-wrap: anywhere; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.empty { color: var(--muted); font-style: italic; margin: 4px 0; }
.more { color: var(--muted); font-size: 12px; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 4px 14px; margin: 0; }
dt { color: var(--muted); }
dd { margin: 0; font-variant-numeric: tabular-nums; overflow-wrap: anywhere; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
.bar { display: inline-block; width: 70px; height: 8px; background: var(--line); border-radius: 4px; vertical-align: middle; margin-right: 6px; }
.bar > span { display: block; height: 100%; border-radius: 4px; background: var(--accent); }
.bar.hot > span { background: var(--bad); }
.tag { font-size: 11px; padding: 1px 6px; border-radius: 4px; background: var(--line); }
.tag.off { background: #fee2e2; color: var(--bad); }
.tag.on { background: #dcfce7; color: var(--ok); }
.deadlock { margin-top: 10px; padding: 8px; border-radius: 6px; background: #fef2f2; color: var(--bad); }
.deadlock.none { background: transparent; color: var(--muted); padding: 0; }
svg.chart { width: 100%; height: 190px; display: block; }
svg.chart .grid { stroke: var(--line); stroke-width: 1; }
svg.chart .axis { fill: var(--muted); font-size: 11px; }
svg.chart .calls { fill: none; stroke: var(--accent); stroke-width: 2; }
svg.chart .errors { fill: none; stroke: var(--bad); stroke-width: 1.5; }
svg.chart .area { fill: rgba(37, 99, 235, .10); stroke: none; }
svg.chart circle.pt { fill: var(--accent); }
svg.chart circle.pt.err { fill: var(--bad); }
.legend { font-size: 12px; color: var(--muted); }
.legend .k1 { color: var(--accent); } .legend .k2 { color: var(--bad); }
.gate { display: flex; justify-content: center; padding: 60px 20px; }
.gate form { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 20px 24px; max-width: 460px; }
.gate h2 { margin-top: 0; font-size: 17px; }
.gate input { width: 100%; padding: 8px; font-size: 14px; margin: 6px 0 10px; }
.gate button { padding: 8px 14px; font-size: 14px; }
.gate-message { color: var(--bad); min-height: 1.4em; }
footer { padding: 4px 20px 16px; color: var(--muted); font-size: 12px; }
[hidden] { display: none !important; }
`;
