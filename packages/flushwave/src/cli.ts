#!/usr/bin/env node
// The package's bin: `npx flushwave pull …` (see pull/command.ts).
import { main } from './catalog/pull-command.js'

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(`flushwave: ${(error as Error)?.message ?? String(error)}`)
    process.exit(1)
  },
)
