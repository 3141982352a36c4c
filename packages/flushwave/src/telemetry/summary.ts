/**
 * A statement's operation and table, for span names (`SELECT book`) and `db.collection.name`:
 * read from its text (Flushwave's own statements are regular; hand-written ones get what the
 * pattern finds), and remembered per text, which repeats.
 */
export interface QuerySummary {
  /** `db.operation.name`: the first keyword, upper case (`SELECT`, `WITH`, `CREATE`). */
  readonly operation: string | undefined
  /** `db.collection.name`: the first table after FROM, INTO or UPDATE, unquoted (`public.book`). */
  readonly collection: string | undefined
  /** The span name: `operation collection`, as much of it as is known. */
  readonly name: string
}

const OPERATION = /^\s*(?:(?:--[^\n]*(?:\n|$)|\/\*[\s\S]*?\*\/)\s*)*([a-zA-Z]+)/
const NAME = String.raw`(?:"(?:[^"]|"")+"|[a-zA-Z_][\w$]*)`
const TARGET = new RegExp(String.raw`\b(?:from|into|update)\s+(${NAME})(?:\s*\.\s*(${NAME}))?`, 'i')
const KEPT = 2000

const summaries = new Map<string, QuerySummary>()

export function summarize(text: string): QuerySummary {
  let summary: QuerySummary | undefined = summaries.get(text)
  if (summary === undefined) {
    const operation = OPERATION.exec(text)?.[1]?.toUpperCase()
    const target = TARGET.exec(topLevel(text))
    const collection = target === null ? undefined : (target[2] === undefined ? unquote(target[1]!) : `${unquote(target[1]!)}.${unquote(target[2])}`)
    summary = { operation, collection, name: [operation, collection].filter((part) => part !== undefined).join(' ') || 'postgresql' }
    // Hand-written SQL may be made of values: keep a bounded number of texts.
    if (summaries.size >= KEPT) summaries.clear()
    summaries.set(text, summary)
  }
  return summary
}

/** The text with what is inside parentheses left out: `extract(epoch from t.at)` names no table. */
function topLevel(text: string): string {
  let outer = text
  for (let inner = ''; inner !== outer; ) [inner, outer] = [outer, outer.replace(/\([^()]*\)/g, '()')]
  return outer
}

function unquote(name: string): string {
  return name.startsWith('"') ? name.slice(1, -1).replaceAll('""', '"') : name.toLowerCase()
}
