import { execFile, execFileSync } from 'node:child_process'
import { promisify } from 'node:util'

const execFileAsync = promisify(execFile)

/**
 * The cluster scripts/patroni-cluster.sh runs (three Patroni-managed PostgreSQL 15 nodes, etcd,
 * HAProxy), as its exports describe it. Without them the cluster suites are skipped:
 *   scripts/patroni-cluster.sh pnpm exec vitest run packages/flushwave/test/cluster
 */
export const cluster = process.env.CLUSTER_PRIMARY_URL === undefined ? undefined : clusterFromEnv()

function clusterFromEnv() {
  const env = (name: string): string => {
    const value = process.env[name]
    if (value === undefined) throw new Error(`${name} is not set: run the cluster suites through scripts/patroni-cluster.sh`)
    return value
  }
  const script = env('CLUSTER_SCRIPT')
  const run = (...args: string[]): string => execFileSync(script, args, { encoding: 'utf8', timeout: 120_000 }).trim()
  const patronictl = env('CLUSTER_PATRONICTL').split(' ')
  const runAsync = async (...args: string[]): Promise<string> => (await execFileAsync(script, args, { encoding: 'utf8', timeout: 120_000 })).stdout.trim()
  return {
    /** Through HAProxy's primary listener. */
    primaryUrl: env('CLUSTER_PRIMARY_URL'),
    /** Through HAProxy's replica listener: the nodes in recovery, round robin. */
    replicaUrl: env('CLUSTER_REPLICA_URL'),
    /** Each node directly, node 1 first. */
    nodeUrls: env('CLUSTER_NODE_URLS').split(','),
    superuserNodeUrls: env('CLUSTER_SUPERUSER_NODE_URLS').split(','),
    superuserUrl: env('CLUSTER_SUPERUSER_URL'),
    synchronous: process.env.CLUSTER_SYNC !== '0',
    /** The leader's node number (1, 2 or 3). */
    leader: (): number => Number(run('leader')),
    killPostmaster: (node: number): void => void run('kill-postmaster', String(node)),
    /** Waits until a leader, two streaming replicas and (synchronous) a synchronous standby. */
    waitHealthy: (seconds = 90): string => run('wait-healthy', String(seconds)),
    patronictl: (...args: string[]): string => execFileSync(patronictl[0]!, [...patronictl.slice(1), ...args], { encoding: 'utf8', timeout: 120_000 }).trim(),
    /**
     * The same, without blocking the event loop: for use while a test's load runs (the synchronous
     * ones stop every worker and reader of the test process until the script returns).
     */
    async: {
      leader: async (): Promise<number> => Number(await runAsync('leader')),
      killPostmaster: async (node: number): Promise<void> => void (await runAsync('kill-postmaster', String(node))),
      waitHealthy: (seconds = 90): Promise<string> => runAsync('wait-healthy', String(seconds)),
      patronictl: async (...args: string[]): Promise<string> =>
        (await execFileAsync(patronictl[0]!, [...patronictl.slice(1), ...args], { encoding: 'utf8', timeout: 120_000 })).stdout.trim(),
    },
  }
}
