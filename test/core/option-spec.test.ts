import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { InvalidArgumentError } from '../../src/core/errors.js';
import {
  booleanOption,
  durationOption,
  readOptions,
  withAliases,
  withDefault,
} from '../../src/core/option-spec.js';
import { optionTable, STORE_OPTION_TABLES } from './option-tables.js';

const SPEC = {
  periodMs: withAliases(withDefault(durationOption(), 10), 'period'),
  strict: withDefault(booleanOption(), false),
  limitMs: durationOption(100),
} as const;

function refused(options: unknown, pattern: RegExp): void {
  assert.throws(
    () => readOptions(options, 'Thing options', SPEC),
    (err: unknown) => err instanceof InvalidArgumentError && pattern.test(err.message),
    JSON.stringify(options),
  );
}

describe('readOptions', () => {
  it('reads defaults, values and aliases', () => {
    assert.deepEqual(readOptions(undefined, 'x', SPEC), {
      periodMs: 10,
      strict: false,
      limitMs: undefined,
    });
    assert.deepEqual(readOptions({ period: 5, limitMs: 100 }, 'x', SPEC), {
      periodMs: 5,
      strict: false,
      limitMs: 100,
    });
  });

  it('refuses unknown names, an option under two names, and values out of their domain', () => {
    refused(
      { periodMS: 5 },
      /^Thing options: unknown option "periodMS" \(known: periodMs, period, strict, limitMs\)$/,
    );
    refused({ periodMs: 5, period: 5 }, /periodMs and period name the same option/);
    refused({ period: -1 }, /Invalid period -1/);
    refused({ limitMs: 99 }, /Invalid limitMs 99: must be >= 100 ms/);
    refused({ strict: 'yes' }, /strict must be a boolean/);
    refused(null, /must be an object, got null/);
    refused([], /must be an object, got an array/);
    // A name from the prototype is not an option.
    refused(JSON.parse('{"__proto__": {"x": 1}}'), /unknown option "__proto__"/);
  });

  it('reads every getter once', () => {
    let reads = 0;
    const options = {
      get periodMs() {
        reads++;
        return reads === 1 ? 5 : -1;
      },
    };
    assert.equal(readOptions(options, 'x', SPEC).periodMs, 5);
    assert.equal(reads, 1);
  });
});

describe('the option tables of docs/store.md', () => {
  /** A markdown table's rows with each cell trimmed and the separator row's dashes dropped. */
  const normalize = (lines: string[]) =>
    lines.map((l) =>
      l
        .split('|')
        .map((cell) => cell.trim().replace(/^-+$/, '-'))
        .join('|'),
    );

  it('are the tables the specs render (names, aliases, domains, defaults)', () => {
    const docs = readFileSync(new URL('../../../docs/store.md', import.meta.url), 'utf8');
    const lines = docs.split('\n');
    for (const [name, spec] of Object.entries(STORE_OPTION_TABLES)) {
      const table = optionTable(spec);
      const at = lines.indexOf(`#### ${name}`);
      assert.ok(at >= 0, `docs/store.md needs a "#### ${name}" heading`);
      const rows: string[] = [];
      for (let i = at + 2; lines[i]?.startsWith('|'); i++) rows.push(lines[i] as string);
      assert.deepEqual(
        normalize(rows),
        normalize(table.split('\n')),
        `docs/store.md must have, under "#### ${name}":\n\n${table}\n`,
      );
    }
  });
});
