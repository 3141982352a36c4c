import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import * as flushwave from '../../src/index.js'
import { Column, Id, ManyToOne, Timestamp } from '../../src/schema/builders.js'

// docs/api.md is written by hand; this keeps it from falling behind the code: every export, every
// public method of the classes an application calls, and every schema builder must be named there.
const page = readFileSync(new URL('../../../../docs/api.md', import.meta.url), 'utf8')
const source = (file: string) => readFileSync(new URL(`../../src/${file}`, import.meta.url), 'utf8')
/** Names in code spans: `em.flush()` gives em, flush; `Where<D, K>` gives Where, D, K. */
const named = new Set([...page.matchAll(/`([^`]+)`/g)].flatMap(([, span]) => span!.match(/[A-Za-z_]\w*/g) ?? []))
const missing = (names: Iterable<string>) => [...names].filter((name) => !named.has(name))

/** Every name `src/index.ts` exports, types included, following `export *`. */
function exportedNames(file: string): string[] {
  const text = source(file)
  const names = [...text.matchAll(/export (?:type )?\{([^}]*)\}/g)].flatMap(([, list]) =>
    list!.split(',').map((n) => n.replace(/^\s*type\s+/, '').trim()).filter(Boolean),
  )
  const declared = [...text.matchAll(/^export (?:declare )?(?:abstract )?(?:class|interface|type|function|const) (\w+)/gm)].map(([, n]) => n!)
  const starred = [...text.matchAll(/^export \* from '\.\/(.+)\.js'/gm)].flatMap(([, f]) => exportedNames(`${f}.ts`))
  return [...names, ...declared, ...starred]
}

/** Public methods of a class as written: the members that are neither private nor the constructor. */
function publicMethods(file: string, className: string): string[] {
  const body = source(file).split(new RegExp(`^export (?:abstract )?class ${className}\\b`, 'm'))[1]!.split(/^}/m)[0]!
  return [...body.matchAll(/^ {2}(?:async )?(\w+)\s*[<(]/gm)].map(([, n]) => n!).filter((n) => n !== 'constructor')
}

/** Members of an exported interface as written: `readonly name:` and `name(` at its first level. */
function interfaceMembers(file: string, name: string): string[] {
  const body = source(file).split(new RegExp(`^export interface ${name}\\b`, 'm'))[1]!.split(/^}/m)[0]!
  return [...body.matchAll(/^ {2}(?:readonly )?(\w+)\s*[<(:?]/gm)].map(([, n]) => n!)
}

describe('docs/api.md', () => {
  it('names every export of the package', () => {
    const exports = exportedNames('index.ts')
    expect(exports.length).toBeGreaterThan(80)
    expect(exports).toContain('CheckViolationError') // through `export * from './errors.js'`
    expect(missing(exports)).toEqual([])
  })

  it('names every public method of Flushwave and EntityManager, and no private one is counted', () => {
    const methods = [...publicMethods('flushwave.ts', 'Flushwave'), ...publicMethods('entity-manager/entity-manager.ts', 'EntityManager'), ...publicMethods('entity-manager/entity-reads.ts', 'EntityReads')]
    expect(methods).toEqual(expect.arrayContaining(['em', 'unitOfWork', 'checkSchema', 'create', 'flush', 'transaction', 'populate']))
    expect(methods).not.toContain('runBeforeHooks')
    expect(missing(methods)).toEqual([])
  })

  it('names every field of the options, results and hooks an application passes or reads', () => {
    const fields = [
      ['flushwave.ts', 'FlushwaveOptions'],
      ['connect.ts', 'ConnectOptions'],
      ['flush/flush.ts', 'FlushResult'],
      ['entity-manager/entity-manager.ts', 'Hooks'],
      ['entity-manager/entity-manager.ts', 'EntityHooks'],
      ['entity-manager/retry.ts', 'RetryPolicy'],
      ['entity-manager/retry.ts', 'UnitOfWorkResult'],
    ].flatMap(([file, name]) => interfaceMembers(file!, name!))
    expect(fields).toEqual(expect.arrayContaining(['knex', 'outcomeLedger', 'roundTrips', 'afterCommit', 'beforeDelete', 'backoffMs', 'attempts']))
    expect(missing(fields)).toEqual([])
  })

  it('shows every `t` builder as t.name( or t.name< and every modifier of columns, ids, references and collections', () => {
    const builders = Object.keys(flushwave.t)
    expect(builders.filter((name) => !new RegExp(`\\bt\\.${name}[<(]`).test(page))).toEqual([])
    const modifiers = [
      ...[Column, Timestamp, Id, ManyToOne].flatMap((c) => Object.getOwnPropertyNames(c.prototype).filter((n) => n !== 'constructor')),
      ...interfaceMembers('schema/infer.ts', 'Collection'),
    ]
    expect(modifiers).toEqual(expect.arrayContaining(['nullable', 'deferrable', 'defaultNow', 'add']))
    expect(modifiers.filter((name) => !page.includes(`.${name}(`) && !named.has(name))).toEqual([])
  })
})
