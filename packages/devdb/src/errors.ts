/** Thrown when devdb cannot start or reach a server; the message says what failed and how to fix it. */
export class DevDbError extends Error {
  override name = 'DevDbError'
}
