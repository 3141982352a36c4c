import { parentPort, workerData } from 'node:worker_threads'
import postgres from 'postgres'
import { fullGc } from './gc.js'
import { instantUnits } from './instant-units.js'
import { libraryAt, workingTreeCopy } from './library-at.js'
import { scenario, type ScenarioName } from './scenarios.js'
import { flushwaveSeries, type Library } from './series/flushwave.js'
import { series as rawPipelined } from './series/raw-pipelined.js'
import type { UnitOfWork } from './series/types.js'

/**
 * One side of ab.ts or ab-own.ts, in a worker thread: a V8 isolate of its own, so that what one
 * side keeps alive (hidden classes, compiled code) cannot speed up the other, as it did when both
 * copies of the library ran in one isolate (see ab.ts). Asked for a sample, it prepares the unit of
 * work (untimed), runs a full GC, times the run and answers with the µs.
 */
export interface AbSide {
  /** 'working tree', 'raw-pipelined' (ab.ts only), or a commit whose sources library-at.ts copies. */
  readonly side: string
  /** 'wire': the bench's unit of work on the embedded server at `url`; 'own': own-cpu.ts's, answered at once. */
  readonly mode: 'wire' | 'own'
  readonly url?: string
  readonly scenario: string
  readonly size: number
}

/** A sample's request: `marker` makes the rows of a wire sample its own, `key` those of an own-work sample. */
export interface AbRequest {
  readonly marker: string
  readonly key: number
}

/** A side's units of work: each prepared (untimed) for a request, and what to close at the end. */
interface Work {
  prepare(request: AbRequest): Promise<UnitOfWork>
  close(): Promise<void>
}

const data = workerData as AbSide
const library = async (): Promise<Library> => (data.side === 'working tree' ? workingTreeCopy() : (await libraryAt(data.side)).library)
const work = data.mode === 'own' ? await ownWork() : await wireWork()

async function ownWork(): Promise<Work> {
  const units = instantUnits(await library(), data.scenario, data.size)
  return { prepare: (request) => units(request.key), close: async () => {} }
}

async function wireWork(): Promise<Work> {
  const factory =
    data.side === 'raw-pipelined' ? rawPipelined : flushwaveSeries(data.side === 'working tree' ? 'working tree' : 'base', undefined, {}, await library())
  const admin = postgres(data.url!, { max: 1, onnotice: () => {} })
  const series = await factory.open(data.url!)
  const sc = scenario(data.scenario as ScenarioName, data.size)
  return {
    prepare: async (request) => (await sc.prepare(admin, series, request.marker)).run,
    close: async () => {
      await series.close()
      await admin.end()
    },
  }
}

parentPort!.on('message', async (request: AbRequest | null) => {
  if (request === null) {
    await work.close()
    parentPort!.close()
    return
  }
  const run = await work.prepare(request)
  await fullGc()
  const started = performance.now()
  await run()
  parentPort!.postMessage((performance.now() - started) * 1000)
})
parentPort!.postMessage('ready')
