import type { CopyPolicy } from '../plan/copy-policy.js'
import type { CarriedIds, Executor, Position, WarmUp, WriteOptions, WriteOutcome } from '../drivers/executor.js'
import type { IdBlocks, IdRequest } from '../sql/render-ids.js'
import type { SessionOptions, TransactionOptions } from '../sql/render-session.js'
import type { Statement, WriteStatement } from '../sql/statement.js'
import type { Telemetry } from './telemetry.js'

/**
 * An executor whose reads, streams and id fetches are traced, and whose transactions and sessions
 * hand out traced executors too. Writes are traced a level up, where the flush's result is known
 * (EntityManager.flush).
 */
export class TracedExecutor implements Executor {
  readonly stream?: (statement: Statement, batchSize: number) => AsyncIterableIterator<unknown[][]>
  readonly withSession?: (session: SessionOptions) => Executor
  readonly after?: (position: Position) => Executor

  constructor(
    readonly inner: Executor,
    private readonly telemetry: Telemetry,
  ) {
    const stream = inner.stream
    if (stream) this.stream = (statement, batchSize) => telemetry.stream(statement, stream.call(inner, statement, batchSize))
    const withSession = inner.withSession
    if (withSession) this.withSession = (session) => new TracedExecutor(withSession.call(inner, session), telemetry)
    const after = inner.after
    if (after) {
      this.after = (position) => {
        const next = after.call(inner, position)
        return next === inner ? this : new TracedExecutor(next, telemetry)
      }
    }
  }

  get position(): Position | undefined {
    return this.inner.position
  }

  get recordsKeys(): boolean | undefined {
    return this.inner.recordsKeys
  }

  get copyPolicy(): CopyPolicy | undefined {
    return this.inner.copyPolicy
  }

  read(statement: Statement): Promise<unknown[][]> {
    return this.telemetry.read(statement, () => this.inner.read(statement))
  }

  write(waves: readonly (readonly WriteStatement[])[], ids?: CarriedIds, options?: WriteOptions): Promise<WriteOutcome> {
    return this.inner.write(waves, ids, options)
  }

  nextIds(requests: readonly IdRequest[]): Promise<IdBlocks> {
    return this.telemetry.allocate(requests.length, () => this.inner.nextIds(requests))
  }

  transaction<T>(fn: (executor: Executor) => Promise<T>, options?: TransactionOptions): Promise<T> {
    return this.inner.transaction((executor) => fn(new TracedExecutor(executor, this.telemetry)), options)
  }

  warmUp(statements: readonly Statement[], ids?: readonly IdRequest[]): Promise<WarmUp> {
    return this.inner.warmUp(statements, ids)
  }
}
