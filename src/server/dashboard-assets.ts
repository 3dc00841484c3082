import { readFileSync } from 'node:fs';

/**
 * The dashboard's script and style sheet, read from the files next to this module: the script
 * is `dashboard-client.ts` compiled by tsc, the style sheet `dashboard.css`, copied into `dist/`
 * by `npm run build`. Each is read once, on its first request, and then served from memory.
 */
function asset(name: string, tidy: (text: string) => string = (text) => text): () => string {
  let text: string | undefined;
  return () => {
    text ??= tidy(readFileSync(new URL(`./${name}`, import.meta.url), 'utf8'));
    return text;
  };
}

/** `GET /dashboard.js`, without tsc's source-map comment (the map is not served). */
export const dashboardScript = asset('dashboard-client.js', (js) =>
  js.replace(/\n\/\/# sourceMappingURL=\S*\s*$/, '\n'),
);

/** `GET /dashboard.css`. */
export const dashboardStyle = asset('dashboard.css');
