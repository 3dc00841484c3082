import { InvalidArgumentError } from '../core/errors.js';
import { describeValue } from '../core/options.js';

/** Where a server listens, and whether it speaks TLS. */
export interface ServerAddress {
  host: string;
  port: number;
  tls: boolean;
  /** `host:port` (IPv6 hosts in brackets): how errors, events and `client.master` name it. */
  label: string;
}

/** The port of a `locksmith://host` address without one. */
export const DEFAULT_PORT = 7420;

/** `host:port`, the host in brackets when it is an IPv6 address. */
export function addressLabel(host: string, port: number): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/**
 * Parses `locksmith://host:port` (or `locksmiths://` for TLS); the port defaults to 7420. A bare
 * `host:port` (no scheme) is `locksmith://host:port`, as redis-cli and etcdctl take addresses.
 */
export function parseServerUrl(url: string): ServerAddress {
  let parsed: URL;
  try {
    parsed = new URL(typeof url === 'string' && !url.includes('://') ? `locksmith://${url}` : url);
  } catch {
    throw new InvalidArgumentError(
      `Invalid server address ${describeValue(url)}: expected locksmith://host:port`,
    );
  }
  if (parsed.protocol !== 'locksmith:' && parsed.protocol !== 'locksmiths:') {
    throw new InvalidArgumentError(
      `Invalid server address ${url}: the scheme must be locksmith:// or locksmiths://`,
    );
  }
  if (parsed.pathname !== '' && parsed.pathname !== '/') {
    throw new InvalidArgumentError(`Invalid server address ${url}: no path expected`);
  }
  if (parsed.username !== '' || parsed.password !== '' || parsed.search !== '' || parsed.hash) {
    throw new InvalidArgumentError(
      `Invalid server address ${url}: expected locksmith://host:port, nothing else`,
    );
  }
  const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
  if (host === '') throw new InvalidArgumentError(`Invalid server address ${url}: no host`);
  const port = parsed.port === '' ? DEFAULT_PORT : Number(parsed.port);
  if (port === 0) throw new InvalidArgumentError(`Invalid server address ${url}: port 0`);
  return { host, port, tls: parsed.protocol === 'locksmiths:', label: addressLabel(host, port) };
}

/**
 * The servers a client may find its master among: `'locksmith://h1:p1,h2:p2'` (the scheme
 * once, for every address; an address may repeat it) or an array of addresses. Every one is
 * checked; a bad one is refused with `InvalidArgumentError` naming it. Duplicates are dropped.
 */
export function parseServerAddresses(urls: string | readonly string[]): ServerAddress[] {
  let parts: string[];
  if (typeof urls === 'string') {
    const scheme =
      /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(urls) ?? (urls.includes('://') ? null : ['']);
    if (scheme === null || !urls.includes(',')) parts = [urls];
    else {
      const rest = urls.slice(scheme[0].length).split(',');
      parts = rest.map((part) => {
        if (part.trim() === '') {
          throw new InvalidArgumentError(
            `Invalid server address list ${JSON.stringify(urls)}: an empty address between commas`,
          );
        }
        return part.includes('://') ? part : `${scheme[0]}${part}`;
      });
    }
  } else if (Array.isArray(urls)) {
    if (urls.length === 0) {
      throw new InvalidArgumentError('connect: the list of server addresses is empty');
    }
    parts = urls.map((url, i) => {
      if (typeof url !== 'string') {
        throw new InvalidArgumentError(
          `connect: server address #${i + 1} must be a string, got ${describeValue(url)}`,
        );
      }
      if (url.includes(',')) {
        throw new InvalidArgumentError(
          `connect: server address #${i + 1} ${JSON.stringify(url)}: one address per array element`,
        );
      }
      return url;
    });
  } else {
    throw new InvalidArgumentError(
      `connect: expected a server address (locksmith://host:port) or an array of them, got ${describeValue(urls)}`,
    );
  }
  const out: ServerAddress[] = [];
  for (const part of parts) {
    const address = parseServerUrl(part);
    if (!out.some((a) => a.label === address.label && a.tls === address.tls)) out.push(address);
  }
  return out;
}

/**
 * The master a `NOT_MASTER` refusal names (`details.master`, `host:port`), reached the same
 * way (TLS or not) as the server that named it; undefined unless it is well-formed, so that a
 * confused or hostile server cannot send the client anywhere but a plain `host:port`.
 */
export function parseMasterAddress(master: unknown, tls: boolean): ServerAddress | undefined {
  if (typeof master !== 'string' || master.length === 0 || master.length > 300) return undefined;
  if (!/^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):[0-9]{1,5}$/.test(master)) return undefined;
  try {
    const address = parseServerUrl(`${tls ? 'locksmiths' : 'locksmith'}://${master}`);
    return address.port >= 1 && address.port <= 65535 ? address : undefined;
  } catch {
    return undefined;
  }
}
