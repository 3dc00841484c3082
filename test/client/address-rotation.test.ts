import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AddressRotation, handshakeTimeoutMs } from '../../src/client/address-rotation.js';
import type { ServerAddress } from '../../src/client/server-address.js';

const at = (port: number): ServerAddress => ({
  host: '127.0.0.1',
  port,
  tls: false,
  label: `127.0.0.1:${port}`,
});
const [a, b, c] = [at(1), at(2), at(3)] as [ServerAddress, ServerAddress, ServerAddress];

function rotation(addresses = [a, b, c]) {
  return new AddressRotation({
    addresses,
    connectTimeoutMs: 8_000,
    reconnectMinMs: 50,
    reconnectMaxMs: 2_000,
  });
}

describe('address rotation', () => {
  it('goes round the list, without waiting within a round and with a growing backoff after', () => {
    const r = rotation();
    const seen: string[] = [];
    const delays: number[] = [];
    for (let i = 0; i < 9; i++) {
      seen.push(r.next().label);
      delays.push(r.afterAttempt(false));
    }
    assert.deepEqual(
      seen.map((l) => l.slice(-1)),
      ['1', '2', '3', '1', '2', '3', '1', '2', '3'],
    );
    assert.deepEqual(
      delays.map((d) => d > 0),
      [false, false, true, false, false, true, false, false, true],
    );
    // Jittered between half and all of 50, 100, 200 ms.
    assert.ok((delays[2] as number) >= 25 && (delays[2] as number) <= 50);
    assert.ok((delays[8] as number) >= 100 && (delays[8] as number) <= 200);
  });

  it('while a server answers NOT_MASTER (a failover), the wait between rounds stays short; without, it grows', () => {
    const refusing = rotation([a, b]);
    const quiet = rotation([a, b]);
    let longestRefused = 0;
    let longestQuiet = 0;
    for (let round = 0; round < 12; round++) {
      for (let i = 0; i < 2; i++) {
        refusing.next();
        if (i === 1) refusing.redirectTo(undefined); // b is a slave that knows no master yet
        longestRefused = Math.max(longestRefused, refusing.afterAttempt(false));
        quiet.next();
        longestQuiet = Math.max(longestQuiet, quiet.afterAttempt(false));
      }
    }
    assert.ok(longestRefused <= 4 * 50, `waited ${longestRefused} ms between rounds`);
    assert.ok(longestQuiet > 1_000, `waited at most ${longestQuiet} ms with nobody answering`);
  });

  it('a redirect goes first, then a dropped server is retried first; a welcome resumes after it', () => {
    const r = rotation();
    assert.equal(r.next(), a);
    r.redirectTo(c);
    assert.equal(r.next(), c);
    r.retryCurrent();
    assert.equal(r.next(), c);
    r.welcomed(c.label);
    assert.equal(r.next(), a, 'after c comes a');
  });

  it('a redirect lengthens a round to two at most, so two servers naming each other cannot spin', () => {
    const r = rotation([a, b]);
    let waited = 0;
    for (let i = 0; i < 8; i++) {
      r.next();
      r.redirectTo(i % 2 === 0 ? b : a);
      if (r.afterAttempt(false) > 0) waited++;
    }
    assert.equal(waited, 2);
  });

  it('the handshake bound doubles after rounds where every attempt timed out, and resets on an answer', () => {
    const r = rotation();
    const base = handshakeTimeoutMs(8_000, 3);
    assert.equal(base, 2_000);
    assert.equal(r.handshakeTimeoutMs, base);
    for (let i = 0; i < 3; i++) r.afterAttempt(true);
    assert.equal(r.handshakeTimeoutMs, 2 * base);
    for (let i = 0; i < 3; i++) r.afterAttempt(true);
    assert.equal(r.handshakeTimeoutMs, 8_000, 'never above connectTimeoutMs');
    r.afterAttempt(true);
    r.afterAttempt(false); // one server answered in this round
    r.afterAttempt(true);
    assert.equal(r.handshakeTimeoutMs, base);
  });

  it('says why each address failed, and gives up on certificates only when none is left', () => {
    const r = rotation();
    r.next();
    r.failed(a.label, 'ECONNREFUSED');
    r.next();
    assert.equal(r.untrusted(b.label), false);
    const message = r.gaveUpMessage('timed out: no TCP connection after 5 ms');
    assert.match(message, /127\.0\.0\.1:1: ECONNREFUSED/);
    assert.match(
      message,
      /127\.0\.0\.1:2: timed out: no TCP connection after 5 ms \(the attempt under way\)/,
    );
    assert.match(message, /127\.0\.0\.1:3: not tried: the time ran out first/);
    assert.equal(r.untrusted(a.label), false);
    assert.equal(r.untrusted(c.label), true);
    assert.match(
      rotation([a]).gaveUpMessage(undefined),
      /^Could not connect to 127\.0\.0\.1:1 within 8000 ms: not tried/,
    );
  });
});
