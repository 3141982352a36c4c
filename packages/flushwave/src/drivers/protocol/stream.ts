import type { Statement } from '../../sql/statement.js'
import type { Opening } from '../../sql/render-session.js'
import type { Port } from '../port.js'
import { refusal, SettingsRefused } from './opening.js'

let cursors = 0

/**
 * A read of any size in batches, through a server-side cursor: DECLARE, then FETCH `batchSize` at a
 * time as the consumer asks, then CLOSE. Only one batch is in memory at once. A cursor lives in a
 * transaction: inside the application's own, it uses it; otherwise it opens one on a connection of
 * its own (`port.transaction`) for as long as the consumer reads, and commits it (it wrote nothing)
 * when the rows run out or the consumer stops.
 */
export function streamRows(port: Port, statement: Statement, batchSize: number, opening?: Opening): AsyncIterableIterator<unknown[][]> {
  const name = `flushwave_cursor_${++cursors}`
  const declare: Statement = { text: `declare ${name} no scroll cursor for ${statement.text}`, params: statement.params }
  const fetch: Statement = { text: `fetch forward ${batchSize} from ${name}`, params: [] }
  const close: Statement = { text: `close ${name}`, params: [] }
  const handoff = new Handoff<unknown[][]>()
  const produce = async (tx: Port) => {
    await tx.query(declare)
    try {
      for (;;) {
        const { rows } = await tx.query(fetch)
        if (rows.length === 0 || !(await handoff.give(rows)) || rows.length < batchSize) break
      }
    } finally {
      await tx.query(close).catch(() => undefined)
    }
  }
  // Outside a transaction, the cursor's own one applies the EntityManager's settings (opening).
  const run = port.inTransaction ? produce(port) : port.transaction(produce, opening)
  run.then(
    () => handoff.end(),
    (error: unknown) => handoff.fail(error instanceof SettingsRefused ? refusal(error, port.serverError ?? ((e) => e)) : error),
  )
  return handoff.consumer(() => run.then(() => undefined, () => undefined))
}

/**
 * Batches passed from a producer to a consumer one at a time: the producer waits, after each batch,
 * until the consumer asks for the next one (then it fetches it) or stops (then it closes).
 */
class Handoff<T> {
  /** The consumer's next(), waiting for a batch. */
  private request: { resolve(result: IteratorResult<T>): void; reject(error: unknown): void } | undefined
  /** A batch given before the consumer asked for it. */
  private offer: { value: T; ack(goOn: boolean): void } | undefined
  /** The producer, waiting to hear whether the consumer wants another batch. */
  private ack: ((goOn: boolean) => void) | undefined
  private finished: { error: unknown } | 'done' | undefined

  /** Hands a batch over; resolves true when the consumer asks for another, false when it stopped. */
  give(value: T): Promise<boolean> {
    return new Promise((ack) => {
      const request = this.request
      if (request === undefined) return void (this.offer = { value, ack })
      this.request = undefined
      this.ack = ack
      request.resolve({ value, done: false })
    })
  }

  end(): void {
    this.finished = 'done'
    this.request?.resolve({ value: undefined, done: true })
    this.request = undefined
  }

  fail(error: unknown): void {
    this.finished = { error }
    this.request?.reject(error)
    this.request = undefined
  }

  consumer(settled: () => Promise<void>): AsyncIterableIterator<T> {
    const next = (): Promise<IteratorResult<T>> => {
      this.ack?.(true)
      this.ack = undefined
      const offer = this.offer
      if (offer) {
        this.offer = undefined
        this.ack = offer.ack
        return Promise.resolve({ value: offer.value, done: false })
      }
      if (this.finished === 'done') return Promise.resolve({ value: undefined, done: true })
      if (this.finished) return Promise.reject(this.finished.error)
      return new Promise((resolve, reject) => (this.request = { resolve, reject }))
    }
    const stop = async (): Promise<IteratorResult<T>> => {
      this.ack?.(false)
      this.ack = undefined
      this.offer?.ack(false)
      this.offer = undefined
      await settled()
      return { value: undefined, done: true }
    }
    const iterator: AsyncIterableIterator<T> = { next, return: stop, [Symbol.asyncIterator]: () => iterator }
    return iterator
  }
}
