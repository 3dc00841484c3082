import { LockIOError } from '../core/errors.js';
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
    throw new LockIOError(
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

/**
 * Calls `visit` with the family of every cell of a record, without building the cells (the
 * check a refused open makes before anything changes). Throws `IO_ERROR` where
 * {@link decodeCells} would.
 */
export function forEachFamily(record: Uint8Array, visit: (family: string) => void): void {
  const buf = Buffer.from(record.buffer, record.byteOffset, record.byteLength);
  const fail = (why: string): never => {
    throw new LockIOError(
      `Corrupt row store record (${why}); its checksum matched, so it was written this way`,
    );
  };
  if (KINDS[buf[0] ?? 255] === undefined || buf.length < 5) fail('unknown kind');
  const count = buf.readUInt32BE(1);
  let at = 5;
  const need = (n: number): void => {
    if (at + n > buf.length) fail('truncated cell');
  };
  let last = '';
  for (let i = 0; i < count; i++) {
    need(2);
    if (TYPES[buf[at] as number] === undefined) fail('unknown cell type');
    const familyLength = buf[at + 1] as number;
    at += 2;
    need(familyLength + 2);
    const family = buf.toString('latin1', at, at + familyLength);
    // Cells of one record mostly share a family: visit each run once.
    if (family !== last) {
      last = family;
      visit(family);
    }
    at += familyLength;
    const rowLength = buf.readUInt16BE(at);
    at += 2 + rowLength;
    need(4);
    at += 4 + buf.readUInt32BE(at);
    need(12);
    at += 8;
    at += 4 + buf.readUInt32BE(at);
    if (at > buf.length) fail('truncated cell');
  }
  if (at !== buf.length) fail('trailing bytes');
}
