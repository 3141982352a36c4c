import type { TestProject } from 'vitest/node'
import { startDatabase } from './postgres.js'
import { startToxiproxy } from './toxiproxy.js'
import './provided-context.js'

/**
 * vitest `globalSetup`: one database and one toxiproxy for the whole run, handed to test files
 * through `inject('databaseUrl')` / `inject('toxiproxyUrl')`. Returns the teardown.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const [db, toxi] = await Promise.allSettled([startDatabase(), startToxiproxy()])
  const stopAll = async () => {
    const results = await Promise.allSettled(
      [db, toxi].map((started) => (started.status === 'fulfilled' ? started.value.stop() : undefined)),
    )
    const failed = results.find((result) => result.status === 'rejected')
    if (failed) throw failed.reason
  }
  if (db.status === 'rejected' || toxi.status === 'rejected') {
    await stopAll()
    throw db.status === 'rejected' ? db.reason : toxi.status === 'rejected' ? toxi.reason : undefined
  }

  project.provide('databaseUrl', db.value.url)
  project.provide('toxiproxyUrl', toxi.value.apiUrl)
  // For code that reads the environment rather than inject(); never override what the user set.
  process.env.DATABASE_URL ||= db.value.url
  process.env.TOXIPROXY_URL ||= toxi.value.apiUrl
  return stopAll
}
