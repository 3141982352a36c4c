import { FlushwaveError } from '../errors.js'
import type { Statement } from './statement.js'

/**
 * What an EntityManager applies inside every transaction it opens (each flush's, each
 * `em.transaction()`'s, and the one-statement transactions its reads then run in): custom settings
 * for row-level security policies (`current_setting('app.tenant')`), a role, a statement timeout.
 * All of it is transaction-local (`set_config(name, value, true)`): nothing outlives the
 * transaction, so a pooled connection (or PgBouncer's transaction mode) never carries it to
 * another client.
 */
export interface SessionOptions {
  /** Custom settings (`app.tenant`) and server parameters, by name, as `set_config(name, value, true)` sets them. */
  readonly settings?: Readonly<Record<string, string | number | boolean>>
  /** `SET LOCAL ROLE`: row-level security and privileges then apply as this role. */
  readonly role?: string
  /** `SET LOCAL statement_timeout`: a statement running longer fails with a StatementTimeoutError. */
  readonly statementTimeoutMs?: number
}

export type IsolationLevel = 'serializable' | 'repeatable read' | 'read committed'

/** `em.transaction(fn, options)`: the session's options for this transaction, and its modes. */
export interface TransactionOptions extends SessionOptions {
  readonly isolation?: IsolationLevel
  /** The transaction writes nothing: a flush with changes fails before anything is sent (ReadOnlyTransactionError). */
  readonly readOnly?: boolean
}

/** How a transaction starts: modes for BEGIN, and the statement that applies the settings right after it. */
export interface Opening {
  /** Transaction modes as words only (`isolation level serializable read only`), or '' for none. */
  readonly modes: string
  readonly settings: Statement | undefined
}

const ISOLATION: ReadonlySet<string> = new Set<IsolationLevel>(['serializable', 'repeatable read', 'read committed'])
/** A parameter name as PostgreSQL takes it: a word, or a custom one with a dot (`app.tenant`). */
const NAME = /^[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)*$/
/** Set through their own options, so that one name is never set twice in one statement. */
const OWN_OPTION: Readonly<Record<string, string>> = { role: 'role', statement_timeout: 'statementTimeoutMs', transaction_isolation: 'isolation', transaction_read_only: 'readOnly' }

/** Throws a FlushwaveError for options PostgreSQL would refuse or that mean nothing, before anything is sent. */
export function checkSession(options: TransactionOptions, where: string): void {
  for (const [name, value] of Object.entries(options.settings ?? {})) {
    if (!NAME.test(name)) throw new FlushwaveError(`${where}: setting name ${JSON.stringify(name)} is not a parameter name (letters, digits, _ and $, parts joined by dots)`)
    const own = OWN_OPTION[name.toLowerCase()]
    if (own !== undefined) throw new FlushwaveError(`${where}: set ${name} with the \`${own}\` option, not in \`settings\``)
    if (!['string', 'number', 'boolean'].includes(typeof value)) throw new FlushwaveError(`${where}: setting ${name} must be a string, number or boolean, not ${value === null ? 'null' : typeof value}`)
    if (typeof value === 'number' && !Number.isFinite(value)) throw new FlushwaveError(`${where}: setting ${name} must be a finite number, not ${value}`)
  }
  if (options.role !== undefined && (typeof options.role !== 'string' || options.role === '')) throw new FlushwaveError(`${where}: role must be a role's name`)
  const timeout = options.statementTimeoutMs
  if (timeout !== undefined && !(Number.isInteger(timeout) && timeout >= 0)) throw new FlushwaveError(`${where}: statementTimeoutMs must be a whole number of milliseconds ≥ 0 (0: none), not ${timeout}`)
  if (options.isolation !== undefined && !ISOLATION.has(options.isolation)) throw new FlushwaveError(`${where}: isolation must be one of ${[...ISOLATION].join(', ')}, not ${String(options.isolation)}`)
  if (options.readOnly !== undefined && typeof options.readOnly !== 'boolean') throw new FlushwaveError(`${where}: readOnly must be true or false`)
}

/** The session's options and a transaction's, the transaction's winning where both name one. */
export function mergeSession(session: SessionOptions | undefined, options: TransactionOptions): TransactionOptions {
  if (session === undefined) return options
  return { ...session, ...options, settings: { ...session.settings, ...options.settings } }
}

/** One statement that applies every setting, or undefined when there is none. Names and values are bound, never spliced. */
export function renderSettings(options: SessionOptions): Statement | undefined {
  const pairs: [string, string][] = Object.entries(options.settings ?? {}).map(([name, value]) => [name, String(value)])
  if (options.role !== undefined) pairs.push(['role', options.role])
  if (options.statementTimeoutMs !== undefined) pairs.push(['statement_timeout', String(options.statementTimeoutMs)])
  if (pairs.length === 0) return undefined
  const calls = pairs.map((_, i) => `set_config($${2 * i + 1}, $${2 * i + 2}, true)`)
  return { text: `select ${calls.join(', ')}`, params: pairs.flat() }
}

/** BEGIN's transaction modes, from a closed set of words. */
export function transactionModes(options: TransactionOptions): string {
  const modes: string[] = []
  if (options.isolation !== undefined) modes.push(`isolation level ${options.isolation}`)
  if (options.readOnly === true) modes.push('read only')
  return modes.join(' ')
}

export function opening(options: TransactionOptions): Opening {
  return { modes: transactionModes(options), settings: renderSettings(options) }
}
