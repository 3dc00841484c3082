import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeCells, encodeCells, forEachFamily } from '../../src/rows/cell-codec.js';

describe('cell codec', () => {
  it('round-trips binary rows, qualifiers, values and every cell type', () => {
    const cells = [
      {
        row: '\x00\xff',
        family: 'f',
        qualifier: '',
        timestamp: 1300775520118,
        type: 'Put' as const,
        value: Buffer.from([0, 1, 2]),
      },
      {
        row: 'r',
        family: 'fam.2',
        qualifier: 'q\x80',
        timestamp: 0,
        type: 'DeleteFamily' as const,
        value: Buffer.alloc(0),
      },
      {
        row: 'r',
        family: 'f',
        qualifier: 'q',
        timestamp: 5,
        type: 'DeleteColumn' as const,
        value: Buffer.alloc(0),
      },
      {
        row: 'r',
        family: 'f',
        qualifier: 'q',
        timestamp: 6,
        type: 'Delete' as const,
        value: Buffer.alloc(0),
      },
    ];
    const decoded = decodeCells(encodeCells('mutation', cells));
    assert.equal(decoded.kind, 'mutation');
    assert.deepEqual(decoded.cells, cells);
    // forEachFamily sees the same families (each run of equal ones once) without decoding.
    const seen: string[] = [];
    forEachFamily(encodeCells('mutation', cells), (f) => seen.push(f));
    assert.deepEqual(seen, ['f', 'fam.2', 'f']);
  });

  it('rejects a record that does not parse, with IO_ERROR', () => {
    const record = encodeCells('snapshot', [
      { row: 'r', family: 'f', qualifier: 'q', timestamp: 1, type: 'Put', value: Buffer.from('v') },
    ]);
    assert.throws(() => decodeCells(record.subarray(0, record.length - 1)), { code: 'IO_ERROR' });
    assert.throws(() => decodeCells(Buffer.concat([record, Buffer.from([0])])), {
      code: 'IO_ERROR',
    });
    assert.throws(() => decodeCells(Buffer.from([9, 0, 0, 0, 0])), { code: 'IO_ERROR' });
    const none = () => {};
    for (let cut = 1; cut < record.length; cut++) {
      assert.throws(() => forEachFamily(record.subarray(0, cut), none), { code: 'IO_ERROR' });
    }
    assert.throws(() => forEachFamily(Buffer.concat([record, Buffer.from([0])]), none), {
      code: 'IO_ERROR',
    });
    assert.throws(() => forEachFamily(Buffer.from([9, 0, 0, 0, 0]), none), { code: 'IO_ERROR' });
  });
});
