import { createHash } from 'node:crypto';

/** A member as the assignment sees it. */
export interface AssignableMember {
  id: string;
}

/**
 * Which member should serve each region: evenly (each member `floor(R/N)` or `ceil(R/N)`
 * regions; the `R mod N` larger shares go to the members holding most now, then by id), and moving as few as
 * that allows. A region stays with its current owner while that owner is among `members` and
 * under its share; the rest go, in region order, to the member ranked highest for that region
 * (rendezvous hashing: SHA-256 of region and member id) that has room.
 *
 * Every server computes this from the same read of the fleet, so all agree without a
 * coordinator; two reads a moment apart can disagree only until the next one.
 *
 * `members` are the live members that take regions; `owners` maps a region to its current
 * owner (any member, live or not). Returns region → member id; empty without members.
 */
export function assignRegions(
  regions: readonly string[],
  members: readonly AssignableMember[],
  owners: ReadonlyMap<string, string | null>,
): Map<string, string> {
  const out = new Map<string, string>();
  if (members.length === 0) return out;
  const sorted = [...new Set(regions)].sort();
  const held = new Map<string, number>();
  for (const region of sorted) {
    const owner = owners.get(region);
    if (owner != null) held.set(owner, (held.get(owner) ?? 0) + 1);
  }
  // The larger shares go to the members holding most now (then by id): fewer moves.
  const ids = [...new Set(members.map((m) => m.id))].sort(
    (a, b) => (held.get(b) ?? 0) - (held.get(a) ?? 0) || (a < b ? -1 : a > b ? 1 : 0),
  );
  const base = Math.floor(sorted.length / ids.length);
  const extra = sorted.length % ids.length;
  const room = new Map(ids.map((id, i) => [id, base + (i < extra ? 1 : 0)]));
  const rest: string[] = [];
  for (const region of sorted) {
    const owner = owners.get(region);
    const left = owner == null ? undefined : room.get(owner);
    if (owner != null && left !== undefined && left > 0) {
      out.set(region, owner);
      room.set(owner, left - 1);
    } else {
      rest.push(region);
    }
  }
  for (const region of rest) {
    let best: string | undefined;
    let bestScore = '';
    for (const id of ids) {
      if ((room.get(id) as number) === 0) continue;
      const score = createHash('sha256').update(`${region}\0${id}`).digest('hex');
      if (best === undefined || score > bestScore) {
        best = id;
        bestScore = score;
      }
    }
    // The shares add up to the number of regions: someone always has room.
    const chosen = best as string;
    out.set(region, chosen);
    room.set(chosen, (room.get(chosen) as number) - 1);
  }
  return out;
}
