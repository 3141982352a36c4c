/**
 * `pnpm --filter bookstore migrate [latest|rollback|status]` against DATABASE_URL. Without it, the
 * migrations run against a throwaway embedded PostgreSQL (a dry run), which is then removed.
 */
import { startDatabase } from 'devdb'
import { connect, MigrationDirectory } from './migrate.js'

const command = process.argv[2] ?? 'latest'
if (!['latest', 'rollback', 'status'].includes(command)) {
  console.error(`usage: pnpm --filter bookstore migrate [latest|rollback|status] (got ${JSON.stringify(command)})`)
  process.exit(2)
}

const db = await startDatabase()
if (!db.external) console.log('DATABASE_URL is not set: migrating a throwaway embedded PostgreSQL (removed afterwards)')
const knex = connect({ url: db.url })
const migrationSource = new MigrationDirectory()
try {
  if (command === 'latest') {
    const [batch, applied] = (await knex.migrate.latest({ migrationSource })) as [number, string[]]
    console.log(applied.length ? `batch ${batch} applied:\n${applied.map((m) => `  ${m}`).join('\n')}` : 'already up to date')
  } else if (command === 'rollback') {
    const [batch, undone] = (await knex.migrate.rollback({ migrationSource })) as [number, string[]]
    console.log(undone.length ? `batch ${batch} rolled back:\n${undone.map((m) => `  ${m}`).join('\n')}` : 'nothing to roll back')
  }
  const [done, pending] = (await knex.migrate.list({ migrationSource })) as [{ name: string }[], string[]]
  console.log(`applied: ${done.map((m) => m.name).join(', ') || '-'}\npending: ${pending.map((m) => migrationSource.getMigrationName(m)).join(', ') || '-'}`)
} catch (error) {
  console.error(`migrate ${command} failed: ${error instanceof Error ? error.message : String(error)}`)
  process.exitCode = 1
} finally {
  await knex.destroy()
  await db.stop()
}
