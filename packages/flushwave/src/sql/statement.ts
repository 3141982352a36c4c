import type { Op } from '../plan/ops.js'

/**
 * A rendered statement. Every parameter is a string in PostgreSQL's text input format (or null) and
 * the text casts it (`$1::int8[]`), so executors bind them as text and never guess types.
 */
export interface Statement {
  readonly text: string
  readonly params: readonly (string | null)[]
  /**
   * The statement returns rows its caller reads, which drivers then deliver as arrays in
   * select-list order (see returning.ts). Reads always come as arrays.
   */
  readonly returnsRows?: boolean
  /**
   * A read whose rows come as objects keyed by column name, each value as the driver parses it
   * (`em.query`), instead of arrays in select-list order.
   */
  readonly objects?: boolean
  /** For `copy … from stdin`: the rows, which the driver sends after the command (render-copy.ts). */
  readonly copy?: CopyRows
}

/**
 * The rows of a `copy … from stdin` in COPY's text format, rendered a piece at a time while the
 * driver sends them: the server stores one piece while the client renders the next, and a large
 * flush never holds all its rows as one string.
 */
export interface CopyRows {
  /** Rows in all. */
  readonly rows: number
  /** The rows' text, in pieces of whole lines, each rendered when it is asked for; pure, so it can be asked again. */
  pieces(): Iterable<string>
}

/** A statement of a flush, with the op it came from for results and error messages. */
export interface WriteStatement extends Statement {
  readonly op: Op
  readonly returnsRows: boolean
}
