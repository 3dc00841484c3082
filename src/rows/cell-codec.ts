import { LocksmithError } from '../core/errors.js';
import type { Cell, CellType } from './cell.js';

/**
 * The payload of a storage record: a list of cells. A `mutation` record is one mutation (its
 * cells share one MVCC write number on replay); a `snapshot` record is a run of cells of a
 * checkpoint, each its own write, listed oldest write first.
 *
 * Layout (big-endian): u8 kind, u32 count, then per cell: u8 type, u8 family length, family,
 * u16 row length, row, u32 qualifier length, qualifier, f64 timestamp, u32 value length, value.
 * Rows and qualifiers are raw bytes (the latin1 strings' code units).
 */
export type RecordKind = 'mutation' | 'snapshot';

const KINDS: readonly RecordKind[] = ['mutation', 'snapshot'];
const TYPES: readonly CellType[] = ['Put', 'Delete', 'DeleteColumn', 'DeleteFamily'];
const FIXED = 1 + 1 + 2 + 4 + 8 + 4;

export type EncodableCell = Omit<Cell, 'seq'>;

export function encodeCells(kind: RecordKind, cells: readonly EncodableCell[]): Buffer {
  let size = 5;
  for (const c of cells)
    size += FIXED + c.family.length + c.row.length + c.qualifier.length + c.value.length;
  const buf = Buffer.allocUnsafe(size);
  buf[0] = KINDS.indexOf(kind);
  buf.writeUInt32BE(cells.length, 1);
  let at = 5;
  for (const c of cells) {
    buf[at++] = TYPES.indexOf(c.type);
    buf[at++] = c.family.length;
    at += buf.write(c.family, at, 'latin1');
    buf.writeUInt16BE(c.row.length, at);
    at += 2;
    at += buf.write(c.row, at, 'latin1');
    buf.writeUInt32BE(c.qualifier.length, at);
    at += 4;
    at += buf.write(c.qualifier, at, 'latin1');
    buf.writeDoubleBE(c.timestamp, at);
    at += 8;
    buf.writeUInt32BE(c.value.length, at);
    at += 4;
    at += c.value.copy(buf, at);
  }
  return buf;
}

export function decodeCells(record: Uint8Array): { kind: RecordKind; cells: EncodableCell[] } {
  const buf = Buffer.from(record.buffer, record.byteOffset, record.byteLength);
  const fail = (why: string): never => {
    throw new LocksmithError(
      'IO_ERROR',
      `Corrupt row store record (${why}); its checksum matched, so it was written this way`,
    );
  };
  const kind = KINDS[buf[0] ?? 255];
  if (kind === undefined || buf.length < 5) return fail('unknown kind');
  const count = buf.readUInt32BE(1);
  const cells: EncodableCell[] = [];
  let at = 5;
  const take = (n: number): number => {
    if (at + n > buf.length) fail('truncated cell');
    const start = at;
    at += n;
    return start;
  };
  for (let i = 0; i < count; i++) {
    const type = TYPES[buf[take(1)] as number];
    if (type === undefined) return fail('unknown cell type');
    const familyLength = buf[take(1)] as number;
    const family = buf.toString('latin1', take(familyLength), at);
    const rowLength = buf.readUInt16BE(take(2));
    const row = buf.toString('latin1', take(rowLength), at);
    const qualifierLength = buf.readUInt32BE(take(4));
    const qualifier = buf.toString('latin1', take(qualifierLength), at);
    const timestamp = buf.readDoubleBE(take(8));
    const valueLength = buf.readUInt32BE(take(4));
    const value = Buffer.from(buf.subarray(take(valueLength), at));
    cells.push({ row, family, qualifier, timestamp, type, value });
  }
  if (at !== buf.length) fail('trailing bytes');
  return { kind, cells };
}
