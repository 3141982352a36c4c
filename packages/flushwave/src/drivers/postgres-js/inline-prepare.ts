/**
 * postgres.js 3.4.9 sends a query whose shape its connection has not prepared as Parse/Describe
 * alone, waits for the parameter types, and only then binds it; a reserved connection holds every
 * later query back until it has answered (see cold-shapes.ts). The wait buys Flushwave nothing: it
 * types every parameter itself (`unknown`, each cast in the text). With the query's `describeFirst` flag pinned to false,
 * postgres.js takes its path for queries without parameters instead: Parse, Describe, Bind and
 * Execute in one write, no wait, and the statement still enters its per-connection cache when the
 * ParameterDescription arrives. A new shape then costs no round trip, and a whole flush of new
 * shapes goes out as one pipeline. With `prepare: false` the same path sends unnamed statements.
 *
 * `describeFirst` is internal to postgres.js (src/connection.js, `build` and `toBuffer`). If a later
 * version renamed it, this pin would do nothing and the query would simply wait as before:
 * `sentInline` then stays false and the round-trip count still tells the truth.
 */

const inline = new WeakSet<object>()

/**
 * One descriptor for every query (its accessors read `this`), so that pinning the flag makes no
 * closures per statement.
 */
const pinned: PropertyDescriptor = {
  configurable: true,
  enumerable: true,
  get: () => false,
  // postgres.js assigns the flag when it builds the query: true means it wanted to wait.
  set(this: object, wanted: unknown) {
    if (wanted) inline.add(this)
  },
}

/** Makes postgres.js send `query` without a describe wait; call it before the query executes. */
export function prepareInline<Q extends object>(query: Q): Q {
  return Object.defineProperty(query, 'describeFirst', pinned)
}

/** Whether postgres.js would have described this query first, and sent it in one write instead. */
export function sentInline(query: object): boolean {
  return inline.has(query)
}
