import { execFileSync } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, rmSync } from 'node:fs'
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
    // package.json too: sources between 463f40a and d79f34d read Flushwave's version from it at load.
    execFileSync('sh', ['-c', `git -C "${repo}" archive ${commit} packages/flushwave/src packages/flushwave/package.json | tar -x --strip-components=2 -C "${copy}"`])
  }
  return { commit, library: (await import(pathToFileURL(`${copy}src/index.ts`).href)) as Library }
}

/**
 * The working tree's Flushwave sources as a copy too (packages/flushwave/.ab/working-tree/, made
 * afresh), so that both sides of a comparison load their library the same way: beside the bench's
 * own import of the working tree, which every side has. With the working tree imported directly,
 * two copies of one commit compared 0.927 in ab-own.ts; as copies, 1.021.
 */
export async function workingTreeCopy(): Promise<Library> {
  const source = fileURLToPath(new URL('../../flushwave/src/', import.meta.url))
  const copy = fileURLToPath(new URL('../../flushwave/.ab/working-tree/', import.meta.url))
  rmSync(copy, { recursive: true, force: true })
  cpSync(source, `${copy}src`, { recursive: true })
  cpSync(fileURLToPath(new URL('../../flushwave/package.json', import.meta.url)), `${copy}package.json`)
  return (await import(pathToFileURL(`${copy}src/index.ts`).href)) as Library
}
