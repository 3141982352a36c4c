import { readNextIds, renderNextIds, type IdRequest } from '../../sql/render-ids.js'
import type { Statement } from '../../sql/statement.js'
import type { WarmUp } from '../executor.js'
import { OPEN, type Answer, type Port } from '../port.js'
import type { Capture } from './capture.js'

/**
 * Takes every connection of the pool at once (opening them) and sends every shape on each as one
 * pipeline (split where the driver bounds pipelines): about one round trip per connection, all
 * connections at once. `ids` ride along on the first connection's pipeline. A driver that keeps
 * nothing prepared only opens its connections (and fetches the ids); one with nothing to warm
 * (`port.warmUp` unset) does nothing, and the caller fetches the ids itself.
 */
export async function warmUpPort(port: Port, capture: Capture, statements: readonly Statement[], ids: readonly IdRequest[]): Promise<WarmUp> {
  const spec = port.warmUp
  if (spec === undefined) return { connections: 0, prepared: 0, durationMs: 0, prepares: false, roundTrips: 0 }
  const started = performance.now()
  const idStatement = ids.length > 0 ? renderNextIds(ids) : undefined
  const connections = await Promise.all(Array.from({ length: spec.connections }, () => port.acquire(Infinity)))
  let idRows: unknown[][] | undefined
  try {
    const counts = await Promise.all(
      connections.map(async (connection, c) => {
        const own = c === 0 ? idStatement : undefined
        const shapes = spec.prepares ? [...statements.filter((s) => s.text !== own?.text), ...capture.shapes()] : []
        // A statement without parameters first: the driver hands over the connection with it.
        const pipeline = [OPEN, ...shapes, ...(own ? [own] : [])]
        let prepared = 0
        let roundTrips = 0
        for (let i = 0; i < pipeline.length; i += port.maxPipeline) {
          const sent = await connection.send(pipeline.slice(i, i + port.maxPipeline))
          for (const answer of sent.settled) {
            if (answer === undefined) throw new Error('the connection closed during the warm-up')
            if (answer.status === 'rejected') throw answer.reason
          }
          roundTrips += sent.roundTrips
          if (spec.prepares) prepared += sent.coldStatements
          if (own && i + port.maxPipeline >= pipeline.length) idRows = (sent.settled.at(-1) as PromiseFulfilledResult<Answer>).value.rows as unknown[][]
        }
        return { prepared, roundTrips }
      }),
    )
    return {
      connections: connections.length,
      prepared: counts.reduce((n, c) => n + c.prepared, 0),
      prepares: spec.prepares,
      // The connections warm in parallel: the slowest one sets the wait.
      roundTrips: Math.max(0, ...counts.map((c) => c.roundTrips)),
      durationMs: performance.now() - started,
      ...(idRows ? { ids: { ids: readNextIds(ids, idRows), roundTrips: 0 } } : {}),
    }
  } finally {
    for (const connection of connections) connection.release(false)
  }
}
