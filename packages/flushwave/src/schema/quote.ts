/** Quotes an identifier (table, column, type). Identifiers only ever come from the schema. */
export function quoteIdent(name: string): string {
  return '"' + name.replace(/"/g, '""') + '"'
}

/** A name as quoteIdent wrote it, split at the dot of a schema: `"billing"."invoice"` → ['billing', 'invoice']. */
export function unquoteIdents(quoted: string): string[] {
  const out: string[] = []
  for (const match of quoted.matchAll(/"((?:[^"]|"")*)"/g)) out.push(match[1]!.replace(/""/g, '"'))
  return out
}
