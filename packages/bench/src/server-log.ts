import type postgres from 'postgres'

/** A statement the server took at least `log_min_duration_statement` over, and when it ended. */
export interface SlowStatement {
  /** When the server logged it (at its end), in ms since the epoch. */
  readonly at: number
  readonly ms: number
  /** The statement's first word: commit, insert, with… */
  readonly what: string
}

// `2026-11-26 00:10:26.948 UTC [11095] LOG:  duration: 3.439 ms  statement: commit`, or with
// `execute <name>:` for a prepared statement. log_timezone is set to UTC below.
const SLOW = /^(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{3}) UTC \[\d+\] LOG: {2}duration: ([\d.]+) ms {2}(?:statement|execute [^:]*): (\S+)/

/**
 * The slow statements an embedded server logs, read from its output (devdb's `onLog`): which of a
 * client's slow round trips the server itself spent the time in.
 */
export class ServerLog {
  readonly slow: SlowStatement[] = []
  private partial = ''

  /** For devdb's `onLog`: the server's output, in pieces that may split lines. */
  readonly onLog = (text: string): void => {
    const lines = (this.partial + text).split('\n')
    this.partial = lines.pop() ?? ''
    for (const line of lines) {
      const m = SLOW.exec(line)
      if (!m) continue
      const [, y, mo, d, h, mi, s, ms, duration, what] = m
      this.slow.push({ at: Date.UTC(+y!, +mo! - 1, +d!, +h!, +mi!, +s!, +ms!), ms: Number(duration), what: what!.toLowerCase() })
    }
  }

  /**
   * Makes the server log every statement of `database`'s new sessions that takes `thresholdMs` or
   * more, with UTC times. Changes server settings: for a server of one's own only.
   */
  static async watch(admin: postgres.Sql, database: string, thresholdMs: number): Promise<void> {
    await admin.unsafe(`alter system set log_timezone = 'UTC'`)
    await admin.unsafe('select pg_reload_conf()')
    await admin.unsafe(`alter database ${database} set log_min_duration_statement = ${Math.round(thresholdMs)}`)
  }

  /** The slow statements that ended between `from` and `to` (ms since the epoch; the log has ms precision). */
  between(from: number, to: number): SlowStatement[] {
    return this.slow.filter((s) => s.at >= Math.floor(from) && s.at <= Math.ceil(to))
  }
}
