import { isIP } from 'node:net';

/**
 * Headers of every answer of the status port. The dashboard runs only this server's own script
 * and style (no inline code, no other origin, no framing, no form target), nothing is cached or
 * sniffed, no Referer leaves, and there is no CORS header: a page of another origin cannot read
 * an answer.
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'cache-control': 'no-store',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

/**
 * Whether a request's `Host` header names this server the way a browser on a legitimate page
 * would: an IP literal (v4, or v6 in brackets), `localhost`, or the host the server was told
 * to listen on, with an optional port. Anything else is refused, which defeats DNS rebinding:
 * a hostile page whose name was re-pointed at 127.0.0.1 sends its own name as Host.
 */
export function allowedHost(header: string | undefined, configuredHost: string): boolean {
  if (header === undefined || header.length === 0 || header.length > 300) return false;
  let name: string;
  let port: string | undefined;
  if (header.startsWith('[')) {
    const end = header.indexOf(']');
    if (end < 0) return false;
    name = header.slice(1, end);
    const rest = header.slice(end + 1);
    if (rest !== '' && !rest.startsWith(':')) return false;
    port = rest === '' ? undefined : rest.slice(1);
    if (isIP(name) !== 6) return false;
  } else {
    const colon = header.indexOf(':');
    name = colon < 0 ? header : header.slice(0, colon);
    port = colon < 0 ? undefined : header.slice(colon + 1);
  }
  if (port !== undefined && !/^[0-9]{1,5}$/.test(port)) return false;
  const lower = name.toLowerCase();
  const configured = configuredHost.toLowerCase().replace(/^\[(.*)\]$/, '$1');
  return isIP(lower) !== 0 || lower === 'localhost' || lower === configured;
}
