#!/usr/bin/env node
// The package's bin: `npx flushwave pull …` (catalog/pull-command.ts), `npx flushwave migrate …` (migrate/command.ts).
import { main } from './catalog/pull-command.js'
import { migrateMain } from './migrate/command.js'

const [command, ...rest] = process.argv.slice(2)
;(command === 'migrate' ? migrateMain(rest) : main(process.argv.slice(2))).then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(`flushwave: ${(error as Error)?.message ?? String(error)}`)
    process.exit(1)
  },
)
