import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, normalize, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

/**
 * The library's layers, bottom up, as the data path of a flush runs: a file may import files of
 * its own layer or of lower ones, never of a higher one, and no files import each other in a
 * circle (type-only imports count: they tie the files together for a reader all the same).
 */
const LAYERS: readonly (readonly string[])[] = [
  ['errors.ts'],
  ['schema/'],
  ['plan/'],
  ['sql/'],
  ['ids/', 'catalog/'],
  ['drivers/port.ts', 'drivers/executor.ts'],
  ['drivers/protocol/'],
  ['drivers/postgres-js/', 'drivers/node-postgres/', 'drivers/pglite/'],
  ['entities/'],
  ['flush/'],
  ['telemetry/'],
  ['entity-manager/'],
  ['migrate/'],
  ['connect.ts', 'flushwave.ts', 'cli.ts'],
  ['index.ts'],
]

/** No source file longer than this many lines (the house rule is ~400). */
const MAX_LINES = 420

const src = join(dirname(fileURLToPath(import.meta.url)), '../../src')

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []))
}

const sources = files(src).map((path) => relative(src, path))

function layerOf(file: string): number {
  const layer = LAYERS.findIndex((prefixes) => prefixes.some((p) => (p.endsWith('/') ? file.startsWith(p) : file === p)))
  if (layer < 0) throw new Error(`${file} is in no layer: add its folder to LAYERS`)
  return layer
}

/** Every relative module a file imports (static, dynamic and re-exports), as paths under src/. */
function importsOf(file: string): string[] {
  const text = readFileSync(join(src, file), 'utf8')
  const specs = [...text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s*['"](\.[^'"]+)['"]|import\(\s*['"](\.[^'"]+)['"]\s*\)/g)].map((m) => m[1] ?? m[2]!)
  return specs.map((spec) => normalize(join(dirname(file), spec)).replace(/\.js$/, '.ts'))
}

const graph = new Map(sources.map((file) => [file, importsOf(file)]))

describe('the layers of packages/flushwave/src', () => {
  it('imports only existing files of the same layer or a lower one', () => {
    const upward: string[] = []
    for (const [file, imports] of graph) {
      for (const target of imports) {
        if (!graph.has(target)) upward.push(`${file} imports ${target}, which does not exist`)
        else if (layerOf(target) > layerOf(file)) upward.push(`${file} (layer ${layerOf(file)}) imports ${target} (layer ${layerOf(target)})`)
      }
    }
    expect(upward).toEqual([])
  })

  it('has no import circle', () => {
    const circles: string[] = []
    const state = new Map<string, 'open' | 'done'>()
    const path: string[] = []
    const visit = (file: string): void => {
      state.set(file, 'open')
      path.push(file)
      for (const next of graph.get(file) ?? []) {
        if (state.get(next) === 'open') circles.push([...path.slice(path.indexOf(next)), next].join(' -> '))
        else if (!state.has(next) && graph.has(next)) visit(next)
      }
      path.pop()
      state.set(file, 'done')
    }
    for (const file of graph.keys()) if (!state.has(file)) visit(file)
    expect(circles).toEqual([])
  })

  it(`keeps every file under ${MAX_LINES} lines`, () => {
    const long = sources.map((file) => [file, readFileSync(join(src, file), 'utf8').split('\n').length] as const).filter(([, n]) => n > MAX_LINES)
    expect(long).toEqual([])
  })

  it('catches what it is meant to catch', () => {
    // The checks above would pass on an empty graph: make sure it was read.
    expect(graph.get('flush/flush.ts')).toContain('plan/planner.ts')
    expect(layerOf('sql/render-write.ts')).toBeGreaterThan(layerOf('plan/ops.ts'))
    expect(graph.size).toBeGreaterThan(80)
  })
})
