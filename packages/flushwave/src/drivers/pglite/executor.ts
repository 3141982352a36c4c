import type { Opening } from '../../sql/render-session.js'
import type { Statement } from '../../sql/statement.js'
import { SettingsRefused } from '../protocol/opening.js'
import { PipelineExecutor, type ExecutorOptions } from '../protocol/pipeline-executor.js'
import { fromNodePostgres } from '../protocol/pg-error.js'
import { BEGIN, COMMIT, type Answer, type Connection, type OpenProbe, type Port, type QueryResult, type Sent } from '../port.js'

/**
 * The part of a PGlite instance (`@electric-sql/pglite` 0.5) Flushwave uses, or of the
 * transaction its `transaction()` hands out. Structural, so that Flushwave's declarations do not
 * import PGlite's: applications without it need not install it.
 */
export interface PGliteLike {
  query(text: string, params?: unknown[], options?: PGliteQueryOptions): Promise<PGliteResults>
  transaction<T>(fn: (tx: PGliteTransactionLike) => Promise<T>): Promise<T>
}

export interface PGliteTransactionLike {
  query(text: string, params?: unknown[], options?: PGliteQueryOptions): Promise<PGliteResults>
  rollback(): Promise<void>
}

interface PGliteQueryOptions {
  rowMode?: 'array' | 'object'
  serializers?: Serializers
  onNotice?: (notice: never) => void
}

type Serializers = { readonly [oid: number]: (value: never) => string }

interface PGliteResults {
  readonly rows: unknown[]
  readonly command?: string
  readonly rowCount?: number
  readonly affectedRows?: number
}

/**
 * Flushes on PGlite, PostgreSQL compiled to WebAssembly and run in this process: for tests, CLIs,
 * edge and browser builds. There is no network, so nothing is pipelined: the statements of a flush
 * run one after another inside PGlite's own transaction, which also keeps its other queries out
 * until COMMIT (PGlite is one connection). A flush still counts one round trip: one exchange with
 * the database, whatever it holds. Its time limit cannot stop a statement running in-process.
 */
export class PGliteExecutor extends PipelineExecutor {
  constructor(db: PGliteLike, options: ExecutorOptions = {}) {
    super(new PGlitePort(db), options)
  }
}

/**
 * Parameters go as Flushwave wrote them, in PostgreSQL's text form: PGlite would otherwise run each
 * through the serializer of the type the server describes (an array, a boolean, bytea), which
 * expect JavaScript values.
 */
const AS_GIVEN = new Proxy({}, { get: () => (value: string) => value }) as Serializers
const ignore = () => undefined

async function run(db: PGliteLike | PGliteTransactionLike, statement: Statement, arrays: boolean): Promise<PromiseSettledResult<Answer>> {
  try {
    const result = await db.query(statement.text, [...statement.params], { rowMode: arrays ? 'array' : 'object', serializers: AS_GIVEN, onNotice: ignore })
    return { status: 'fulfilled', value: { command: result.command ?? '', rowCount: result.rowCount ?? result.affectedRows ?? null, rows: result.rows } }
  } catch (reason) {
    return { status: 'rejected', reason }
  }
}

const answered = (command: string): PromiseSettledResult<Answer> => ({ status: 'fulfilled', value: { command, rowCount: null, rows: [] } })

export class PGlitePort implements Port {
  readonly maxPipeline = Infinity
  /** PGlite's errors name their fields as node-postgres's do. */
  readonly serverError = fromNodePostgres

  constructor(
    private readonly db: PGliteLike,
    /** Set inside `transaction()`: statements run on PGlite's transaction, which is not the protocol's. */
    private readonly tx?: PGliteTransactionLike,
  ) {}

  get inTransaction(): boolean {
    return this.tx !== undefined
  }

  async acquire(): Promise<Connection> {
    return this.tx ? new PGliteConnection(this.tx, undefined) : new PGliteConnection(undefined, this.db)
  }

  async query(statement: Statement): Promise<QueryResult> {
    const result = await (this.tx ?? this.db).query(statement.text, [...statement.params], { rowMode: statement.objects ? 'object' : 'array', serializers: AS_GIVEN, onNotice: ignore })
    return { rows: result.rows as unknown[][], roundTrips: 1 }
  }

  /** In-process, nothing to pipeline: PGlite's BEGIN, then the modes and the settings as statements of their own. */
  transaction<T>(fn: (port: Port) => Promise<T>, opening?: Opening): Promise<T> {
    return this.db.transaction(async (tx) => {
      if (opening?.modes) await tx.query(`set transaction ${opening.modes}`, [], { onNotice: ignore })
      if (opening?.settings) {
        await tx.query(opening.settings.text, [...opening.settings.params], { serializers: AS_GIVEN, onNotice: ignore }).catch((error: unknown) => Promise.reject(new SettingsRefused(error)))
      }
      return fn(new PGlitePort(this.db, tx))
    })
  }

  /** The same database: in-process, there is no other connection to lose. */
  readonly openProbe: OpenProbe = () => ({
    probe: async (text, params) => (await this.db.query(text, [...params], { rowMode: 'array', serializers: AS_GIVEN })).rows as unknown[][],
    close: async () => undefined,
  })
}

class PGliteConnection implements Connection {
  readonly usable = true

  /** Exactly one of them: the application's transaction, or the database a flush runs its own on. */
  constructor(
    private readonly tx: PGliteTransactionLike | undefined,
    private readonly db: PGliteLike | undefined,
  ) {}

  async send(statements: readonly Statement[]): Promise<Sent> {
    const settled: PromiseSettledResult<Answer>[] = []
    let next = 0
    if (statements[0] === BEGIN && this.db) {
      // BEGIN … COMMIT become PGlite's transaction(), which holds its other queries back meanwhile.
      const commitAt = statements.indexOf(COMMIT)
      if (commitAt < 0) throw new Error('a pipeline that begins a transaction must end it')
      try {
        await this.db.transaction(async (tx) => {
          settled.push(answered('BEGIN'))
          let failed = false
          for (let i = 1; i < commitAt; i++) {
            const answer = await run(tx, statements[i]!, statements[i]!.returnsRows === true)
            failed ||= answer.status === 'rejected'
            settled.push(answer)
          }
          // COMMIT after a failure answers ROLLBACK, as PostgreSQL's own would.
          if (failed) await tx.rollback()
          settled.push(answered(failed ? 'ROLLBACK' : 'COMMIT'))
        })
      } catch (error) {
        // COMMIT itself failed (a deferred constraint): PGlite rolled back.
        settled[commitAt] = { status: 'rejected', reason: error }
      }
      next = commitAt + 1
    }
    for (let i = next; i < statements.length; i++) settled.push(await run(this.tx ?? this.db!, statements[i]!, statements[i]!.returnsRows === true))
    return { settled, roundTrips: 1, coldStatements: 0 }
  }

  /** In-process: a statement cannot be interrupted; the flush's deadline is checked once it is over. */
  cut(): void {}

  pid(): undefined {
    return undefined
  }

  release(): void {}
}
