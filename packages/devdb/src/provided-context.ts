/** Values the vitest global setup provides to test files: `inject('databaseUrl')`. */
declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of the PostgreSQL shared by all test files (DATABASE_URL, or an embedded one). */
    databaseUrl: string
    /** API URL of the toxiproxy shared by all test files (TOXIPROXY_URL, or a local one). */
    toxiproxyUrl: string
  }
}
export {}
