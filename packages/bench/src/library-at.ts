import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync } from 'node:fs'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type { Library } from './series/flushwave.js'

/**
 * Flushwave's sources at `ref`, for measuring a change against them in one process (ab.ts,
 * ab-own.ts): copied to packages/flushwave/.ab/<commit>/ (git archive; ignored by git) and
 * imported from there, so that they resolve the same postgres.js as the working tree's.
 */
export async function libraryAt(ref: string): Promise<{ commit: string; library: Library }> {
  const repo = fileURLToPath(new URL('../../../', import.meta.url))
  const commit = execFileSync('git', ['-C', repo, 'rev-parse', '--verify', `${ref}^{commit}`], { encoding: 'utf8' }).trim()
  const copy = fileURLToPath(new URL(`../../flushwave/.ab/${commit}/`, import.meta.url))
  if (!existsSync(`${copy}src/index.ts`)) {
    mkdirSync(copy, { recursive: true })
    execFileSync('sh', ['-c', `git -C "${repo}" archive ${commit} packages/flushwave/src | tar -x --strip-components=2 -C "${copy}"`])
  }
  return { commit, library: (await import(pathToFileURL(`${copy}src/index.ts`).href)) as Library }
}
