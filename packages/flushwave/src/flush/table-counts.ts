/**
 * A record of row counts keyed by table name (FlushResult.inserted, WarmUpResult.idsFetched), with
 * no prototype: a table may be called `constructor` or `__proto__`, which on a plain object would
 * read a member of Object.prototype (or set the prototype) instead of a count.
 *
 * V8 also keeps a prototype-less record in dictionary mode from the start, so filling one makes no
 * hidden classes. A plain object's classes, one per key added, die in a major GC and are made again
 * by the next flush (docs/design-notes.md, "Prototype-less count records").
 */
export function tableCounts(): Record<string, number> {
  return Object.create(null) as Record<string, number>
}
