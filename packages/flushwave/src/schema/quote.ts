/** Quotes an identifier (table, column, type). Identifiers only ever come from the schema. */
export function quoteIdent(name: string): string {
  return '"' + name.replace(/"/g, '""') + '"'
}
