// Summary of vitest JSON reports for CI logs: every failing test as `file > describe > test` with
// its error message, every test file that failed as a whole (did not load, a hook threw), each
// report that is missing (its run ended before vitest wrote it; one failure), and last "N passed, N failed".
//   node scripts/vitest-report.mjs .tmp/vitest.json .tmp/vitest-pg15.json …
import { existsSync, readFileSync } from 'node:fs'
import path from 'node:path'

const files = process.argv.slice(2)
let passed = 0
let failed = 0
const lines = []
for (const file of files) {
  const run = path.basename(file, '.json')
  if (!existsSync(file)) {
    lines.push(`[${run}] no report: the run ended before vitest wrote ${file} (counted as one failure)`)
    failed += 1
    continue
  }
  const report = JSON.parse(readFileSync(file, 'utf8'))
  passed += report.numPassedTests
  failed += report.numFailedTests
  for (const suite of report.testResults) {
    const name = displayName(suite.name)
    if (suite.status === 'failed' && suite.message) lines.push(`[${run}] ${name}: failed as a whole: ${firstLines(suite.message)}`)
    for (const test of suite.assertionResults) {
      if (test.status !== 'failed') continue
      const message = test.failureMessages.map(firstLines).join(' | ') || '(no message)'
      lines.push(`[${run}] ${[name, ...test.ancestorTitles, test.title].join(' > ')}: ${message}`)
    }
  }
}
if (lines.length) console.log(`\nFailures:\n${lines.map((line) => `  ${line}`).join('\n')}\n`)
console.log(`${passed} passed, ${failed} failed`)

/** The message without its stack, at most 4 lines. */
function firstLines(message) {
  const text = message.split('\n').filter((line) => !/^\s+at /.test(line))
  return text.slice(0, 4).join('\n    ').trim()
}

/** A test file's path from the checkout's root, also for a run in scripts/clone-0700.sh's copy (…/repo/). */
function displayName(file) {
  const relative = path.relative(process.cwd(), file)
  const copy = file.lastIndexOf('/repo/')
  return relative.startsWith('..') && copy >= 0 ? file.slice(copy + '/repo/'.length) : relative
}
