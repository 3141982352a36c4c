import type { Op } from './ops.js'

/**
 * Rows per statement at most (10,000 by default): a flush of 100,000 rows becomes a few more
 * statements of bounded size rather than one huge message, in the same pipeline.
 */
export const DEFAULT_MAX_ROWS = 10_000

/** Splits an op with more than `maxRows` rows into ops of at most `maxRows`, in order. */
export function chunk(op: Op, maxRows: number): Op[] {
  const rows = 'ids' in op ? op.ids.length : 'owners' in op ? op.owners.length : 0
  if (rows <= maxRows) return [op]
  const out: Op[] = []
  for (let from = 0; from < rows; from += maxRows) {
    const to = Math.min(rows, from + maxRows)
    const part = <T>(xs: readonly T[]) => xs.slice(from, to)
    switch (op.kind) {
      case 'insert':
        out.push({ ...op, ids: part(op.ids), columns: op.columns.map(part) })
        break
      case 'update':
        out.push({
          ...op,
          ids: part(op.ids),
          columns: op.columns.map((c) => ({ values: part(c.values), set: part(c.set) })),
          versions: op.versions && part(op.versions),
          increments: op.increments?.map(part),
        })
        break
      case 'delete':
        out.push({ ...op, ids: part(op.ids), versions: op.versions && part(op.versions) })
        break
      case 'lock':
        out.push({ ...op, ids: part(op.ids) })
        break
      case 'link-insert':
      case 'link-delete':
        out.push({ ...op, owners: part(op.owners), targets: part(op.targets) })
        break
      default:
        return [op]
    }
  }
  return out
}
