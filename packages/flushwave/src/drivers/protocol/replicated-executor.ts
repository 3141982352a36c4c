import { ConnectionLostError } from '../../errors.js'
import type { CopyPolicy } from '../../plan/copy-policy.js'
import type { IdBlocks, IdRequest } from '../../sql/render-ids.js'
import { laterLsn } from '../../sql/render-replica.js'
import { renderSettings, type SessionOptions, type TransactionOptions } from '../../sql/render-session.js'
import type { Statement, WriteStatement } from '../../sql/statement.js'
import { PRIMARY, type CarriedIds, type Executor, type Position, type QueryEvent, type WarmUp, type WriteOptions, type WriteOutcome } from '../executor.js'
import { isServerError } from './pg-error.js'
import type { PipelineExecutor } from './pipeline-executor.js'
import { PipelinedReads } from './pipelined-reads.js'
import { isConnectionFailure, read } from './reads.js'

/** How long a replica that failed is left out before it is tried again (ms). */
export const DEFAULT_REPLICA_RETRY_MS = 5_000

/** The longest `replicaWaitMs`: a wait holds the replica's connection. */
export const MAX_REPLICA_WAIT_MS = 10_000

/** What every executor made from one shares. */
export interface ReplicaSettings {
  /** A read's deadline (the flush timeout). */
  readonly timeoutMs: number
  /** How long a failed replica is left out (ms). */
  readonly retryMs: number
  /** How long a read may wait on a replica for its position to be replayed (ms; 0: not at all). */
  readonly waitMs: number
  readonly onQuery?: ((event: QueryEvent) => void) | undefined
}

/** Which replicas are down, and whose turn it is: shared by every executor made from one (`withSession`, `after`). */
interface Health {
  turn: number
  readonly downUntil: number[]
}

/** The replicas' executors and their health. */
class Replicas {
  constructor(
    readonly executors: readonly PipelineExecutor[],
    private readonly retryMs: number,
    private readonly health: Health = { turn: 0, downUntil: executors.map(() => 0) },
  ) {}

  /** The same servers through other executors (a session's), sharing their health. */
  through(executors: readonly PipelineExecutor[]): Replicas {
    return new Replicas(executors, this.retryMs, this.health)
  }

  /** The replicas to try: the live ones, starting with the next in turn (reads spread over them). */
  order(): number[] {
    const now = performance.now()
    const { downUntil } = this.health
    const n = downUntil.length
    const start = this.health.turn++ % n
    const live: number[] = []
    for (let k = 0; k < n; k++) {
      const i = (start + k) % n
      if (downUntil[i]! <= now) live.push(i)
    }
    return live
  }

  failed(i: number): void {
    this.health.downUntil[i] = performance.now() + this.retryMs
  }
}

/**
 * An executor with read replicas: reads outside a transaction go to a replica, round robin;
 * everything else (flushes, transactions and their reads, id fetches, the outcome probe, and
 * `em.query`, which may write) to the primary. With a position (`after(lsn)`, after a flush) a
 * read goes behind a check that the replica replayed it, in the same pipeline; a replica behind it
 * sends the read to the primary. A replica whose connection fails (or that is shutting down, or
 * cancels a read for a recovery conflict) is left out for a while and the read tried on the next,
 * then on the primary: the application sees the primary's answer, never the replica's failure.
 */
export class ReplicatedExecutor implements Executor {
  private readonly positioned: readonly PipelinedReads[] | undefined

  constructor(
    private readonly primary: Executor,
    private readonly replicas: Replicas,
    private readonly settings: ReplicaSettings,
    private readonly session: SessionOptions | undefined,
    /** What this executor's reads must see: a WAL position, or PRIMARY (only the primary will do). */
    readonly position?: Position,
  ) {
    if (typeof position === 'string') {
      const settings = session && renderSettings(session)
      const stale = (statement: Statement) => this.primary.read(statement)
      const { onQuery, timeoutMs, waitMs } = this.settings
      this.positioned = replicas.executors.map((replica) => new PipelinedReads(replica.port, { settings, stale, onQuery, waitMs }, timeoutMs))
    }
  }

  static over(primary: Executor, replicas: readonly PipelineExecutor[], settings: ReplicaSettings): ReplicatedExecutor {
    return new ReplicatedExecutor(primary, new Replicas(replicas, settings.retryMs), settings, undefined)
  }

  get recordsKeys(): boolean | undefined {
    return this.primary.recordsKeys
  }

  get copyPolicy(): CopyPolicy | undefined {
    return this.primary.copyPolicy
  }

  /** The same executor whose reads see every commit up to `position` as well. */
  after(position: Position): Executor {
    const later = this.position === PRIMARY || position === PRIMARY ? PRIMARY : laterLsn(this.position, position)
    return later === this.position ? this : new ReplicatedExecutor(this.primary, this.replicas, this.settings, this.session, later)
  }

  withSession(session: SessionOptions): Executor {
    const replicas = this.replicas.through(this.replicas.executors.map((r) => r.withSession(session)))
    return new ReplicatedExecutor(this.primary.withSession!(session), replicas, this.settings, session, this.position)
  }

  async read(statement: Statement): Promise<unknown[][]> {
    if (this.position === PRIMARY || statement.objects === true) return this.primary.read(statement)
    for (const i of this.replicas.order()) {
      try {
        const positioned = this.positioned?.[i]
        if (positioned === undefined) return await this.replicas.executors[i]!.read(statement)
        this.settings.onQuery?.({ phase: 'read', text: statement.text, params: statement.params })
        return await read(() => positioned.read(statement, this.position as string), { retry: true, timeoutMs: this.settings.timeoutMs })
      } catch (error) {
        if (!replicaFailed(error)) throw error
        this.replicas.failed(i)
      }
    }
    return this.primary.read(statement)
  }

  stream(statement: Statement, batchSize: number): AsyncIterableIterator<unknown[][]> {
    // A stream's cursor reads as it goes: it is not checked against a position, so after a flush it reads the primary.
    const [first] = this.position === undefined ? this.replicas.order() : []
    return (first === undefined ? this.primary : this.replicas.executors[first]!).stream!(statement, batchSize)
  }

  write(waves: readonly (readonly WriteStatement[])[], ids?: CarriedIds, options?: WriteOptions): Promise<WriteOutcome> {
    return this.primary.write(waves, ids, options)
  }

  nextIds(requests: readonly IdRequest[]): Promise<IdBlocks> {
    return this.primary.nextIds(requests)
  }

  transaction<T>(fn: (executor: Executor) => Promise<T>, options?: TransactionOptions): Promise<T> {
    return this.primary.transaction(fn, options)
  }

  warmUp(statements: readonly Statement[], ids?: readonly IdRequest[]): Promise<WarmUp> {
    return this.primary.warmUp(statements, ids)
  }
}

/**
 * A failure of the replica, not of the read: its connection (lost, refused, timed out), the server
 * shutting down or starting (57P01–57P03), or a read cancelled for a conflict with recovery (40001).
 */
function replicaFailed(error: unknown): boolean {
  if (error instanceof ConnectionLostError || isConnectionFailure(error)) return true
  return isServerError(error) && /^(57P0[1-3]|40001)$/.test(error.code)
}
