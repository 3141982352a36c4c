/**
 * Puts the results into the repository README, between `<!-- bench:start -->` and
 * `<!-- bench:end -->`. `pnpm bench` does it after a full default run; by hand, from the last
 * results: `pnpm --filter bench exec tsx src/readme.ts`.
 */
import { readFile, writeFile } from 'node:fs/promises'
import { pathToFileURL } from 'node:url'
import { markdown, type Results } from './report.js'

const README = new URL('../../../README.md', import.meta.url)
const START = '<!-- bench:start -->'
const END = '<!-- bench:end -->'

export async function updateReadme(results: Results): Promise<void> {
  const text = await readFile(README, 'utf8')
  const from = text.indexOf(START)
  const to = text.indexOf(END)
  if (from < 0 || to < from) throw new Error(`README.md has no ${START} … ${END} block`)
  const body = markdown(results).replace(/^# Flushwave benchmark\n\n/, '').replace(/^## /gm, '#### ')
  await writeFile(README, `${text.slice(0, from + START.length)}\n${body}\n${text.slice(to)}`)
  process.stderr.write('updated the benchmark section of README.md\n')
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const results = JSON.parse(await readFile(new URL('../results/latest.json', import.meta.url), 'utf8')) as Results
  await updateReadme(results)
}
