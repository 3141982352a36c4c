/**
 * Runs a command with DATABASE_URL set to a fresh embedded PostgreSQL (a new database for each
 * run), then stops the server and removes its directory; exits with the command's status.
 *   pnpm --filter devdb exec tsx src/with-database.ts -- node consumer.mjs
 * For scripts that run outside the workspace (the package consumer test) and cannot import devdb.
 */
import { spawn } from 'node:child_process'
import { startEmbeddedDatabase } from './postgres.js'

const separator = process.argv.indexOf('--')
const [command, ...args] = separator >= 0 ? process.argv.slice(separator + 1) : process.argv.slice(2)
if (!command) {
  console.error('usage: with-database.ts -- <command> [args…]')
  process.exit(2)
}
const db = await startEmbeddedDatabase()
let status = 1
try {
  status = await new Promise<number>((resolve, reject) => {
    const child = spawn(command, args, { stdio: 'inherit', env: { ...process.env, DATABASE_URL: db.url } })
    child.on('error', reject)
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)))
  })
} catch (error) {
  console.error(`with-database: could not run ${command}: ${(error as Error).message}`)
} finally {
  await db.stop()
}
process.exit(status)
