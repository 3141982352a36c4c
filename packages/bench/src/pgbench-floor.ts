import { execFile, spawnSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { BOOKS_PER_AUTHOR, REVIEWS_PER_BOOK, TAGS_PER_BOOK } from './data.js'

/**
 * bulkCreate×1's transaction as PostgreSQL's own C client sends it: pgbench, in one pipeline
 * (BEGIN, the five inserts, COMMIT), `transactions` times back to back on one connection. No
 * Node.js process is involved, so its spread is what this server and machine give any client.
 * The rows are the same in number and shape; the server makes their values from a base id
 * counted per transaction (pgbench has no array parameters).
 * Latencies in ms, in the order they ran; undefined when pgbench is not installed.
 *
 * Asynchronous, so that this process goes on reading the embedded server's output while pgbench
 * runs: the server writes its log (every statement over 1 ms, in steady-ids.ts) to a pipe this
 * process drains, and a blocked event loop let that pipe fill. A backend whose log write blocks
 * stays `active` with no wait event, and pgbench waits on it: with spawnSync, runs on a busy host
 * hung until the timeout (one beside a CI run sat 20 minutes on an insert, one on 2026-11-26 70 s).
 */
export async function pgbenchFloor(url: string, transactions: number): Promise<number[] | undefined> {
  if (spawnSync('pgbench', ['--version']).status !== 0) return undefined
  const dir = mkdtempSync(join(tmpdir(), 'pgbench-floor-'))
  try {
    const books = BOOKS_PER_AUTHOR
    const reviews = books * REVIEWS_PER_BOOK
    const tags = books * TAGS_PER_BOOK
    // Ids from :b (the author) up: books b+1…, reviews b+1001…, tags b+2001…, with b = -10,000
    // times the transaction's number (a client variable counted from --define n=0): no two
    // transactions' ids meet, and no id meets one a sequence gave the other series. A random
    // positive b clashed: pooled sequences step by 1,000 from 1, so a nextval is b + 1,001 for
    // every b = 1,000k they pass, and over a long run they reach 10^8 (a duplicate review id ended
    // 4 of 13 runs of steady-ids.ts pooled); two transactions drawing the same b would clash too.
    const b = '(:b::int8)'
    const script = [
      '\\set n :n + 1',
      '\\set b -10000 * :n',
      '\\startpipeline',
      'begin;',
      `insert into author (id, first_name, last_name, email, created_at, updated_at) values (${b}, 'first0', 'last0', 'a' || ${b} || '@example.com', now(), now());`,
      `insert into book (id, title, author_id, published, pages, created_at, updated_at) select ${b} + g, 'book 0.' || g, ${b}, null, 100 + g, now(), now() from generate_series(1, ${books}) g;`,
      `insert into book_review (id, book_id, rating, text, created_at, updated_at) select ${b} + 1000 + g, ${b} + 1 + (g - 1) / ${REVIEWS_PER_BOOK}, 1 + g % 5, 'review ' || g, now(), now() from generate_series(1, ${reviews}) g;`,
      `insert into tag (id, name, created_at, updated_at) select ${b} + 2000 + g, 'tag ' || (${b} + 2000 + g), now(), now() from generate_series(1, ${tags}) g;`,
      `insert into book_tag (book_id, tag_id) select ${b} + 1 + (g - 1) / ${TAGS_PER_BOOK}, ${b} + 2000 + g from generate_series(1, ${tags}) g;`,
      'commit;',
      '\\endpipeline',
      '',
    ].join('\n')
    writeFileSync(join(dir, 'bulk-create.sql'), script)
    const args = ['--no-vacuum', '--client=1', '--define=n=0', `--transactions=${transactions}`, '--protocol=prepared', '--log', `--log-prefix=${join(dir, 'log')}`, `--file=${join(dir, 'bulk-create.sql')}`, url]
    // A transaction takes a few ms: a run that has not finished at 100 ms a transaction is stuck.
    const limitMs = Math.max(60_000, transactions * 100)
    await new Promise<void>((resolve, reject) => {
      execFile('pgbench', args, { encoding: 'utf8', timeout: limitMs }, (error, stdout, stderr) => {
        if (error === null) return resolve()
        if (error.killed) return reject(new Error(`pgbench did not finish in ${limitMs / 1000} s`))
        reject(new Error(`pgbench failed: ${stderr || stdout || error.message}`))
      })
    })
    const log = readdirSync(dir).find((f) => f.startsWith('log'))
    if (log === undefined) throw new Error('pgbench wrote no transaction log')
    // One line per transaction: client, transaction number, latency in µs, script, epoch s, µs.
    return readFileSync(join(dir, log), 'utf8')
      .trim()
      .split('\n')
      .map((line) => Number(line.split(' ')[2]) / 1000)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
