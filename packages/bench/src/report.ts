import type { Run } from './runner.js'

export interface Results {
  readonly startedAt: string
  readonly machine: Record<string, string | number>
  readonly runs: readonly Run[]
  /** Series that could not be loaded or failed verification, with the error. */
  readonly unavailable: readonly { readonly series: string; readonly error: string }[]
  readonly durationS: number
}

const BASE = 'flushwave'

/** One table per scenario and size: a row per series, a column per latency, ratios to flushwave. */
export function markdown(results: Results): string {
  const lines = [
    `# Flushwave benchmark`,
    '',
    `${results.startedAt.slice(0, 10)} · ${Object.entries(results.machine).map(([k, v]) => `${k}: ${v}`).join(' · ')} · ${results.durationS.toFixed(0)} s`,
    '',
    'Median ms per unit of work (ratio to `flushwave`; above 1 is slower). `stmts` and `rtt`: SQL',
    'statements (BEGIN and COMMIT included) and round trips counted on the wire in a warm run at the',
    'highest latency.',
  ]
  const cells = groupBy(results.runs, (r) => `${r.scenario} ${r.size}`)
  for (const runs of cells.values()) {
    const { scenario, size } = runs[0]!
    const latencies = [...new Set(runs.map((r) => r.latencyMs))].sort((a, b) => a - b)
    const series = [...new Set(runs.map((r) => r.series))]
    lines.push('', `## ${scenario}${size ? ` ×${size}` : ''}`, '')
    lines.push(`| series | ${latencies.map((l) => `${l} ms`).join(' | ')} | stmts | rtt |`)
    lines.push(`|---|${latencies.map(() => '---:').join('|')}|---:|---:|`)
    for (const s of series) {
      const row = latencies.map((l) => {
        const run = runs.find((r) => r.series === s && r.latencyMs === l)
        const base = runs.find((r) => r.series === BASE && r.latencyMs === l)
        if (!run) return '–'
        return base ? `${run.medianMs.toFixed(1)} (${(run.medianMs / base.medianMs).toFixed(2)}×)` : run.medianMs.toFixed(1)
      })
      // Counted at the highest latency, where a client that does not wait cannot look like one that does.
      const ref = runs.filter((r) => r.series === s).sort((a, b) => b.latencyMs - a.latencyMs)[0]
      lines.push(`| ${s} | ${row.join(' | ')} | ${ref?.statements ?? '?'} | ${ref?.roundTrips ?? '?'} |`)
    }
  }
  if (results.unavailable.length > 0) {
    lines.push('', '## Not measured', '')
    for (const u of results.unavailable) lines.push(`- **${u.series}**: ${u.error.split('\n')[0]}`)
  }
  return lines.join('\n') + '\n'
}

export function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>()
  for (const item of items) {
    const k = key(item)
    const list = out.get(k)
    if (list) list.push(item)
    else out.set(k, [item])
  }
  return out
}
